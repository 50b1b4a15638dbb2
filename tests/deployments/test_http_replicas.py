"""Replicas: two ``<slug> http`` processes that share one signing key serve one conversation.

The AWS bake, installed with its dev extra (which brings the ``http`` one), runs as two replicas
started the way the project's Docker image starts: its ENTRYPOINT, with arguments in place of its
CMD, as ``docker run IMAGE --host 127.0.0.1 --port 0`` would. In front of them a round-robin
proxy of a few lines forwards each POST to the next replica in turn and logs which one served it:
no sticky sessions, no shared store, only the key file (made with ``<slug> keygen --path``) and a
bearer token. Through the proxy a plain HTTP client completes ``deploy_to_aws`` against moto's
standalone server, ``plan_release``, a conversation whose first replica was SIGKILLed after round
one, and one across two replicas in the middle of a key rotation. Each test prints the proxy's
log (``pytest -rA`` shows it).

2025-11-25 clients (the official Python SDK in ``legacy`` mode) need more: their session lives
in one replica. Behind a proxy that routes by ``Mcp-Session-Id`` (tests/peers/http_proxy.py) two
sessions land on the two replicas and complete ``deploy_to_aws`` and ``plan_release``, answering
the questions each replica asked; a session sent to the other replica gets 404, and the client
starts over with ``initialize``.

The Dockerfile's checks need no Docker daemon: a pinned slim base, a user that is not root, a
build context that holds no key, the extras it installs, and its command.
"""

from __future__ import annotations

import http.client
import itertools
import json
import os
import re
import secrets
import shutil
import subprocess
import threading
import time
import tomllib
import zipfile
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import boto3
import mcp_types as types
import pytest
from bakery import (
    COMBINATIONS,
    DEFAULT_PACKAGE,
    DEFAULT_SLUG,
    FULL_COMBINATIONS,
    KEY_FILE,
    Installed,
    bake_every_combination,
    run,
)
from docker_context import build_context
from host_client import MODERN, meta
from mcp import Client as SdkClient
from mcp import MCPError
from moto.server import ThreadedMotoServer
from peers.http_proxy import LEGACY, Exchange, Proxy, answers, assert_legacy_session, questions

pytestmark = pytest.mark.baked_checks

Json = dict[str, Any]

#: What replaces the image's CMD here: loopback only, and a free port per replica.
REPLICA_ARGUMENTS = ("--host", "127.0.0.1", "--port", "0")
LISTENING = re.compile(r"serving MCP at (http://\S+/mcp)")
#: Generous bounds for a loaded machine: a replica's start, one round (a deploy included).
START_TIMEOUT_SECONDS = 60
CALL_TIMEOUT_SECONDS = 60
MAX_ROUNDS = 6
REGION = "us-east-1"
ROLE_ARN = "arn:aws:iam::123456789012:role/deployer"  # moto's default account: stacks visible
#: moto accepts any credentials; these keep the developer's own AWS setup out of the test.
MOTO_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
#: How the "user" fills in any form the sample tools send, by property name.
FORM_ANSWERS: Json = {
    "confirmed": True,
    "arn": ROLE_ARN,
    "version": "1.3.0",
    "kind": "minor",
    "highlights": "Parallel builds; a cache that never goes stale",
}
RELEASE_ARGS: Json = {
    "project": "Replicas",
    "previous_version": "1.2.0",
    "changes": ["feat: parallel builds", "fix: stale cache"],
}
# RFC 9110 section 7.6.1: connection-specific fields are not forwarded by an intermediary.
HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "upgrade"}
)


# -- the image's command, read from the Dockerfile -----------------------------------------------


def instructions(dockerfile: str) -> list[tuple[str, str]]:
    """The Dockerfile's (INSTRUCTION, arguments), continuation lines joined, comments left out."""
    found = []
    for line in re.sub(r"\\\n", " ", dockerfile).splitlines():
        text = line.strip()
        if text and not text.startswith("#"):
            keyword, _, arguments = text.partition(" ")
            found.append((keyword.upper(), arguments.strip()))
    return found


def final_stage(dockerfile: str) -> list[tuple[str, str]]:
    steps = instructions(dockerfile)
    last_from = max(index for index, (keyword, _) in enumerate(steps) if keyword == "FROM")
    return steps[last_from:]


