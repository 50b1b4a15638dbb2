"""Tasks that outlive their process: ``deploy_to_aws`` confirmed once, killed mid-deploy, finished.

The AWS bake, installed, deploys against moto's standalone server through a gate: a forwarding
proxy of a few lines that can hold CloudFormation's ``ExecuteChangeSet`` (the deploy's point of
no return) until the test has killed the server that sent it, then drop it unsent. So the
server dies exactly mid-deploy, with the change set made and not executed, and whoever resumes
the task must execute it once, not make a second one.

- stdio: one server, its tasks in the default SQLite store (the per-user state directory), is
  SIGKILLed mid-task; a new process started the same way answers ``tasks/get`` for the task id,
  takes the task over once the dead one's lease lapses, and finishes it.
- replicas: two ``<slug> http`` processes on one real ``redis-server``; round 1 on A, the
  confirming round on B (the task is created there), B SIGKILLed mid-deploy, and ``tasks/get``
  on A shows the task resumed and completed, with one stack and one executed change set.

Each replays the confirming round after completion and counts moto's change sets: the replay
gets the same task back and deploys nothing. Each prints which process did what (``-rA``).
"""

from __future__ import annotations

import http.client
import json
import os
import secrets
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import boto3
import pytest
from bakery import DEFAULT_SLUG, Installed, run
from host_client import MODERN
from moto.server import ThreadedMotoServer
from runtime.redis_server import find_redis_server, running_redis
from test_http_replicas import (
    FORM_ANSWERS,
    HOP_BY_HOP,
    MOTO_CREDENTIALS,
    REGION,
    Replica,
    replica_command,
    start_replica,
)

pytestmark = pytest.mark.baked_checks

Json = dict[str, Any]

TASKS = "io.modelcontextprotocol/tasks"
STACK = "durable-demo"
#: The engine's lease is 15 s: a dead worker's task is taken over once it lapses. The bound
#: leaves room for that, the resumed deploy and a loaded machine.
TAKEOVER_TIMEOUT_SECONDS = 90
HOLD_TIMEOUT_SECONDS = 60


def task_meta() -> Json:
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {
            "elicitation": {"form": {}},
            "extensions": {TASKS: {}},
        },
        "io.modelcontextprotocol/clientInfo": {"name": "durable-tasks-test", "version": "0"},
    }


def answer(request: Json) -> Json:
    assert request["method"] == "elicitation/create", request
    asked = request["params"]["requestedSchema"]["properties"]
    return {"action": "accept", "content": {name: FORM_ANSWERS[name] for name in asked}}


# -- the gate in front of moto -----------------------------------------------------------------


class Gate(ThreadingHTTPServer):
    """Forwards every AWS call to moto, but holds ExecuteChangeSet while `closed` is set.

    `held` is set when a call is being held; `drop()` lets the held ones go unsent (their caller
    is dead by then) and opens the gate for every later call.
    """

    daemon_threads = True

    def __init__(self, upstream: str) -> None:
        super().__init__(("127.0.0.1", 0), _GateHandler)
        self.upstream = urlsplit(upstream)
        self.closed = threading.Event()
        self.closed.set()
        self.held = threading.Event()
        self.released = threading.Event()
        self.executes_forwarded = 0
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    def drop(self) -> None:
        self.closed.clear()
        self.released.set()


