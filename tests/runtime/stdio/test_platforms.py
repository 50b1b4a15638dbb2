"""The platforms hosts run on, proven here by injecting the platform.

Claude Desktop runs only on macOS and Windows; the generated workflow runs there too, but as a
confirmation: every choice the runtime makes by platform takes the platform as a parameter, and
each branch is exercised below on whatever system runs this suite.

- stdin's reader and stdout's writer (2025-11-25 / 2026-07-28 basic/transports/stdio: the
  server reads JSON-RPC from stdin and writes it to stdout, newline-delimited): on Windows a
  thread reads and writes plain, because the proactor loop's pipe transports need a handle opened
  for overlapped I/O, which an inherited stdin pipe is not;
- the wire stays exactly b"...\\n" (no text-mode CRLF on Windows);
- the stop signals degrade to signal.signal, then to none, where the loop has no
  add_signal_handler (Windows);
- the permission checks of every secret file: POSIX mode bits on 'posix', none on 'nt' (there
  Python reports 0o666 for every writable file, and the profile's ACLs protect it);
- what `config` and `keygen` print: each host's config location, quoting, and what keeps a key
  private, for win32, darwin and linux.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

import support
from mrtr_runtime import _config, _permissions, _sqlite_store, _stdio
from mrtr_runtime._config import WeakSigningKey
from mrtr_runtime._task_store import TaskStoreUnavailable
from mrtr_runtime.cli._commands import keygen, print_config
from support import KEY_HEX, make_server, request

pytestmark = pytest.mark.anyio

BOUND = 30  # seconds for one in-process conversation

POSIX_PLATFORMS = ("linux", "darwin", "freebsd14")
ALL_KINDS: tuple[_stdio.StdioKind, ...] = ("pipe", "socket", "tty", "file", "device", "closed")


# -- which reader, which writer -------------------------------------------------------------


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_on_windows_stdin_of_any_kind_is_read_by_the_thread_reader(
    kind: _stdio.StdioKind,
) -> None:
    # The point: a pipe on Windows would otherwise go to the proactor's pipe reader.
    assert _stdio.reads_in_thread("win32", kind)


@pytest.mark.parametrize("platform", POSIX_PLATFORMS)
@pytest.mark.parametrize(
    ("kind", "thread"),
    [
        ("pipe", False),
        ("socket", False),
        ("tty", False),
        ("file", True),
        ("device", True),
        ("closed", True),
    ],
)
def test_on_posix_the_loop_reads_what_it_can_poll_and_a_thread_the_rest(
    platform: str, kind: _stdio.StdioKind, thread: bool
) -> None:
    assert _stdio.reads_in_thread(platform, kind) is thread


@pytest.mark.parametrize("kind", ALL_KINDS)
@pytest.mark.parametrize("shared", [False, True])
def test_on_windows_stdout_is_written_with_plain_blocking_writes(
    kind: _stdio.StdioKind, shared: bool
) -> None:
    assert _stdio.writes_blocking("win32", kind, shared_with_input=shared)


@pytest.mark.parametrize("platform", POSIX_PLATFORMS)
@pytest.mark.parametrize(
    ("kind", "shared", "blocking"),
    [
        ("pipe", False, False),
        ("socket", False, False),
        ("tty", False, False),
        # One socket for both directions (inetd, socat EXEC): asyncio's write pipe would watch
        # it for reads and take the first request for the client hanging up.
        ("socket", True, True),
        ("file", False, True),
        ("device", False, True),
        ("closed", False, True),
    ],
)
def test_on_posix_stdout_uses_the_write_pipe_where_the_loop_can_poll_it(
    platform: str, kind: _stdio.StdioKind, shared: bool, blocking: bool
) -> None:
    assert _stdio.writes_blocking(platform, kind, shared_with_input=shared) is blocking


@pytest.fixture
def fds() -> Iterator[list[int]]:
    """Descriptors a test opens, closed after it."""
    opened: list[int] = []
    yield opened
    for fd in opened:
        with contextlib.suppress(OSError):  # closed by the test itself
            os.close(fd)


def test_the_kind_of_each_real_descriptor_is_told_apart(tmp_path: Path, fds: list[int]) -> None:
    read_end, write_end = os.pipe()
    one, other = socket.socketpair()
    regular = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT, 0o600)
    null = os.open(os.devnull, os.O_RDONLY)
    closed = os.open(os.devnull, os.O_RDONLY)
    os.close(closed)
    fds += [read_end, write_end, regular, null]
    try:
        kinds = [_stdio.stdio_kind(fd) for fd in (read_end, one.fileno(), regular, null, closed)]
    finally:
        one.close()
        other.close()
    assert kinds == ["pipe", "socket", "file", "device", "closed"]
    if hasattr(os, "openpty"):
        controller, terminal = os.openpty()
        fds += [controller, terminal]
        assert _stdio.stdio_kind(terminal) == "tty"


class PipeCalls:
    """Which of the loop's pipe transports the transport asked for."""

    def __init__(self, loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch) -> None:
        self.read: list[object] = []
        self.write: list[object] = []
        real_read, real_write = loop.connect_read_pipe, loop.connect_write_pipe

        async def read(factory: Callable[[], asyncio.Protocol], pipe: Any) -> Any:
            self.read.append(pipe)
            return await real_read(factory, pipe)

        async def write(factory: Callable[[], asyncio.BaseProtocol], pipe: Any) -> Any:
            self.write.append(pipe)
            return await real_write(factory, pipe)

        monkeypatch.setattr(loop, "connect_read_pipe", read)
        monkeypatch.setattr(loop, "connect_write_pipe", write)


