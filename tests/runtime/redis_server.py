"""A real ``redis-server`` for the task-store tests: found, installed if missing, started, stopped.

Never a mock: the Redis store's atomicity lives in Lua scripts that only a real server runs. The
binary is ``$MRTR_REDIS_SERVER`` when set (the template's own test set-up may pass one), else
``redis-server`` on PATH, else Debian's package, installed here with ``apt-get install -y
redis-server`` (CI and the dev machines run Debian as root; elsewhere the error says what to
install). One installer at a time: parallel suites share the lock file. When it cannot be had
the tests that need it FAIL with the reason: a store nobody tested is not a store we ship.

Each server runs on a free loopback port with its own temporary directory, no persistence and
no config file of the machine's (``redis-server --port N --dir D --save ''``), and is stopped
(SIGTERM, then SIGKILL) when the fixture ends.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

#: Set to a redis-server executable to skip the lookup and the install.
BINARY_VARIABLE = "MRTR_REDIS_SERVER"
_INSTALL_LOCK = Path(tempfile.gettempdir()) / "mrtr-redis-server-install.lock"
_APT_TIMEOUT_SECONDS = 600
_START_TIMEOUT_SECONDS = 20.0


class RedisUnavailableError(RuntimeError):
    """No redis-server could be found or installed; the message says why and what to do."""


def _apt_get(*args: str) -> subprocess.CompletedProcess[str]:
    apt_get = shutil.which("apt-get")
    if apt_get is None:
        raise RedisUnavailableError(
            "redis-server is not on PATH and this machine has no apt-get to install Debian's "
            f"package; install redis-server (7 or newer) or set {BINARY_VARIABLE} to its path"
        )
    environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    return subprocess.run(
        [apt_get, "-o", "DPkg::Lock::Timeout=300", *args],
        capture_output=True,
        text=True,
        timeout=_APT_TIMEOUT_SECONDS,
        env=environment,
        check=False,
    )


def _install_with_apt() -> None:
    if os.geteuid() != 0:
        raise RedisUnavailableError(
            "redis-server is not on PATH and installing Debian's package needs root; run "
            f"`sudo apt-get install -y redis-server`, or set {BINARY_VARIABLE} to its path"
        )
    result = _apt_get("install", "-y", "--no-install-recommends", "redis-server")
    if result.returncode != 0:
        # The package lists may be missing or stale (a fresh container): fetch them once.
        update = _apt_get("update")
        if update.returncode != 0:
            raise RedisUnavailableError(f"`apt-get update` failed:\n{update.stderr[-3000:]}")
        result = _apt_get("install", "-y", "--no-install-recommends", "redis-server")
    if result.returncode != 0:
        raise RedisUnavailableError(
            f"`apt-get install -y redis-server` failed ({result.returncode}):\n"
            f"{result.stderr[-3000:]}"
        )


def find_redis_server() -> Path:
    """The redis-server executable: the variable's, PATH's, or Debian's package installed now."""
    configured = os.environ.get(BINARY_VARIABLE, "").strip()
    if configured:
        if not os.access(configured, os.X_OK):
            raise RedisUnavailableError(f"{BINARY_VARIABLE}={configured} is not an executable")
        return Path(configured)
    with _INSTALL_LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = shutil.which("redis-server") or shutil.which("redis-server", path="/usr/bin")
        if found is None:
            _install_with_apt()
            found = shutil.which("redis-server", path=f"{os.environ.get('PATH', '')}:/usr/bin")
        if found is None:
            raise RedisUnavailableError(
                "apt-get installed redis-server but no redis-server is on PATH or in /usr/bin"
            )
        return Path(found)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _answers_ping(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5) as sock:
        sock.sendall(b"PING\r\n")
        return sock.recv(16).startswith(b"+PONG")
    return False


@dataclass(frozen=True)
class RunningRedis:
    port: int
    directory: Path

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"


@contextlib.contextmanager
def running_redis(binary: Path) -> Iterator[RunningRedis]:
    """A redis-server of our own on a free loopback port, stopped on exit."""
    with tempfile.TemporaryDirectory(prefix="mrtr-redis-") as directory:
        for _attempt in range(5):  # the free port can be taken between the probe and the bind
            port = _free_port()
            log = Path(directory) / "redis.log"
            process = subprocess.Popen(
                [
                    str(binary),
                    "--port",
                    str(port),
                    "--bind",
                    "127.0.0.1",
                    "--dir",
                    directory,
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--logfile",
                    str(log),
                    "--daemonize",
                    "no",
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            deadline = time.monotonic() + _START_TIMEOUT_SECONDS
            while process.poll() is None and time.monotonic() < deadline:
                if _answers_ping(port):
                    break
                time.sleep(0.05)
            if process.poll() is None and _answers_ping(port):
                break
            process.kill()
            process.wait()
        else:
            text = log.read_text(errors="replace")[-3000:] if log.exists() else ""
            raise RedisUnavailableError(f"{binary} did not start on a free port:\n{text}")
        try:
            yield RunningRedis(port, Path(directory))
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