def exec_form(arguments: str) -> list[str]:
    """A JSON-array (exec form) argument list; the shell form would put `sh -c` in between."""
    words = json.loads(arguments)
    assert isinstance(words, list) and all(isinstance(word, str) for word in words), arguments
    return words


def image_command(project: Path) -> tuple[list[str], list[str]]:
    """The image's ENTRYPOINT and CMD."""
    stage = dict(final_stage((project / "Dockerfile").read_text(encoding="utf-8")))
    return exec_form(stage["ENTRYPOINT"]), exec_form(stage["CMD"])


def replica_command(project: Installed) -> list[str]:
    """The image's ENTRYPOINT, its program the console script this venv installed."""
    (program, *arguments), _ = image_command(project.project)
    return [str(project.tool(program)), *arguments, *REPLICA_ARGUMENTS]


# -- replicas and the proxy in front of them ----------------------------------------------------


@dataclass
class Replica:
    name: str
    process: subprocess.Popen[bytes]
    url: str

    @property
    def label(self) -> str:
        return f"{self.name} (pid {self.process.pid}, port {urlsplit(self.url).port})"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_replica(name: str, command: Sequence[str], env: Mapping[str, str], logs: Path) -> Replica:
    log = logs / f"replica-{name}-{secrets.token_hex(3)}.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            list(command),
            cwd="/",
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=sink,
        )
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while (listening := LISTENING.search(log.read_text(encoding="utf-8"))) is None:
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            process.wait()
            pytest.fail(f"replica {name} did not start:\n{log.read_text(encoding='utf-8')}")
        time.sleep(0.05)
    return Replica(name, process, listening[1])


@dataclass(frozen=True)
class Hop:
    """One POST through the proxy: who served it, what it carried, what came back."""

    replica: str
    method: str
    name: str
    answered: tuple[str, ...]
    outcome: str

    def __str__(self) -> str:
        sent = f"answers {', '.join(self.answered)}" if self.answered else "no answers"
        return f"{self.method} {self.name} -> {self.replica}: {sent}; got {self.outcome}"


def messages_in(payload: bytes, content_type: str) -> list[Json]:
    """The JSON-RPC messages of a response body: one JSON object, or the events of an SSE stream."""
    if content_type.startswith("text/event-stream"):
        found = []
        for event in payload.decode("utf-8").split("\n\n"):
            data = [line[5:].lstrip() for line in event.splitlines() if line.startswith("data:")]
            # A priming event (an id and an empty data line, for resuming) carries no message.
            if "".join(data).strip():
                found.append(json.loads("\n".join(data)))
        return found
    return [json.loads(payload)]


def outcome_of(status: int, content_type: str, payload: bytes) -> str:
    if status != 200:
        return f"HTTP {status}"
    messages = messages_in(payload, content_type)
    final = messages[-1]
    streamed = f" (SSE after {len(messages) - 1} notifications)" if len(messages) > 1 else ""
    if "error" in final:
        return f"error {final['error']['code']}{streamed}"
    if final["result"].get("resultType") == "input_required":
        return f"input_required for {', '.join(sorted(final['result']['inputRequests']))}"
    return f"the result{streamed}"


class RoundRobin(ThreadingHTTPServer):
    """A load balancer at its simplest: each request to the next replica, whatever it carries."""

    daemon_threads = True

    def __init__(self, replicas: Sequence[Replica]) -> None:
        super().__init__(("127.0.0.1", 0), _Forward)
        self.replicas = list(replicas)
        self.turns = itertools.count()
        self.log: list[Hop] = []
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/mcp"

    def next_replica(self) -> Replica:
        with self.lock:
            return self.replicas[next(self.turns) % len(self.replicas)]

    def replace(self, old: Replica, new: Replica) -> None:
        with self.lock:
            self.replicas[self.replicas.index(old)] = new

    def record(self, replica: Replica, body: bytes, outcome: str) -> None:
        request = json.loads(body)
        params = request.get("params", {})
        answered = tuple(sorted(params.get("inputResponses", {})))
        hop = Hop(replica.label, request["method"], params.get("name", ""), answered, outcome)
        with self.lock:
            self.log.append(hop)


