"""Host configs: the snippets themselves, and a server started exactly as a printed config says."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from bakery import DEFAULT_PACKAGE, DEFAULT_SLUG, KEY_FILE, REPO, BakeFactory, Installed, run
from host_client import MODERN, answer, fill, meta
from uv import find_uv_bin

HOSTS_PY = (
    REPO
    / "{{cookiecutter.project_slug}}"
    / "src"
    / "{{cookiecutter.package_name}}"
    / "mrtr_runtime"
    / "cli"
    / "_hosts.py"
)
MAX_ROUNDS = 6


def load_hosts() -> ModuleType:
    # _hosts.py holds no Jinja, so the template's file is the one a bake gets; the post-gen hook
    # loads it by path the same way.
    spec = importlib.util.spec_from_file_location("_template_hosts", HOSTS_PY)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


hosts = load_hosts()
LAUNCH = hosts.venv_launch(
    "/home/ada/My Servers/demo/.venv/bin/python",
    "demo",
    key_file_path="/home/ada/My Servers/demo/.mrtr-signing-key",
)


def test_vscode_uses_servers_and_a_stdio_type() -> None:
    document = json.loads(hosts.snippet("vscode", "demo", LAUNCH))
    assert document == {
        "servers": {
            "demo": {
                "type": "stdio",
                "command": LAUNCH.command,
                "args": ["-m", "demo"],
                "env": {"MRTR_SIGNING_KEY_FILE": "/home/ada/My Servers/demo/.mrtr-signing-key"},
            }
        }
    }


@pytest.mark.parametrize("host", ["claude-desktop", "cursor", "mcp-json"])
def test_mcp_servers_hosts_share_one_shape(host: str) -> None:
    entry = json.loads(hosts.snippet(host, "demo", LAUNCH))["mcpServers"]["demo"]
    assert entry["command"] == LAUNCH.command
    assert entry["args"] == ["-m", "demo"]
    assert entry["env"] == dict(LAUNCH.env)
    assert ("type" in entry) is (host == "mcp-json")


def test_claude_code_command_round_trips_through_a_posix_shell() -> None:
    command = hosts.snippet("claude-code", "demo", LAUNCH)
    assert shlex.split(command) == [
        "claude",
        "mcp",
        "add",
        "--transport",
        "stdio",
        "demo",
        "--env",
        "MRTR_SIGNING_KEY_FILE=/home/ada/My Servers/demo/.mrtr-signing-key",
        "--",
        "/home/ada/My Servers/demo/.venv/bin/python",
        "-m",
        "demo",
    ]


def test_claude_code_command_puts_nothing_positional_after_an_env_value() -> None:
    """Claude Code's ``--env`` is variadic: a word after its value that is not an option or
    ``--`` is taken as another ``KEY=VALUE``, the server's name included."""
    launch = hosts.Launch(command="/srv/py", args=("-m", "demo"), env={"A": "1", "B": "2"})
    words = shlex.split(hosts.claude_code_command("demo", launch))
    assert words[:6] == ["claude", "mcp", "add", "--transport", "stdio", "demo"]
    for index, word in enumerate(words[:-1]):
        if word == "--":
            break
        if word == "--env":
            after = words[index + 2]
            assert after == "--" or after.startswith("-"), words


def test_windows_paths_use_the_scripts_directory() -> None:
    python = hosts.venv_python("C:\\Users\\ada\\demo", windows=True)
    assert python == "C:\\Users\\ada\\demo\\.venv\\Scripts\\python.exe"
    command = hosts.claude_code_command(
        "demo", hosts.venv_launch(python, "demo", key_file_path=None), windows=True
    )
    assert command.endswith("demo -- C:\\Users\\ada\\demo\\.venv\\Scripts\\python.exe -m demo")


def test_uv_launch_names_the_project_and_extras() -> None:
    launch = hosts.uv_launch(
        "/opt/uv/bin/uv", "/srv/demo", "demo", key_file_path="/srv/demo/k", extras=("aws",)
    )
    assert launch.argv() == [
        "/opt/uv/bin/uv",
        "run",
        "--directory",
        "/srv/demo",
        "--extra",
        "aws",
        "demo",
    ]
    assert launch.env == {"MRTR_SIGNING_KEY_FILE": "/srv/demo/k"}


def test_uvx_launch_starts_the_published_package_with_its_extras() -> None:
    assert hosts.uvx_launch("/opt/uv/bin/uvx", "demo", key_file_path=None).argv() == [
        "/opt/uv/bin/uvx",
        "demo",
    ]
    launch = hosts.uvx_launch("/opt/uv/bin/uvx", "demo", extras=("aws",), key_file_path=None)
    assert launch.argv() == ["/opt/uv/bin/uvx", "--from", "demo[aws]", "demo"]
    assert launch.env == {}


def test_a_venv_has_one_interpreter_name_in_every_config() -> None:
    assert hosts.venv_interpreter("/srv/demo/.venv", windows=False) == "/srv/demo/.venv/bin/python"
    assert hosts.venv_python("/srv/demo", windows=False) == "/srv/demo/.venv/bin/python"
    assert (
        hosts.venv_interpreter("C:\\demo\\.venv", windows=True)
        == "C:\\demo\\.venv\\Scripts\\python.exe"
    )