async def serve_one_request(
    platform: str, monkeypatch: pytest.MonkeyPatch, *, ending: bytes = b"\n"
) -> tuple[bytes, int, PipeCalls, bool]:
    """`server/discover` (its line ended by `ending`) over two real pipes, the transport told it
    runs on `platform`; the raw bytes written, the exit status, the pipe transports asked for,
    and whether a thread read."""
    calls = PipeCalls(asyncio.get_running_loop(), monkeypatch)
    wire_in, client_out = os.pipe()
    client_in, wire_out = os.pipe()
    line = json.dumps(request(1, "server/discover"), separators=(",", ":")).encode() + ending
    threaded: list[bool] = []
    try:
        with anyio.fail_after(BOUND):
            serving = asyncio.create_task(
                _stdio._serve_pipes(make_server(), wire_in, wire_out, platform=platform)
            )
            await anyio.to_thread.run_sync(os.write, client_out, line)
            received = b""
            while not received.endswith(b"\n"):
                received += await anyio.to_thread.run_sync(os.read, client_in, 65536)
            threaded.append(any(t.name == "mrtr-stdin" for t in threading.enumerate()))
            os.close(client_out)  # end of input: the server drains and stops
            client_out = -1
            status = await serving
    finally:
        for fd in (wire_in, wire_out, client_in, client_out):
            if fd >= 0:
                os.close(fd)
    return received, status, calls, threaded[0]


async def test_on_windows_a_pipe_is_served_by_the_thread_reader_and_plain_writes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Python 3.11 on Windows has no os.set_blocking (pipes gained it in 3.12): the thread
    # reader and the plain writer must not need it, or the reader dies and nothing is read.
    monkeypatch.delattr(os, "set_blocking")
    received, status, calls, threaded = await serve_one_request("win32", monkeypatch)
    assert (calls.read, calls.write, threaded, status) == ([], [], True, 0)
    # The wire is exactly one JSON text and b"\n": no b"\r" from a text-mode translation.
    assert received.count(b"\n") == 1 and b"\r" not in received
    assert json.loads(received)["result"]["resultType"] == "complete"


