"""A real `redis-server` for the tasks section: started on a free loopback port in a temporary
directory, stopped (and its directory removed) when the section ends.

The server is Debian's `redis-server` package. When it is not on PATH the harness installs it
with `apt-get install -y redis-server` (as root; `apt-get update` first if the install fails on
an old package list), and when that cannot be done the section fails with the reason: it never
falls back to something that is not Redis.

Persistence is off (`--save ""`, `--appendonly no`) for every user of it alike (our store and
FastMCP's Docket): the figures are the engines' and their round trips to Redis, not fsync.
`flush_all` empties it between sessions, so each starts from the same state. The few commands
the harness sends itself go over a socket in RESP (stdlib only, like the rest of `run.py`).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Self

import envs

STARTUP_TIMEOUT = 20.0


class RedisError(envs.SetupError):
    """redis-server could not be installed, started or reached."""


def _apt_install() -> None:
    if os.geteuid() != 0:
        raise RedisError("redis-server is not installed and installing it needs root (apt-get)")
    if shutil.which("apt-get") is None:
        raise RedisError("redis-server is not installed and there is no apt-get to install it")
    install = ["apt-get", "install", "-y", "-q", "redis-server"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for attempt in (install, ["apt-get", "update", "-q"], install):
        envs.LOGS.mkdir(parents=True, exist_ok=True)
        with (envs.LOGS / "redis-install.log").open("ab") as log:
            done = subprocess.run(attempt, stdout=log, stderr=subprocess.STDOUT, env=env)
        if attempt is install and done.returncode == 0 and shutil.which("redis-server"):
            return
    raise RedisError(f"apt-get install redis-server failed; see {envs.LOGS / 'redis-install.log'}")


def redis_server_binary() -> str:
    """Path of `redis-server`, installing Debian's package when it is missing."""
    found = shutil.which("redis-server")
    if found is None:
        _apt_install()
        found = shutil.which("redis-server")
    if found is None:
        raise RedisError("redis-server is still not on PATH after installing it")
    return found


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _encode(*args: str) -> bytes:
    out = [f"*{len(args)}\r\n".encode()]
    for arg in args:
        data = arg.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


class RedisServer:
    """One redis-server process on 127.0.0.1. A context manager that always stops it."""

    def __init__(self) -> None:
        self.binary = redis_server_binary()
        self.port = _free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="bench-redis-"))
        envs.LOGS.mkdir(parents=True, exist_ok=True)
        self._log = (envs.LOGS / "redis-server.log").open("ab")
        self.proc = subprocess.Popen(
            [
                self.binary,
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--dir",
                str(self.dir),
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
                "--protected-mode",
                "yes",
            ],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=self.dir,
        )
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while True:
            try:
                if self.command("PING") == "PONG":
                    break
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RedisError(f"redis-server did not answer PING; see {self._log.name}")
            time.sleep(0.05)
        self.version = str(self.command("INFO", "server")).split("redis_version:")[1].split()[0]

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def command(self, *args: str) -> object:
        """Send one command and return its reply (simple string, integer or bulk string)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as conn:
            conn.sendall(_encode(*args))
            reader = conn.makefile("rb")
            line = reader.readline()
            kind, rest = line[:1], line[1:].rstrip(b"\r\n")
            if kind == b"+":
                return rest.decode()
            if kind == b":":
                return int(rest)
            if kind == b"$":
                size = int(rest)
                return None if size < 0 else reader.read(size + 2)[:-2].decode()
            if kind == b"-":
                raise RedisError(f"redis: {rest.decode()}")
            raise RedisError(f"redis: unexpected reply {line[:80]!r}")

    def flush_all(self) -> None:
        self.command("FLUSHALL")

    def connected_clients(self) -> int:
        """Clients connected now, not counting the one asking."""
        info = str(self.command("INFO", "clients"))
        return int(info.split("connected_clients:")[1].split()[0]) - 1

    def keys(self, db: int = 0) -> int:
        """Keys in database `db` (INFO keyspace lists every non-empty database)."""
        info = str(self.command("INFO", "keyspace"))
        marker = f"db{db}:keys="
        return int(info.split(marker)[1].split(",")[0]) if marker in info else 0

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
