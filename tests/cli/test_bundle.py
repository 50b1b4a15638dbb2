"""The MCP Bundle, on every baked combination, checked with the official MCPB CLI.

`<slug> bundle` writes `<slug>-<version>.mcpb`. The official CLI (npm `@anthropic-ai/mcpb`,
pinned in tests/peers/package.json) unpacks it, validates the manifest and packs the unpacked
directory again, which must give the same files with the same permissions: so the archive is
one `mcpb pack` would write. Then the server is started exactly as the manifest says, as a host
does it: working directory `/`, an environment holding only HOME, PATH and the manifest's `env`,
`${__dirname}` and `${user_config.*}` substituted; and it finishes plan_release's three rounds,
signing with the per-user key it creates (the bundle carries none).

The manifest's server type is `uv` (`uv run --directory <bundle> <slug>`): the first launch
installs anyio and pydantic (and boto3 in AWS bakes) from PyPI, which CI reaches; the uv cache
in .cache/uv makes the runs after the first one quick.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from bakery import (
    COMBINATIONS,
    DEFAULT_PACKAGE,
    DEFAULT_SLUG,
    FULL_COMBINATIONS,
    REPO,
    Installed,
    run,
)
from peers.node import NodePeers, PeersUnavailableError, ensure_node_peers

UV_CACHE = REPO / ".cache" / "uv"
#: What a user would type into the host's form for each `user_config` entry.
USER_CONFIG = {"aws_profile": "bundle-test", "aws_region": "eu-west-1"}
#: The machine's network settings, which the host's own uv would see too.
NETWORK_SETTINGS = ("SSL_CERT_FILE", "SSL_CERT_DIR", "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY")
PLACEHOLDER = re.compile(r"\$\{([^}]*)\}")

# Run with the bake's own python: it drives the server through the runtime's ClientSession,
# answering plan_release's three forms and its review page, and prints the final result as JSON.
CLIENT = """
import json, sys
import anyio
from PACKAGE.mrtr_runtime.testing import ClientSession

with open(sys.argv[1], encoding="utf-8") as spec:
    launch = json.load(spec)
FORMS = {
    "version": {"version": "1.5.0", "kind": "minor"},
    "highlights": {"highlights": "JSON output"},
    "confirmed": {"confirmed": True},
}


async def fill_in(params):
    if params.get("mode") == "url":  # the release notes' review page: read, then go on
        return {"action": "accept"}
    field = next(iter(params["requestedSchema"]["properties"]))
    return {"action": "accept", "content": FORMS[field]}


async def main():
    with anyio.fail_after(240):
        async with ClientSession.spawn(
            launch["command"], env=launch["env"], cwd="/", elicitation=fill_in
        ) as session:
            tools = await session.request("tools/list", {})
            result = await session.call_tool(
                "plan_release", {"project": "demo", "previous_version": "1.4.2"}
            )
            stderr = session.stderr_text()
    print(json.dumps({"tools": tools, "structured": result.structured, "stderr": stderr}))


