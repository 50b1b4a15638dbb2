"""`serve_http` stopping and bounding connections, as a real process over real sockets.

On SIGTERM every request still running or waiting gets the JSON-RPC 503 (never uvicorn's
plain-text 500), one past its point of no return is told it may have been carried out, and the
process ends within SHUTDOWN_GRACE_SECONDS + SHUTDOWN_MARGIN_SECONDS whatever a tool's thread
does. A burst of connections past MRTR_HTTP_MAX_CONNECTIONS refuses only the excess.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from anyio import to_thread

from mrtr_runtime._context import SHUTDOWN_GRACE_SECONDS
from mrtr_runtime.http._uvicorn import SHUTDOWN_MARGIN_SECONDS
from support import BOUND, MODERN, Json, meta, server_env

_logger = logging.getLogger(__name__)

SCRIPT = """\
import functools
import os
import sys
import threading
import time
from pathlib import Path

from anyio import to_thread
from support import build_registry, make_server

from mrtr_runtime import Context
from mrtr_runtime.server import HttpSettings, codec_from_environment, serve_http

registry = build_registry()


@registry.tool()
def block(marker: str, commit: bool = False, *, ctx: Context) -> str:
    \"\"\"Blocks its worker thread for ever, after passing its point of no return if `commit`.\"\"\"
    if commit:
        ctx.point_of_no_return()
    Path(marker).touch()
    threading.Event().wait()
    return "never"


def _block_in_thread(marker: str) -> None:
    Path(marker).touch()
    threading.Event().wait()


@registry.tool()
async def hold(marker: str, *, ctx: Context) -> str:
    \"\"\"Awaits a worker thread blocked for ever: anyio shields the call, so no cancel ends it,
    and past anyio's thread limit the call waits for a thread first. With a progress token
    its answer is an SSE stream already open.\"\"\"
    await ctx.report_progress(1, message="holding")
    Path(marker + ".in").touch()
    await to_thread.run_sync(functools.partial(_block_in_thread, marker))
    return "never"


@registry.tool()
def quick() -> str:
    \"\"\"Returns at once, from one of AnyIO's worker threads (a plain def tool).\"\"\"
    return "done"


@registry.tool()
async def stall(marker: str, release: str) -> str:
    \"\"\"Blocks the event loop itself until `release` exists: what a loop starved by busy threads
    looks like to the clients, whose connections wait unaccepted in the listen backlog.\"\"\"
    Path(marker).touch()
    while not Path(release).exists():
        time.sleep(0.01)
    return "released"


codec = codec_from_environment(os.environ, default_key_file=None)
settings = HttpSettings.from_environment(os.environ, host="127.0.0.1", port=0)
sys.exit(serve_http(make_server(registry=registry, codec=codec), settings, name="support-server"))
"""

ADDRESS = re.compile(r"serving MCP at http://([^:/]+):(\d+)/mcp")
#: The contract: the grace, then the last answers' margin; the process is already running.
STOP_BOUND = SHUTDOWN_GRACE_SECONDS + SHUTDOWN_MARGIN_SECONDS


@dataclass
class Server:
    process: subprocess.Popen[str]
    port: int


@contextmanager
def http_server(tmp_path: Path, **env: str) -> Iterator[Server]:
    script = tmp_path / "serve_http_shutdown.py"
    script.write_text(SCRIPT)
    process = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=server_env(**env),
    )
    try:
        assert process.stderr is not None
        seen = []
        for line in process.stderr:
            seen.append(line)
            found = ADDRESS.search(line)
            if found:
                yield Server(process, int(found.group(2)))
                break
        else:
            raise AssertionError(f"the server did not say where it listens:\n{''.join(seen)}")
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=BOUND)


def post(
    port: int,
    request_id: int,
    name: str,
    arguments: Json,
    *,
    accept: str = "application/json",
    **extra: Any,
) -> bytes:
    """One tools/call as raw HTTP/1.1, asking the server to close the connection after it."""
    params = {"name": name, "arguments": arguments, "_meta": meta(**extra)}
    body = json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    )
    head = (
        f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n"
        f"accept: {accept}\r\nmcp-protocol-version: {MODERN}\r\n"
        f"mcp-method: tools/call\r\nmcp-name: {name}\r\nconnection: close\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body.encode()


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: Any  # the JSON body, or the raw text when it is not JSON


def parse_reply(raw: bytes) -> Reply:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    try:
        parsed: Any = json.loads(body)
    except ValueError:
        parsed = body.decode(errors="replace")
    return Reply(status, headers, parsed)


class Client:
    """Many connections at once from one event loop: each sends its request and reads its reply
    to the end (the server closes it)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.replies: dict[int, Reply] = {}

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection("127.0.0.1", self.port, limit=1 << 20)

    async def exchange(
        self,
        index: int,
        streams: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        request: bytes,
    ) -> None:
        reader, writer = streams
        writer.write(request)
        await writer.drain()
        raw = await reader.read(-1)
        writer.close()
        await writer.wait_closed()
        self.replies[index] = parse_reply(raw)


