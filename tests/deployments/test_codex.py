"""Codex CLI, a second real host, runs what ``<slug> config codex`` prints, and calls the tools.

The pinned Codex CLI (npm ``@openai/codex``, its native binary through its launcher) runs offline
with a throwaway HOME whose ``~/.codex/config.toml`` names one model provider: a stand-in on
127.0.0.1 that answers the Responses API (``POST /v1/responses``, SSE) with the function call a
test scripts, then with text once it has the call's output. Codex speaks MCP 2025-06-18
(``initialize``) and declares forms and URL questions; ``codex exec`` has no one to ask, so it
declines every question a tool sends, and a tool that is not marked read-only needs an approval
it cannot get.

- Both printed commands, run as printed (``codex`` found on PATH), add the stdio server and the
  HTTP one (``<slug> http``, a bearer token, reached through a recording relay) under their two
  default names; ``codex mcp list`` shows both, and the model is offered each server's tools.
- Read-only: the model reads the project's skill through Codex's ``read_mcp_resource`` and gets
  the file; it calls ``plan_release`` (read-only), Codex declines its question, and the model
  reads that nothing is planned, and why.
- ``deploy_to_aws`` (not read-only): plain ``codex exec`` refuses the call itself (the server
  sees no ``tools/call``); with approvals bypassed the call reaches the server, Codex declines
  the role question, and the model reads that nothing was written to AWS. moto holds no stack
  either way.

Each test prints its transcript: the commands run and Codex's output (``pytest -rA``).
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import boto3
import pytest
from bakery import DEFAULT_PACKAGE, DEFAULT_SLUG, Installed, run
from peers.node import NodePeers, PeersUnavailableError, ensure_node_peers
from test_claude_code import Relay, Transcript, serving
from test_http_replicas import MOTO_CREDENTIALS, REGION, Replica
from test_http_replicas import start_replica as start_server

pytestmark = pytest.mark.baked_checks

Json = dict[str, Any]

#: The two default names: the stdio form's is the project's, the HTTP form's `<slug>-http`.
HTTP_NAME = f"{DEFAULT_SLUG}-http"
STACK = "codex-demo"
SKILL_URI = "skill://multi-round-tool/SKILL.md"
#: Codex offers each MCP server's tools in a namespace `mcp__<name, with _ for ->`.
STDIO_NAMESPACE = "mcp__" + DEFAULT_SLUG.replace("-", "_")
HTTP_NAMESPACE = "mcp__" + HTTP_NAME.replace("-", "_")
#: `codex exec` starts every server and runs a whole turn.
CODEX_TIMEOUT_SECONDS = 240
STAND_IN_KEY_ENV = "STAND_IN_API_KEY"
#: How long the relay may take to record an exchange the server has ended.
RELAY_WAIT_SECONDS = 10


# -- the stand-in model: the Responses API, scripted --------------------------------------------


class StandInModel(ThreadingHTTPServer):
    """``POST /v1/responses`` as Codex reads it (SSE): the function call in `plan` while the
    conversation holds no output of it, then text repeating that output."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Responses)
        self.requests: list[Json] = []
        self.lock = threading.Lock()
        #: The function call the model makes: its name, arguments and (MCP tools) namespace.
        self.plan: Json = {}

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def offered(self) -> dict[str, list[str]]:
        """The last request's tools: each namespace's tool names, and top-level functions."""
        with self.lock:
            tools = self.requests[-1].get("tools", []) if self.requests else []
        offered: dict[str, list[str]] = {"": []}
        for tool in tools:
            if tool.get("type") == "namespace":
                offered[tool["name"]] = [inner["name"] for inner in tool.get("tools", [])]
            elif "name" in tool:
                offered[""].append(tool["name"])
        return offered

    def outputs(self) -> list[str]:
        """Every function call output the model was sent, as text, in order."""
        with self.lock:
            requests = list(self.requests)
        return [
            _text(item.get("output"))
            for request in requests
            for item in request.get("input", [])
            if isinstance(item, dict) and item.get("type") == "function_call_output"
        ]


def _text(output: Any) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "\n".join(str(part.get("text", "")) for part in output if isinstance(part, dict))
    return json.dumps(output)


def _events(items: Sequence[Json]) -> bytes:
    response_id = f"resp_{secrets.token_hex(6)}"
    usage = {"input_tokens": 16, "output_tokens": 8, "total_tokens": 24}
    events: list[tuple[str, Json]] = [("response.created", {"response": {"id": response_id}})]
    events += [("response.output_item.done", {"item": item}) for item in items]
    events.append(("response.completed", {"response": {"id": response_id, "usage": usage}}))
    text = "".join(
        f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n" for name, data in events
    )
    return text.encode("utf-8")


