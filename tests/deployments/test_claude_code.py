"""Claude Code, a real host, runs what ``<slug> config claude-code`` prints, and calls a tool.

The pinned Claude Code CLI (npm ``@anthropic-ai/claude-code``, its native binary) runs offline
with a throwaway HOME and an environment of PATH, HOME and what it needs, nothing of this
shell's:

- the stdio command ``config claude-code`` prints, and the HTTP one ``config claude-code --http``
  prints for ``<slug> http --port 0`` (with a bearer token), each parsed with shlex and run as
  printed: ``claude`` is found on PATH, as in a shell; then ``claude mcp list`` starts every
  server and must say "Connected" for both. The token is in no printed text and in no file
  Claude Code wrote; without ``MRTR_HTTP_TOKEN`` in its environment the HTTP server refuses it.
- one print-mode call (``claude -p``), whose model is a stand-in on 127.0.0.1 that answers the
  Messages API with a ``tool_use`` of ``deploy_to_aws`` on the HTTP server (the AWS bake, moto
  behind it), then with text once it has the tool's result. Print mode has no one to ask, so
  Claude Code answers each of the tool's questions with ``cancel``. The HTTP server is reached
  through a recording relay, as a deployment's load balancer would be: the relay shows the
  cancel reaching the server and the server ending the call on it, moto shows no stack, and the
  stand-in shows the tool result the model read.

Each test prints its transcript: the commands run and Claude Code's output (``pytest -rA``).
"""

from __future__ import annotations

import contextlib
import html
import http.client
import json
import os
import re
import secrets
import shlex
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import boto3
import pytest
from bakery import DEFAULT_PACKAGE, DEFAULT_SLUG, Installed, run
from peers.node import NodePeers, PeersUnavailableError, ensure_node_peers
from peers.terminal import Terminal, TerminalUnavailableError, find_tmux
from test_http_replicas import HOP_BY_HOP, MOTO_CREDENTIALS, REGION, Replica, messages_in
from test_http_replicas import start_replica as start_server

pytestmark = pytest.mark.baked_checks

Json = dict[str, Any]

#: The HTTP server's name in Claude Code: the stdio one has the default name, the project's.
HTTP_NAME = f"{DEFAULT_SLUG}-http"
STACK = "claude-code-demo"
#: Claude Code's names for a server's tools: mcp__<server>__<tool>.
DEPLOY_TOOL = f"mcp__{HTTP_NAME}__deploy_to_aws"
#: `claude mcp list` starts every server and waits for each; `claude -p` runs a whole turn.
CLAUDE_TIMEOUT_SECONDS = 240
#: How long the interactive UI may take to have its stdio server connected (a loaded machine).
MCP_CONNECT_SECONDS = 120


class Transcript:
    """What the test ran and what came back, printed as it happens (``pytest -rA`` shows it)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, text: str) -> None:
        for line in text.rstrip("\n").splitlines() or [""]:
            self.lines.append(line)
            print(f"  {line}")  # noqa: T201 (the transcript this test exists to show)


# -- the relay in front of the HTTP server: what reached it, what it answered --------------------


@dataclass(frozen=True)
class Exchange:
    request: Json
    replies: tuple[Json, ...]


class Relay(ThreadingHTTPServer):
    """Forwards every request to the server as it comes and streams the answer back (a listen
    stream stays open as long as the server keeps it), keeping each JSON-RPC exchange."""

    daemon_threads = True

    def __init__(self, upstream: str) -> None:
        super().__init__(("127.0.0.1", 0), _Relayed)
        self.upstream = urlsplit(upstream)
        self.exchanges: list[Exchange] = []
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}{self.upstream.path}"

    def calls_of(self, tool: str) -> list[Exchange]:
        with self.lock:
            return [
                exchange
                for exchange in self.exchanges
                if exchange.request.get("method") == "tools/call"
                and exchange.request.get("params", {}).get("name") == tool
            ]


class _Relayed(BaseHTTPRequestHandler):
    server: Relay

    def _forward(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length) if length else b""
        upstream = self.server.upstream
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        # No timeout: a listen stream is quiet for as long as nothing changes; the server's
        # stop ends it.
        connection = http.client.HTTPConnection(upstream.hostname or "", upstream.port)
        try:
            connection.request(self.command, self.path, body or None, headers)
            response = connection.getresponse()
            self.send_response(response.status)
            for name, value in response.getheaders():
                if name.lower() not in HOP_BY_HOP:
                    self.send_header(name, value)
            self.end_headers()  # HTTP/1.0: the body runs to the connection's close
            payload = bytearray()
            while chunk := response.read1(65536):
                payload += chunk
                try:
                    self.wfile.write(chunk)
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    # The client went away (Claude Code exits with its listen stream open):
                    # closing the upstream connection tells the server, as a direct client's
                    # disconnect would.
                    break
        finally:
            connection.close()
        if body and self.command == "POST":
            content_type = response.getheader("Content-Type", "")
            replies = tuple(messages_in(bytes(payload), content_type)) if payload else ()
            with self.server.lock:
                self.server.exchanges.append(Exchange(json.loads(body), replies))

    do_POST = do_GET = do_DELETE = _forward

    def log_message(self, format: str, *args: Any) -> None:
        """The relay's record is ``Relay.exchanges``."""


