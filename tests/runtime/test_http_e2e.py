"""`serve_http` as a real process on uvicorn over real sockets: it says where it listens, serves
a conversation across two replicas sharing a key (one killed between rounds), refuses a
rebinding Host, streams progress, and stops on SIGTERM with status 0."""

from __future__ import annotations

import http.client
import json
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

codec = codec_from_environment(os.environ, default_key_file=None)
settings = HttpSettings.from_environment(os.environ, host=sys.argv[1], port=int(sys.argv[2]))
sys.exit(serve_http(make_server(codec=codec), settings, name="support-server"))
"""

ADDRESS = re.compile(r"serving MCP at http://([^:/]+):(\d+)/mcp")


class Replica:
    def __init__(self, process: subprocess.Popen[str], host: str, port: int) -> None:
        self.process = process
        self.host = host
        self.port = port

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
def replica(tmp_path: Path, host: str = "127.0.0.1", port: int = 0) -> Iterator[Replica]:
    script = tmp_path / "serve_http.py"
    script.write_text(SCRIPT)
    process = subprocess.Popen(
        [sys.executable, str(script), host, str(port)],
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
                yield Replica(process, found.group(1), int(found.group(2)))
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