class _Responses(BaseHTTPRequestHandler):
    server: StandInModel
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        with self.server.lock:
            self.server.requests.append(request)
            plan = dict(self.server.plan)
        outputs = [
            item
            for item in request.get("input", [])
            if isinstance(item, dict) and item.get("type") == "function_call_output"
        ]
        if plan and not outputs:
            call = {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": plan["name"],
                "arguments": json.dumps(plan["arguments"]),
            }
            if plan.get("namespace"):
                call["namespace"] = plan["namespace"]
            items = [call]
        else:
            said = _text(outputs[-1].get("output")) if outputs else "Nothing to do."
            content = [{"type": "output_text", "text": f"The tool said: {said}"}]
            items = [{"type": "message", "role": "assistant", "id": "msg_1", "content": content}]
        body = _events(items)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        """The stand-in's record is ``StandInModel.requests``."""


# -- the host: Codex in a throwaway home ---------------------------------------------------------


@dataclass
class Host:
    """Codex as a user has it: a home of its own (``~/.codex/config.toml``), a workspace,
    ``codex`` on PATH, and only the environment it needs."""

    home: Path
    workspace: Path
    bin: Path
    transcript: Transcript
    token: str
    relay: Relay
    model: StandInModel
    aws: str

    def env(self, **extra: str) -> dict[str, str]:
        return {
            "PATH": os.pathsep.join([str(self.bin), os.defpath]),
            "HOME": str(self.home),
            # Where the stdio server Codex starts keeps its task store: this test's.
            "XDG_STATE_HOME": str(self.home / "state"),
            STAND_IN_KEY_ENV: "stand-in",
            **extra,
        }

    def run(self, argv: Sequence[str], **extra: str) -> subprocess.CompletedProcess[str]:
        shown = " ".join(shlex.quote(word) for word in argv)
        names = " ".join(f"{name}=..." for name in sorted(extra))
        self.transcript(f"$ {names + ' ' if names else ''}{shown}")
        result = subprocess.run(
            list(argv),
            cwd=self.workspace,
            env=self.env(**extra),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=CODEX_TIMEOUT_SECONDS,
            check=False,
        )
        # Codex's notice that it keeps no PATH helpers under a temporary directory (pytest's).
        shown_output = "\n".join(
            line
            for line in (result.stdout + result.stderr).splitlines()
            if "could not create PATH aliases" not in line
        )
        self.transcript(shown_output)
        assert self.token not in result.stdout + result.stderr
        return result

    def exec(self, prompt: str, plan: Json, *options: str) -> subprocess.CompletedProcess[str]:
        """One headless turn (``codex exec``) whose model makes the call in `plan`.

        Codex does not wait for a slow server before its first request (see `registered`), and
        every turn starts the stdio server anew: on a loaded machine a turn may go out before
        that server has answered. Its tools are then not offered, and Codex refuses the
        model's call itself ("unsupported call"), so nothing reached the server: such a turn
        is taken again, up to three turns."""
        with self.model.lock:
            self.model.plan = plan
        namespace = plan.get("namespace")
        for turn in range(1, 4):
            result = self.run(
                ["codex", "exec", "--skip-git-repo-check", *options, prompt],
                MRTR_HTTP_TOKEN=self.token,
            )
            if namespace is None or result.returncode != 0 or namespace in self.model.offered():
                break
            self.transcript(f"turn {turn}: {namespace} was not offered yet; another turn")
        return result


@pytest.fixture(scope="module")
def peers() -> NodePeers:
    try:
        return ensure_node_peers()
    except PeersUnavailableError as error:
        pytest.fail(f"cannot install Codex: {error}")


@pytest.fixture(scope="module")
def project(installed: Callable[[str], Installed]) -> Installed:
    """The AWS bake: ``deploy_to_aws`` asks before it deploys; it ships the skill too."""
    return installed("aws")


def printed_command(
    project: Installed, transcript: Transcript, *args: str, **env: str
) -> list[str]:
    """What ``<slug> config codex ...`` prints, parsed as a POSIX shell would."""
    argv = [str(project.python), "-m", DEFAULT_PACKAGE, "config", "codex", *args]
    shown = " ".join(f"{name}=..." for name in sorted(env))
    transcript(f"$ {shown + ' ' if shown else ''}{' '.join([DEFAULT_SLUG, *argv[3:]])}")
    printed = run(argv, cwd=Path("/"), env=env)
    transcript(printed.stdout)
    (line,) = printed.stdout.splitlines()  # stdout is the command; the rest is on stderr
    token = env.get("MRTR_HTTP_TOKEN")
    if token:
        assert token not in printed.stdout + printed.stderr
    words = shlex.split(line)
    assert words[:3] == ["codex", "mcp", "add"], words
    return words


