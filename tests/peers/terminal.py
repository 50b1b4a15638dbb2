"""A real terminal for a host's interactive UI: tmux, a fixed size, keys in, the screen out.

What a person sees in Claude Code (how much of a question, which field titles) is only known
from its screen, so the tests that hold it run it in tmux (Debian's package, installed here
with apt-get when it is missing, as root; elsewhere the error says what to install) and read
the screen with ``capture-pane``. Each terminal is a tmux server of its own (``-L``), killed
when the test ends.
"""

from __future__ import annotations

import os
import secrets
import shlex
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

_APT_TIMEOUT_SECONDS = 600


class TerminalUnavailableError(RuntimeError):
    """tmux could not be found or installed; the message says what to do."""


def _apt_get(*args: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    return subprocess.run(
        ["apt-get", "-o", "DPkg::Lock::Timeout=300", *args],
        capture_output=True,
        text=True,
        timeout=_APT_TIMEOUT_SECONDS,
        env=environment,
        check=False,
    )


def find_tmux() -> str:
    """tmux on PATH, or Debian's package installed now."""
    found = shutil.which("tmux") or shutil.which("tmux", path="/usr/bin")
    if found is not None:
        return found
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        raise TerminalUnavailableError(
            "tmux is not on PATH; install it (Debian: apt-get install -y tmux)"
        )
    result = _apt_get("install", "-y", "--no-install-recommends", "tmux")
    if result.returncode != 0:  # stale or missing package lists (a fresh container)
        _apt_get("update")
        result = _apt_get("install", "-y", "--no-install-recommends", "tmux")
    found = shutil.which("tmux") or shutil.which("tmux", path="/usr/bin")
    if result.returncode != 0 or found is None:
        raise TerminalUnavailableError(f"apt-get install -y tmux failed:\n{result.stderr[-3000:]}")
    return found


class Terminal:
    """One program in a ``columns`` x ``rows`` terminal, started in `cwd` with exactly `env`."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        columns: int = 80,
        rows: int = 50,
    ) -> None:
        self.tmux = find_tmux()
        self.socket = f"mrtr-{secrets.token_hex(6)}"
        assignments = " ".join(shlex.quote(f"{key}={value}") for key, value in env.items())
        command = f"cd {shlex.quote(str(cwd))} && exec env -i {assignments} {shlex.join(argv)}"
        self._tmux("new-session", "-d", "-s", "host", "-x", str(columns), "-y", str(rows), command)

    def _tmux(self, *args: str) -> str:
        done = subprocess.run(
            [self.tmux, "-L", self.socket, *args],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        if done.returncode != 0:
            raise TerminalUnavailableError(f"tmux {args[0]} failed: {done.stderr.strip()}")
        return done.stdout

    def screen(self) -> str:
        """What the terminal shows now, blank lines left out."""
        shown = self._tmux("capture-pane", "-p", "-t", "host")
        return "\n".join(line.rstrip() for line in shown.splitlines() if line.strip())

    def wait_for(self, text: str, *, timeout: float = 120.0) -> str:
        """The screen, once it shows `text`; fails with the last screen after `timeout` s."""
        deadline = time.monotonic() + timeout
        shown = ""
        while time.monotonic() < deadline:
            shown = self.screen()
            if text in shown:
                return shown
            time.sleep(0.25)
        raise AssertionError(f"the screen never showed {text!r}; it shows:\n{shown}")

    def type(self, text: str) -> None:
        self._tmux("send-keys", "-t", "host", "-l", text)
        time.sleep(0.3)

    def press(self, *keys: str) -> None:
        for key in keys:
            self._tmux("send-keys", "-t", "host", key)
            time.sleep(0.3)

    def close(self) -> None:
        subprocess.run(
            [self.tmux, "-L", self.socket, "kill-server"], capture_output=True, check=False
        )
