"""The whole OAuth flow on one machine: a local authorization server and this MCP server as its
resource server, both on loopback. One command, Ctrl-C stops both:

    .venv/bin/python local-stack/start.py [--port 8000] [--issuer-port 9000] [--opaque]

It needs Node.js 20 or later for the authorization server (npm `oidc-provider`, a certified
OpenID Provider, installed into local-stack/node_modules by `npm ci` on the first run) and the
project's `http` and `oauth` extras (`dev` has both). In order, it:

1. starts `{{ cookiecutter.project_slug }} http` with only MRTR_OAUTH_ISSUER and
   MRTR_OAUTH_RESOURCE set, and reads the scopes its tools need from its Protected Resource
   Metadata, as a host does;
2. starts the authorization server for that resource and those scopes, with a signing key of
   its own (new each start), dynamic client registration for hosts, and one client for
   scripts (client credentials, a new secret each start);
3. prints the server's URL, how to add it to a host, and a token request to try by hand.

With `--opaque` the access tokens are opaque strings, and the server reads each one by asking
the authorization server (RFC 7662 introspection) as a client of its own.

Not for production: the authorization server's sign-in page lets anyone sign in under any name,
so every account on this machine can call your tools, with your credentials: run it on a
machine only you use. docs/oauth.md says what a real identity provider needs instead.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import IO

HERE = Path(__file__).resolve().parent
PACKAGE = "{{ cookiecutter.package_name }}"
SERVER_NAME = "{{ cookiecutter.project_slug }}"
MIN_NODE_MAJOR = 20
START_TIMEOUT_SECONDS = 60
SCRIPT_CLIENT = "local-script"
#: This server's own client at the authorization server, with --opaque (for introspection).
SERVER_CLIENT = "local-mcp-server"
#: What the stack sets for the server; the same variables from the shell are left out.
STACK_VARIABLES = ("MRTR_OAUTH_", "MRTR_HTTP_TOKEN")


class StackError(Exception):
    """Why the stack cannot start; printed, exit status 1."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def find_node() -> str:
    node = shutil.which("node")
    if node is None:
        raise StackError(
            f"the local authorization server needs Node.js {MIN_NODE_MAJOR} or later "
            "(https://nodejs.org), and `node` is not on PATH"
        )
    version = subprocess.run(
        [node, "--version"], capture_output=True, text=True, check=False
    ).stdout.strip()
    major = version.lstrip("v").split(".")[0]
    if not major.isdigit() or int(major) < MIN_NODE_MAJOR:
        raise StackError(f"Node.js {version or '?'} is too old: {MIN_NODE_MAJOR} or later needed")
    return node


def install_authorization_server() -> None:
    """`npm ci` into local-stack/node_modules (the versions package-lock.json pins), once."""
    if (HERE / "node_modules" / "oidc-provider" / "package.json").is_file():
        return
    npm = shutil.which("npm")
    if npm is None:
        raise StackError("`npm` is not on PATH: it installs the authorization server once")
    print("installing the authorization server (npm ci, once)...", file=sys.stderr, flush=True)
    done = subprocess.run(
        [npm, "ci", "--no-audit", "--no-fund"], cwd=HERE, stdout=sys.stderr, check=False
    )
    if done.returncode != 0:
        raise StackError(f"npm ci failed (status {done.returncode}); see above")


def wait_for_line(
    name: str, process: subprocess.Popen[str], stream: IO[str], marker: str, echo: IO[str] | None
) -> str:
    """The first line of `stream` containing `marker`; the lines before it (and, in a thread,
    every line after it) go to `echo`. StackError if the process ends or takes too long."""
    found: list[str] = []
    ready = threading.Event()

    def pump() -> None:
        for line in stream:
            if echo is not None:
                echo.write(line)
                echo.flush()
            if not ready.is_set() and marker in line:
                found.append(line.strip())
                ready.set()
        ready.set()

    threading.Thread(target=pump, daemon=True).start()
    if not ready.wait(START_TIMEOUT_SECONDS) or not found:
        process.kill()
        raise StackError(f"{name} did not start (no {marker!r} line)")
    return found[0]