@pytest.fixture(scope="module")
def host(
    peers: NodePeers,
    project: Installed,
    aws: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Host]:
    root = tmp_path_factory.mktemp("codex")
    home, workspace, bin_dir = root / "home", root / "workspace", root / "bin"
    for directory in (home / ".codex", workspace, bin_dir):
        directory.mkdir(parents=True)
    launcher = bin_dir / "codex"
    launcher.write_text(
        f'#!/bin/sh\nexec {shlex.join(peers.codex_command())} "$@"\n', encoding="utf-8"
    )
    launcher.chmod(0o755)
    model = StandInModel()
    # The model is the test's; the MCP servers are what the printed commands add below.
    (home / ".codex" / "config.toml").write_text(
        'model = "stand-in"\n'
        'model_provider = "stand-in"\n\n'
        "[model_providers.stand-in]\n"
        'name = "Stand-in"\n'
        f'base_url = "{model.url}"\n'
        'wire_api = "responses"\n'
        f'env_key = "{STAND_IN_KEY_ENV}"\n\n',
        encoding="utf-8",
    )
    transcript = Transcript()
    token = secrets.token_urlsafe(24)
    server_env = {
        "PATH": os.defpath,
        "HOME": str(root / "server-home"),
        "XDG_STATE_HOME": str(root / "server-state"),
        "MRTR_HTTP_TOKEN": token,
        "AWS_ENDPOINT_URL": aws,
        **MOTO_CREDENTIALS,
        "AWS_REGION": REGION,
        "AWS_CONFIG_FILE": str(root / "no-aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(root / "no-aws-credentials"),
    }
    command = [str(project.tool(DEFAULT_SLUG)), "http", "--port", "0"]
    transcript(f"$ MRTR_HTTP_TOKEN=... {DEFAULT_SLUG} http --port 0")
    server: Replica = start_server("http", command, server_env, root)
    transcript(f"{DEFAULT_SLUG}: serving MCP at {server.url}")
    relay = Relay(server.url)
    try:
        with serving(relay), serving(model):
            yield Host(home, workspace, bin_dir, transcript, token, relay, model, aws)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def registered(host: Host, project: Installed) -> Host:
    """Both forms added by running the printed commands as they are, with their default names."""
    added = host.run(printed_command(project, host.transcript))
    assert added.returncode == 0, added.stderr
    over_http = printed_command(
        project, host.transcript, "--http", host.relay.url, MRTR_HTTP_TOKEN=host.token
    )
    assert over_http[3] == HTTP_NAME, over_http
    assert over_http[-2:] == ["--bearer-token-env-var", "MRTR_HTTP_TOKEN"], over_http
    added = host.run(over_http)
    assert added.returncode == 0, added.stderr
    config = (host.home / ".codex" / "config.toml").read_text(encoding="utf-8")
    assert host.token not in config
    # `codex exec` sends its first request about a second after it starts, with the tools of
    # the servers that have answered by then. A user's machine starts this server in a third
    # of a second; a CI machine running other suites on every core, with the bake's bytecode
    # not yet compiled, has taken longer. One start ahead compiles it, as a user's first run
    # of the server (or its tests) does.
    warm = subprocess.run(
        [str(project.python), "-m", DEFAULT_PACKAGE],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=CODEX_TIMEOUT_SECONDS,
        check=False,
    )
    assert warm.returncode == 0, warm.stderr
    return host


def no_stacks(host: Host) -> list[Json]:
    cloudformation = boto3.client(
        "cloudformation",
        region_name=REGION,
        endpoint_url=host.aws,
        aws_access_key_id=MOTO_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=MOTO_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    )
    stacks: list[Json] = cloudformation.list_stacks()["StackSummaries"]
    host.transcript(f"moto: {len(stacks)} stacks")
    return stacks


def test_codex_adds_both_printed_forms_and_offers_every_tool(registered: Host) -> None:
    host = registered
    listed = host.run(["codex", "mcp", "list"])
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0]: line for line in listed.stdout.splitlines() if line.strip()}
    assert {DEFAULT_SLUG, HTTP_NAME} <= set(rows), listed.stdout
    assert all("enabled" in rows[name] for name in (DEFAULT_SLUG, HTTP_NAME)), listed.stdout

    # Codex does not wait for a slow server before its first request (see `registered`): on a
    # loaded machine a turn may still go out before the stdio server has answered. A later
    # turn (a new `codex exec`, which starts the servers again) offers its tools.
    for attempt in range(1, 4):
        result = host.exec("Say hello.", {})
        assert result.returncode == 0, result.stderr
        offered = host.model.offered()
        host.transcript(f"turn {attempt}: the model was offered: {json.dumps(offered)}")
        if all(namespace in offered for namespace in (STDIO_NAMESPACE, HTTP_NAMESPACE)):
            break
    for namespace in (STDIO_NAMESPACE, HTTP_NAMESPACE):
        assert sorted(offered.get(namespace, [])) == ["deploy_to_aws", "plan_release"], offered
    assert "read_mcp_resource" in offered[""]