def assert_json_rpc(reply: Reply) -> Json:
    assert reply.headers.get("content-type") == "application/json", (reply.status, reply.body)
    assert isinstance(reply.body, dict), reply.body
    assert reply.body["jsonrpc"] == "2.0"
    return reply.body


async def until(condition: Any, what: str) -> None:
    deadline = time.monotonic() + BOUND
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def markers_in(folder: Path) -> int:
    return sum(1 for _ in folder.iterdir())


def test_sigterm_after_a_thread_tool_returned_reports_no_thread_still_running(
    tmp_path: Path,
) -> None:
    # The worker thread that ran `quick` waits, idle, for its next job for ten seconds: it runs
    # no tool, and the stop must not say it does (nor abandon it with os._exit).
    with http_server(tmp_path) as server:

        async def call() -> Reply:
            client = Client(server.port)
            await client.exchange(1, await client.connect(), post(server.port, 1, "quick", {}))
            return client.replies[1]

        reply = asyncio.run(call())
        assert assert_json_rpc(reply)["result"]["content"][0]["text"] == "done"
        server.process.send_signal(signal.SIGTERM)
        _, stderr = server.process.communicate(timeout=BOUND)
    assert server.process.returncode == 0, stderr
    assert "still running" not in stderr, stderr


# -- SIGTERM with requests stuck in threads and waiting for a place -----------------------------


@pytest.mark.parametrize("stuck", [1, 50, 320, 3200])
def test_sigterm_answers_every_stuck_and_waiting_request_in_json_and_ends_in_time(
    tmp_path: Path, stuck: int
) -> None:
    # Each request blocks its worker thread for ever; every other one first passes its point of
    # no return. 64 run, 256 more wait for a place (320 fills both), and a 3,200 storm fills
    # every bound: what does not fit (connections, then places) is refused busy at once.
    folder = tmp_path / "markers"
    folder.mkdir()
    with http_server(tmp_path) as server:
        client = Client(server.port)

        async def storm() -> float:
            """Every reply in; when SIGTERM was sent."""
            streams = await asyncio.gather(*(client.connect() for _ in range(stuck)))
            requests = [
                post(
                    server.port, n, "block", {"marker": str(folder / str(n)), "commit": n % 2 == 1}
                )
                for n in range(stuck)
            ]
            sent = [
                asyncio.create_task(client.exchange(n, streams[n], requests[n]))
                for n in range(stuck)
            ]
            admitted = min(stuck, 64)
            waiting = min(stuck - admitted, 256)
            # Sync handlers share anyio's worker threads: the admitted past those wait for one.
            threads = min(admitted, to_thread.current_default_thread_limiter().total_tokens)
            await until(lambda: markers_in(folder) == threads, f"{threads} tool threads")
            await until(lambda: len(client.replies) == stuck - admitted - waiting, "the refusals")
            signalled = time.monotonic()
            server.process.send_signal(signal.SIGTERM)
            await asyncio.gather(*sent)
            return signalled

        signalled = asyncio.run(storm())
        # The answers first: each one must be the JSON-RPC 503, whatever else happens.
        assert len(client.replies) == stuck
        running = {int(marker.name) for marker in folder.iterdir()}
        for n, reply in client.replies.items():
            assert reply.status == 503, (n, reply.status, reply.body)
            assert reply.headers.get("content-type") == "application/json", (n, reply.body)
            body = assert_json_rpc(reply)
            message = body["error"]["message"]
            assert body["error"]["code"] == -32603
            if n in running and n % 2 == 1:
                assert "may have been carried out" in message, message
            elif n in running:
                assert message == "Server stopping: the request was not finished; send it again"
            else:
                # Admitted but waiting for a worker thread, waiting for a place, or refused.
                assert message.startswith(
                    (
                        "Server stopping: the request was not finished; send it again",
                        "Server stopping: the request was not started",
                        "Server busy",
                    )
                ), message
        _, stderr = server.process.communicate(timeout=BOUND)  # reads stderr until the exit
        took = time.monotonic() - signalled
    _logger.info("%d stuck: the process ended %.2f s after SIGTERM", stuck, took)
    assert server.process.returncode == 0, stderr
    assert "Exception in ASGI application" not in stderr
    assert "Traceback" not in stderr
    assert took < STOP_BOUND


