"""``<slug> health``: the Docker image's HEALTHCHECK, a real ``server/discover`` over HTTP.

A bake's ``<slug> http --port 0`` is started from its source tree with this venv's python (it
has the ``http`` extra's uvicorn and httptools), and ``<slug> health --url`` is run against it
(0), against a port nothing listens on, a server that is not MCP, and a server whose bearer
token it lacks (1, with one line on stderr). The answer's parser gets property tests.
"""

from __future__ import annotations

import importlib
import json
import re
import secrets
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType

import pytest
from bakery import COMBINATIONS, DEFAULT_PACKAGE, bake_project, child_env, run
from hypothesis import given
from hypothesis import strategies as st

LISTENING = re.compile(r"serving MCP at (http://\S+/mcp)")
START_TIMEOUT_SECONDS = 60
TOKEN = secrets.token_hex(16)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return bake_project(tmp_path_factory.mktemp("health"), **COMBINATIONS["no-aws"])


def source_env(project: Path, home: Path, **extra: str) -> dict[str, str]:
    return {"PYTHONPATH": str(project / "src"), "HOME": str(home), **extra}


@pytest.fixture
def server(project: Path, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    token = getattr(request, "param", "")
    env = child_env(
        **source_env(project, tmp_path, **({"MRTR_HTTP_TOKEN": token} if token else {}))
    )
    command = [sys.executable, "-m", DEFAULT_PACKAGE, "http", "--port", "0"]
    process = subprocess.Popen(
        command,
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        lines = []
        for line in process.stderr:
            lines.append(line)
            found = LISTENING.search(line)
            if found:
                # Keep draining stderr so the server never blocks on a full pipe.
                threading.Thread(target=process.stderr.read, daemon=True).start()
                yield found[1]
                break
        else:
            status = process.wait(timeout=START_TIMEOUT_SECONDS)
            pytest.fail(f"the server exited {status} before listening:\n" + "".join(lines))
    finally:
        process.terminate()
        process.wait(timeout=START_TIMEOUT_SECONDS)


def health(project: Path, home: Path, url: str, **env: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", DEFAULT_PACKAGE, "health", "--url", url]
    return run(command, cwd=project, env=source_env(project, home, **env), check=False)


def test_health_passes_against_a_running_server(project: Path, server: str, tmp_path: Path) -> None:
    checked = health(project, tmp_path, server)
    assert (checked.returncode, checked.stdout, checked.stderr) == (0, "", "")


@pytest.mark.parametrize("server", [TOKEN], indirect=True, ids=["with-a-token"])
def test_health_sends_the_bearer_token_it_is_given(
    project: Path, server: str, tmp_path: Path
) -> None:
    assert health(project, tmp_path, server, MRTR_HTTP_TOKEN=TOKEN).returncode == 0
    refused = health(project, tmp_path, server)
    assert refused.returncode == 1
    assert refused.stderr.splitlines() == [f"mrtr-server: unhealthy: {server}: HTTP status 401"]


def test_health_fails_in_one_line_when_nothing_listens(project: Path, tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # Bound, never listening: a connection to it is refused.
    checked = health(project, tmp_path, f"http://127.0.0.1:{port}/mcp")
    assert checked.returncode == 1
    (line,) = checked.stderr.splitlines()
    assert line.startswith(f"mrtr-server: unhealthy: http://127.0.0.1:{port}/mcp: no answer")


@pytest.mark.parametrize(
    "url",
    [
        "http://deployer:pw-0123456789secret@127.0.0.1:{port}/mcp?X-Amz-Security-Token=FwoG-tok3n",
        "ftp://deployer:pw-0123456789secret@127.0.0.1:{port}/?X-Amz-Security-Token=FwoG-tok3n",
    ],
)
def test_health_never_prints_the_urls_password_or_token(
    project: Path, tmp_path: Path, url: str
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    checked = health(project, tmp_path, url.format(port=port))
    assert checked.returncode == 1
    (line,) = checked.stderr.splitlines()
    assert line.startswith("mrtr-server: unhealthy: ")
    assert "pw-0123456789secret" not in line and "FwoG-tok3n" not in line
    assert "[redacted]" in line


class NotMcp(BaseHTTPRequestHandler):
    """Answers every POST 200 with a JSON-RPC response that is no discover result."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {}}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_health_fails_against_a_server_that_is_not_mcp(project: Path, tmp_path: Path) -> None:
    impostor = ThreadingHTTPServer(("127.0.0.1", 0), NotMcp)
    threading.Thread(target=impostor.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{impostor.server_address[1]}/mcp"
        checked = health(project, tmp_path, url)
    finally:
        impostor.shutdown()
        impostor.server_close()
    assert checked.returncode == 1
    assert checked.stderr.splitlines() == [
        f"mrtr-server: unhealthy: {url}: the answer is not a complete result"
    ]


# -- the answer's parser ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cli(project: Path) -> Iterator[ModuleType]:
    sys.path.insert(0, str(project / "src"))
    try:
        yield importlib.import_module(f"{DEFAULT_PACKAGE}.mrtr_runtime.cli._http_commands")
    finally:
        sys.path.remove(str(project / "src"))
        for name in [name for name in sys.modules if name.split(".")[0] == DEFAULT_PACKAGE]:
            del sys.modules[name]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)


@given(
    status=st.integers(100, 599),
    kind=st.sampled_from(["application/json", "text/event-stream", "text/html", ""]),
    body=st.binary(max_size=256) | json_values.map(lambda v: json.dumps(v).encode()),
)
def test_any_answer_is_judged_without_an_exception(
    cli: ModuleType, status: int, kind: str, body: bytes
) -> None:
    problem = cli.discover_problem(status, kind, body)
    assert problem is None or (isinstance(problem, str) and "\n" not in problem)


def test_only_a_discover_result_is_healthy(cli: ModuleType) -> None:
    result = {
        "resultType": "complete",
        "supportedVersions": ["2026-07-28"],
        "capabilities": {},
    }
    good = json.dumps({"jsonrpc": "2.0", "id": 1, "result": result}).encode()
    assert cli.discover_problem(200, "application/json", good) is None
    assert cli.discover_problem(200, "text/event-stream", b"event: message\ndata: " + good) is None
    for broken in (
        {**result, "resultType": "input_required"},
        {**result, "supportedVersions": ["2025-11-25"]},
        {key: value for key, value in result.items() if key != "capabilities"},
    ):
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "result": broken}).encode()
        assert cli.discover_problem(200, "application/json", body) is not None
    assert cli.discover_problem(503, "application/json", good) == "HTTP status 503"
