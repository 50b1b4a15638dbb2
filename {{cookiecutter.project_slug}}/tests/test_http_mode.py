"""HTTP mode: the ``http`` command serves these tools over MCP's Streamable HTTP transport.

``python -m <package> http`` speaks 2026-07-28 at ``/mcp``, and a multi-round call finishes on a
second server process started with the same key, as it would on another replica behind a load
balancer.

``call_until_complete`` is a whole 2026-07-28 client over HTTP in a few lines: every request
carries ``_meta`` and the metadata headers; an ``input_required`` result is answered and the
call sent again with ``inputResponses`` and the ``requestState`` it came with. The testing
face's ``ClientSession.connect(url, ...)`` is that client, with the callbacks and ``call_tool``
the stdio tests use: the last test here is the one to copy.
"""

from __future__ import annotations

import http.client
import json
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import anyio
import pytest

from {{ cookiecutter.package_name }}.mrtr_runtime.testing import ClientSession
from test_smoke import PLAN, fill_in, fill_in_sync

BOUND = 30  # seconds for a start, a request or a stop
ADDRESS = re.compile(r"serving MCP at http://([^:/\s]+):(\d+)/mcp")
VERSION = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientInfo": {"name": "test_http_mode", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
}


class Endpoint:
    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port

    def post(self, method: str, params: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": META}}
        headers: dict[str, str] = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": VERSION,
            "mcp-method": method,
        }
        if "name" in params:
            headers["mcp-name"] = params["name"]
        connection = http.client.HTTPConnection(self.host, self.port, timeout=BOUND)
        try:
            connection.request("POST", "/mcp", json.dumps(body), headers)
            response = connection.getresponse()
            message: dict[str, Any] = json.loads(response.read())
            return response.status, message
        finally:
            connection.close()


@contextmanager
def http_server(command: list[str], env: dict[str, str]) -> Iterator[Endpoint]:
    process = subprocess.Popen(
        [*command, "http", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stderr is not None
        for line in process.stderr:
            found = ADDRESS.search(line)
            if found:
                yield Endpoint(found.group(1), int(found.group(2)))
                break
        else:
            raise AssertionError("the server never said where it listens")
        if sys.platform == "win32":
            # No SIGTERM to send on Windows: send_signal(SIGTERM) is TerminateProcess, which no
            # handler sees (status 1), and what a Windows host or service manager does too. The
            # clean stop on SIGTERM, status 0, is what the POSIX runs check.
            process.terminate()
            process.wait(timeout=BOUND)
        else:
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=BOUND) == 0
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=BOUND)


def call_until_complete(
    endpoints: list[Endpoint],
    name: str,
    arguments: Mapping[str, Any],
    answer: Callable[[Mapping[str, Any]], dict[str, Any]],
) -> tuple[dict[str, Any], int]:
    """Call a tool and answer its input requests until it completes, each round on the next
    endpoint in turn. Returns the final result and the number of rounds."""
    params: dict[str, Any] = {"name": name, "arguments": dict(arguments)}
    for round_number in range(1, 11):
        endpoint = endpoints[(round_number - 1) % len(endpoints)]
        status, message = endpoint.post("tools/call", params)
        assert status == 200, message
        result: dict[str, Any] = message["result"]
        if result["resultType"] == "complete":
            return result, round_number
        assert result["resultType"] == "input_required"
        responses = {
            key: answer(request["params"]) for key, request in result["inputRequests"].items()
        }
        params = {**params, "inputResponses": responses, "requestState": result["requestState"]}
    raise AssertionError("no result after 10 rounds")


def test_a_multi_round_call_crosses_two_server_processes_over_http(
    server_command: list[str], server_env: dict[str, str]
) -> None:
    with (
        http_server(server_command, server_env) as first,
        http_server(server_command, server_env) as second,
    ):
        status, listed = first.post("tools/list", {})
        assert status == 200
        assert "plan_release" in {tool["name"] for tool in listed["result"]["tools"]}
        result, rounds = call_until_complete([first, second], "plan_release", PLAN, fill_in_sync)
    assert rounds > 2
    assert not result.get("isError"), result
    assert "1.5.0" in json.dumps(result)


def test_a_2025_client_over_http_is_told_to_use_stdio(
    server_command: list[str], server_env: dict[str, str]
) -> None:
    with http_server(server_command, server_env) as endpoint:
        connection = http.client.HTTPConnection(endpoint.host, endpoint.port, timeout=BOUND)
        initialize = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {}},
        }
        connection.request(
            "POST", "/mcp", json.dumps(initialize), {"content-type": "application/json"}
        )
        response = connection.getresponse()
        error = json.loads(response.read())["error"]
        connection.close()
    assert response.status == 400
    assert error["data"]["supported"] == ["2026-07-28"]


@pytest.mark.anyio
async def test_the_testing_client_finishes_a_multi_round_call_over_http(
    server_command: list[str], server_env: dict[str, str]
) -> None:
    with http_server(server_command, server_env) as endpoint, anyio.fail_after(BOUND):
        url = f"http://{endpoint.host}:{endpoint.port}/mcp"
        async with ClientSession.connect(url, elicitation=fill_in) as session:
            result = await session.call_tool("plan_release", PLAN)
            assert session.protocol_violations == []
    assert result.rounds == 3  # the release, its highlights, the confirmation
    assert result.structured["status"] == "confirmed"