def dechunked(body: bytes) -> bytes:
    """An HTTP/1.1 chunked body's content (RFC 9112 section 7.1); what is cut off is dropped."""
    content = b""
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0 or len(rest) < size:
            break
        content += rest[:size]
        body = rest[size + 2 :]
    return content


def last_event(raw: bytes) -> Json:
    """The JSON-RPC message of an SSE reply's last event."""
    _, _, body = raw.partition(b"\r\n\r\n")
    events = [line for line in dechunked(body).split(b"\n") if line.startswith(b"data: ")]
    assert events, raw[:300]
    message: Json = json.loads(events[-1][len(b"data: ") :])
    return message


class RawClient(Client):
    """A `Client` that keeps each reply's bytes as they came."""

    def __init__(self, port: int) -> None:
        super().__init__(port)
        self.raw: dict[int, bytes] = {}

    async def exchange(
        self,
        index: int,
        streams: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        request: bytes,
    ) -> None:
        reader, writer = streams
        writer.write(request)
        await writer.drain()
        try:
            raw = await reader.read(-1)
        except ConnectionResetError:
            raw = b""
        writer.close()
        with contextlib.suppress(ConnectionResetError):
            await writer.wait_closed()
        self.raw[index] = raw
        if raw:
            self.replies[index] = parse_reply(raw)


@pytest.mark.parametrize(
    ("held", "stream"),
    [(40, False), (45, False), (70, False), (400, False), (45, True), (400, True)],
    ids=["40", "45", "70", "400", "45-sse", "400-sse"],
)
def test_sigterm_answers_requests_holding_or_awaiting_a_thread_and_ends_in_time(
    tmp_path: Path, held: int, stream: bool
) -> None:
    # An async tool awaits a thread that blocks for ever (anyio shields the call). anyio lends
    # 40 threads: the admitted past those wait for one, cancellable; 64 are admitted, 256 more
    # wait for a place, the rest are refused busy. With `stream` each answer is an SSE stream
    # already open (a progress notification went out first).
    folder = tmp_path / "markers"
    folder.mkdir()
    with http_server(tmp_path) as server:
        client = RawClient(server.port)
        extra: dict[str, Any] = {}
        if stream:
            extra = {"accept": "application/json, text/event-stream", "progressToken": "p"}

        async def storm() -> float:
            streams = await asyncio.gather(*(client.connect() for _ in range(held)))
            sent = [
                asyncio.create_task(
                    client.exchange(
                        n,
                        streams[n],
                        post(server.port, n, "hold", {"marker": str(folder / str(n))}, **extra),
                    )
                )
                for n in range(held)
            ]
            admitted = min(held, 64)
            waiting = min(held - admitted, 256)
            threads = min(admitted, to_thread.current_default_thread_limiter().total_tokens)

            def counted(suffix: str) -> int:
                return sum(1 for marker in folder.iterdir() if marker.suffix == suffix)

            await until(lambda: counted(".in") == admitted, f"{admitted} requests in the tool")
            await until(lambda: counted("") == threads, f"{threads} tool threads")
            await until(lambda: len(client.raw) == held - admitted - waiting, "the refusals")
            signalled = time.monotonic()
            server.process.send_signal(signal.SIGTERM)
            await asyncio.gather(*sent)
            return signalled

        signalled = asyncio.run(storm())
        _, stderr = server.process.communicate(timeout=BOUND)
        took = time.monotonic() - signalled
    kinds: dict[str, int] = {}
    for n in range(held):
        raw = client.raw[n]
        reply = client.replies.get(n)
        if reply is None:
            kind = "reset"
        elif reply.status == 200:
            kind = "sse " + str(last_event(raw).get("error", {}).get("message"))[:50]
        else:
            error = reply.body.get("error", {}) if isinstance(reply.body, dict) else {}
            kind = f"{reply.status} " + str(error.get("message", reply.body))[:50]
        kinds[kind] = kinds.get(kind, 0) + 1
    _logger.info("%d held: ended %.2f s after SIGTERM; answers %s", held, took, kinds)
    for n in range(held):
        raw = client.raw[n]
        assert raw, f"request {n} of {held}: the connection closed with no answer ({kinds})"
        if stream and client.replies[n].status == 200:
            # The stream was open: its last event is the answer (basic/transports, SSE).
            error = last_event(raw)["error"]
            assert error["code"] == -32603
            assert error["message"] == (
                "Server stopping: the request was not finished; send it again"
            ), error
            continue
        reply = client.replies[n]
        assert reply.status == 503, (n, reply.status, reply.body)
        body = assert_json_rpc(reply)
        assert body["error"]["code"] == -32603
        assert body["error"]["message"].startswith(("Server stopping: ", "Server busy")), body
    assert server.process.returncode == 0, stderr
    assert "Exception in ASGI application" not in stderr
    assert "Traceback" not in stderr
    assert took < STOP_BOUND


