"""deploy_to_aws against an AWS endpoint that misbehaves: no credential ever gets out.

A small stand-in for AWS (stdlib ``http.server`` on 127.0.0.1) answers STS and CloudFormation
over their query protocol, just well enough for a deploy to succeed, and misbehaves on one
chosen call: **truncated** (the right response cut half-way, AssumeRole's inside its
credentials), **garbled** (bytes that are no protocol at all) or **echoing** (the request's
headers quoted back, Authorization and X-Amz-Security-Token included). botocore cannot parse
any of them and raises ``ResponseParserError``, which quotes the body and is no BotoCoreError.

Each flow (a create, a replace of a ROLLBACK_COMPLETE stack, an update over a leftover change
set; together every AWS call the engine makes) runs once cleanly to record its calls, then once
per call with that call misbehaving. The real server runs over stdio, with its own logging,
so the runtime's failure path and log formatter are what is checked: the base credentials and
the assumed role's never reach a result, a progress notification or stderr.
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qs

import anyio
import pytest

PACKAGE = os.environ["MRTR_PACKAGE"]
testing = importlib.import_module(f"{PACKAGE}.mrtr_runtime.testing")
ClientSession, answers = testing.ClientSession, testing.answers

BOUND = 60  # seconds for one flow: a server start and a deploy per AWS call
ROLE = "arn:aws:iam::123456789012:role/Deployer"
STACK = "prod-api"
STACK_ID = f"arn:aws:cloudformation:us-east-1:123456789012:stack/{STACK}/1111"
CHANGE_SET_ID = "arn:aws:cloudformation:us-east-1:123456789012:changeSet/mrtr-x/2222"
# Fake credentials, shaped like real ones (nothing in them spells a name the output may show).
BASE = {
    "AWS_ACCESS_KEY_ID": "AKIAQ3EGZK7BXJ4W2N6P",
    "AWS_SECRET_ACCESS_KEY": "h7Qx/2LmZp9vR4tWc8Yb+Ke3Nf6Js1Ud5Ga0Vi7O",
    "AWS_SESSION_TOKEN": "IQoJb3JpZ2luX2VjEPr/9wEaCXVzLWVhc3QtMSJGMEQCIHtK+q2w==",
}
ASSUMED = {
    "AccessKeyId": "ASIAQ3EGZK7BM5R8T1YC",
    "SecretAccessKey": "c0Rm+4hT8wXq/3LzV7nBk2Ps6Gd9Fy1Ja5Uo0Ei",
    "SessionToken": "FwoGZXIvYXdzEJr//////////wEaDH3q8Kz+Lm0Nv7Rt2Yw9Pc==",
}
SECRETS = [*BASE.values(), *ASSUMED.values()]
# Long enough a piece of any secret to count as a leak of it.
PIECES = [secret[i : i + 12] for secret in SECRETS for i in range(0, len(secret) - 11, 4)]

Flow = Literal["create", "replace", "update"]
Mode = Literal["truncated", "garbled", "echoing"]
FLOWS: dict[Flow, set[str]] = {
    "create": {
        "AssumeRole",
        "GetTemplateSummary",
        "DescribeStacks",
        "CreateChangeSet",
        "DescribeChangeSet",
        "DescribeStackEvents",
        "ExecuteChangeSet",
    },
    "replace": {"AssumeRole", "DescribeStacks", "DeleteStack", "CreateChangeSet"},
    "update": {"AssumeRole", "GetTemplate", "DescribeChangeSet", "DeleteChangeSet"},
}
STS_NS = "https://sts.amazonaws.com/doc/2011-06-15/"
CFN_NS = "http://cloudformation.amazonaws.com/doc/2010-05-15/"


def response(action: str, result: str | None, namespace: str = CFN_NS) -> bytes:
    inner = "" if result is None else f"<{action}Result>{result}</{action}Result>"
    return (
        f'<{action}Response xmlns="{namespace}">{inner}'
        f"<ResponseMetadata><RequestId>r-1</RequestId></ResponseMetadata></{action}Response>"
    ).encode()


def not_found() -> bytes:
    return (
        f'<ErrorResponse xmlns="{CFN_NS}"><Error><Type>Sender</Type><Code>ValidationError</Code>'
        f"<Message>Stack with id {STACK} does not exist</Message></Error>"
        "<RequestId>r-1</RequestId></ErrorResponse>"
    ).encode()


class FakeAws:
    """STS and CloudFormation, just enough for one deploy; call number `fail_at` misbehaves."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: list[str] = []
        self.status: str | None = None
        self.mode: Mode | None = None
        self.fail_at = -1
        self.reflecting = False

    def reset(self, flow: Flow, mode: Mode | None = None, fail_at: int = -1) -> None:
        with self.lock:
            self.calls = []
            self.status = {"create": None, "replace": "ROLLBACK_COMPLETE"}.get(
                flow, "UPDATE_COMPLETE"
            )
            self.mode, self.fail_at = mode, fail_at
            self.reflecting = False

    def answer(self, action: str, head: bytes, body: bytes) -> tuple[int, bytes]:
        with self.lock:
            number = len(self.calls)
            self.calls.append(action)
            status, correct = self.correct(action)
            if number != self.fail_at:
                return status, correct
        if self.mode == "truncated":
            token = correct.find(ASSUMED["SessionToken"].encode())
            cut = token + 20 if token >= 0 else len(correct) // 2
            return 200, correct[:cut]
        if self.mode == "garbled":
            return 200, b"\x00\x9f\xfe<<HTTP/1.1 \xff\xfe garbage \x1b[31m" + bytes(range(256))
        return 200, b"You sent:\r\n" + head + b"\r\n" + body

    def correct(self, action: str) -> tuple[int, bytes]:
        stack = (
            f"<Stacks><member><StackName>{STACK}</StackName><StackId>{STACK_ID}</StackId>"
            f"<CreationTime>2026-07-28T00:00:00Z</CreationTime>"
            f"<StackStatus>{self.status}</StackStatus>{self.reflected_outputs()}</member></Stacks>"
        )
        change_set = (
            f"<ChangeSetName>mrtr-x</ChangeSetName><ChangeSetId>{CHANGE_SET_ID}</ChangeSetId>"
            f"<StackId>{STACK_ID}</StackId><Status>CREATE_COMPLETE</Status>"
            "<ExecutionStatus>AVAILABLE</ExecutionStatus>"
        )
        if action == "AssumeRole":
            credentials = "".join(f"<{key}>{value}</{key}>" for key, value in ASSUMED.items())
            return 200, response(
                action,
                f"<Credentials>{credentials}<Expiration>2026-07-28T01:00:00Z</Expiration>"
                "</Credentials><AssumedRoleUser><AssumedRoleId>AROAEXAMPLEID:s</AssumedRoleId>"
                f"<Arn>{ROLE}</Arn></AssumedRoleUser>",
                STS_NS,
            )
        if action == "DescribeStacks":
            return (400, not_found()) if self.status is None else (200, response(action, stack))
        if action == "DeleteStack":
            self.status = None
            return 200, response(action, None)
        if action == "ExecuteChangeSet":
            self.status = "CREATE_COMPLETE" if self.status is None else "UPDATE_COMPLETE"
        results = {
            "GetTemplateSummary": "<Parameters/>",
            "GetTemplate": "<TemplateBody>Resources: {}</TemplateBody>",
            "DescribeChangeSet": change_set,
            "DeleteChangeSet": "",
            "CreateChangeSet": f"<Id>{CHANGE_SET_ID}</Id><StackId>{STACK_ID}</StackId>",
            "DescribeStackEvents": f"<StackEvents>{self.reflected_event()}</StackEvents>",
            "ExecuteChangeSet": "",
        }
        return 200, response(action, results[action])

    def reflected_outputs(self) -> str:
        if not self.reflecting:
            return ""
        return (
            f"<Outputs><member><OutputKey>Echo</OutputKey><OutputValue>{ASSUMED['SessionToken']}"
            "</OutputValue></member></Outputs>"
        )

    def reflected_event(self) -> str:
        # Only once the change set runs: the events before it are not relayed.
        if not self.reflecting or self.status != "CREATE_COMPLETE":
            return ""
        return (
            f"<member><EventId>e-1</EventId><StackId>{STACK_ID}</StackId>"
            f"<StackName>{STACK}</StackName><LogicalResourceId>Api</LogicalResourceId>"
            "<ResourceType>AWS::Lambda::Function</ResourceType>"
            "<ResourceStatus>CREATE_IN_PROGRESS</ResourceStatus><ResourceStatusReason>"
            f"saw {ASSUMED['SessionToken']} with {ASSUMED['SecretAccessKey']} and "
            f"{BASE['AWS_SECRET_ACCESS_KEY']}</ResourceStatusReason>"
            "<Timestamp>2026-07-28T00:00:01Z</Timestamp></member>"
        )