class _Forward(BaseHTTPRequestHandler):
    server: RoundRobin

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        replica = self.server.next_replica()
        target = urlsplit(replica.url)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        connection = http.client.HTTPConnection(
            target.hostname or "", target.port, timeout=CALL_TIMEOUT_SECONDS
        )
        try:
            connection.request("POST", target.path, body, headers)
            response = connection.getresponse()
            status, payload = response.status, response.read()
            reply_headers = [
                (k, v) for k, v in response.getheaders() if k.lower() not in HOP_BY_HOP
            ]
        except OSError as error:  # a dead replica: what a load balancer answers then
            status, payload, reply_headers = 502, str(error).encode(), []
        finally:
            connection.close()
        content_type = dict((k.lower(), v) for k, v in reply_headers).get("content-type", "")
        self.server.record(replica, body, outcome_of(status, content_type, payload))
        self.send_response(status)
        for name, value in reply_headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        """The proxy's own log is ``RoundRobin.log``."""


# -- a client: plain HTTP, the 2026-07-28 headers ------------------------------------------------


@dataclass
class Client:
    url: str
    token: str
    ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def request(self, method: str, params: Json) -> tuple[Json, list[Json]]:
        """POST one request; its result, and the notifications streamed before it."""
        request_id = next(self.ids)
        headers = {
            "Content-Type": "application/json",
            # basic/transports/streamable-http "Sending Messages": the client MUST accept both.
            "Accept": "application/json, text/event-stream",
            "Authorization": f"Bearer {self.token}",
            "MCP-Protocol-Version": MODERN,
            "Mcp-Method": method,
        }
        if "name" in params:
            headers["Mcp-Name"] = params["name"]
        body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        target = urlsplit(self.url)
        connection = http.client.HTTPConnection(
            target.hostname or "", target.port, timeout=CALL_TIMEOUT_SECONDS
        )
        try:
            connection.request("POST", target.path, body, headers)
            response = connection.getresponse()
            payload = response.read()
        finally:
            connection.close()
        assert response.status == 200, (response.status, payload)
        messages = messages_in(payload, response.getheader("Content-Type", ""))
        (reply,) = [message for message in messages if message.get("id") == request_id]
        assert "result" in reply, reply
        return reply["result"], [message for message in messages if "id" not in message]


def answer(request: Json) -> Json:
    assert request["method"] == "elicitation/create", request
    asked = request["params"]["requestedSchema"]["properties"]
    return {"action": "accept", "content": {name: FORM_ANSWERS[name] for name in asked}}


@dataclass
class Conversation:
    """One tools/call, round by round: each round answers what the previous one asked."""

    client: Client
    tool: str
    arguments: Json
    meta: Json = field(default_factory=meta)
    result: Json | None = None
    notifications: list[Json] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return self.result is not None and self.result.get("resultType") != "input_required"

    def round(self) -> Json:
        params: Json = {
            "name": self.tool,
            "arguments": self.arguments,
            "_meta": self.meta,
        }
        if self.result is not None:
            asked = self.result["inputRequests"]
            params["inputResponses"] = {key: answer(request) for key, request in asked.items()}
            params["requestState"] = self.result["requestState"]
        self.result, notifications = self.client.request("tools/call", params)
        self.notifications += notifications
        return self.result

    def finish(self) -> Json:
        for _ in range(MAX_ROUNDS):
            if self.done:
                assert self.result is not None
                return self.result
            self.round()
        pytest.fail(f"{self.tool} still asks after {MAX_ROUNDS} rounds: {self.result}")


# -- the cluster: moto, the key, two replicas, the proxy ----------------------------------------


@dataclass
class Cluster:
    project: Installed
    env: dict[str, str]
    logs: Path
    proxy: RoundRobin
    replicas: list[Replica]
    token: str

    def client(self) -> Client:
        return Client(self.proxy.url, self.token)

    def start(self, name: str, **env: str) -> Replica:
        replica = start_replica(name, replica_command(self.project), {**self.env, **env}, self.logs)
        self.replicas.append(replica)
        return replica

    def served(self, since: int) -> list[Hop]:
        with self.proxy.lock:
            return self.proxy.log[since:]

    def replica_named(self, label: str) -> Replica:
        (replica,) = [replica for replica in self.replicas if replica.label == label]
        return replica