# -- the stand-in model: the Messages API, scripted ---------------------------------------------


class StandInModel(ThreadingHTTPServer):
    """``POST /v1/messages`` as the Anthropic API answers it (JSON, or SSE when asked to stream):
    a ``tool_use`` of ``DEPLOY_TOOL`` while the conversation holds no result of it, then text.
    Any other request (one that offers no such tool) gets a short text."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Messages)
        self.requests: list[Json] = []
        self.lock = threading.Lock()
        #: The tool the model calls, and with what: a test may set another.
        self.plan: tuple[str, Json] = (DEPLOY_TOOL, {"stack": STACK, "region": REGION})

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    def offered_since(self, sent: int, tool: str, *, timeout: float) -> bool:
        """Whether a request after the first `sent` offers `tool`, once the turn has reached
        the model (False when it did without it)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                new = self.requests[sent:]
            if any(tool in {t.get("name") for t in request.get("tools", [])} for request in new):
                return True
            if new:
                time.sleep(0.5)  # a side request (a title, say) may come first
                with self.lock:
                    later = self.requests[sent:]
                if later and not any(
                    tool in {t.get("name") for t in request.get("tools", [])} for request in later
                ):
                    return False
            time.sleep(0.1)
        return False

    def tool_results(self) -> list[Json]:
        """Every tool_result block the model was sent, in order."""
        with self.lock:
            requests = list(self.requests)
        return [
            block
            for request in requests
            for message in request.get("messages", [])
            if isinstance(message.get("content"), list)
            for block in message["content"]
            if isinstance(block, dict) and block.get("type") == "tool_result"
        ]


TOOL_USE_ID = "toolu_deploy_1"


def _reply_to(request: Json, plan: tuple[str, Json]) -> tuple[list[Json], str]:
    tool, arguments = plan
    offered = {tool.get("name") for tool in request.get("tools", [])}
    answered = any(
        isinstance(block, dict) and block.get("tool_use_id") == TOOL_USE_ID
        for message in request.get("messages", [])
        if isinstance(message.get("content"), list)
        for block in message["content"]
    )
    if tool in offered and not answered:
        return [{"type": "tool_use", "id": TOOL_USE_ID, "name": tool, "input": arguments}], (
            "tool_use"
        )
    text = "The deploy was not carried out." if answered else "Nothing to do."
    return [{"type": "text", "text": text}], "end_turn"


def _stream(message: Json) -> bytes:
    """The Messages API's SSE events for ``message``, one delta per block."""
    start = {**message, "content": [], "stop_reason": None}
    events: list[tuple[str, Json]] = [("message_start", {"message": start})]
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            opened, delta = (
                {"type": "text", "text": ""},
                {"type": "text_delta", "text": block["text"]},
            )
        else:
            opened = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        events += [
            ("content_block_start", {"index": index, "content_block": opened}),
            ("content_block_delta", {"index": index, "delta": delta}),
            ("content_block_stop", {"index": index}),
        ]
    stop = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    events += [
        ("message_delta", {"delta": stop, "usage": {"output_tokens": 8}}),
        ("message_stop", {}),
    ]
    text = "".join(
        f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n" for name, data in events
    )
    return text.encode("utf-8")


