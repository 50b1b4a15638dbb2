"""A name twice in a JSON object is refused on every transport, before anything runs.

RFC 8259 section 4: names within an object SHOULD be unique, and parsers disagree on which one
wins. A gateway that reads the first `name` and a server that keeps the last would disagree on
which tool is called: the server refuses the message instead (-32600, the id kept).
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import anyio
import pytest
from test_http_app import Client, app_over

from support import (
    BOUND,
    SERVER_SCRIPT,
    make_server,
    raw_server,
    read_message,
    reader,
    send,
    server_env,
)

pytestmark = pytest.mark.anyio

META = (
    b'"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
    b'"io.modelcontextprotocol/clientCapabilities":{}}'
)
#: A gateway reading the first `name` sees `echo`; a last-wins parser would run `refuse`.
SMUGGLED = (
    b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","name":"refuse",'
    b'"arguments":{"text":"hi","reason":"x"},' + META + b"}}"
)
REFUSAL = {"code": -32600, "message": "Invalid request: duplicate name 'name' in a JSON object"}


async def test_over_http_a_duplicate_name_is_a_400_invalid_request_with_the_id(
    calls: Counter[str],
) -> None:
    client = Client(app_over(make_server(calls=calls)))
    headers = {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "echo"}
    reply = await client.post(SMUGGLED, headers=headers)
    assert reply.status == 400
    assert reply.json() == {"jsonrpc": "2.0", "id": 7, "error": REFUSAL}
    assert sum(calls.values()) == 0


async def test_over_stdio_a_duplicate_name_is_an_invalid_request_with_the_id(
    tmp_path: Path,
) -> None:
    script = tmp_path / "serve_support.py"
    script.write_text(SERVER_SCRIPT, encoding="utf-8")
    with anyio.fail_after(BOUND):
        async with raw_server([sys.executable, str(script)], server_env()) as process:
            await send(process, SMUGGLED + b"\n")
            answer = await read_message(reader(process))
    assert answer == {"jsonrpc": "2.0", "id": 7, "error": REFUSAL}