def show(title: str, hops: Sequence[Hop]) -> None:
    """The proxy's log of one conversation, for the issue's note (``pytest -rA``)."""
    print(f"\n{title}")  # noqa: T201 (the report this test exists to show)
    for number, hop in enumerate(hops, start=1):
        print(f"  round {number}: {hop}")  # noqa: T201


def assert_alternating(hops: Sequence[Hop]) -> None:
    served = [hop.replica for hop in hops]
    assert all(a != b for a, b in itertools.pairwise(served)), served


@pytest.fixture(scope="module")
def project(installed: Callable[[str], Installed]) -> Installed:
    """The session's AWS bake: its dev extra brings the http one."""
    return installed("aws")


@pytest.fixture(scope="module")
def aws_endpoint() -> Iterator[str]:
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    host, port = moto.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        moto.stop()


@pytest.fixture(scope="module")
def cluster(
    project: Installed, aws_endpoint: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    home = tmp_path_factory.mktemp("replicas")
    key_file = home / "secrets" / "mrtr-signing-key"
    run([project.tool(DEFAULT_SLUG), "keygen", "--path", key_file], cwd=home)
    token = secrets.token_urlsafe(32)
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(home),
        "MRTR_SIGNING_KEY_FILE": str(key_file),
        "MRTR_HTTP_TOKEN": token,
        "AWS_ENDPOINT_URL": aws_endpoint,
        **MOTO_CREDENTIALS,
        "AWS_REGION": REGION,
        "AWS_CONFIG_FILE": str(home / "no-aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(home / "no-aws-credentials"),
    }
    cluster = Cluster(project, env, home, RoundRobin([]), [], token)
    proxy = threading.Thread(target=cluster.proxy.serve_forever, daemon=True)
    proxy.start()
    try:
        cluster.proxy.replicas = [cluster.start("A"), cluster.start("B")]
        yield cluster
    finally:
        cluster.proxy.shutdown()
        cluster.proxy.server_close()
        for replica in cluster.replicas:
            replica.stop()


def stack_status(endpoint: str, stack: str) -> str:
    cloudformation = boto3.client(
        "cloudformation",
        region_name=REGION,
        endpoint_url=endpoint,
        aws_access_key_id=MOTO_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=MOTO_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    )
    status: str = cloudformation.describe_stacks(StackName=stack)["Stacks"][0]["StackStatus"]
    return status


# -- conversations across replicas --------------------------------------------------------------


def test_deploy_to_aws_asks_on_one_replica_and_deploys_on_the_other(
    cluster: Cluster, aws_endpoint: str
) -> None:
    since = len(cluster.proxy.log)
    stack = f"replicas-{secrets.token_hex(3)}"
    deploy = Conversation(
        cluster.client(),
        "deploy_to_aws",
        {"stack": stack},
        {**meta(), "progressToken": "deploy"},
    )
    result = deploy.finish()
    hops = cluster.served(since)
    show(f"deploy_to_aws {stack} through the round-robin proxy", hops)

    assert result.get("isError") is not True, result
    assert result["structuredContent"]["action"] == "created"
    assert stack_status(aws_endpoint, stack) == "CREATE_COMPLETE"
    # The role, then the yes to the plan it shows, then the deploy: each round on the other
    # replica from the last.
    assert [hop.answered for hop in hops] == [(), ("role-arn",), ("confirm",)]
    assert hops[0].outcome == "input_required for role-arn"
    assert hops[1].outcome == "input_required for confirm"
    assert_alternating(hops)
    # The deploy's progress came back through the proxy as the SSE stream of round three.
    assert "SSE" in hops[2].outcome
    progress = [note for note in deploy.notifications if note["method"] == "notifications/progress"]
    assert progress
    assert {note["params"]["progressToken"] for note in progress} == {"deploy"}


def test_plan_release_rounds_alternate_between_the_replicas(cluster: Cluster) -> None:
    since = len(cluster.proxy.log)
    result = Conversation(cluster.client(), "plan_release", RELEASE_ARGS).finish()
    hops = cluster.served(since)
    show("plan_release through the round-robin proxy", hops)

    assert result["structuredContent"]["status"] == "confirmed"
    assert result["structuredContent"]["version"] == "1.3.0"
    assert len(hops) == 4  # version and kind; highlights; the yes; the plan
    assert_alternating(hops)
    assert len({hop.replica for hop in hops}) == 2


def test_a_replica_killed_between_rounds_loses_nothing(cluster: Cluster) -> None:
    since = len(cluster.proxy.log)
    plan = Conversation(cluster.client(), "plan_release", RELEASE_ARGS)
    plan.round()
    first = cluster.replica_named(cluster.served(since)[0].replica)
    first.process.kill()  # SIGKILL: no shutdown, nothing written anywhere
    first.process.wait()
    plan.round()  # the other replica's turn: it has never seen this conversation
    restarted = cluster.start(first.name)
    cluster.proxy.replace(first, restarted)
    result = plan.finish()  # round three on the restarted replica, the plan on the other one
    hops = cluster.served(since)
    show(f"plan_release, {first.label} SIGKILLed after round 1 and started again", hops)

    assert result["structuredContent"]["status"] == "confirmed"
    assert [hop.replica for hop in hops] == [
        first.label,
        hops[1].replica,
        restarted.label,
        hops[1].replica,
    ]
    assert hops[1].replica not in (first.label, restarted.label)


def test_replicas_in_the_middle_of_a_key_rotation_accept_each_others_rounds(
    cluster: Cluster,
) -> None:
    # README "Running N replicas": first every replica verifies the new key, then every replica
    # signs with it and still verifies the old one. Half-way through the second step, one
    # replica signs with the old key and the other with the new one.
    # (MRTR_SIGNING_KEY comes before the cluster's MRTR_SIGNING_KEY_FILE.)
    old, new = secrets.token_hex(32), secrets.token_hex(32)
    signs_old = cluster.start("old-key", MRTR_SIGNING_KEY=old, MRTR_PREVIOUS_SIGNING_KEYS=new)
    signs_new = cluster.start("new-key", MRTR_SIGNING_KEY=new, MRTR_PREVIOUS_SIGNING_KEYS=old)
    proxy = RoundRobin([signs_old, signs_new])
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    try:
        client = Client(proxy.url, cluster.token)
        result = Conversation(client, "plan_release", RELEASE_ARGS).finish()
    finally:
        proxy.shutdown()
        proxy.server_close()
        signs_old.stop()
        signs_new.stop()
    show(
        "plan_release across a key rotation (one replica signs old, the other new)",
        proxy.log,
    )

    assert result["structuredContent"]["status"] == "confirmed"
    assert [hop.replica for hop in proxy.log] == [signs_old.label, signs_new.label] * 2


# -- a 2025-11-25 client on two replicas: its sessions need affinity -----------------------------
#
# A legacy session lives in the replica that answered its `initialize` (its client's
# capabilities, its log level, the questions it has been asked and not yet answered): 2025-11-25
# basic/transports "Session Management" lets a server hold one, and the only thing that ties
# the session's later requests to it is the `Mcp-Session-Id` header. So the proxy in front of
# replicas routes by that header (session affinity); the first request, with no id, goes to any
# replica. A client sent to another replica gets 404, and "Session Management" 4. says what it
# MUST do then: initialize again. The Python SDK (mcp 2.3.0) raises the 404's JSON-RPC error
# (-32600 "Session not found ...") rather than initializing by itself, so the host (here: the
# test) starts over with a new Client.


def elicit_from_form_answers(
    asked: list[str],
) -> Callable[[Any, types.ElicitRequestParams], Awaitable[types.ElicitResult]]:
    """The SDK's elicitation callback: each form filled from FORM_ANSWERS; `asked` keeps the
    first line of each question."""

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message.splitlines()[0])
        properties = getattr(params, "requested_schema", {}).get("properties", {})
        return types.ElicitResult(
            action="accept", content={name: FORM_ANSWERS[name] for name in properties}
        )

    return elicit


