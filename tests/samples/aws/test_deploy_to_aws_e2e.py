"""deploy_to_aws end to end: the real server in a subprocess, with moto's server playing AWS.

The server gets moto's address only through AWS_ENDPOINT_URL, which boto3 reads by itself, so
the code under test is exactly what runs against AWS. The client is the project's own
ClientSession, whose call_tool drives every round, answering elicitations the way a host's form
would.

Part of the template's samples suite: it runs with a baked project's python against its
package (``MRTR_PACKAGE``).
"""

from __future__ import annotations

import contextlib
import http.client
import importlib
import json
import os
import secrets
import signal
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import boto3
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream
from moto.server import ThreadedMotoServer

PACKAGE = os.environ["MRTR_PACKAGE"]
testing = importlib.import_module(f"{PACKAGE}.mrtr_runtime.testing")
ClientSession = testing.ClientSession

BOUND = 60  # seconds for the whole conversation, server start-up included
REGION = "eu-west-1"
ROLE = "arn:aws:iam::111122223333:role/Deployer"  # another account: moto switches to it
STACK = "e2e-api"

Json = dict[str, Any]


@pytest.fixture
def endpoint() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        # moto's backends live in this process and outlive the server: start from nothing.
        reset = urllib.request.Request(f"http://{host}:{port}/moto-api/reset", method="POST")
        urllib.request.urlopen(reset, timeout=10).close()  # noqa: S310 (our own local server)
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture
def server_env(endpoint: str, tmp_path: Path) -> dict[str, str]:
    """What a host config would pass, pointed at moto; nothing of the developer's AWS setup."""
    source = Path(importlib.import_module(PACKAGE).__file__ or "").resolve().parents[1]
    return {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(tmp_path),
        "PYTHONPATH": str(source),
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": REGION,
        "AWS_CONFIG_FILE": str(tmp_path / "no-aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-aws-credentials"),
        "MRTR_SIGNING_KEY": secrets.token_hex(32),
    }


