"""`serve_http` as a real process on uvicorn over real sockets: it says where it listens, serves
a conversation across two replicas sharing a key (one killed between rounds), refuses a
rebinding Host, streams progress, and stops on SIGTERM with status 0."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from support import BOTH_ANSWERS, BOUND, DEPLOY, MODERN, Json, meta, server_env

SCRIPT = """\
import os
import sys

from support import make_server

from mrtr_runtime.server import HttpSettings, codec_from_environment, serve_http

import dataclasses
import json

codec = codec_from_environment(os.environ, default_key_file=None)
settings = HttpSettings.from_environment(os.environ, host=sys.argv[1], port=int(sys.argv[2]))
settings = dataclasses.replace(settings, **json.loads(sys.argv[3] if len(sys.argv) > 3 else "{}"))
sys.exit(serve_http(make_server(codec=codec), settings, name="support-server"))
"""

ADDRESS = re.compile(r"serving MCP at http://([^:/]+):(\d+)/mcp")


class Replica:
    def __init__(
        self, process: subprocess.Popen[str], host: str, port: int, startup: str = ""
    ) -> None:
        self.process = process
        self.host = host
        self.port = port
        #: What the server wrote to stderr up to the line that says where it listens.
        self.startup = startup

    def post(self, body: Json | bytes, headers: dict[str, str] | None = None) -> tuple[int, Any]:
        """One POST on a fresh connection: the status, and the JSON body (or the raw text)."""
        connection = http.client.HTTPConnection(self.host, self.port, timeout=BOUND)
        try:
            raw = body if isinstance(body, bytes) else json.dumps(body).encode()
            fields = {"content-type": "application/json", "accept": "application/json"}
            fields.update(headers or {})
            connection.request("POST", "/mcp", raw, fields)
            response = connection.getresponse()
            text = response.read().decode()
            kind = response.getheader("content-type", "")
            return response.status, json.loads(text) if kind == "application/json" else text
        finally:
            connection.close()

    def rpc(self, method: str, params: Json, **headers: str) -> tuple[int, Any]:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta()}}
        fields = {"mcp-protocol-version": MODERN, "mcp-method": method}
        if "name" in params:
            fields["mcp-name"] = params["name"]
        fields.update(headers)
        return self.post(body, fields)


@contextmanager
def replica(
    tmp_path: Path, host: str = "127.0.0.1", port: int = 0, prelude: str = "", **settings: object
) -> Iterator[Replica]:
    """`serve_http` in a process of its own; `prelude` runs first (to stand in for the machine)."""
    script = tmp_path / "serve_http.py"
    script.write_text(prelude + SCRIPT)
    process = subprocess.Popen(
        [sys.executable, str(script), host, str(port), json.dumps(settings)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=server_env(),
    )
    try:
        assert process.stderr is not None
        seen = []
        for line in process.stderr:
            seen.append(line)
            found = ADDRESS.search(line)
            if found:
                yield Replica(process, found.group(1), int(found.group(2)), "".join(seen))
                break
        else:
            raise AssertionError(f"the server did not say where it listens:\n{''.join(seen)}")
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=BOUND)


def stop(server: Replica) -> tuple[int, str]:
    server.process.send_signal(signal.SIGTERM)
    stdout, stderr = server.process.communicate(timeout=BOUND)
    return server.process.returncode, stdout + stderr


def test_a_round_started_on_one_replica_finishes_on_another_after_the_first_dies(
    tmp_path: Path,
) -> None:
    with replica(tmp_path) as first, replica(tmp_path) as second:
        status, round_one = first.rpc("tools/call", DEPLOY)
        assert status == 200
        assert round_one["result"]["resultType"] == "input_required"
        first.process.kill()  # nothing of the conversation lived in it
        first.process.wait(timeout=BOUND)
        retry = {
            **DEPLOY,
            "inputResponses": BOTH_ANSWERS,
            "requestState": round_one["result"]["requestState"],
        }
        status, final = second.rpc("tools/call", retry)
        assert status == 200
        assert final["result"]["content"][0]["text"] == "Deployed prod-api successfully"
        returncode, output = stop(second)
    assert returncode == 0, output
    # stdout is no wire over HTTP, and the runtime still writes nothing there.
    assert "Traceback" not in output


def test_it_refuses_a_rebinding_host_and_streams_progress(tmp_path: Path) -> None:
    with replica(tmp_path) as server:
        status, body = server.rpc("tools/list", {}, host="evil.example.com")
        assert status == 403
        assert "evil.example.com" in body["error"]["message"]
        connection = http.client.HTTPConnection(server.host, server.port, timeout=BOUND)
        params = {"name": "progress_steps", "arguments": {}, "_meta": meta(progressToken=3)}
        request = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params}
        connection.request(
            "POST",
            "/mcp",
            json.dumps(request),
            {
                "content-type": "application/json",
                "accept": "application/json, text/event-stream",
                "mcp-protocol-version": MODERN,
                "mcp-method": "tools/call",
                "mcp-name": "progress_steps",
            },
        )
        response = connection.getresponse()
        assert response.getheader("content-type") == "text/event-stream"
        text = response.read().decode()
        connection.close()
        events = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]
        assert [event.get("method") for event in events][-1] is None
        assert events[0]["method"] == "notifications/progress"
        assert events[-1]["id"] == 9
        assert stop(server)[0] == 0


def test_a_taken_port_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        script = tmp_path / "serve_http.py"
        script.write_text(SCRIPT)
        done = subprocess.run(
            [sys.executable, str(script), "127.0.0.1", str(port)],
            capture_output=True,
            text=True,
            env=server_env(),
            timeout=BOUND,
            check=False,
        )
    assert done.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize("token", ["a-long-random-token"])
def test_the_bearer_token_comes_from_the_environment(tmp_path: Path, token: str) -> None:
    script = tmp_path / "serve_http.py"
    script.write_text(SCRIPT)
    process = subprocess.Popen(
        [sys.executable, str(script), "127.0.0.1", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=server_env(MRTR_HTTP_TOKEN=token),
    )
    assert process.stderr is not None
    try:
        for line in process.stderr:
            found = ADDRESS.search(line)
            if found:
                server = Replica(process, found.group(1), int(found.group(2)))
                break
        assert server.rpc("tools/list", {})[0] == 401
        assert server.rpc("tools/list", {}, authorization=f"Bearer {token}")[0] == 200
        assert stop(server)[0] == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=BOUND)


# -- what uvicorn leaves unbounded ---------------------------------------------------------------


@pytest.mark.parametrize("idle", [500, 4500])
def test_connections_that_never_send_a_request_are_closed_and_the_server_serves_again(
    tmp_path: Path, idle: int
) -> None:
    # Past uvicorn's connection bound (448) every new request is refused with 503; connections
    # that send nothing would hold it there for ever without the head timeout.
    with replica(tmp_path, head_timeout_seconds=1.0) as server:
        sockets = [socket.create_connection((server.host, server.port), timeout=BOUND)]
        try:
            sockets += [
                socket.create_connection((server.host, server.port), timeout=BOUND)
                for _ in range(idle - 1)
            ]
            closed = 0
            for sock in sockets:
                answer = sock.recv(4096)  # blocks until the server gives up on it
                assert answer == b"" or answer.startswith(b"HTTP/1.1 408"), answer[:80]
                closed += 1
            assert closed == idle
        finally:
            for sock in sockets:
                sock.close()
        status, _ = server.rpc("tools/list", {})
        assert status == 200
        assert stop(server)[0] == 0


@pytest.mark.parametrize("header_bytes", [65 * 1024, 640 * 1024])
def test_a_request_head_past_the_bound_gets_431(tmp_path: Path, header_bytes: int) -> None:
    with replica(tmp_path) as server:
        with socket.create_connection((server.host, server.port), timeout=BOUND) as sock:
            sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ")
            sent = 0
            with contextlib.suppress(OSError):  # the server may close while we still send
                while sent < header_bytes:
                    sock.sendall(b"a" * 8192)
                    sent += 8192
            answer = sock.recv(4096)
        assert answer.startswith(b"HTTP/1.1 431"), answer[:80]
        assert server.rpc("tools/list", {})[0] == 200
        assert stop(server)[0] == 0


def read_events(response: http.client.HTTPResponse) -> Iterator[Json]:
    for raw in response:
        line = raw.decode().rstrip("\r\n")
        if line.startswith("data: "):
            yield json.loads(line[len("data: ") :])


def test_sigterm_ends_listens_at_once_and_answers_a_call_that_outlives_the_grace(
    tmp_path: Path,
) -> None:
    with replica(tmp_path) as server:
        headers = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": MODERN,
        }
        listen = http.client.HTTPConnection(server.host, server.port, timeout=BOUND)
        params = {"notifications": {"toolsListChanged": True}, "_meta": meta()}
        body = {"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen", "params": params}
        listen.request(
            "POST", "/mcp", json.dumps(body), {**headers, "mcp-method": "subscriptions/listen"}
        )
        listen_events = read_events(listen.getresponse())
        acknowledged = next(listen_events)
        assert acknowledged["method"] == "notifications/subscriptions/acknowledged"

        gate = http.client.HTTPConnection(server.host, server.port, timeout=BOUND)
        params = {"name": "gate", "arguments": {"name": "never"}, "_meta": meta(progressToken=1)}
        body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}
        gate.request(
            "POST",
            "/mcp",
            json.dumps(body),
            {**headers, "mcp-method": "tools/call", "mcp-name": "gate"},
        )
        gate_events = read_events(gate.getresponse())
        assert next(gate_events)["method"] == "notifications/progress"  # it is waiting

        server.process.send_signal(signal.SIGTERM)
        # basic/patterns/subscriptions "Graceful Closure": cancelled, then the result.
        ending = list(listen_events)
        assert [event.get("method") for event in ending] == ["notifications/cancelled", None]
        assert ending[-1]["id"] == 1
        # The gate outlives the grace period: it is stopped and answered, not cut off.
        (last,) = list(gate_events)
        assert last["id"] == 2
        assert last["error"]["code"] == -32603
        assert "Server stopping" in last["error"]["message"]
        listen.close()
        gate.close()
        _, stderr = server.process.communicate(timeout=BOUND)
    assert server.process.returncode == 0, stderr
    assert "Traceback" not in stderr
    assert "Exception in ASGI application" not in stderr


def test_without_the_http_extra_it_says_what_to_install(tmp_path: Path) -> None:
    # A uvicorn installed without the httptools parser (not through the `http` extra).
    blocked = tmp_path / "blocked" / "httptools"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'httptools'\", name='httptools')\n"
    )
    script = tmp_path / "serve_http.py"
    script.write_text(SCRIPT)
    env = server_env()
    env["PYTHONPATH"] = f"{blocked.parent}{os.pathsep}{env['PYTHONPATH']}"
    done = subprocess.run(
        [sys.executable, str(script), "127.0.0.1", "0"],
        capture_output=True,
        text=True,
        env=env,
        timeout=BOUND,
        check=False,
    )
    assert done.returncode == 2
    assert "httptools is missing" in done.stderr
    assert "[http]" in done.stderr
    assert "Traceback" not in done.stderr


# -- the 2025-11-25 transport over real sockets ---------------------------------------------------

LEGACY_HEADERS = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2025-11-25",
}


def _sse_events(response: http.client.HTTPResponse) -> Iterator[dict[str, str]]:
    """The SSE events of a streaming response, as they arrive (comments skipped)."""
    fields: dict[str, str] = {}
    while True:
        line = response.readline().decode()
        if not line:
            return
        line = line.rstrip("\n")
        if not line:
            if fields:
                yield fields
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            fields[name] = value.removeprefix(" ")


@contextmanager
def _legacy_post(
    server: Replica, body: Json, session: str | None
) -> Iterator[http.client.HTTPResponse]:
    connection = http.client.HTTPConnection(server.host, server.port, timeout=BOUND)
    headers = dict(LEGACY_HEADERS)
    if session is not None:
        headers["mcp-session-id"] = session
    try:
        connection.request("POST", "/mcp", json.dumps(body), headers)
        with connection.getresponse() as response:
            yield response
    finally:
        connection.close()


def _legacy_status(server: Replica, body: Json, session: str | None) -> int:
    with _legacy_post(server, body, session) as response:
        response.read()
        return response.status


def test_a_2025_11_25_client_is_served_in_a_session_over_real_sockets(tmp_path: Path) -> None:
    # 2025-11-25 basic/transports: initialize opens the session (Mcp-Session-Id), the bridge
    # asks on the call's SSE stream and the answers are POSTed back, the GET stream is open
    # throughout, and SIGTERM still stops the server at once with status 0.
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": {"form": {}}},
            "clientInfo": {"name": "e2e", "version": "1"},
        },
    }
    with replica(tmp_path) as server:
        with _legacy_post(server, initialize, None) as opened:
            session = opened.getheader("mcp-session-id")
            assert opened.status == 200 and session
            assert json.loads(opened.read())["result"]["protocolVersion"] == "2025-11-25"
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert _legacy_status(server, initialized, session) == 202

        listening = http.client.HTTPConnection(server.host, server.port, timeout=BOUND)
        listen_headers = {"accept": "text/event-stream", "mcp-session-id": session}
        listening.request("GET", "/mcp", headers=listen_headers)
        stream = listening.getresponse()
        assert stream.getheader("content-type") == "text/event-stream"
        assert next(_sse_events(stream))["data"] == ""  # the priming event

        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": DEPLOY}
        with _legacy_post(server, call, session) as deploy:
            assert deploy.getheader("content-type") == "text/event-stream"
            messages = _answer_questions(server, session, _sse_events(deploy))
        assert [m.get("method") for m in messages] == ["elicitation/create"] * 2 + [None]
        assert messages[-1]["result"]["content"][0]["text"] == "Deployed prod-api successfully"

        returncode, output = stop(server)
        assert stream.read() == b""  # the GET stream ended with the server
        listening.close()
    assert returncode == 0, output
    assert "Traceback" not in output
    assert session not in output  # no session id in the log


def _answer_questions(
    server: Replica, session: str, events: Iterator[dict[str, str]]
) -> list[Json]:
    """Answer the deploy's questions as a host would; every message of the stream."""
    messages = []
    for event in events:
        if not event.get("data"):
            continue
        message = json.loads(event["data"])
        messages.append(message)
        if message.get("method") == "elicitation/create":
            content = (
                {"confirmed": True}
                if "production" in message["params"]["message"]
                else {"arn": "arn:aws:iam::123456789012:role/Deploy"}
            )
            answer = {
                "jsonrpc": "2.0",
                "id": message["id"],
                "result": {"action": "accept", "content": content},
            }
            assert _legacy_status(server, answer, session) == 202
    return messages