@pytest.fixture
def affinity(cluster: Cluster) -> Iterator[Proxy]:
    """A proxy that routes by `Mcp-Session-Id`, holding the bearer token as a gateway would."""
    replicas = list(cluster.proxy.replicas)
    with Proxy(
        [replica.url for replica in replicas],
        route="affinity",
        headers={"Authorization": f"Bearer {cluster.token}"},
        names=[replica.label for replica in replicas],
    ) as proxy:
        yield proxy


def show_transcript(title: str, proxy: Proxy, start: int = 0) -> None:
    print(f"\n{title}")  # noqa: T201 (the transcript this test exists to show)
    print("\n".join(proxy.transcript(start)))  # noqa: T201


def of_session(proxy: Proxy, session: str) -> list[Exchange]:
    return [e for e in proxy.since(0) if session in (e.session, e.new_session)]


def test_legacy_clients_on_two_replicas_behind_a_proxy_with_session_affinity(
    cluster: Cluster, affinity: Proxy, aws_endpoint: str
) -> None:
    stack = f"legacy-{secrets.token_hex(3)}"
    deploy_asked: list[str] = []
    plan_asked: list[str] = []

    async def both() -> tuple[types.CallToolResult, types.CallToolResult]:
        with anyio.fail_after(CALL_TIMEOUT_SECONDS * 2):
            deployer = SdkClient(
                affinity.url,
                mode="legacy",
                elicitation_callback=elicit_from_form_answers(deploy_asked),
            )
            planner = SdkClient(
                affinity.url,
                mode="legacy",
                elicitation_callback=elicit_from_form_answers(plan_asked),
            )
            async with deployer, planner:
                assert deployer.protocol_version == planner.protocol_version == LEGACY
                deployed = await deployer.call_tool("deploy_to_aws", {"stack": stack})
                planned = await planner.call_tool("plan_release", RELEASE_ARGS)
        return deployed, planned

    deployed, planned = anyio.run(both)
    show_transcript("two 2025-11-25 sessions through a proxy with session affinity", affinity)

    assert not deployed.is_error, deployed
    assert deployed.structured_content is not None
    assert deployed.structured_content["action"] == "created"
    assert stack_status(aws_endpoint, stack) == "CREATE_COMPLETE"
    assert deploy_asked == [
        "Which IAM role should the deploy assume? Give its ARN.",
        f"Create stack '{stack}' in account 123456789012, us-east-1?",
    ]
    assert planned.structured_content is not None
    assert planned.structured_content["status"] == "confirmed"
    assert len(plan_asked) == 3  # version and kind; highlights; yes to the plan
    # Each session was opened by an initialize, on its own replica (the two initializes went
    # to different ones), and every later request of it, the answers included, went there.
    sessions = affinity.sessions()
    assert len(sessions) == 2
    homes = []
    for session in sessions:
        exchanges = of_session(affinity, session)
        assert_legacy_session(exchanges)
        assert {exchange.upstream for exchange in exchanges} == {exchanges[0].upstream}
        assert {exchange.status for exchange in exchanges} <= {200, 202}
        homes.append(exchanges[0].upstream)
    assert sorted(homes) == [0, 1]
    # The questions came on one replica's stream and their answers went back to that replica.
    assert len(questions(affinity.since(0))) == len(answers(affinity.since(0))) == 5