class _Messages(BaseHTTPRequestHandler):
    server: StandInModel
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        if urlsplit(self.path).path.endswith("/count_tokens"):
            self._send("application/json", json.dumps({"input_tokens": 16}).encode())
            return
        with self.server.lock:
            self.server.requests.append(request)
        content, stop_reason = _reply_to(request, self.server.plan)
        message = {
            "id": f"msg_{secrets.token_hex(8)}",
            "type": "message",
            "role": "assistant",
            "model": request.get("model", "stand-in"),
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {"input_tokens": 16, "output_tokens": 8},
        }
        if request.get("stream"):
            self._send("text/event-stream", _stream(message))
        else:
            self._send("application/json", json.dumps(message).encode())

    def do_GET(self) -> None:
        self._send("application/json", b"{}", status=404)

    def _send(self, content_type: str, body: bytes, status: int = 200) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """The stand-in's record is ``StandInModel.requests``."""


@contextlib.contextmanager
def serving(server: ThreadingHTTPServer) -> Iterator[None]:
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()


# -- the host: Claude Code in a throwaway home ---------------------------------------------------


@dataclass
class Host:
    """Claude Code as a user has it: a home of its own, a workspace (local scope is per
    directory), ``claude`` on PATH, and only the environment it needs."""

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
            # Where the stdio server Claude Code starts keeps its task store: this test's.
            "XDG_STATE_HOME": str(self.home / "state"),
            "DISABLE_TELEMETRY": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            # A loaded machine starts a server slowly; Claude Code's default wait is shorter.
            "MCP_TIMEOUT": "60000",
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
            timeout=CLAUDE_TIMEOUT_SECONDS,
            check=False,
        )
        self.transcript(result.stdout + result.stderr)
        assert self.token not in result.stdout + result.stderr
        return result

    def mcp_list(self, **extra: str) -> dict[str, str]:
        """``claude mcp list``: each server's line, by name."""
        result = self.run(["claude", "mcp", "list"], **extra)
        assert result.returncode == 0, result.stderr
        lines: dict[str, str] = {}
        for line in result.stdout.splitlines():
            name, colon, rest = line.partition(": ")
            if colon and name in (DEFAULT_SLUG, HTTP_NAME):
                lines[name] = rest
        return lines


@pytest.fixture(scope="module")
def peers() -> NodePeers:
    try:
        return ensure_node_peers()
    except PeersUnavailableError as error:
        pytest.fail(f"cannot install Claude Code: {error}")


@pytest.fixture(scope="module")
def project(installed: Callable[[str], Installed]) -> Installed:
    """The AWS bake: ``deploy_to_aws`` asks before it deploys (its dev extra brings ``http``)."""
    return installed("aws")


def printed_command(
    project: Installed, transcript: Transcript, *args: str, **env: str
) -> list[str]:
    """What ``<slug> config claude-code ...`` prints, parsed as a POSIX shell would."""
    argv = [str(project.python), "-m", DEFAULT_PACKAGE, "config", "claude-code", *args]
    shown = " ".join(f"{name}=..." for name in sorted(env))
    transcript(f"$ {shown + ' ' if shown else ''}{' '.join([DEFAULT_SLUG, *argv[3:]])}")
    printed = run(argv, cwd=Path("/"), env=env)
    transcript(printed.stdout)
    # stdout is the command and nothing else; what it needs to know is on stderr.
    (line,) = printed.stdout.splitlines()
    token = env.get("MRTR_HTTP_TOKEN")
    if token:
        assert token not in printed.stdout + printed.stderr
    words = shlex.split(line)
    assert words[:3] == ["claude", "mcp", "add"], words
    return words


@pytest.fixture(scope="module")
def host(
    peers: NodePeers,
    project: Installed,
    aws: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Host]:
    root = tmp_path_factory.mktemp("claude-code")
    home, workspace, bin_dir = root / "home", root / "workspace", root / "bin"
    for directory in (home, workspace, bin_dir):
        directory.mkdir()
    (bin_dir / "claude").symlink_to(peers.claude_command()[0])
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
    relay, model = Relay(server.url), StandInModel()
    try:
        with serving(relay), serving(model):
            yield Host(home, workspace, bin_dir, transcript, token, relay, model, aws)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def registered(host: Host, project: Installed) -> Host:
    """Both servers added to Claude Code by running the printed commands as they are, with
    their default names: each form has its own, so the second is not "already exists"."""
    stdio = printed_command(project, host.transcript)
    added = host.run(stdio)
    assert added.returncode == 0, added.stderr
    over_http = printed_command(
        project, host.transcript, "--http", host.relay.url, MRTR_HTTP_TOKEN=host.token
    )
    assert over_http[5] == HTTP_NAME, over_http
    added = host.run(over_http)
    assert added.returncode == 0, added.stderr
    return host


