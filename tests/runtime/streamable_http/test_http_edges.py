"""The HTTP bounds hold however the bytes arrive, and who may call a server started without a token.

uvicorn's protocol with the runtime's guards, fed reads directly (the head in one read, a byte at
a time, split anywhere), then `serve_http` as a real process over real sockets: heads at the
bound and past it, bodies past theirs sent with the head, a body still arriving after its request
was answered, Origin headers that are not bare origins, and the warning a loopback server
without `MRTR_HTTP_TOKEN` gives on a machine where others log in."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import random
import re
import socket
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_http_e2e import Replica, replica, stop

from mrtr_runtime.http._settings import MAX_BODY_BYTES, MAX_HEAD_BYTES, HttpSettings
from mrtr_runtime.http._uvicorn_classes import GuardedHttpToolsProtocol
from support import BOUND, MODERN, meta

TOOLS_LIST = json.dumps(
    {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta()}}
).encode()


def request(
    head_size: int | None = None,
    body: bytes = TOOLS_LIST,
    *,
    declared: int | None = None,
    chunked: bool = False,
    origin: str | None = None,
) -> bytes:
    """A tools/list POST whose head (up to and with its empty line) is `head_size` bytes."""
    fields = [
        "POST /mcp HTTP/1.1",
        "Host: 127.0.0.1",
        "Content-Type: application/json",
        "Accept: application/json",
        f"MCP-Protocol-Version: {MODERN}",
        "Mcp-Method: tools/list",
        "Transfer-Encoding: chunked" if chunked else f"Content-Length: {declared or len(body)}",
    ]
    if origin is not None:
        fields.append(f"Origin: {origin}")
    head = ("\r\n".join(fields) + "\r\n").encode("latin-1")
    if head_size is not None:
        pad = head_size - len(head) - len(b"X-Pad: \r\n\r\n")
        assert pad >= 0
        head += b"X-Pad: " + b"a" * pad + b"\r\n"
    head += b"\r\n"
    assert head_size is None or len(head) == head_size
    if chunked:
        body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    return head + body


# -- the protocol, fed reads directly -----------------------------------------------------------


class Wire(asyncio.Transport):
    """The transport a protocol writes to: what it wrote, and whether it closed."""

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.closed = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 8000), "peername": ("127.0.0.1", 50000)}.get(
            name, default
        )

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += data

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def ok_app(scope: Any, receive: Any, send: Any) -> None:
    """Reads the whole body, then answers 200 with its length."""
    size = 0
    while True:
        message = await receive()
        size += len(message.get("body", b""))
        if not message.get("more_body", False):
            break
    answer = str(size).encode()
    headers = [(b"content-length", str(len(answer)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": answer})


async def feed(reads: Iterable[bytes], max_head_bytes: int = MAX_HEAD_BYTES) -> bytes:
    """What the guarded protocol answers to these reads of one connection (the app run between
    reads as the loop would)."""
    import uvicorn
    from uvicorn.server import ServerState

    config = uvicorn.Config(ok_app, log_config=None, lifespan="off")
    protocol_class = GuardedHttpToolsProtocol.configured(
        HttpSettings(max_head_bytes=max_head_bytes)
    )
    protocol = protocol_class(
        config=config, server_state=ServerState(), app_state={}, _loop=asyncio.get_running_loop()
    )
    wire = Wire()
    protocol.connection_made(wire)
    for data in reads:
        if wire.closed:
            break
        protocol.data_received(data)
        await asyncio.sleep(0)
    for _ in range(5):
        await asyncio.sleep(0)
    protocol.connection_lost(None)
    return bytes(wire.written)


def status(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("head_size", "expected"),
    [
        (MAX_HEAD_BYTES, 200),
        (MAX_HEAD_BYTES + 1, 431),
        (70_000, 431),
        (10 * MAX_HEAD_BYTES, 431),
    ],
)
async def test_a_head_in_one_read_is_bounded_like_one_sent_a_byte_at_a_time(
    head_size: int, expected: int
) -> None:
    data = request(head_size)
    assert status(await feed([data])) == expected
    assert status(await feed([data[:-1], data[-1:]])) == expected
    if head_size <= 70_000:
        assert status(await feed(data[i : i + 1] for i in range(len(data)))) == expected


@pytest.mark.anyio
async def test_the_body_in_the_same_read_as_the_head_is_not_counted_as_head() -> None:
    body = b'{"pad": "' + b"a" * (4 * MAX_HEAD_BYTES) + b'"}'
    answer = await feed([request(MAX_HEAD_BYTES, body)])
    assert status(answer) == 200
    assert answer.endswith(str(len(body)).encode())


@pytest.mark.anyio
async def test_each_request_on_a_connection_gets_the_whole_bound() -> None:
    first = request(MAX_HEAD_BYTES - 100)
    second = request(MAX_HEAD_BYTES)
    answers = await feed([first, second, request(MAX_HEAD_BYTES + 1)])
    assert re.findall(rb"HTTP/1.1 (\d{3})", answers) == [b"200", b"200", b"431"]


@pytest.mark.anyio
@pytest.mark.parametrize("first_body", [TOOLS_LIST, b"x" * 100_000])
async def test_a_head_that_follows_another_request_in_the_same_read_is_measured_whole(
    first_body: bytes,
) -> None:
    # HTTP/1.1 pipelining: the second head starts mid-read, after the first request's body.
    first = request(500, first_body)
    answers = await feed([first + request(MAX_HEAD_BYTES + 1)])
    assert re.findall(rb"HTTP/1.1 (\d{3})", answers) == [b"200", b"431"]
    answers = await feed([first + request(MAX_HEAD_BYTES) + request(MAX_HEAD_BYTES)])
    assert re.findall(rb"HTTP/1.1 (\d{3})", answers) == [b"200", b"200", b"200"]
    answers = await feed([first + request(10 * MAX_HEAD_BYTES)[:-10], b"x" * 10])
    assert re.findall(rb"HTTP/1.1 (\d{3})", answers) == [b"200", b"431"]


@pytest.mark.anyio
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    head_size=st.sampled_from([300, 1000, 1001, 2000]),
    cuts=st.lists(st.integers(min_value=0), max_size=12),
)
async def test_however_the_reads_split_a_request_the_verdict_is_the_same(
    head_size: int, cuts: list[int]
) -> None:
    data = request(head_size)
    points = sorted({0, len(data), *(cut % (len(data) + 1) for cut in cuts)})
    reads = [data[a:b] for a, b in itertools.pairwise(points)]
    assert status(await feed(reads, max_head_bytes=1000)) == (200 if head_size <= 1000 else 431)


# -- over real sockets --------------------------------------------------------------------------


def connect(server: Replica) -> socket.socket:
    sock = socket.create_connection((server.host, server.port), timeout=BOUND)
    # Each send its own segment: the server reads what arrives, as small as it arrives.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def response_head(sock: socket.socket) -> bytes:
    """The status line and fields of the next response (empty if the connection ended)."""
    seen = b""
    with contextlib.suppress(ConnectionResetError):
        while b"\r\n\r\n" not in seen:
            chunk = sock.recv(65536)
            if not chunk:
                break
            seen += chunk
    return seen


def until_closed(sock: socket.socket) -> bytes:
    """Whatever else arrives before the connection ends."""
    seen = b""
    with contextlib.suppress(ConnectionResetError):
        while chunk := sock.recv(65536):
            seen += chunk
    return seen


def send(server: Replica, reads: Iterable[bytes]) -> bytes:
    """Send `reads` one by one on a new connection; the response head that comes back."""
    with connect(server) as sock:
        with contextlib.suppress(OSError):  # the server may close while we still send
            for data in reads:
                sock.sendall(data)
        return response_head(sock)


def in_chunks(data: bytes, sizes: Iterable[int]) -> Iterable[bytes]:
    offset = 0
    for size in sizes:
        if offset >= len(data):
            return
        yield data[offset : offset + size]
        offset += size
    yield data[offset:]


@pytest.mark.parametrize("split", ["one sendall", "1-byte sends", "random sends"])
def test_a_70_kb_head_is_431_however_it_is_sent(tmp_path: Path, split: str) -> None:
    data = request(70_000)
    chosen = random.Random(70_000)  # noqa: S311 -- split points, not secrets
    reads = {
        "one sendall": [data],
        "1-byte sends": in_chunks(data, itertools.repeat(1)),
        "random sends": in_chunks(data, iter(lambda: chosen.randint(1, 9000), None)),
    }[split]
    with replica(tmp_path) as server:
        assert send(server, reads).startswith(b"HTTP/1.1 431")
        assert server.rpc("tools/list", {})[0] == 200
        assert stop(server)[0] == 0


def test_a_head_at_the_bound_is_served_one_byte_more_is_431_and_ten_times_too(
    tmp_path: Path,
) -> None:
    with replica(tmp_path) as server:
        assert send(server, [request(MAX_HEAD_BYTES)]).startswith(b"HTTP/1.1 200")
        assert send(server, [request(MAX_HEAD_BYTES + 1)]).startswith(b"HTTP/1.1 431")
        assert send(server, [request(10 * MAX_HEAD_BYTES)]).startswith(b"HTTP/1.1 431")
        # The server still serves, on the same connection as before the bound too; and a
        # second head in the same sendall is measured as the first.
        with connect(server) as sock:
            sock.sendall(request(MAX_HEAD_BYTES) + request(MAX_HEAD_BYTES - 1))
            assert response_head(sock).startswith(b"HTTP/1.1 200")
        with connect(server) as sock:
            sock.sendall(request(500) + request(MAX_HEAD_BYTES + 1))
            assert re.findall(rb"HTTP/1.1 (\d{3})", until_closed(sock)) == [b"200", b"431"]
        assert server.rpc("tools/list", {})[0] == 200
        assert stop(server)[0] == 0


class Sender(threading.Thread):
    """Sends `data` on `sock` while the test reads: whether all of it went, or the server
    closed first."""

    def __init__(self, sock: socket.socket, data: bytes | Iterable[bytes]) -> None:
        super().__init__(daemon=True)
        self.sock = sock
        self.data = [data] if isinstance(data, bytes) else data
        self.all_sent = False

    def run(self) -> None:
        with contextlib.suppress(OSError):
            for chunk in self.data:
                self.sock.sendall(chunk)
            self.all_sent = True


@pytest.mark.parametrize("factor", [1, 10])
@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_body_past_the_bound_sent_with_the_head_in_one_read_is_413(
    tmp_path: Path, factor: int, framing: str
) -> None:
    body = b'{"pad": "' + b"a" * (factor * MAX_BODY_BYTES) + b'"}'
    data = request(body=body, chunked=framing == "chunked")
    with replica(tmp_path) as server:
        with connect(server) as sock:
            sender = Sender(sock, data)
            sender.start()
            answer = response_head(sock)
            sender.join(BOUND)
        assert answer.startswith(b"HTTP/1.1 413"), answer[:80]
        assert server.rpc("tools/list", {})[0] == 200
        assert stop(server)[0] == 0


def test_the_rest_of_a_body_past_the_bound_is_not_read_for_ever(tmp_path: Path) -> None:
    # Answered 413 at once from Content-Length, the body goes on arriving: ten bounds of it.
    declared = 10 * MAX_BODY_BYTES
    with replica(tmp_path) as server:
        with connect(server) as sock:
            sock.sendall(request(body=b"", declared=declared))
            assert response_head(sock).startswith(b"HTTP/1.1 413")
            sender = Sender(sock, in_chunks(b"a" * declared, itertools.repeat(65536)))
            sender.start()
            sender.join(BOUND)
            assert not sender.is_alive()
            assert not sender.all_sent  # the server closed after at most one bound more
            assert b"HTTP/1.1" not in until_closed(sock)  # no second answer: it answered once
        assert server.rpc("tools/list", {})[0] == 200
        assert stop(server)[0] == 0


def trickle() -> Iterable[bytes]:
    deadline = time.monotonic() + BOUND
    while time.monotonic() < deadline:
        yield b"a"
        time.sleep(0.05)


@pytest.mark.parametrize("refused", ["413", "403"])
def test_a_body_trickling_after_its_request_was_answered_ends_with_the_body_timeout(
    tmp_path: Path, refused: str
) -> None:
    head = (
        request(body=b"", declared=10 * MAX_BODY_BYTES)
        if refused == "413"
        else request(body=b"", declared=MAX_BODY_BYTES, origin="http://evil.example.com")
    )
    # One second instead of thirty (the app's bound, and the discarding connection's).
    prelude = (
        "import support\nimport mrtr_runtime.http._app\n"
        "import mrtr_runtime.http._uvicorn_classes\n\n"
        "mrtr_runtime.http._app.BODY_TIMEOUT_SECONDS = 1.0\n"
        "mrtr_runtime.http._uvicorn_classes.BODY_TIMEOUT_SECONDS = 1.0\n"
    )
    with replica(tmp_path, prelude=prelude) as server:
        with connect(server) as sock:
            sock.sendall(head)
            assert response_head(sock).startswith(f"HTTP/1.1 {refused}".encode())
            sender = Sender(sock, trickle())
            sender.start()
            sender.join(BOUND + 5)
            assert not sender.all_sent  # closed by the server before the trickle ran out
            assert b"HTTP/1.1" not in until_closed(sock)
        assert stop(server)[0] == 0


# -- Origin --------------------------------------------------------------------------------------

REFUSED_ORIGINS = [
    "http://evil.com:80@localhost",
    "http://evil.com@127.0.0.1",
    "http://localhost/",
    "http://localhost/path",
    "http://localhost?q",
    "http://localhost#f",
    "http://local host",
    "http://l\u00f6calhost",
    "http://localhost:99999",
    "http://[::1",  # a parse that raises must not become a 500
    "null",
    "http://evil.example.com",
]


def test_origins_that_are_not_bare_loopback_origins_are_403_and_bare_ones_pass(
    tmp_path: Path,
) -> None:
    with replica(tmp_path) as server:
        for origin in REFUSED_ORIGINS:
            with connect(server) as sock:
                sock.sendall(request(origin=origin))
                answer = response_head(sock)
            assert answer.startswith(b"HTTP/1.1 403"), (origin, answer[:80])
        for origin in ("http://localhost", "http://127.0.0.1:6274", "https://[::1]:3000"):
            with connect(server) as sock:
                sock.sendall(request(origin=origin))
                answer = response_head(sock)
            assert answer.startswith(b"HTTP/1.1 200"), (origin, answer[:80])
        assert stop(server)[0] == 0


# -- serving without a token ---------------------------------------------------------------------


def passwd(*others: int) -> str:
    """A prelude that makes the passwd database this server's account plus `others`."""
    entries = ", ".join(
        f"pwd.struct_passwd(('user{uid}', 'x', {uid}, {uid}, '', '/home/u', '/bin/bash'))"
        for uid in others
    )
    return (
        "import os\nimport pwd\n\n"
        "own = pwd.struct_passwd(('me', 'x', os.getuid(), 0, '', '/', '/bin/sh'))\n"
        f"pwd.getpwall = lambda: [own, {entries}]\n"
    )


@pytest.mark.parametrize(("others", "warned"), [((), False), ((4242,), True), ((4242, 4343), True)])
def test_a_loopback_server_without_a_token_warns_when_others_log_in_here(
    tmp_path: Path, others: tuple[int, ...], warned: bool
) -> None:
    with replica(tmp_path, prelude=passwd(*others)) as server:
        warnings = [line for line in server.startup.splitlines() if "MRTR_HTTP_TOKEN" in line]
        assert len(warnings) == (1 if warned else 0), server.startup
        if warned:
            assert f"{len(others)} other login account" in warnings[0]
        assert server.rpc("tools/list", {})[0] == 200
        assert stop(server)[0] == 0