def test_a_legacy_session_sent_to_the_other_replica_gets_404_and_the_client_starts_over(
    cluster: Cluster, affinity: Proxy
) -> None:
    """Why affinity: the same request on the replica that never saw the session is 404."""
    asked: list[str] = []

    async def converse() -> tuple[MCPError, types.CallToolResult]:
        elicit = elicit_from_form_answers(asked)
        with anyio.fail_after(CALL_TIMEOUT_SECONDS * 2):
            async with SdkClient(affinity.url, mode="legacy", elicitation_callback=elicit) as first:
                await first.list_tools()
                (session,) = affinity.sessions()
                affinity.misroute(
                    session
                )  # what a proxy without affinity would do, sooner or later
                with pytest.raises(MCPError) as lost:
                    await first.call_tool("plan_release", RELEASE_ARGS)
            # "Session Management" 4.: on 404 the client MUST initialize again, with no id.
            async with SdkClient(affinity.url, mode="legacy", elicitation_callback=elicit) as again:
                planned = await again.call_tool("plan_release", RELEASE_ARGS)
        return lost.value, planned

    lost, planned = anyio.run(converse)
    show_transcript("a 2025-11-25 session routed to the other replica, then started over", affinity)

    first_session, second_session = affinity.sessions()
    misrouted = [e for e in of_session(affinity, first_session) if e.methods() == ["tools/call"]]
    (call,) = misrouted
    assert call.status == 404
    assert call.upstream != of_session(affinity, first_session)[0].upstream
    # The SDK hands on the JSON-RPC error the 404 carried: the session is unknown there.
    assert lost.error.code == types.INVALID_REQUEST
    assert lost.error.message.startswith("Session not found"), lost.error.message
    assert len(asked) == 3  # all three questions of the plan, asked in the new session
    assert planned.structured_content is not None
    assert planned.structured_content["status"] == "confirmed"
    exchanges = of_session(affinity, second_session)
    assert_legacy_session(exchanges)
    assert {exchange.upstream for exchange in exchanges} == {exchanges[0].upstream}