def test_claude_code_connects_to_both_servers_as_the_printed_commands_add_them(
    registered: Host,
) -> None:
    host = registered
    connected = host.mcp_list(MRTR_HTTP_TOKEN=host.token)
    assert set(connected) == {DEFAULT_SLUG, HTTP_NAME}, host.transcript.lines
    for name, line in connected.items():
        assert "Connected" in line and "Failed" not in line, (name, line)

    # The token is in nothing Claude Code keeps: its config holds the placeholder, filled in
    # from its environment at each connection.
    kept = "\n".join(
        path.read_text(encoding="utf-8", errors="replace")
        for path in [host.home / ".claude.json", *host.home.rglob("*.json")]
        if path.is_file()
    )
    assert "Bearer ${MRTR_HTTP_TOKEN}" in kept
    assert host.token not in kept

    # Without the variable the HTTP server refuses Claude Code (basic/authorization: a
    # request without valid credentials gets 401), so the header is what carries the token.
    refused = host.mcp_list()
    assert "Connected" in refused[DEFAULT_SLUG]
    assert "Connected" not in refused[HTTP_NAME] and "401" in refused[HTTP_NAME], refused


def test_claude_code_in_print_mode_cancels_the_deploy_and_nothing_is_deployed(
    registered: Host,
) -> None:
    host = registered
    result = host.run(
        [
            "claude",
            "-p",
            f"Deploy the CloudFormation stack {STACK} to {REGION}.",
            "--allowedTools",
            DEPLOY_TOOL,
        ],
        ANTHROPIC_BASE_URL=host.model.url,
        ANTHROPIC_API_KEY="stand-in",
        # Every MCP tool in the request itself, not behind a tool search.
        ENABLE_TOOL_SEARCH="false",
        MRTR_HTTP_TOKEN=host.token,
    )
    assert result.returncode == 0, result.stderr

    calls = host.relay.calls_of("deploy_to_aws")
    host.transcript("what reached the HTTP server, and its answers:")
    for exchange in calls:
        params = exchange.request["params"]
        final = exchange.replies[-1].get("result", exchange.replies[-1]) if exchange.replies else {}
        host.transcript(
            f"  tools/call deploy_to_aws inputResponses={json.dumps(params.get('inputResponses'))}"
            f" -> {final.get('resultType')} {json.dumps(final.get('structuredContent'))}"
            f" asks={sorted(final.get('inputRequests', {}))}"
        )
    assert calls, "Claude Code never called deploy_to_aws"
    # 2026-07-28 basic/patterns/mrtr: the first round asks (input_required), the retry carries
    # the client's answers; client/elicitation: "cancel" is the user dismissing the question.
    first = calls[0].replies[-1]["result"]
    assert first["resultType"] == "input_required"
    asked = sorted(first["inputRequests"])
    answering = [exchange for exchange in calls if exchange.request["params"].get("inputResponses")]
    assert answering, "no round carried Claude Code's answers"
    answers = answering[-1].request["params"]["inputResponses"]
    assert sorted(answers) == asked
    assert all(answer.get("action") == "cancel" for answer in answers.values()), answers
    ended = answering[-1].replies[-1]["result"]
    assert ended["resultType"] == "complete" and not ended.get("isError"), ended
    assert ended["structuredContent"]["action"] == "cancelled"

    # Nothing reached AWS that makes a stack.
    cloudformation = boto3.client(
        "cloudformation",
        region_name=REGION,
        endpoint_url=host.aws,
        aws_access_key_id=MOTO_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=MOTO_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    )
    stacks = cloudformation.list_stacks()["StackSummaries"]
    host.transcript(f"moto: {len(stacks)} stacks")
    assert stacks == []

    # What the model read: the server's answer, cancelled.
    results = [block for block in host.model.tool_results() if block["tool_use_id"] == TOOL_USE_ID]
    assert results, "the model was never sent the tool's result"
    content = results[-1]["content"]
    text = (
        content
        if isinstance(content, str)
        else " ".join(block.get("text", "") for block in content if isinstance(block, Mapping))
    )
    host.transcript(f"the model's tool_result: {text}")
    assert "cancelled" in text and not results[-1].get("is_error"), results[-1]