@pytest.mark.parametrize("pending", [16, 160])
def test_sigterm_answers_connections_not_yet_accepted_and_ends_in_time(
    tmp_path: Path, pending: int
) -> None:
    # The event loop is stalled (in the field: threads starving it of the GIL) while clients
    # connect and send their requests, so the connections wait in the kernel's listen backlog
    # when SIGTERM arrives. Closing the listener then would reset each one, its request unread:
    # each must get a JSON-RPC 503 instead. The connection bound is 16, met and passed tenfold.
    marker, release = tmp_path / "stalled", tmp_path / "release"
    with http_server(tmp_path, MRTR_HTTP_MAX_CONNECTIONS="16") as server:
        client = RawClient(server.port)

        async def storm() -> float:
            stalled = await client.connect()
            arguments = {"marker": str(marker), "release": str(release)}
            stalling = asyncio.create_task(
                client.exchange(-1, stalled, post(server.port, -1, "stall", arguments))
            )
            await until(marker.exists, "the stalled event loop")
            streams = await asyncio.gather(*(client.connect() for _ in range(pending)))
            sent = [
                asyncio.create_task(
                    client.exchange(n, streams[n], post(server.port, n, "echo", {"text": "hi"}))
                )
                for n in range(pending)
            ]
            await asyncio.sleep(0.2)  # the requests reach the server's kernel buffers
            signalled = time.monotonic()
            server.process.send_signal(signal.SIGTERM)
            release.touch()
            await asyncio.gather(stalling, *sent)
            return signalled

        signalled = asyncio.run(storm())
        _, stderr = server.process.communicate(timeout=BOUND)
        took = time.monotonic() - signalled
    assert client.replies[-1].status == 200, client.replies[-1]
    resets = sorted(n for n in range(pending) if not client.raw[n])
    assert not resets, f"{len(resets)} of {pending} connections reset with no answer"
    for n in range(pending):
        reply = client.replies[n]
        assert reply.status == 503, (n, reply.status, reply.body)
        assert reply.headers.get("retry-after") == "1", reply.headers
        error = assert_json_rpc(reply)["error"]
        assert error["code"] == -32603
        assert error["message"].startswith(
            ("Server stopping: the request was not started", "Server busy")
        ), error
    assert server.process.returncode == 0, stderr
    assert "Traceback" not in stderr
    assert took < STOP_BOUND


def test_sigterm_answers_a_request_whose_head_is_still_arriving(tmp_path: Path) -> None:
    # uvicorn closes a connection with no request cycle at once when it stops: a request whose
    # head is half sent would get no answer at all.
    with http_server(tmp_path) as server:
        client = RawClient(server.port)

        async def halves() -> None:
            reader, writer = await client.connect()
            request = post(server.port, 0, "echo", {"text": "hi"})
            writer.write(request[:20])
            await writer.drain()
            await asyncio.sleep(0.3)  # the first half is read: the head has begun
            server.process.send_signal(signal.SIGTERM)
            await asyncio.sleep(0.3)  # the server has begun stopping
            writer.write(request[20:])
            with contextlib.suppress(ConnectionError):
                await writer.drain()
            await client.exchange(0, (reader, writer), b"")

        asyncio.run(halves())
        _, stderr = server.process.communicate(timeout=BOUND)
    assert client.raw[0], "the connection closed with no answer"
    reply = client.replies[0]
    assert reply.status == 503, (reply.status, reply.body)
    error = assert_json_rpc(reply)["error"]
    assert error["message"].startswith("Server stopping: the request was not started"), error
    assert server.process.returncode == 0, stderr