anyio.run(main)
""".replace("PACKAGE", DEFAULT_PACKAGE)


@pytest.fixture(scope="module")
def peers() -> NodePeers:
    try:
        return ensure_node_peers()
    except PeersUnavailableError as error:
        pytest.fail(f"cannot install the MCPB CLI: {error}")


def find_uv() -> Path:
    search = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    found = shutil.which("uv", path=search)
    if found is None:
        pytest.fail("uv is not installed; requirements-dev.txt pins it")
    return Path(found)


def members(archive: Path) -> dict[str, tuple[bytes, int]]:
    """Each file of a zip archive: its bytes and its Unix permission bits."""
    with zipfile.ZipFile(archive) as opened:
        return {
            info.filename: (opened.read(info), (info.external_attr >> 16) & 0o777)
            for info in opened.infolist()
        }


def substitute(value: str, dirname: Path) -> str:
    """What a host does to `mcp_config` strings (MANIFEST.md, Variable Substitution)."""

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name == "__dirname":
            return str(dirname)
        if name.startswith("user_config."):
            return USER_CONFIG[name.removeprefix("user_config.")]
        raise AssertionError(f"the manifest uses ${{{name}}}, which this test does not supply")

    return PLACEHOLDER.sub(one, value)


def host_launch(config: Mapping[str, Any], dirname: Path, home: Path) -> dict[str, Any]:
    """The command and environment a host builds from `server.mcp_config`."""
    path = [str(find_uv().parent), str(Path(sys.base_prefix, "bin")), "/usr/bin", "/bin"]
    env = {"HOME": str(home), "PATH": os.pathsep.join(path), "UV_CACHE_DIR": str(UV_CACHE)}
    env |= {name: os.environ[name] for name in NETWORK_SETTINGS if name in os.environ}
    env |= {name: substitute(value, dirname) for name, value in config.get("env", {}).items()}
    command = [config["command"], *config.get("args", [])]
    return {"command": [substitute(part, dirname) for part in command], "env": env}


@pytest.mark.parametrize("combination", sorted(FULL_COMBINATIONS))
def test_the_bundle_passes_the_official_cli_and_serves_a_multi_round_call_as_a_host_starts_it(
    installed: Callable[[str], Installed], peers: NodePeers, tmp_path: Path, combination: str
) -> None:
    project = installed(combination)
    aws = COMBINATIONS[combination]["include_aws_example"] == "yes"
    bundled = run(
        [project.tool(DEFAULT_SLUG), "bundle", "--output-dir", tmp_path / "dist"], cwd=tmp_path
    )
    archive = tmp_path / "dist" / f"{DEFAULT_SLUG}-0.1.0.mcpb"
    assert bundled.stdout.strip() == str(archive)

    unpacked = tmp_path / "unpacked"
    run(peers.mcpb_command("unpack", str(archive), str(unpacked)), cwd=tmp_path)
    validated = run(peers.mcpb_command("validate", str(unpacked / "manifest.json")), cwd=tmp_path)
    assert "Manifest schema validation passes!" in validated.stdout
    repacked = tmp_path / "official.mcpb"
    run(peers.mcpb_command("pack", str(unpacked), str(repacked)), cwd=tmp_path)
    ours = members(archive)
    assert ours == members(repacked)
    assert not any(".mrtr-signing-key" in name or "__pycache__" in name for name in ours)

    manifest = json.loads((unpacked / "manifest.json").read_text(encoding="utf-8"))
    assert (manifest["version"], manifest["server"]["type"]) == ("0.1.0", "uv")
    expected_tools = {"plan_release", "deploy_to_aws"} if aws else {"plan_release"}
    assert {tool["name"] for tool in manifest["tools"]} == expected_tools
    assert all(tool["description"] for tool in manifest["tools"])
    assert set(manifest.get("user_config", {})) == (set(USER_CONFIG) if aws else set())

    home = tmp_path / "home"
    home.mkdir()
    launch = host_launch(manifest["server"]["mcp_config"], unpacked, home)
    if aws:
        assert launch["env"]["AWS_PROFILE"] == USER_CONFIG["aws_profile"]
        assert launch["env"]["AWS_REGION"] == USER_CONFIG["aws_region"]
    client, spec = tmp_path / "client.py", tmp_path / "launch.json"
    client.write_text(CLIENT, encoding="utf-8")
    spec.write_text(json.dumps(launch), encoding="utf-8")
    completed = run([project.python, client, spec], cwd=tmp_path, timeout=300)
    outcome = json.loads(completed.stdout)
    assert {tool["name"] for tool in outcome["tools"]["tools"]} == expected_tools
    plan = outcome["structured"]
    assert (plan["status"], plan["version"]) == ("confirmed", "1.5.0")
    assert "Traceback" not in outcome["stderr"], outcome["stderr"]
    # The bundle holds no key, so the server made this user's own, in the XDG state directory.
    # Beside it, the task store, where the confirmation just given is recorded (single use).
    state = home / ".local" / "state" / DEFAULT_SLUG
    (key_file,) = (path for path in state.iterdir() if not path.name.startswith("tasks.sqlite3"))
    assert key_file.stat().st_mode & 0o777 == 0o600
    assert (state / "tasks.sqlite3").stat().st_mode & 0o777 == 0o600
