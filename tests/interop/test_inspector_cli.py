"""The MCP Inspector's CLI (`@modelcontextprotocol/inspector` 2.12.0, a pinned test peer) against a
baked `<slug> http`, run the way its README shows: a URL and a method, no era flag.

What the CLI does, read from its bundle (`clients/cli/build/index.js`):
- with no `--protocol-era` it negotiates the legacy era: "ad-hoc --server-url / target runs
  otherwise default to legacy" (its own `--help`), and `InspectorClient` defaults
  `versionNegotiation` to `{mode: "legacy"}`; a URL ending in `/mcp` is Streamable HTTP.
  So it sends `initialize` (2025-11-25) over HTTP, and over stdio too.
- it builds its client with `elicit: false` and `sample: false`: it declares neither
  capability and cannot answer a question, whatever the flags. So `deploy_to_aws`, whose
  role and confirmation are questions, cannot complete from the CLI: the server cannot ask,
  and nothing reaches AWS (moto holds no stack). What the CLI can do here is list the tools
  and call one that asks nothing of a host without forms: `plan_release`, which drafts its
  plan from the arguments and says so.
- `--protocol-era modern` (or `auto`) is its switch to 2026-07-28: no `initialize`.

Every run goes through the recording proxy (tests/peers/http_proxy.py); each test prints the
transcript (`pytest -rA`).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from peers.aws_moto import moto_server, stack_status
from peers.http_proxy import Proxy, assert_legacy_session, questions
from peers.node import NodePeers, ensure_node_peers
from peers.project import BakedProject, bake, serve_http

#: A cold Node start of the Inspector's bundle, then a few sub-second requests.
RUN_TIMEOUT_SECONDS = 120
RELEASE_ARGS = {"project": "Peer", "previous_version": "1.2.0", "changes": ["feat: x"]}


@pytest.fixture(scope="module")
def peers() -> NodePeers:
    return ensure_node_peers()


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> BakedProject:
    return bake(tmp_path_factory.mktemp("inspector"), project_name="Inspector Peer", aws=True)


@pytest.fixture(scope="module")
def aws_env() -> Iterator[dict[str, str]]:
    with moto_server() as env:
        yield env


def state_env(project: BakedProject) -> dict[str, str]:
    return {"XDG_STATE_HOME": str(project.root.parent / "state")}


@pytest.fixture(scope="module")
def proxy(
    project: BakedProject, aws_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Proxy]:
    log_path = tmp_path_factory.mktemp("inspector-http") / "server.log"
    with serve_http(project, log_path, {**state_env(project), **aws_env}) as server:
        with Proxy([server.url]) as recording:
            yield recording
        assert server.stop() == 0, server.log()


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Inspector keeps its settings and secrets under HOME: a throwaway one."""
    return tmp_path_factory.mktemp("inspector-home")


def inspector(
    peers: NodePeers, home: Path, *args: str, env: dict[str, str] | None = None
) -> tuple[int, dict[str, Any]]:
    """`inspector --cli <args> --format json`: its exit status and its one JSON object."""
    done = subprocess.run(
        peers.inspector_command("--cli", *args, "--format", "json"),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_SECONDS,
        env={"PATH": os.environ.get("PATH", os.defpath), "HOME": str(home), **(env or {})},
        check=False,
    )
    assert done.stdout.strip(), done.stderr[-4000:]
    report: dict[str, Any] = json.loads(done.stdout)
    return done.returncode, report


def tool_names(report: dict[str, Any]) -> list[str]:
    """The tools a `tools/list` run printed (under `result`, or bare: the CLI prints both)."""
    listed = report.get("result", report)
    return [tool["name"] for tool in listed["tools"]]


def show(title: str, proxy: Proxy, start: int, report: dict[str, Any]) -> None:
    print(f"\n{title}")  # noqa: T201 (the transcript this test exists to show)
    print("\n".join(proxy.transcript(start)))  # noqa: T201
    print(f"  the CLI printed: {json.dumps(report)[:400]}")  # noqa: T201