# -- what a person sees: the interactive UI in a real terminal -----------------------------------

#: The stand-in's API key; Claude Code asks once whether to use a custom key, so it is approved
#: in its settings beforehand, with the onboarding and the workspace's trust.
STAND_IN_KEY = "sk-ant-stand-in-" + "0" * 24
#: Claude Code shows 3 lines of a question, each cut at the terminal's width: the narrowest
#: terminal anyone uses is where the lines that decide a yes must still be whole.
COLUMNS = 80
#: Claude Code's marks: its prompt and the field under the cursor, a field to fill, one filled.
CURSOR, REQUIRED, FILLED, INVALID = "\u276f", "*", "\u2714", "\u26a0"
CHANGES = [
    "feat: add --json output",
    "feat(cli): color output",
    "fix(cli): exit 2 on a bad flag",
    "fix: crash on empty input",
    "docs: usage",
    "chore: bump ruff",
]


def interactive(host: Host, tool: str, **extra: str) -> Terminal:
    """Claude Code's interactive UI in an 80-column terminal, asked to "go" (the stand-in
    model then calls `tool`)."""
    settings = host.home / ".claude.json"
    config = json.loads(settings.read_text(encoding="utf-8")) if settings.is_file() else {}
    config.update(
        hasCompletedOnboarding=True,
        theme="dark",
        customApiKeyResponses={"approved": [STAND_IN_KEY[-20:]], "rejected": []},
    )
    workspace = config.setdefault("projects", {}).setdefault(str(host.workspace), {})
    workspace.update(hasTrustDialogAccepted=True, hasCompletedProjectOnboarding=True)
    settings.write_text(json.dumps(config), encoding="utf-8")
    env = host.env(
        ANTHROPIC_BASE_URL=host.model.url,
        ANTHROPIC_API_KEY=STAND_IN_KEY,
        ENABLE_TOOL_SEARCH="false",
        TERM="xterm-256color",
        **extra,
    )
    terminal = Terminal(
        ["claude", "--allowedTools", tool], cwd=host.workspace, env=env, columns=COLUMNS
    )
    terminal.wait_for(CURSOR)
    # Claude Code connects its MCP servers in the background: a turn sent before the server is
    # up offers the model no tool of it. Ask again until a turn offers `tool`.
    deadline = time.monotonic() + MCP_CONNECT_SECONDS
    while True:
        sent = len(host.model.requests)
        terminal.type("go")
        terminal.press("Enter")
        if host.model.offered_since(sent, tool, timeout=CLAUDE_TIMEOUT_SECONDS):
            return terminal
        if time.monotonic() > deadline:
            terminal.close()
            raise AssertionError(f"Claude Code never offered {tool} to its model")
        time.sleep(1)


def question_lines(screen: str) -> list[str]:
    """The lines of the question a form shows: after "requests your input", up to the first
    field, or the "… (+N more lines)" that stands for the rest."""
    lines = screen.splitlines()
    start = next(i for i, line in enumerate(lines) if "requests your input" in line) + 1
    shown: list[str] = []
    for line in lines[start:]:
        text = line.strip()
        if text.startswith(("… (+", CURSOR, REQUIRED, FILLED, INVALID)):
            break
        shown.append(text)
    return shown


def model_read(host: Host, before: int) -> str:
    """The tool result the stand-in model was sent after `before` earlier ones, as text."""
    for _ in range(240):
        results = [
            block for block in host.model.tool_results() if block["tool_use_id"] == TOOL_USE_ID
        ]
        if len(results) > before:
            content = results[-1]["content"]
            if isinstance(content, str):
                return content
            return " ".join(
                block.get("text", "") for block in content if isinstance(block, Mapping)
            )
        threading.Event().wait(0.25)
    raise AssertionError("the model was never sent the tool's result")


@pytest.fixture
def screens(registered: Host) -> Iterator[Host]:
    try:
        find_tmux()
    except TerminalUnavailableError as error:
        pytest.fail(f"no terminal to show Claude Code in: {error}")
    plan = registered.model.plan
    try:
        yield registered
    finally:
        registered.model.plan = plan