def handler_for(fake: FakeAws) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            action = parse_qs(body.decode()).get("Action", ["?"])[0]
            head = f"{self.requestline}\r\n{self.headers}".encode()
            status, reply = fake.answer(action, head, body)
            self.send_response(status)
            self.send_header("Content-Type", "text/xml")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, format: str, *args: Any) -> None:
            del format, args  # the test's own stderr stays quiet

    return Handler


@pytest.fixture
def fake_aws() -> Iterator[tuple[FakeAws, str]]:
    fake = FakeAws()
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(fake))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(BOUND)


def server_env(endpoint: str, tmp_path: Path) -> dict[str, str]:
    proxies = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("AWS_", "MRTR_")) and name.lower() not in proxies
    }
    return {
        **env,
        **BASE,
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": str(tmp_path / "no-aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-aws-credentials"),
        "AWS_EC2_METADATA_DISABLED": "true",
        "NO_PROXY": "*",
        # The deploy's confirmation is recorded in the task store: this test's own, never the
        # user's (the default store lives in the per-user state directory).
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "MRTR_SIGNING_KEY": "8b0f2e4d6c1a3957e8f0b2d4c6a81357e9f1b3d5c7a90246f8e0d2b4c6a81357",
        "MRTR_LOG_LEVEL": "DEBUG",
    }


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["truncated", "garbled", "echoing"])
@pytest.mark.parametrize("flow", FLOWS)
async def test_no_credential_gets_out_whichever_aws_call_misbehaves(
    fake_aws: tuple[FakeAws, str], tmp_path: Path, flow: Flow, mode: Mode
) -> None:
    fake, endpoint = fake_aws
    yes = answers({"confirm": {"confirmed": True}, "role-arn": {"arn": ROLE}})
    outputs: list[str] = []
    with anyio.fail_after(BOUND):
        async with ClientSession.spawn(
            [sys.executable, "-m", PACKAGE], env=server_env(endpoint, tmp_path), elicitation=yes
        ) as session:
            fake.reset(flow)
            clean = await session.call_tool("deploy_to_aws", {"stack": STACK})
            assert not clean.is_error, clean.text
            calls = list(fake.calls)
            assert FLOWS[flow] <= set(calls)
            for number, action in enumerate(calls):
                fake.reset(flow, mode, number)
                # A region of its own per attempt: identical rounds minted within one second
                # are one confirmation, which the runtime answers with the outcome it recorded
                # for it (the last attempt's) instead of running it again.
                arguments = {"stack": STACK, "region": f"eu-west-{number + 1}"}
                failed = await session.call_tool("deploy_to_aws", arguments)
                assert failed.is_error, (action, failed.text)
                assert fake.calls[-1] == action  # the deploy stopped at the call that misbehaved
                outputs.append(repr(failed))
    # After the session: the server has exited and its stderr is read to the end.
    outputs += [repr(session.notifications), session.stderr_text()]
    everything = "\n".join(outputs)
    for piece in PIECES:
        assert piece not in everything, f"a credential reached the output ({mode} {flow})"
    # Every failure is a ToolError the engine built: nothing fell through to the generic path.
    assert "Traceback" not in everything


@pytest.mark.anyio
async def test_credentials_an_endpoint_echoes_bare_never_get_out(
    fake_aws: tuple[FakeAws, str], tmp_path: Path
) -> None:
    # A stack event's reason and an Output value quote the credentials with no name beside
    # them: only the values the deploy registered as secret can find them.
    fake, endpoint = fake_aws
    yes = answers({"confirm": {"confirmed": True}, "role-arn": {"arn": ROLE}})
    with anyio.fail_after(BOUND):
        async with ClientSession.spawn(
            [sys.executable, "-m", PACKAGE], env=server_env(endpoint, tmp_path), elicitation=yes
        ) as session:
            fake.reset("create")
            fake.reflecting = True
            result = await session.call_tool(
                "deploy_to_aws", {"stack": STACK}, meta={"progressToken": "deploy"}
            )
    assert not result.is_error, result.text
    assert "DescribeStackEvents" in fake.calls
    everything = "\n".join(
        [result.text, repr(result), repr(session.notifications), session.stderr_text()]
    )
    assert "[redacted]" in repr(result.structured)  # the echo came through, redacted
    assert "Api (AWS::Lambda::Function)" in repr(session.notifications)
    for piece in PIECES:
        assert piece not in everything, "an echoed credential reached the output"