def test_inspector_cli_with_a_url_and_no_era_flag_lists_tools_in_the_2025_11_25_era(
    peers: NodePeers, home: Path, proxy: Proxy
) -> None:
    start = len(proxy.exchanges)
    status, report = inspector(peers, home, proxy.url, "--method", "tools/list")
    exchanges = proxy.since(start)
    show("inspector --cli <url> --method tools/list", proxy, start, report)

    assert status == 0, report
    assert {"deploy_to_aws", "plan_release"} <= set(tool_names(report))
    assert_legacy_session(exchanges)
    # The CLI declares no elicitation and no sampling (`elicit: false`, `sample: false`).
    capabilities = exchanges[0].sent[0]["params"]["capabilities"]
    assert "elicitation" not in capabilities
    assert "sampling" not in capabilities


def test_inspector_cli_plans_a_release_without_questions_over_http(
    peers: NodePeers, home: Path, proxy: Proxy
) -> None:
    start = len(proxy.exchanges)
    status, report = inspector(
        peers,
        home,
        proxy.url,
        "--method",
        "tools/call",
        "--tool-name",
        "plan_release",
        "--tool-args-json",
        json.dumps(RELEASE_ARGS),
    )
    exchanges = proxy.since(start)
    show("inspector --cli <url> --method tools/call --tool-name plan_release", proxy, start, report)

    assert status == 0, report
    plan = report.get("result", report)["structuredContent"]
    assert plan["status"] == "drafted"  # no form to confirm it in
    assert plan["version"] == "1.3.0"
    assert (
        "Nobody confirmed this plan: the host cannot show forms (elicitation)."
        in (plan["assumptions"])
    )
    assert_legacy_session(exchanges)
    assert questions(exchanges) == []


def test_inspector_cli_cannot_answer_deploy_to_aws_and_nothing_is_deployed(
    peers: NodePeers, home: Path, proxy: Proxy, aws_env: dict[str, str]
) -> None:
    """The negative, for a client that cannot answer: no question is sent, no stack made."""
    start = len(proxy.exchanges)
    status, report = inspector(
        peers,
        home,
        proxy.url,
        "--method",
        "tools/call",
        "--tool-name",
        "deploy_to_aws",
        "--tool-arg",
        "stack=inspector-cli",
    )
    exchanges = proxy.since(start)
    show(
        "inspector --cli <url> --method tools/call --tool-name deploy_to_aws", proxy, start, report
    )

    assert status != 0, report
    text = json.dumps(report)
    assert "elicitation" in text, report  # the refusal names the capability it needs
    assert_legacy_session(exchanges)
    assert questions(exchanges) == []  # a client that declared no elicitation is never asked
    assert stack_status(aws_env, "inspector-cli", role_arn=None) is None


def test_inspector_cli_protocol_era_modern_speaks_2026_07_28_over_http(
    peers: NodePeers, home: Path, proxy: Proxy
) -> None:
    """The switch: `--protocol-era modern` sends no initialize and opens no session."""
    start = len(proxy.exchanges)
    status, report = inspector(
        peers, home, proxy.url, "--protocol-era", "modern", "--method", "tools/list"
    )
    exchanges = proxy.since(start)
    show("inspector --cli <url> --protocol-era modern --method tools/list", proxy, start, report)

    assert status == 0, report
    assert "deploy_to_aws" in tool_names(report)
    assert not [exchange for exchange in exchanges if "initialize" in exchange.methods()]
    assert not [exchange for exchange in exchanges if exchange.new_session]
    assert {exchange.version for exchange in exchanges} == {"2026-07-28"}


def test_inspector_cli_over_stdio_with_no_era_flag_sends_initialize(
    peers: NodePeers, home: Path, project: BakedProject, tmp_path: Path
) -> None:
    """Over stdio the CLI's default is the same legacy era: its first line is `initialize`."""
    wire = tmp_path / "stdin.jsonl"
    server = shlex.join([*project.server_command()])
    # The server as a host starts it, with what the host writes to its stdin kept in a file.
    command = f"tee {shlex.quote(str(wire))} | exec {server}"
    env = project.server_env(state_env(project))
    status, report = inspector(
        peers,
        home,
        "--method",
        "tools/list",
        *[flag for key, value in env.items() for flag in ("-e", f"{key}={value}")],
        "--",
        "/bin/sh",
        "-c",
        command,
    )

    assert status == 0, report
    assert "deploy_to_aws" in tool_names(report)
    first = json.loads(wire.read_text(encoding="utf-8").splitlines()[0])
    assert first["method"] == "initialize"
    assert first["params"]["protocolVersion"] == "2025-11-25"
    assert sys.executable in server