def test_the_grace_counts_from_the_signal_when_the_loop_answers_it_late(tmp_path: Path) -> None:
    # A request holds a thread for ever, so the whole grace is used; the event loop is stalled
    # for most of the grace after SIGTERM. The stop is still bounded from the signal, not from
    # when the loop got round to it.
    folder = tmp_path / "markers"
    folder.mkdir()
    marker, release = tmp_path / "stalled", tmp_path / "release"
    stalled_for = 0.6 * SHUTDOWN_GRACE_SECONDS
    with http_server(tmp_path) as server:
        client = RawClient(server.port)

        async def storm() -> float:
            held = await client.connect()
            holding = asyncio.create_task(
                client.exchange(
                    0, held, post(server.port, 0, "block", {"marker": str(folder / "0")})
                )
            )
            await until(lambda: markers_in(folder) == 1, "the tool thread")
            stalled = await client.connect()
            arguments = {"marker": str(marker), "release": str(release)}
            stalling = asyncio.create_task(
                client.exchange(1, stalled, post(server.port, 1, "stall", arguments))
            )
            await until(marker.exists, "the stalled event loop")
            signalled = time.monotonic()
            server.process.send_signal(signal.SIGTERM)
            await asyncio.sleep(stalled_for)
            release.touch()
            await asyncio.gather(holding, stalling)
            return signalled

        signalled = asyncio.run(storm())
        _, stderr = server.process.communicate(timeout=BOUND)
        took = time.monotonic() - signalled
    assert client.replies[1].status == 200, client.replies[1]
    assert client.replies[0].status == 503, client.replies[0]
    assert server.process.returncode == 0, stderr
    assert took < STOP_BOUND, f"ended {took:.2f} s after SIGTERM"


# -- the connection bound -------------------------------------------------------------------------


@pytest.mark.parametrize("connections", [64, 640])
def test_a_connection_burst_past_the_bound_refuses_only_the_excess(
    tmp_path: Path, connections: int
) -> None:
    # Every connection is open before the first request is sent, so all of them are open when
    # the first head is parsed: the first 64 are served all the same, the rest get a JSON-RPC
    # 503 with Retry-After and are closed.
    bound = 64
    with http_server(tmp_path, MRTR_HTTP_MAX_CONNECTIONS=str(bound)) as server:
        client = Client(server.port)

        async def burst() -> None:
            streams = []
            for _ in range(connections):
                streams.append(await client.connect())  # in order: the server accepts in order
            await asyncio.sleep(0.5)  # let the server accept every one of them first
            await asyncio.gather(
                *(
                    client.exchange(n, streams[n], post(server.port, n, "echo", {"text": "hi"}))
                    for n in range(connections)
                )
            )

        asyncio.run(burst())
        server.process.send_signal(signal.SIGTERM)
        _, stderr = server.process.communicate(timeout=BOUND)
    assert server.process.returncode == 0, stderr
    served = sorted(n for n, reply in client.replies.items() if reply.status == 200)
    refused = sorted(n for n, reply in client.replies.items() if reply.status != 200)
    assert served == list(range(min(connections, bound)))
    assert refused == list(range(bound, connections))
    for n in served:
        assert assert_json_rpc(client.replies[n])["result"]["content"][0]["text"] == "hi"
    for n in refused:
        reply = client.replies[n]
        assert reply.status == 503
        assert reply.headers.get("retry-after") == "1"
        assert reply.headers.get("connection") == "close"
        error = assert_json_rpc(reply)["error"]
        assert error == {
            "code": -32603,
            "message": f"Server busy: {bound} connections open at once; retry later",
        }


@pytest.mark.parametrize("value", ["0", "-1", "ten", "1.5", "٣"])
def test_a_connection_bound_that_is_not_a_whole_number_from_1_is_refused(value: str) -> None:
    from mrtr_runtime.server import HttpSettings

    with pytest.raises(ValueError, match="MRTR_HTTP_MAX_CONNECTIONS must be a whole number"):
        HttpSettings.from_environment({"MRTR_HTTP_MAX_CONNECTIONS": value}, host="h", port=1)


def test_the_connection_bound_comes_from_the_environment() -> None:
    from mrtr_runtime.http._app import MAX_CONNECTIONS
    from mrtr_runtime.server import HttpSettings

    assert HttpSettings.from_environment({}, host="h", port=1).max_connections == MAX_CONNECTIONS
    chosen = HttpSettings.from_environment({"MRTR_HTTP_MAX_CONNECTIONS": " 64 "}, host="h", port=1)
    assert chosen.max_connections == 64