async def test_on_posix_the_same_pipes_go_to_the_loops_pipe_transports(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    received, status, calls, threaded = await serve_one_request("linux", monkeypatch)
    assert (len(calls.read), len(calls.write), threaded, status) == (1, 1, False, 0)
    assert received.count(b"\n") == 1 and b"\r" not in received


async def test_a_line_a_windows_client_ends_with_crlf_is_one_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A client writing its pipe in text mode (Python's subprocess with text=True on Windows)
    # sends b"\r\n"; the \r is JSON whitespace, and the answer still ends in b"\n" alone.
    received, status, _, _ = await serve_one_request("win32", monkeypatch, ending=b"\r\n")
    assert status == 0 and received.endswith(b"}\n") and b"\r" not in received
    assert json.loads(received)["result"]["resultType"] == "complete"


def test_on_windows_the_wire_descriptors_are_put_in_binary_mode() -> None:
    # A Windows C-runtime descriptor in text mode writes b"\n" as b"\r\n" and reads b"\x1a"
    # as end of file; the stdio transport's messages are newline-delimited bytes.
    seen: list[tuple[int, int]] = []
    _stdio.binary_mode((5, 6), platform="win32", setmode=lambda fd, mode: seen.append((fd, mode)))
    assert seen == [(5, 0x8000), (6, 0x8000)]  # _O_BINARY of the Windows SDK's fcntl.h


@pytest.mark.parametrize("platform", POSIX_PLATFORMS)
def test_elsewhere_no_descriptor_mode_is_touched(platform: str) -> None:
    seen: list[tuple[int, int]] = []
    _stdio.binary_mode((5, 6), platform=platform, setmode=lambda fd, mode: seen.append((fd, mode)))
    assert seen == []


# -- the stop signals -------------------------------------------------------------------------


def test_windows_stops_on_ctrl_break_too_where_python_defines_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(signal, "SIGBREAK", 21, raising=False)
    assert _stdio.stop_signals("win32") == (signal.SIGTERM, signal.SIGINT, 21)
    assert _stdio.stop_signals("linux") == (signal.SIGTERM, signal.SIGINT)


class LoopWithoutSignals:
    """What the proactor loop does with add_signal_handler: NotImplementedError."""

    def __init__(self) -> None:
        self.scheduled: list[Callable[[], None]] = []

    def add_signal_handler(self, signum: int, callback: Callable[[], None]) -> None:
        raise NotImplementedError

    def call_soon_threadsafe(self, callback: Callable[[], None]) -> None:
        self.scheduled.append(callback)


def test_where_the_loop_has_no_signal_handlers_signal_signal_hands_the_stop_to_the_loop() -> None:
    loop = LoopWithoutSignals()
    installed: dict[int, Any] = {}
    stopped: list[bool] = []

    def set_handler(signum: int, handler: Any) -> Any:
        previous = installed.get(signum, "previous")
        installed[signum] = handler
        return previous

    uninstall = _stdio.install_stop_signals(
        loop,  # type: ignore[arg-type]
        lambda: stopped.append(True),
        platform="win32",
        set_handler=set_handler,
    )
    assert set(installed) == set(_stdio.stop_signals("win32"))
    installed[signal.SIGINT](signal.SIGINT, None)  # what Ctrl-C runs
    # The handler runs between bytecodes of the main thread: it only schedules the stop.
    assert stopped == [] and len(loop.scheduled) == 1
    loop.scheduled[0]()
    assert stopped == [True]
    uninstall()
    assert set(installed.values()) == {"previous"}


def test_where_no_handler_can_be_installed_the_server_still_starts() -> None:
    # signal.signal outside the main thread: ValueError. The server then stops at end of
    # input only, and says so in its debug log, never with an error.
    def set_handler(signum: int, handler: Any) -> Any:
        raise ValueError("signal only works in main thread of the main interpreter")

    uninstall = _stdio.install_stop_signals(
        LoopWithoutSignals(),  # type: ignore[arg-type]
        lambda: None,
        platform="win32",
        set_handler=set_handler,
    )
    uninstall()


async def test_on_posix_the_loops_own_handler_takes_sigterm_and_is_removed_after() -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def no_process_wide_handler(signum: int, handler: Any) -> Any:
        raise AssertionError("signal.signal used where the loop has add_signal_handler")

    uninstall = _stdio.install_stop_signals(
        loop, stop.set, platform="linux", set_handler=no_process_wide_handler
    )
    try:
        signal.raise_signal(signal.SIGTERM)
        with anyio.fail_after(BOUND):
            await stop.wait()
    finally:
        uninstall()
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


# -- permission checks of the secret files ---------------------------------------------------


@pytest.mark.parametrize(
    ("platform", "mode", "mask", "found"),
    [
        ("posix", 0o100600, 0o077, None),
        ("posix", 0o100644, 0o077, "0o644"),
        ("posix", 0o40755, 0o022, None),
        ("posix", 0o40775, 0o022, "0o775"),
        # What Python's fstat reports on Windows for every writable / read-only file.
        ("nt", 0o100666, 0o077, None),
        ("nt", 0o100444, 0o077, None),
        ("nt", 0o40777, 0o022, None),
    ],
)
def test_mode_bits_count_only_where_the_system_enforces_them(
    platform: str, mode: int, mask: int, found: str | None
) -> None:
    assert _permissions.open_to_others(mode, mask, platform=platform) == found


def key_file(tmp_path: Path, mode: int) -> Path:
    path = tmp_path / "key"
    path.write_text(KEY_HEX + "\n", encoding="ascii")
    os.chmod(path, mode)
    return path


def test_a_key_file_others_can_read_is_refused_on_posix(tmp_path: Path) -> None:
    path = key_file(tmp_path, 0o644)
    with pytest.raises(WeakSigningKey, match=r"readable or writable by other users \(mode 0o644\)"):
        _config._read_private_text(path, "key file", platform="posix")


def test_on_windows_a_key_files_mode_bits_are_not_checked(tmp_path: Path) -> None:
    # What Windows reports for any file that is not read-only: 0o666.
    path = key_file(tmp_path, 0o666)
    assert _config._read_private_text(path, "key file", platform="nt").strip() == KEY_HEX


def test_a_per_user_key_directory_open_to_others_is_refused_on_posix(tmp_path: Path) -> None:
    directory = tmp_path / "server"
    directory.mkdir(mode=0o755)
    os.chmod(directory, 0o755)  # noqa: S103 (the wrong mode under test)
    with pytest.raises(WeakSigningKey, match=r"is open to other users \(mode 0o755\)"):
        _config.load_or_create_key_file(directory / ".mrtr-signing-key", platform="posix")


def test_on_windows_the_per_user_key_directory_is_used_as_it_is(tmp_path: Path) -> None:
    directory = tmp_path / "server"
    directory.mkdir(mode=0o755)
    os.chmod(directory, 0o777)  # noqa: S103 (the wrong mode under test)
    key, created = _config.load_or_create_key_file(directory / ".mrtr-signing-key", platform="nt")
    again, created_again = _config.load_or_create_key_file(
        directory / ".mrtr-signing-key", platform="nt"
    )
    assert (created, created_again, again.key_id) == (True, False, key.key_id)


def test_a_task_store_directory_others_can_write_is_refused_on_posix(tmp_path: Path) -> None:
    directory = tmp_path / "state"
    directory.mkdir()
    os.chmod(directory, 0o777)  # noqa: S103 (the wrong mode under test)
    with pytest.raises(TaskStoreUnavailable, match=r"can be written by other users \(mode 0o777\)"):
        _sqlite_store._private_directory(directory, make_parents=False, platform="posix")
    _sqlite_store._private_directory(directory, make_parents=False, platform="nt")


def test_a_task_store_file_others_can_read_is_refused_on_posix_only(tmp_path: Path) -> None:
    path = tmp_path / "tasks.sqlite3"
    path.write_bytes(b"")
    os.chmod(path, 0o644)
    with pytest.raises(TaskStoreUnavailable, match=r"readable or writable by other users"):
        _sqlite_store._private_file(path, platform="posix")
    _sqlite_store._private_file(path, platform="nt")


def test_an_http_tokens_file_others_can_read_is_refused_on_posix_only(tmp_path: Path) -> None:
    http_settings = pytest.importorskip("mrtr_runtime.http._settings")
    path = tmp_path / "tokens"
    path.write_text("alice:tok-a\n", encoding="utf-8")
    os.chmod(path, 0o644)
    with pytest.raises(ValueError, match="readable by others; chmod 600"):
        http_settings._read_tokens_file(str(path), platform="posix")
    # Windows reports 0o666 for it whatever its ACL says: the check would refuse every file.
    os.chmod(path, 0o666)  # noqa: S103 (the wrong mode under test)
    assert http_settings._read_tokens_file(str(path), platform="nt") == (("alice", "tok-a"),)


# -- what the command line prints, for each system -----------------------------------------


@pytest.fixture
def project() -> Any:
    """The baked project's `Project` (its app.py)."""
    return __import__(f"{support.PACKAGE}.app", fromlist=["PROJECT"]).PROJECT


@pytest.mark.parametrize(
    ("platform", "config_file"),
    [
        ("win32", "%APPDATA%\\Claude\\claude_desktop_config.json"),
        ("darwin", "~/Library/Application Support/Claude/claude_desktop_config.json"),
        ("linux", "~/.config/Claude/claude_desktop_config.json"),
    ],
)
def test_config_names_claude_desktops_file_on_the_users_system(
    project: Any,
    platform: str,
    config_file: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("MRTR_SIGNING_KEY_FILE", str(tmp_path / "key file"))
    assert print_config(project, "claude-desktop", use_uv=False, platform=platform) == 0
    printed = capsys.readouterr()
    assert f"Merge into {config_file}, then restart Claude Desktop" in printed.err
    entry = json.loads(printed.out)["mcpServers"][project.name]
    assert entry["env"] == {"MRTR_SIGNING_KEY_FILE": str(tmp_path / "key file")}


@pytest.mark.parametrize(("platform", "quote"), [("win32", '"'), ("darwin", "'"), ("linux", "'")])
def test_config_quotes_the_claude_code_command_for_the_users_shell(
    project: Any,
    platform: str,
    quote: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    # cmd and PowerShell take double quotes; a POSIX shell single quotes (shlex.quote).
    key = tmp_path / "key file"
    monkeypatch.setenv("MRTR_SIGNING_KEY_FILE", str(key))
    assert print_config(project, "claude-code", use_uv=False, platform=platform) == 0
    command = capsys.readouterr().out
    assert f"--env {quote}MRTR_SIGNING_KEY_FILE={key}{quote}" in command


@pytest.mark.parametrize(
    ("platform", "promise"),
    [
        ("win32", "kept private by its folder's ACLs"),
        ("darwin", "mode 0600"),
        ("linux", "mode 0600"),
    ],
)
def test_keygen_promises_only_what_the_system_enforces(
    project: Any,
    platform: str,
    promise: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    target = tmp_path / "key"
    assert keygen(project, force=False, rotate=False, path=target, platform=platform) == 0
    printed = capsys.readouterr()
    assert printed.out == f"{target}\n"
    assert f", {promise}) to {target}." in printed.err
    assert ("mode 0600" in printed.err) is (platform != "win32")