def test_the_hooks_uv_config_says_to_uv_sync_before_the_first_launch(
    bake: BakeFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    uv = Path(find_uv_bin())
    monkeypatch.setenv("PATH", f"{uv.parent}{os.pathsep}{os.environ.get('PATH', os.defpath)}")
    baked = bake(include_aws_example="yes")
    expected = f"Run '{uv} sync --directory {baked.project} --extra aws' once before the host"
    assert expected in baked.stdout


def test_unknown_host_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown host 'zed'"):
        hosts.snippet("zed", "demo", LAUNCH)


def test_render_all_covers_every_host() -> None:
    text = hosts.render_all("demo", LAUNCH)
    for title in ("Claude Desktop", "Claude Code", "VS Code", "Cursor"):
        assert f"== {title} ==" in text
    assert ".mcp.json" in text


# -- the real thing: a server launched the way a host would ---------------------------------------


class HostLaunch:
    """Starts the server from a printed config: cwd ``/``, env = HOME + PATH + the config's env."""

    def __init__(self, entry: Mapping[str, Any]) -> None:
        self.argv = [entry["command"], *entry["args"]]
        self.env = {
            "HOME": os.environ.get("HOME", "/"),
            "PATH": os.environ.get("PATH", os.defpath),
            **entry.get("env", {}),
        }
        self.stderr = ""

    def one_request(self, request_id: int, method: str, params: Mapping[str, Any]) -> Any:
        """A fresh server process answers one request, then sees EOF and must exit 0."""
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        process = subprocess.run(
            self.argv,
            cwd="/",
            env=self.env,
            input=json.dumps(message) + "\n",
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=60,
            check=False,
        )
        self.stderr += process.stderr
        assert process.returncode == 0, process.stderr
        lines = process.stdout.splitlines()
        assert len(lines) == 1, f"stdout must carry exactly one message: {process.stdout!r}"
        response = json.loads(lines[0])
        assert response["jsonrpc"] == "2.0" and response["id"] == request_id
        assert "error" not in response, response
        return response["result"]


def _printed_config(project: Installed) -> dict[str, Any]:
    printed = run(
        [project.python, "-m", DEFAULT_PACKAGE, "config", "claude-desktop"], cwd=Path("/")
    )
    config: dict[str, Any] = json.loads(printed.stdout)  # stdout is the snippet and nothing else
    return config["mcpServers"][DEFAULT_SLUG]


@pytest.mark.baked_checks
def test_server_starts_as_the_printed_claude_desktop_config_says(
    installed: Callable[[str], Installed],
) -> None:
    project = installed("no-aws")
    entry = _printed_config(project)
    assert entry["command"] == str(project.python)
    assert entry["args"] == ["-m", DEFAULT_PACKAGE]
    assert entry["env"] == {"MRTR_SIGNING_KEY_FILE": str(project.project / KEY_FILE)}

    host = HostLaunch(entry)
    result = host.one_request(1, "server/discover", {"_meta": meta()})
    assert MODERN in result["supportedVersions"]
    assert "tools" in result["capabilities"]
    assert result["resultType"] == "complete"
    # The key file was found (its public id is logged), and the key itself never shows.
    key = (project.project / KEY_FILE).read_text(encoding="ascii").strip()
    assert hashlib.sha256(bytes.fromhex(key)).hexdigest()[:8] in host.stderr
    assert key not in host.stderr


@pytest.mark.baked_checks
def test_a_multi_round_call_survives_a_new_process_per_round(
    installed: Callable[[str], Installed],
) -> None:
    # Each round goes to a *new* server process started from the printed config: only the signing
    # key file can make round N+1 accept the requestState minted by round N.
    project = installed("no-aws")
    host = HostLaunch(_printed_config(project))
    tools = host.one_request(1, "tools/list", {"_meta": meta()})["tools"]
    request_id = 2
    for tool in tools:
        arguments = fill(tool["inputSchema"], required_only=True)
        params: dict[str, Any] = {"name": tool["name"], "arguments": arguments, "_meta": meta()}
        result = host.one_request(request_id, "tools/call", params)
        request_id += 1
        states = 0
        for _ in range(MAX_ROUNDS):
            if result.get("resultType") != "input_required":
                break
            answers = {
                key: answer(request) for key, request in result.get("inputRequests", {}).items()
            }
            # Each retry is a new request: the answers to this round, plus the state (if any)
            # that carries the earlier ones (2026-07-28 basic/patterns/mrtr).
            params = {**params, "inputResponses": answers}
            params.pop("requestState", None)
            if "requestState" in result:
                params["requestState"] = result["requestState"]
                states += 1
            result = host.one_request(request_id, "tools/call", params)
            request_id += 1
        if states:
            assert result.get("resultType") == "complete", result
            assert not result.get("isError"), result
            return
    pytest.fail(
        "no tool in the no-AWS bake answers input_required with a requestState; every bake must "
        f"ship an AWS-free multi-round sample (tools: {[tool['name'] for tool in tools]})"
    )