# -- the Docker image, checked without a daemon --------------------------------------------------


@pytest.fixture(scope="module")
def bakes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return bake_every_combination(tmp_path_factory, "docker", FULL_COMBINATIONS)


def test_the_image_runs_the_command_the_replicas_run(project: Installed) -> None:
    entrypoint, cmd = image_command(project.project)
    scripts = tomllib.loads((project.project / "pyproject.toml").read_text(encoding="utf-8"))[
        "project"
    ]["scripts"]
    # The replicas above run this ENTRYPOINT; only CMD differs, replaced by their arguments.
    assert entrypoint == [DEFAULT_SLUG, "http"]
    assert entrypoint[0] in scripts
    assert cmd[::2] == list(REPLICA_ARGUMENTS[::2])  # the same options, other values
    # A container binds every interface of its own network namespace (the Dockerfile says why).
    assert cmd == ["--host", "0.0.0.0", "--port", "8000"]  # noqa: S104
    stage = dict(final_stage((project.project / "Dockerfile").read_text(encoding="utf-8")))
    assert stage["EXPOSE"] == cmd[-1]


@pytest.mark.parametrize("combination", sorted(FULL_COMBINATIONS))
def test_the_image_is_pinned_runs_as_no_root_and_carries_no_key(
    bakes: dict[str, Path], combination: str
) -> None:
    dockerfile = (bakes[combination] / "Dockerfile").read_text(encoding="utf-8")
    steps = instructions(dockerfile)
    bases = [arguments.split()[0] for keyword, arguments in steps if keyword == "FROM"]
    assert bases
    for base in bases:
        # A tag can be moved to other bytes; a digest cannot. The tag stays, for people.
        assert re.fullmatch(r"python:\d+\.\d+\.\d+-slim-[a-z]+@sha256:[0-9a-f]{64}", base), base
    assert len(set(bases)) == 1
    tag = bases[0].split("@")[0]
    assert f"docker buildx imagetools inspect {tag}" in dockerfile  # how to refresh the digest
    users = [arguments for keyword, arguments in final_stage(dockerfile) if keyword == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0"), users
    assert users[-1].isdigit()
    environment = " ".join(arguments for keyword, arguments in steps if keyword == "ENV")
    assert "MRTR_SIGNING_KEY=" not in environment  # the key itself is never baked in
    assert "MRTR_SIGNING_KEY_FILE=/run/secrets/" in environment
    extras = re.search(r'pip install [^"]*"\.\[([a-z,]+)\]"', dockerfile)
    assert extras is not None
    aws = COMBINATIONS[combination]["include_aws_example"] == "yes"
    wings = ["http", "oauth", "redis"]
    assert extras[1].split(",") == ([*wings, "aws"] if aws else wings)


def test_the_image_checks_its_health_with_a_real_discover_on_its_own_port(
    project: Installed,
) -> None:
    stage = final_stage((project.project / "Dockerfile").read_text(encoding="utf-8"))
    (check,) = [arguments for keyword, arguments in stage if keyword == "HEALTHCHECK"]
    options, _, command = check.partition(" CMD ")
    assert "--timeout=" in options
    program, *arguments = exec_form(command)
    assert (program, arguments) == (DEFAULT_SLUG, ["health"])
    _, cmd = image_command(project.project)
    # Its default URL is the image's own port: the one EXPOSE and CMD name.
    described = run([project.tool(program), *arguments, "--help"], cwd=project.project)
    assert f"http://127.0.0.1:{cmd[-1]}/mcp" in described.stdout
    assert dict(stage)["EXPOSE"] == cmd[-1]


@pytest.mark.parametrize("combination", sorted(FULL_COMBINATIONS))
def test_the_build_context_holds_what_the_image_copies_and_no_secret(
    bakes: dict[str, Path], combination: str
) -> None:
    project = bakes[combination]
    package = next((project / "src").iterdir())
    # What a developer's checkout has besides the bake: a venv, local settings, rotated keys.
    for planted in (
        ".env",
        ".env.local",
        ".venv/bin/python",
        ".mrtr-signing-key.1a2b.tmp",
        ".mrtr-previous-signing-keys",
        f"src/{package.name}/.env",
        f"src/{package.name}/{KEY_FILE}",
        f"src/{package.name}/__pycache__/app.cpython-311.pyc",
        "dist/old.whl",
    ):
        (project / planted).parent.mkdir(parents=True, exist_ok=True)
        (project / planted).write_text("secret", encoding="utf-8")
    sent = build_context(project)

    assert (project / KEY_FILE).is_file()
    secret = re.compile(r"(^|/)(\.mrtr-signing-key|\.mrtr-previous-signing-keys|\.env|\.venv)")
    assert [path for path in sent if secret.search(path)] == []
    assert not [path for path in sent if "__pycache__" in path or path.startswith("dist/")]
    copied = [
        source
        for keyword, arguments in instructions((project / "Dockerfile").read_text("utf-8"))
        if keyword == "COPY" and not arguments.startswith("--from")
        for source in arguments.split()[:-1]
    ]
    assert copied == ["pyproject.toml", "README.md", "hatch_build.py", "src"]
    for source in copied:
        assert any(path == source or path.startswith(f"{source}/") for path in sent), source
    assert f"src/{package.name}/app.py" in sent


def image_environment(project: Path) -> dict[str, str]:
    stage = final_stage((project / "Dockerfile").read_text(encoding="utf-8"))
    words = " ".join(arguments for keyword, arguments in stage if keyword == "ENV").split()
    return dict(word.partition("=")[::2] for word in words)


def test_the_image_without_a_key_refuses_to_start(project: Installed, tmp_path: Path) -> None:
    # The image names a key file and nothing mounted it there: the replica must stop, not sign
    # with a key of its own that no other replica shares.
    key_file = image_environment(project.project)["MRTR_SIGNING_KEY_FILE"]
    assert not Path(key_file).exists()
    started = subprocess.run(
        replica_command(project),
        cwd="/",
        env={"PATH": os.environ.get("PATH", os.defpath), "HOME": str(tmp_path)}
        | {"MRTR_SIGNING_KEY_FILE": key_file},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT_SECONDS,
        check=False,
    )
    assert started.returncode == 2, started.stderr
    assert f"MRTR_SIGNING_KEY_FILE {key_file} cannot be read" in started.stderr
    assert LISTENING.search(started.stderr) is None


def test_what_the_image_copies_builds_the_wheel_it_installs(
    bakes: dict[str, Path], project: Installed, tmp_path: Path
) -> None:
    baked = bakes["aws"]  # the other combination differs only in the tools and the extras
    context = tmp_path / "context"
    for relative in build_context(baked):
        (context / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(baked / relative, context / relative)
    # What the image's `pip install .[...]` builds first, with any pip (here the AWS bake's).
    wheel_dir = tmp_path / "dist"
    run([project.python, "-m", "pip", "wheel", "--no-deps", "-w", wheel_dir, context], cwd=tmp_path)
    (wheel,) = wheel_dir.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (entry_points,) = [name for name in names if name.endswith(".dist-info/entry_points.txt")]
        (metadata,) = [name for name in names if name.endswith(".dist-info/METADATA")]
        scripts = archive.read(entry_points).decode("utf-8")
        extras = re.findall(r"^Provides-Extra: (\S+)$", archive.read(metadata).decode(), re.M)
    entrypoint, _ = image_command(baked)
    assert f"{entrypoint[0]} = {DEFAULT_PACKAGE}.app:main" in scripts
    assert {"http", "oauth", "aws"} <= set(extras)
    assert not [name for name in names if KEY_FILE in name or ".env" in name]