def start_mcp_server(
    processes: list[subprocess.Popen[str]], port: int, oauth: dict[str, str]
) -> None:
    """The server with the `oauth` settings, added to `processes` at once (a Ctrl-C while it
    starts stops it too), then waited for."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(STACK_VARIABLES)} | oauth
    command = [sys.executable, "-m", PACKAGE, "http", "--host", "127.0.0.1", "--port", str(port)]
    process = subprocess.Popen(
        command, env=env, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    processes.append(process)
    if process.stderr is None:  # never: stderr is a pipe
        raise StackError("the server's log cannot be read")
    wait_for_line("the MCP server", process, process.stderr, "serving MCP at", sys.stderr)


def tool_scopes(resource: str) -> list[str]:
    """The scopes the server's Protected Resource Metadata lists (RFC 9728), as a host reads
    them: its URL is the resource's with the well-known suffix before the path."""
    base, _, path = resource.partition("//")[2].partition("/")
    url = f"http://{base}/.well-known/oauth-protected-resource/{path}"
    with urllib.request.urlopen(url, timeout=10) as response:
        metadata = json.load(response)
    scopes = metadata.get("scopes_supported", [])
    return [scope for scope in scopes if isinstance(scope, str)]


def start_authorization_server(
    processes: list[subprocess.Popen[str]], node: str, config: dict[str, object], home: Path
) -> None:
    path = home / "authorization-server.json"
    # The config holds a client secret: readable by this user only.
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        json.dump(config, file)
    process = subprocess.Popen(
        [node, str(HERE / "authorization_server.mjs"), str(path)],
        cwd=HERE,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
    )
    processes.append(process)
    if process.stdout is None:  # never: stdout is a pipe
        raise StackError("the authorization server's output cannot be read")
    wait_for_line("the authorization server", process, process.stdout, "ready ", None)


def summary(resource: str, issuer: str, secret: str, scopes: list[str]) -> str:
    scope = " ".join(scopes)
    return f"""
MCP server:            {resource}
authorization server:  {issuer}  (sign-in page: any name; NOT for production)

Add it to a host that follows MCP's authorization: it registers itself with the
authorization server and opens the sign-in page in your browser:
  claude mcp add --transport http {SERVER_NAME} {resource}

Or get a token as a script (client credentials) and call the server with it:
  curl -s -u {SCRIPT_CLIENT}:{secret} {issuer}/token \\
    -d grant_type=client_credentials -d resource={resource} -d scope='{scope}'
  # then send it as "Authorization: Bearer <access_token>" to {resource}

Ctrl-C stops both.
"""


def stop(processes: list[subprocess.Popen[str]]) -> None:
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


def interrupt(signum: int, frame: object) -> None:
    """SIGTERM stops the stack as Ctrl-C does."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8000, help="the MCP server's (0: any free)")
    parser.add_argument(
        "--issuer-port", type=int, default=9000, help="the authorization server's (0: any free)"
    )
    parser.add_argument(
        "--opaque", action="store_true", help="opaque access tokens, read by introspection"
    )
    arguments = parser.parse_args(argv)
    port = arguments.port or free_port()
    issuer_port = arguments.issuer_port or free_port()
    issuer = f"http://127.0.0.1:{issuer_port}"
    resource = f"http://127.0.0.1:{port}/mcp"
    processes: list[subprocess.Popen[str]] = []
    signal.signal(signal.SIGTERM, interrupt)
    try:
        with tempfile.TemporaryDirectory(prefix="mcp-local-stack-") as home:
            node = find_node()
            install_authorization_server()
            oauth = {"MRTR_OAUTH_ISSUER": issuer, "MRTR_OAUTH_RESOURCE": resource}
            clients = []
            if arguments.opaque:
                server_secret = os.urandom(18).hex()
                oauth |= {"MRTR_OAUTH_CLIENT_ID": SERVER_CLIENT}
                oauth |= {"MRTR_OAUTH_CLIENT_SECRET": server_secret}
                clients.append({"client_id": SERVER_CLIENT, "client_secret": server_secret})
            start_mcp_server(processes, port, oauth)
            scopes = tool_scopes(resource)
            secret = os.urandom(18).hex()
            clients.append(
                {"client_id": SCRIPT_CLIENT, "client_secret": secret, "scope": " ".join(scopes)}
            )
            config = {
                "port": issuer_port,
                "resource": resource,
                "scopes": scopes,
                "clients": clients,
                "opaque": arguments.opaque,
            }
            start_authorization_server(processes, node, config, Path(home))
            print(summary(resource, issuer, secret, scopes), flush=True)
            while all(process.poll() is None for process in processes):
                time.sleep(0.5)
            raise StackError("a process of the stack ended; see its log above")
    except KeyboardInterrupt:
        return 0
    except (StackError, OSError) as error:
        print(f"local stack: {error}", file=sys.stderr)
        return 1
    finally:
        stop(processes)


if __name__ == "__main__":
    raise SystemExit(main())
