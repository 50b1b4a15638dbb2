"""A stdio server started without its pipes says which one is missing and exits 2.

The client's pipes are the server's fd 0 and fd 1 (basic/transports, stdio). Started with one
closed, the server must not run: the next file it opened would take that number, and it would
read requests from a key file, or answer into one.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys

import pytest

from support import BOUND, PACKAGE, server_env

NAME = importlib.import_module(f"{PACKAGE}.app").PROJECT.name
STDIN_CLOSED = (
    f"{NAME}: cannot start: stdin (fd 0) is closed: start the server with its standard input "
    "connected to the MCP client (a host starts it with pipes)"
)
STDOUT_CLOSED = (
    f"{NAME}: cannot start: stdout (fd 1) is closed: start the server with its standard output "
    "connected to the MCP client (a host starts it with pipes)"
)


@pytest.mark.skipif(os.name != "posix", reason="closes the fds with a POSIX shell")
@pytest.mark.parametrize(
    ("redirections", "expected"),
    [("<&-", STDIN_CLOSED), (">&-", STDOUT_CLOSED), ("<&- >&-", STDIN_CLOSED)],
    ids=["stdin", "stdout", "both"],
)
def test_a_server_started_with_fd_0_or_1_closed_exits_2_with_one_line(
    redirections: str, expected: str
) -> None:
    # The shell's exec closes the fd for the server itself; a pipe at EOF or /dev/null would
    # be an open fd.
    result = subprocess.run(
        ["/bin/sh", "-c", f'exec "$@" {redirections}', "sh", sys.executable, "-m", PACKAGE],
        stdin=subprocess.PIPE,
        capture_output=True,
        env=server_env(),
        timeout=BOUND,
        check=False,
    )

    stderr = result.stderr.decode("utf-8", "replace")
    assert (result.returncode, stderr.splitlines()) == (2, [expected]), stderr
    assert result.stdout == b""