def test_codex_reads_the_projects_skill_through_its_resource_tool(
    registered: Host, project: Installed
) -> None:
    host = registered
    plan = {"name": "read_mcp_resource", "arguments": {"server": DEFAULT_SLUG, "uri": SKILL_URI}}
    result = host.exec("How do I write a multi-round tool here?", plan)
    assert result.returncode == 0, result.stderr
    (output,) = host.model.outputs()[-1:]
    skill = project.project / "src" / DEFAULT_PACKAGE / "skills" / "multi-round-tool" / "SKILL.md"
    first_line_of_body = next(
        line for line in skill.read_text(encoding="utf-8").split("---", 2)[2].splitlines() if line
    )
    assert SKILL_URI in output and first_line_of_body in output, output


def test_codex_declines_plan_releases_question_and_the_model_reads_why(registered: Host) -> None:
    host = registered
    plan = {
        "namespace": STDIO_NAMESPACE,
        "name": "plan_release",
        "arguments": {"project": "demo", "changes": ["feat: skills", "fix: a crash"]},
    }
    result = host.exec("Plan the next release of demo.", plan)
    assert result.returncode == 0, result.stderr
    output = host.model.outputs()[-1]
    host.transcript(f"the model read: {output}")
    assert '"status":"declined"' in output.replace(" ", ""), output
    assert "Nothing is planned" in output, output


def test_plain_codex_exec_refuses_the_deploy_itself_and_nothing_reaches_the_server(
    registered: Host,
) -> None:
    host = registered
    before = len(host.relay.calls_of("deploy_to_aws"))
    plan = {
        "namespace": HTTP_NAMESPACE,
        "name": "deploy_to_aws",
        "arguments": {"stack": STACK, "region": REGION},
    }
    result = host.exec(f"Deploy the stack {STACK} to {REGION}.", plan)
    assert result.returncode == 0, result.stderr
    output = host.model.outputs()[-1]
    host.transcript(f"the model read: {output}")
    # deploy_to_aws is annotated not read-only: Codex wants an approval `exec` cannot give.
    assert "requires approval" in output, output
    assert len(host.relay.calls_of("deploy_to_aws")) == before
    assert no_stacks(host) == []


def test_codex_with_approvals_bypassed_declines_the_question_and_nothing_is_deployed(
    registered: Host,
) -> None:
    host = registered
    plan = {
        "namespace": HTTP_NAMESPACE,
        "name": "deploy_to_aws",
        "arguments": {"stack": STACK, "region": REGION},
    }
    result = host.exec(
        f"Deploy the stack {STACK} to {REGION}.",
        plan,
        "--dangerously-bypass-approvals-and-sandbox",
    )
    assert result.returncode == 0, result.stderr
    # The relay keeps an exchange once the server has ended its stream, which may be just
    # after Codex, which had what it needed, has exited.
    deadline = time.monotonic() + RELAY_WAIT_SECONDS
    while not (calls := host.relay.calls_of("deploy_to_aws")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(calls) == 1, "Codex did not call deploy_to_aws once"
    # 2025-06-18: the question is a real elicitation/create on the call's stream; Codex's
    # answer comes back as a POST of its own.
    (call,) = calls
    asked = [reply for reply in call.replies if reply.get("method") == "elicitation/create"]
    assert asked, call.replies
    with host.relay.lock:
        answers = [
            exchange.request
            for exchange in host.relay.exchanges
            if exchange.request.get("id") == asked[0]["id"] and "result" in exchange.request
        ]
    host.transcript(f"asked: {asked[0]['params']['message'].splitlines()[0]}")
    host.transcript(f"Codex answered: {json.dumps([answer['result'] for answer in answers])}")
    assert [answer["result"]["action"] for answer in answers] in (["decline"], ["cancel"])
    final = call.replies[-1]["result"]
    assert final["structuredContent"]["action"] == "cancelled", final
    output = host.model.outputs()[-1]
    host.transcript(f"the model read: {output}")
    assert "nothing was written to AWS" in output, output
    assert no_stacks(host) == []


def test_the_transcript_holds_no_token(registered: Host) -> None:
    assert all(registered.token not in line for line in registered.transcript.lines)