def assumed(service: str, endpoint: str) -> Any:
    """A boto3 client of the role's account on moto's server, to look at what was deployed."""
    sts = boto3.client(
        "sts",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    credentials = sts.assume_role(RoleArn=ROLE, RoleSessionName="e2e-check")["Credentials"]
    return boto3.client(
        service,
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=credentials["AccessKeyId"],
        aws_secret_access_key=credentials["SecretAccessKey"],
        aws_session_token=credentials["SessionToken"],
    )


def what_was_deployed(endpoint: str) -> Json:
    """The stack's resources as moto holds them, read with the role's credentials."""
    cloudformation = assumed("cloudformation", endpoint)
    stack = cloudformation.describe_stacks(StackName=STACK)["Stacks"][0]
    resources = cloudformation.list_stack_resources(StackName=STACK)["StackResourceSummaries"]
    by_id = {item["LogicalResourceId"]: item for item in resources}
    queue_url = by_id["Queue"]["PhysicalResourceId"]
    name = f"/{STACK}/staging/queue-url"
    return {
        "stack_id": stack["StackId"],
        "status": stack["StackStatus"],
        "parameters": {
            item["ParameterKey"]: item["ParameterValue"] for item in stack["Parameters"]
        },
        "types": {key: item["ResourceType"] for key, item in by_id.items()},
        "ssm_value_is_queue_url": assumed("ssm", endpoint).get_parameter(Name=name)["Parameter"][
            "Value"
        ]
        == queue_url,
        "queue_tags": assumed("sqs", endpoint).list_queue_tags(QueueUrl=queue_url)["Tags"],
    }


@pytest.mark.anyio
async def test_two_rounds_through_the_real_server_deploy_the_stack_into_moto(
    endpoint: str, server_env: dict[str, str]
) -> None:
    asked: list[str] = []

    async def elicit(params: Json) -> Json:
        asked.append(params["message"])
        if "confirmed" in params["requestedSchema"]["properties"]:
            return {"action": "accept", "content": {"confirmed": True}}
        return {"action": "accept", "content": {"arn": ROLE}}

    arguments: Json = {"stack": STACK, "parameters": {"Environment": "staging"}}
    command = [sys.executable, "-m", PACKAGE]
    with anyio.fail_after(BOUND):
        async with ClientSession.spawn(command, env=server_env, elicitation=elicit) as session:
            created = await session.call_tool("deploy_to_aws", arguments)
            after_create = await anyio.to_thread.run_sync(what_was_deployed, endpoint)
            again = await session.call_tool("deploy_to_aws", arguments)
            updated = await session.call_tool(
                "deploy_to_aws",
                {"stack": STACK, "parameters": {"Environment": "prod"}},
                meta={"progressToken": "e2e"},
            )
            after_update = await anyio.to_thread.run_sync(what_was_deployed, endpoint)
            notifications: list[Json] = list(session.notifications)

    assert not created.is_error, (created, session.stderr_text())
    # Two input rounds per call: the role, then the yes to the plan it shows.
    assert [call.asked for call in (created, again, updated)] == [(("role-arn",), ("confirm",))] * 3
    assert asked[0] == "Which IAM role should the deploy assume? Give its ARN."
    assert asked[1].splitlines()[:5] == [
        f"Create stack '{STACK}' in account 111122223333, {REGION}?",
        "No IAM capabilities. Creates 2: Queue, QueueUrlParameter",
        'Set: Environment="staging"',
        f"Account 111122223333, region {REGION}, role {ROLE}",
        "Stack now: none, so this creates it",
    ]
    assert asked[3].splitlines()[:3] == [
        f"Update stack '{STACK}' in account 111122223333, {REGION}?",
        "No IAM capabilities. Template unchanged",
        "Set: no parameter changes",
    ]
    assert asked[3].splitlines()[4].startswith("Stack now: CREATE_COMPLETE, last changed ")
    assert asked[5].splitlines()[2] == 'Set: Environment="prod" (was "staging")'

    assert created.structured["action"] == "created"
    assert created.structured["region"] == REGION
    assert after_create == {
        "stack_id": created.structured["stack_id"],
        "status": "CREATE_COMPLETE",
        "parameters": {"Environment": "staging", "MessageRetentionSeconds": "345600"},
        "types": {"Queue": "AWS::SQS::Queue", "QueueUrlParameter": "AWS::SSM::Parameter"},
        "ssm_value_is_queue_url": True,
        "queue_tags": {"environment": "staging"},
    }
    assert again.structured["action"] == "unchanged"
    assert updated.structured["action"] == "updated"
    assert after_update["status"] == "UPDATE_COMPLETE"
    assert after_update["parameters"]["Environment"] == "prod"
    # The deploy reports its progress; the call's result holds what reached the client for it.
    assert updated.progress
    mine = [
        note["params"]
        for note in notifications
        if note["method"] == "notifications/progress" and note["params"]["progressToken"] == "e2e"
    ]
    seen = [(note["progress"], note.get("total"), note.get("message")) for note in mine]
    assert seen == list(updated.progress)


@pytest.mark.anyio
async def test_a_host_that_follows_tasks_gets_the_deploy_as_a_task_run_once(
    endpoint: str, server_env: dict[str, str]
) -> None:
    stack = "e2e-task"
    call: Json = {"name": "deploy_to_aws", "arguments": {"stack": stack}}
    role = {"role-arn": {"action": "accept", "content": {"arn": ROLE}}}
    yes = {"confirm": {"action": "accept", "content": {"confirmed": True}}}
    with anyio.fail_after(BOUND):
        async with ClientSession.spawn(
            [sys.executable, "-m", PACKAGE],
            env=server_env,
            capabilities={"elicitation": {"form": {}}},
            tasks=True,
        ) as session:
            first = await session.request("tools/call", call)
            second = await session.request(
                "tools/call",
                {**call, "inputResponses": role, "requestState": first["requestState"]},
            )
            confirming = {**call, "inputResponses": yes, "requestState": second["requestState"]}
            created = await session.request("tools/call", confirming)
            task = created
            statuses: list[str] = []
            while task["status"] == "working":
                statuses.append(str(task.get("statusMessage")))
                await anyio.sleep(0.1)
                task = await session.request("tasks/get", {"taskId": created["taskId"]})
            replayed = await session.request("tools/call", confirming)

    assert first["resultType"] == second["resultType"] == "input_required"
    assert created["resultType"] == "task", created
    assert statuses[0] == f"Deploying stack '{stack}' to AWS account 111122223333, {REGION}"
    assert task["status"] == "completed", (task, session.stderr_text())
    assert task["result"]["structuredContent"]["action"] == "created"
    # The confirming round again, byte for byte, after the task ended: that task, not a deploy.
    assert replayed["resultType"] == "task"
    assert (replayed["taskId"], replayed["status"]) == (created["taskId"], "completed")
    cloudformation = assumed("cloudformation", endpoint)
    stacks = cloudformation.list_stacks()["StackSummaries"]
    assert [summary["StackStatus"] for summary in stacks if summary["StackName"] == stack] == [
        "CREATE_COMPLETE"
    ]
    change_sets = cloudformation.list_change_sets(StackName=stack)["Summaries"]
    assert [item["ExecutionStatus"] for item in change_sets] == ["EXECUTE_COMPLETE"]


class SlowAws:
    """A proxy in front of moto's server that holds every AWS call for `delay` seconds.

    It makes a deploy slow enough to cancel between two of its steps, and it records the
    action of every call that reached AWS, so a test can tell which steps happened. With
    `trigger`, `on_trigger` runs as the first call of that action arrives (`"after:X"`: the
    first call after X), before it is held; from that call on each is held `delay_after`.
    The trigger counts only calls made after `arm()` (the questions read AWS too).
    """

    def __init__(
        self,
        upstream: str,
        delay: float,
        *,
        trigger: str | None = None,
        on_trigger: Callable[[], None] = lambda: None,
        delay_after: float | None = None,
    ) -> None:
        target = urlsplit(upstream)
        self.actions: list[str] = []
        #: Calls held or being forwarded right now; 0 once everything sent has reached moto.
        self.in_flight = 0
        self.triggered = False
        self.armed = False
        lock = threading.Lock()
        proxy = self

        def hold(action: str) -> float:
            with lock:
                proxy.in_flight += 1
                previous = proxy.actions[-1] if proxy.actions else None
                proxy.actions.append(action)
                fires = trigger in (action, f"after:{previous}")
                if proxy.armed and not proxy.triggered and fires:
                    proxy.triggered = True
                    on_trigger()
                if proxy.triggered and delay_after is not None:
                    return delay_after
                return delay

        class Forward(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self._forward()

            def do_GET(self) -> None:
                self._forward()

            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                action = dict(
                    pair.split("=", 1) for pair in body.decode().split("&") if "=" in pair
                ).get("Action", self.headers.get("X-Amz-Target", "?"))
                try:
                    time.sleep(hold(action))
                    self._relay(body)
                finally:
                    with lock:
                        proxy.in_flight -= 1

            def _relay(self, body: bytes) -> None:
                upstream_conn = http.client.HTTPConnection(
                    target.hostname or "127.0.0.1", target.port, timeout=30
                )
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                upstream_conn.request(self.command, self.path, body, headers)
                reply = upstream_conn.getresponse()
                data = reply.read()
                self.send_response(reply.status)
                for key, value in reply.getheaders():
                    if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                with contextlib.suppress(OSError):  # the caller may be gone (its server stopped)
                    self.wfile.write(data)
                upstream_conn.close()

            def log_message(self, format: str, *args: Any) -> None:
                del format, args

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Forward)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def arm(self) -> None:
        self.armed = True

    def __enter__(self) -> SlowAws:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.anyio
async def test_a_cancel_after_the_first_progress_stops_the_deploy(
    endpoint: str, server_env: dict[str, str]
) -> None:
    # basic/utilities/cancellation: the receiver SHOULD stop processing, and nothing more is
    # sent for the cancelled id -- progress included. Every AWS call takes a second here, so
    # the cancel lands before the role is assumed or while it is, never after a
    # CloudFormation step.
    role = {"role-arn": {"action": "accept", "content": {"arn": ROLE}}}
    answers = {"confirm": {"action": "accept", "content": {"confirmed": True}}}
    # moto's server keeps its state for the whole process: a stack name of this test's own.
    stack = "e2e-cancelled"
    call: Json = {"name": "deploy_to_aws", "arguments": {"stack": stack}}
    first_progress = anyio.Event()

    async def on_notification(message: Json) -> None:
        if message.get("method") == "notifications/progress":
            first_progress.set()

    with SlowAws(endpoint, delay=1.0) as aws, anyio.fail_after(BOUND):
        env = {**server_env, "AWS_ENDPOINT_URL": aws.url}
        async with ClientSession.spawn(
            [sys.executable, "-m", PACKAGE],
            env=env,
            capabilities={"elicitation": {"form": {}}},
            notification_handler=on_notification,
        ) as session:
            first = await session.request("tools/call", call)
            second = await session.request(
                "tools/call",
                {**call, "inputResponses": role, "requestState": first["requestState"]},
            )
            asked_before = len(aws.actions)  # the question read the stack as the role
            retry = {
                "jsonrpc": "2.0",
                "id": 9001,  # sent raw: a response to it would be a protocol violation here
                "method": "tools/call",
                "params": {
                    **call,
                    "inputResponses": answers,
                    "requestState": second["requestState"],
                    "_meta": {
                        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                        "io.modelcontextprotocol/clientCapabilities": session.capabilities,
                        "progressToken": "cancel-me",
                    },
                },
            }
            await session.send_raw(json.dumps(retry).encode() + b"\n")

            def progress() -> list[Json]:
                return [
                    note
                    for note in session.notifications
                    if note.get("method") == "notifications/progress"
                ]

            await first_progress.wait()
            assert "Assuming role" in str(progress()[0]["params"])
            await session.notify("notifications/cancelled", {"requestId": 9001})
            sent_before_cancel = len(progress())
            # Long enough for every step that would follow at one second per AWS call.
            await anyio.sleep(6)
            listed = await session.request("tools/list", {})
            after = len(progress())
            violations = list(session.protocol_violations)

    assert listed["tools"]
    assert sent_before_cancel == after == 1
    assert violations == []  # no response for id 9001
    assert "CreateChangeSet" not in aws.actions
    assert "ExecuteChangeSet" not in aws.actions
    # The confirming round reads the stack again (its first run, and the run recorded as its
    # task), then the deploy assumes the role: the cancel may even land before that.
    assert aws.actions[asked_before:].count("AssumeRole") <= 3
    cloudformation = assumed("cloudformation", endpoint)
    stacks = cloudformation.list_stacks()["StackSummaries"]
    assert [summary for summary in stacks if summary["StackName"] == stack] == []


# -- SIGTERM at each AWS step: what the client is told matches what the stack did ---------------


def stack_status(endpoint: str, stack: str) -> str | None:
    cloudformation = assumed("cloudformation", endpoint)
    summaries = cloudformation.list_stacks()["StackSummaries"]
    found = [summary for summary in summaries if summary["StackName"] == stack]
    return str(found[0]["StackStatus"]) if found else None


async def deploy_then_stop(
    server_env: dict[str, str], endpoint: str, stack: str, step: str, delay_after: float
) -> tuple[Json, list[str], str | None]:
    """The role, then the confirming round through a slowed AWS; SIGTERM as `step` reaches
    AWS in that round. The answer to it, every AWS call made, and the stack's status once all
    is done."""
    role = {"role-arn": {"action": "accept", "content": {"arn": ROLE}}}
    answers = {"confirm": {"action": "accept", "content": {"confirmed": True}}}
    modern = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
    }
    call: Json = {"name": "deploy_to_aws", "arguments": {"stack": stack}, "_meta": modern}

    def line(request_id: int, params: Json) -> bytes:
        message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
        return json.dumps(message).encode() + b"\n"

    stopping: list[Process] = []

    def terminate() -> None:
        stopping[0].send_signal(signal.SIGTERM)

    aws = SlowAws(endpoint, 0.3, trigger=step, on_trigger=terminate, delay_after=delay_after)
    env = {**server_env, "AWS_ENDPOINT_URL": aws.url}
    with aws:
        process = await anyio.open_process([sys.executable, "-m", PACKAGE], env=env)
        stopping.append(process)
        assert process.stdin is not None and process.stdout is not None
        stdout = BufferedByteReceiveStream(process.stdout)
        try:
            with anyio.fail_after(BOUND):
                await process.stdin.send(line(1, call))
                first = json.loads(await stdout.receive_until(b"\n", 1 << 20))
                state = first["result"]["requestState"]
                await process.stdin.send(
                    line(2, {**call, "inputResponses": role, "requestState": state})
                )
                second = json.loads(await stdout.receive_until(b"\n", 1 << 20))
                state = second["result"]["requestState"]
                aws.arm()  # the confirming round: SIGTERM as it reaches `step`
                await process.stdin.send(
                    line(3, {**call, "inputResponses": answers, "requestState": state})
                )
                answer = json.loads(await stdout.receive_until(b"\n", 1 << 20))
                assert await process.wait() == 0
                while aws.in_flight:  # noqa: ASYNC110 -- the proxy's threads, not ours
                    await anyio.sleep(0.05)
        finally:
            if process.returncode is None:
                process.kill()
            with anyio.CancelScope(shield=True):
                await process.aclose()
    return answer, list(aws.actions), stack_status(endpoint, stack)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("step", "delay_after", "told"),
    [
        ("AssumeRole", 0.3, "not completed"),
        ("CreateChangeSet", 0.3, "not completed"),
        ("DescribeChangeSet", 0.3, "not completed"),
        ("ExecuteChangeSet", 0.3, "result"),
        ("after:ExecuteChangeSet", 0.3, "result"),
        # Every call from the execution on takes 4 s: the deploy outlives the 5 s grace.
        ("ExecuteChangeSet", 4.0, "may have been carried out"),
    ],
)
async def test_sigterm_at_each_aws_step_is_answered_with_what_the_stack_really_did(
    endpoint: str, server_env: dict[str, str], step: str, delay_after: float, told: str
) -> None:
    stack = f"e2e-stop-{step.replace(':', '-')}-{int(delay_after * 10)}"
    answer, actions, status = await deploy_then_stop(server_env, endpoint, stack, step, delay_after)
    executed = "ExecuteChangeSet" in actions
    if told == "result":
        assert "result" in answer, (answer, status)
        assert answer["result"]["structuredContent"]["action"] == "created", answer
        assert status == "CREATE_COMPLETE"
        return
    error = answer["error"]
    assert error["code"] == -32603
    assert error["message"].startswith("Server stopping")
    if told == "not completed":
        # Nothing was executed: at most a change set proposed (the stack in review).
        assert error["message"].endswith("it was not completed"), error
        assert not executed, actions
        assert status in (None, "REVIEW_IN_PROGRESS"), status
    else:
        assert "may have been carried out" in error["message"], error
        assert "call the tool again with the same arguments" in error["message"]
        assert executed
        assert status == "CREATE_COMPLETE"
