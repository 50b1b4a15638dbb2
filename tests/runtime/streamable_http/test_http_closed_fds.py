"""An HTTP server started without fd 0 or fd 1 serves, and stops cleanly on SIGTERM.

Over Streamable HTTP (basic/transports) neither is the wire, so the server gives a closed one
to /dev/null before it opens anything: the next file or socket would otherwise take its number,
and the event loop aborts when it closes an fd that low.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from support import BOUND, PACKAGE, server_env

ADDRESS = re.compile(r"serving MCP at http://([^:/]+):(\d+)/mcp")


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads the fds from /proc")
@pytest.mark.parametrize("redirections", ["<&-", ">&-", "<&- >&-"], ids=["stdin", "stdout", "both"])
def test_an_http_server_started_with_fd_0_or_1_closed_serves_and_stops_on_sigterm(
    redirections: str,
) -> None:
    command = [sys.executable, "-m", PACKAGE, "http", "--host", "127.0.0.1", "--port", "0"]
    process = subprocess.Popen(
        ["/bin/sh", "-c", f'exec "$@" {redirections}', "sh", *command],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=server_env(),
    )
    try:
        assert process.stderr is not None
        seen = []
        for raw in process.stderr:
            seen.append(raw.decode("utf-8", "replace"))
            found = ADDRESS.search(seen[-1])
            if found:
                break
        else:
            raise AssertionError(f"the server did not say where it listens:\n{''.join(seen)}")
        fds = {fd: os.readlink(f"/proc/{process.pid}/fd/{fd}") for fd in (0, 1)}
        closed = {fd for fd in (0, 1) if f"{'<' if fd == 0 else '>'}&-" in redirections}
        assert {fd for fd, target in fds.items() if target == os.devnull} == closed, fds
        url = f"http://{found.group(1)}:{found.group(2)}/mcp"
        with pytest.raises(urllib.request.HTTPError) as refused:
            urllib.request.urlopen(url, timeout=BOUND)
        refused.value.close()
        assert refused.value.code == 405  # a GET: served, and refused as the endpoint does
        process.send_signal(signal.SIGTERM)
        rest = process.stderr.read().decode("utf-8", "replace")
        assert process.wait(timeout=BOUND) == 0, "".join(seen) + rest
        assert "Assertion" not in rest, rest
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=BOUND)