class _GateHandler(BaseHTTPRequestHandler):
    server: Gate
    protocol_version = "HTTP/1.1"

    def _forward(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if b"Action=ExecuteChangeSet" in body:
            if self.server.closed.is_set():
                self.server.held.set()
                self.server.released.wait(HOLD_TIMEOUT_SECONDS)
                self.close_connection = True
                return  # dropped unsent: the server that sent it was killed meanwhile
            with self.server.lock:
                self.server.executes_forwarded += 1
        upstream = self.server.upstream
        connection = http.client.HTTPConnection(upstream.hostname or "", upstream.port, timeout=60)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        try:
            connection.request(self.command, self.path, body, headers)
            response = connection.getresponse()
            payload = response.read()
        finally:
            connection.close()
        self.send_response(response.status)
        for name, value in response.getheaders():
            if name.lower() not in HOP_BY_HOP:
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_POST = _forward
    do_GET = _forward

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test prints what matters."""


@dataclass
class Aws:
    moto_url: str
    gate: Gate

    def cloudformation(self) -> Any:
        return boto3.client(
            "cloudformation",
            region_name=REGION,
            endpoint_url=self.moto_url,
            aws_access_key_id=MOTO_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=MOTO_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        )

    def stacks(self) -> list[Json]:
        found: list[Json] = self.cloudformation().describe_stacks()["Stacks"]
        return [stack for stack in found if stack["StackName"] == STACK]

    def executed_change_sets(self) -> int:
        summaries = self.cloudformation().list_change_sets(StackName=STACK)["Summaries"]
        return sum(1 for summary in summaries if summary["ExecutionStatus"] == "EXECUTE_COMPLETE")


@pytest.fixture
def aws() -> Iterator[Aws]:
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    host, port = moto.get_host_and_port()
    # moto's backends live in this test process, shared by every server it starts: each test
    # starts from an empty AWS.
    reset = http.client.HTTPConnection(host, port, timeout=30)
    reset.request("POST", "/moto-api/reset")
    assert reset.getresponse().status == 200
    reset.close()
    gate = Gate(f"http://{host}:{port}")
    threading.Thread(target=gate.serve_forever, daemon=True).start()
    try:
        yield Aws(f"http://{host}:{port}", gate)
    finally:
        gate.drop()
        gate.shutdown()
        gate.server_close()
        moto.stop()


@pytest.fixture(scope="module")
def project(installed: Any) -> Installed:
    return installed("aws")  # type: ignore[no-any-return]


def base_env(home: Path, aws: Aws) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(home),
        "XDG_STATE_HOME": str(home / "state"),
        "AWS_ENDPOINT_URL": aws.gate.url,
        **MOTO_CREDENTIALS,
        "AWS_REGION": REGION,
        "AWS_CONFIG_FILE": str(home / "no-aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(home / "no-aws-credentials"),
    }


DEPLOY_ARGUMENTS: Json = {"stack": STACK, "region": REGION}


# -- a stdio server, spoken to line by line ----------------------------------------------------


class StdioServer:
    def __init__(self, argv: list[str], env: Mapping[str, str], log: Path) -> None:
        self.log = log
        self.sink = log.open("ab")
        self.process = subprocess.Popen(
            argv,
            cwd="/",
            env=dict(env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.sink,
        )
        self.ids = iter(range(1, 1_000_000))

    def request(self, method: str, params: Json) -> Json:
        assert self.process.stdin is not None and self.process.stdout is not None
        request_id = next(self.ids)
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()
        while True:
            line = self.process.stdout.readline()
            assert line, f"the server exited: {self.log.read_text(encoding='utf-8')}"
            response = json.loads(line)
            if response.get("id") == request_id:
                assert "result" in response, response
                result: Json = response["result"]
                return result

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)
        self.sink.close()

    def close(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.sink.close()


@dataclass
class Steps:
    """What happened, in order, for the note (`pytest -rA` prints it)."""

    lines: list[str] = field(default_factory=list)

    def __call__(self, line: str) -> None:
        self.lines.append(line)
        print(f"  {line}")  # noqa: T201 (the log this test exists to show)


def confirm_until_task(send: Any, steps: Steps, first: Any = None) -> tuple[Json, Json]:
    """Walks deploy_to_aws's rounds until the server answers with a task: (task, its round).

    `first` sends round 1 (default `send`); every later round goes through `send`.
    """
    params: Json = {"name": "deploy_to_aws", "arguments": DEPLOY_ARGUMENTS, "_meta": task_meta()}
    result = (first or send)("tools/call", params)
    for number in range(2, 8):
        if result.get("resultType") != "input_required":
            break
        asked = result["inputRequests"]
        steps(f"round {number - 1}: input_required for {', '.join(sorted(asked))}")
        params = {
            **params,
            "inputResponses": {key: answer(request) for key, request in asked.items()},
            "requestState": result["requestState"],
        }
        result = send("tools/call", params)
    assert result.get("resultType") == "task", result
    assert "requestState" not in result, result
    return result, params


def poll(send: Any, task_id: str, timeout: float = TAKEOVER_TIMEOUT_SECONDS) -> Json:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        task = send("tasks/get", {"taskId": task_id, "_meta": task_meta()})
        if task["status"] in ("completed", "failed", "cancelled"):
            return task
        time.sleep(max(task.get("pollIntervalMs", 500), 100) / 1000)
    pytest.fail(f"task {task_id} did not end within {timeout} s")


def task_lines(log: Path) -> list[str]:
    text = log.read_text(encoding="utf-8", errors="replace")
    return [line for line in text.splitlines() if "task" in line.lower()]


def test_a_stdio_server_killed_mid_deploy_finishes_the_task_after_a_restart(
    project: Installed, aws: Aws, tmp_path: Path
) -> None:
    env = base_env(tmp_path, aws)
    argv = [str(project.tool(DEFAULT_SLUG))]
    steps = Steps()
    print("\nstdio: killed mid-deploy, restarted")  # noqa: T201
    first = StdioServer(argv, env, tmp_path / "first.log")
    try:
        task, confirming = confirm_until_task(first.request, steps)
        steps(f"confirming round: task {task['taskId'][:8]}... created ({task['status']})")
        assert aws.gate.held.wait(HOLD_TIMEOUT_SECONDS), "the deploy never reached its execute"
        first.kill()
        steps("ExecuteChangeSet held at the gate; the server SIGKILLed (pid gone)")
    finally:
        first.close()
    aws.gate.drop()
    assert aws.executed_change_sets() == 0

    second = StdioServer(argv, env, tmp_path / "second.log")
    try:
        ended = poll(second.request, task["taskId"])
        steps(f"restarted server: tasks/get -> {ended['status']}")
        assert ended["status"] == "completed", ended
        assert ended["result"]["structuredContent"]["action"] == "created", ended
        replay = second.request("tools/call", confirming)
        steps(f"confirming round replayed: {replay.get('resultType')} {replay.get('taskId')}")
        assert replay.get("taskId") == task["taskId"], json.dumps(replay.get("inputRequests"))
        again = poll(second.request, task["taskId"], timeout=10)
        assert again["status"] == "completed"
    finally:
        second.close()
    for line in task_lines(tmp_path / "second.log"):
        steps(f"second server log: {line}")
    assert len(aws.stacks()) == 1
    assert aws.executed_change_sets() == 1
    assert aws.gate.executes_forwarded == 1
    steps("moto: 1 stack, 1 executed change set")


# -- replicas on one redis-server ------------------------------------------------------------------


@pytest.fixture
def redis_url() -> Iterator[str]:
    # The runtime suite's real redis-server: found, or installed from Debian's package (it
    # fails, never skips, when it cannot be had).
    with running_redis(find_redis_server()) as redis:
        yield redis.url


@dataclass
class HttpClient:
    url: str
    token: str
    ids: Iterator[int] = field(default_factory=lambda: iter(range(1, 1_000_000)))

    def request(self, method: str, params: Json) -> Json:
        request_id = next(self.ids)
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "Authorization": f"Bearer {self.token}",
            "MCP-Protocol-Version": MODERN,
            "Mcp-Method": method,
        }
        name = params.get("taskId", params.get("name"))
        if isinstance(name, str):
            headers["Mcp-Name"] = name
        body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        target = urlsplit(self.url)
        connection = http.client.HTTPConnection(target.hostname or "", target.port, timeout=60)
        try:
            connection.request("POST", target.path, body, headers)
            response = connection.getresponse()
            payload = response.read()
        finally:
            connection.close()
        assert response.status == 200, (response.status, payload)
        if response.getheader("Content-Type", "").startswith("text/event-stream"):
            events = [
                json.loads(line[5:].strip())
                for line in payload.decode().splitlines()
                if line.startswith("data:")
            ]
            (reply,) = [event for event in events if event.get("id") == request_id]
        else:
            reply = json.loads(payload)
        assert "result" in reply, reply
        result: Json = reply["result"]
        return result


def test_two_replicas_on_redis_one_killed_mid_deploy_the_other_finishes_it(
    project: Installed, aws: Aws, redis_url: str, tmp_path: Path
) -> None:
    key_file = tmp_path / "secrets" / "mrtr-signing-key"
    run([project.tool(DEFAULT_SLUG), "keygen", "--path", key_file], cwd=tmp_path)
    token = secrets.token_urlsafe(32)
    env = {
        **base_env(tmp_path, aws),
        "MRTR_SIGNING_KEY_FILE": str(key_file),
        "MRTR_HTTP_TOKEN": token,
        "MRTR_TASK_STORE": redis_url,
    }
    command = replica_command(project)
    replicas: list[Replica] = []
    steps = Steps()
    print("\nreplicas on one redis-server: B killed mid-deploy")  # noqa: T201
    try:
        a = start_replica("A", command, env, tmp_path)
        replicas.append(a)
        b = start_replica("B", command, env, tmp_path)
        replicas.append(b)
        on_a, on_b = HttpClient(a.url, token), HttpClient(b.url, token)
        task, confirming = confirm_until_task(on_b.request, steps, first=on_a.request)
        steps(f"round 1 on {a.label}; later rounds on {b.label}")
        steps(f"task {task['taskId'][:8]}... created on B ({task['status']})")
        assert aws.gate.held.wait(HOLD_TIMEOUT_SECONDS), "the deploy never reached its execute"
        b.process.send_signal(signal.SIGKILL)
        b.process.wait(timeout=30)
        steps("B: ExecuteChangeSet held at the gate; B SIGKILLed")
        aws.gate.drop()
        ended = poll(on_a.request, task["taskId"])
        steps(f"A: tasks/get -> {ended['status']} ({ended.get('statusMessage')})")
        assert ended["status"] == "completed", ended
        assert ended["result"]["structuredContent"]["action"] == "created", ended
        replay = on_a.request("tools/call", confirming)
        steps(f"A: confirming round replayed -> task {str(replay.get('taskId'))[:8]}...")
        assert replay.get("taskId") == task["taskId"], replay
    finally:
        for replica in replicas:
            replica.stop()
    for replica in replicas:
        for log in tmp_path.glob(f"replica-{replica.name}-*.log"):
            for line in task_lines(log):
                steps(f"{replica.name} log: {line}")
    assert len(aws.stacks()) == 1
    assert aws.executed_change_sets() == 1
    assert aws.gate.executes_forwarded == 1
    steps("moto: 1 stack, 1 executed change set")