def test_claude_codes_deploy_form_shows_what_decides_the_yes_and_a_no_deploys_nothing(
    screens: Host,
) -> None:
    host = screens
    stack = "screen-demo"
    arguments: Json = {
        "stack": stack,
        "region": REGION,
        "parameters": {"Environment": "prod"},
        "capabilities": ["CAPABILITY_NAMED_IAM"],
    }
    host.model.plan = (DEPLOY_TOOL, arguments)
    before = len(host.model.tool_results())
    terminal = interactive(host, DEPLOY_TOOL, MRTR_HTTP_TOKEN=host.token)
    try:
        role = terminal.wait_for("IAM role ARN")
        host.transcript(f"Claude Code, {COLUMNS} columns, round 1:\n{role}")
        assert "arn:" not in role.split("IAM role ARN")[0].splitlines()[-1]  # a title, not a key
        terminal.type("arn:aws:iam::123456789012:role/Deployer")
        terminal.press("Down", "Enter")
        confirm = terminal.wait_for("Deploy this plan")
        host.transcript(f"round 2:\n{confirm}")
        # The three lines it shows are whole, and they are what decides the yes: create,
        # where, IAM, what it makes, the value that is not the default.
        assert question_lines(confirm) == [
            f"Create stack '{stack}' in account 123456789012, {REGION}?",
            "May change IAM (CAPABILITY_NAMED_IAM). Creates 2: Queue, QueueUrlParameter",
            'Set: Environment="prod"',
        ]
        assert "(+6 more lines)" in confirm
        terminal.press("Down", "Right", "Enter")  # Decline
        read = model_read(host, before)
    finally:
        terminal.close()
    host.transcript(f"the model's tool_result: {read}")
    assert f"Deploy of stack '{stack}' cancelled by the user; nothing was written" in read
    assert "null" not in read
    cloudformation = boto3.client(
        "cloudformation",
        region_name=REGION,
        endpoint_url=host.aws,
        aws_access_key_id=MOTO_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=MOTO_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    )
    assert [
        s for s in cloudformation.list_stacks()["StackSummaries"] if s["StackName"] == stack
    ] == []


def test_claude_code_links_the_full_release_notes_beside_the_yes(screens: Host) -> None:
    host = screens
    tool = f"mcp__{DEFAULT_SLUG}__plan_release"  # the stdio server: it serves review pages
    host.model.plan = (tool, {"project": "demo", "previous_version": "1.4.2", "changes": CHANGES})
    before = len(host.model.tool_results())
    terminal = interactive(host, tool)
    try:
        terminal.wait_for("Kind of release")
        terminal.type("1.5.0")
        terminal.press("Down", "Right", "Down", "Space", "Enter", "Enter")  # minor; Accept
        terminal.wait_for("What are the highlights")
        terminal.type("JSON output; colors in the terminal")
        terminal.press("Down", "Enter")
        link = terminal.wait_for("wants to open a URL")
        host.transcript(f"Claude Code, {COLUMNS} columns, round 3, first:\n{link}")
        (url,) = re.findall(r"http://127\.0\.0\.1:\d+/review/[A-Za-z0-9_-]+", link)
        connection = http.client.HTTPConnection(urlsplit(url).hostname or "", urlsplit(url).port)
        connection.request("GET", urlsplit(url).path)
        page = html.unescape(connection.getresponse().read().decode())
        connection.close()
        terminal.press("Right", "Enter")  # I'm done, continue
        confirm = terminal.wait_for("Release with these notes")
        host.transcript(f"then:\n{confirm}")
        assert question_lines(confirm) == [
            "Release demo 1.5.0 (minor) with these notes?",
            "Sets the version, adds the notes to CHANGELOG.md, pushes tag v1.5.0",
            "Notes: 2 highlights, 2 features, 2 fixes, 2 other changes",
        ]
        terminal.press("Space", "Down", "Enter")  # yes; Accept
        read = model_read(host, before)
    finally:
        terminal.close()
    host.transcript(f"the model's tool_result: {read[:300]}...")
    plan = json.loads(read)
    assert plan["status"] == "confirmed" and "null" not in read
    # The page held every line the yes approved.
    for line in plan["notes_markdown"].strip().splitlines():
        assert line in page, line
