"""deploy_to_aws in process: what the tool asks, and that nothing is deployed without a yes.

The MRTR rounds run through MemoryClient; moto (``mock_aws``) stands in for AWS. These tests are
about the handler, the part to copy for a tool of your own: the first round asks for the role and
touches nothing, the confirmation shows the plan in its first lines, only a real yes deploys
(inline, or as a task that a replay of the yes finds again), and a no or answers sent ahead of
their question deploy nothing. The rest of the handler's tests (every way a plan is shown, a
task's progress and cancel, a yes bound to the role, stack and template, a bad ARN asked again,
loosely typed answers, the 2025-11-25 bridge) and the change-set engine behind it
(`tools/_cloudformation.py`: updates, retries, waiting, errors, credentials) are maintained and
tested by the mrtr-server template, like the runtime.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

{% if cookiecutter.include_tasks == "yes" -%}
import anyio
import anyio.from_thread
{% endif -%}
import boto3
import pytest
from moto import mock_aws

from {{ cookiecutter.package_name }}.app import build_server
from {{ cookiecutter.package_name }}.mrtr_runtime.testing import (
    MemoryClient,
    RpcError,
    ToolCallResult,
)
from {{ cookiecutter.package_name }}.tools import _cloudformation as engine
from {{ cookiecutter.package_name }}.tools import deploy_to_aws as tool

REGION = "us-east-1"
ACCOUNT = "123456789012"  # moto's default account: the role lives there, so do the stacks
ROLE = f"arn:aws:iam::{ACCOUNT}:role/Deployer"
STACK = "prod-api"
TEMPLATE = engine.load_template("stack.yaml")

Json = dict[str, Any]
Elicit = Callable[[Json], Awaitable[Json]]

FORMS: Json = {"elicitation": {"form": {}}}
# What a host that follows tasks declares beside forms (the tasks extension).
TASKS: Json = {**FORMS, "extensions": {"io.modelcontextprotocol/tasks": {}}}
BOUND = 30  # seconds for a task to end against moto

# Round 1: only the role; the confirmation shows what it implies (its account).
ROLE_REQUEST: Json = {
    "method": "elicitation/create",
    "params": {
        "message": "Which IAM role should the deploy assume? Give its ARN.",
        "requestedSchema": {
            "type": "object",
            "properties": {
                "arn": {
                    "type": "string",
                    "pattern": "^arn:aws:iam::",
                    "title": "IAM role ARN",
                    "description": "The role to assume: arn:aws:iam::<account>:role/<name>",
                }
            },
            "required": ["arn"],
        },
    },
}
CONFIRM_SCHEMA: Json = {
    "type": "object",
    "properties": {
        "confirmed": {
            "type": "boolean",
            "title": "Deploy this plan",
            "description": "Yes deploys exactly what is shown above; no changes nothing in AWS.",
        }
    },
    "required": ["confirmed"],
}
TEMPLATE_SHA = hashlib.sha256(TEMPLATE.encode()).hexdigest()[:12]
# Round 2: the resolved plan. A host may show only the first 3 lines, each cut at the
# terminal's width (Claude Code): they say what and where, what is dangerous, and which values
# are not the defaults; the whole plan follows, one fact per line.
PLAN_LINES = [
    f"Create stack 'prod-api' in account {ACCOUNT}, {REGION}?",
    "No IAM capabilities. Creates 2: Queue, QueueUrlParameter",
    "Set: every parameter at its template default",
    f"Account {ACCOUNT}, region {REGION}, role {ROLE}",
    "Stack now: none, so this creates it",
    f"Template: stack.yaml (sha256 {TEMPLATE_SHA})",
    "Capabilities: none",
    'Parameters: Environment="dev" (default), MessageRetentionSeconds="345600" (default)',
    "To create: Queue (AWS::SQS::Queue), QueueUrlParameter (AWS::SSM::Parameter)",
]
#: What a host shows of a question (Claude Code: 3 lines, each cut at an 80-column terminal).
SHOWN_LINES, SHOWN_WIDTH = tool.SHOWN_LINES, tool.SHOWN_WIDTH


def new_server() -> Any:
    # A task store of this server's own, in memory: nothing outlives the test.
    return build_server({"MRTR_SIGNING_KEY": secrets.token_hex(32), "MRTR_TASK_STORE": "memory:"})


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """moto in process, with dummy credentials and nothing of the developer's AWS setup."""
    for name in ("AWS_PROFILE", "AWS_REGION", "AWS_ENDPOINT_URL", "AWS_ROLE_ARN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    with mock_aws():
        yield


@pytest.fixture
def client(aws: None) -> MemoryClient:
    return MemoryClient(new_server(), capabilities=FORMS)


def answering(*, confirm: Json | None = None, arn: str = ROLE) -> Elicit:
    """An elicitation callback: full ElicitResult objects, as a host's form would return."""

    async def elicit(params: Json) -> Json:
        if "confirmed" in params["requestedSchema"]["properties"]:
            return confirm or {"action": "accept", "content": {"confirmed": True}}
        return {"action": "accept", "content": {"arn": arn}}

    return elicit


async def deploy(
    client: MemoryClient, elicit: Elicit | None = None, **arguments: Any
) -> ToolCallResult:
    """deploy_to_aws through every round, on `client`'s server, answered by `elicit`."""
    arguments.setdefault("stack", STACK)
    asking = MemoryClient(
        client.server, capabilities=client.capabilities, elicitation=elicit or answering()
    )
    return await asking.call_tool("deploy_to_aws", arguments)


def cfn() -> Any:
    return engine.aws_session(boto3).client("cloudformation", region_name=REGION)


def no_stacks() -> bool:
    return not cfn().list_stacks()["StackSummaries"]


ARN: Json = {"role-arn": {"action": "accept", "content": {"arn": ROLE}}}
CONFIRMED: Json = {"confirm": {"action": "accept", "content": {"confirmed": True}}}


async def rounds(client: MemoryClient, call: Json, *answers: Json) -> Json:
    """The first call, then one retry per set of `answers`, each echoing the last requestState."""
    result = await client.request("tools/call", call)
    for given in answers:
        assert result["resultType"] == "input_required", result
        retry = {**call, "inputResponses": given, "requestState": result["requestState"]}
        result = await client.request("tools/call", retry)
    return result


def change_sets(name: str = STACK) -> list[Json]:
    """Every change set moto holds for stack `name`, executed or not."""
    if no_stacks():
        return []
    summaries: list[Json] = cfn().list_change_sets(StackName=name)["Summaries"]
    return summaries


# -- round 1: the role -----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_first_round_asks_for_the_role_and_touches_nothing(client: MemoryClient) -> None:
    result = await client.request(
        "tools/call", {"name": "deploy_to_aws", "arguments": {"stack": STACK}}
    )

    assert result["resultType"] == "input_required"
    assert isinstance(result["requestState"], str)
    assert result["inputRequests"] == {"role-arn": ROLE_REQUEST}
    assert no_stacks()


@pytest.mark.anyio
async def test_a_client_without_elicitation_gets_missing_capability_error(aws: None) -> None:
    bare = MemoryClient(new_server(), capabilities={})

    with pytest.raises(RpcError) as raised:
        await bare.request("tools/call", {"name": "deploy_to_aws", "arguments": {"stack": STACK}})

    assert raised.value.code == -32021
    assert isinstance(raised.value.data, dict)
    assert "elicitation" in raised.value.data["requiredCapabilities"]


@pytest.mark.anyio
async def test_tool_declares_honest_annotations_and_an_output_schema(client: MemoryClient) -> None:
    listed = await client.request("tools/list", {})
    (declared,) = [entry for entry in listed["tools"] if entry["name"] == "deploy_to_aws"]

    assert declared["annotations"] == {
        "title": "Deploy a CloudFormation stack",
        "readOnlyHint": False,
        "destructiveHint": True,
        "idempotentHint": True,
        "openWorldHint": True,
    }
    assert declared["outputSchema"]["required"] == ["action", "stack"]
    assert declared["inputSchema"]["required"] == ["stack"]


# -- round 2: the plan, as it would run ----------------------------------------------------------


@pytest.mark.anyio
async def test_the_confirmation_shows_the_resolved_plan_in_its_first_lines(
    client: MemoryClient,
) -> None:
    call: Json = {"name": "deploy_to_aws", "arguments": {"stack": STACK}}

    second = await rounds(client, call, ARN)

    assert second["resultType"] == "input_required"
    assert list(second["inputRequests"]) == ["confirm"]
    asked = second["inputRequests"]["confirm"]["params"]
    assert asked["requestedSchema"] == CONFIRM_SCHEMA
    assert asked["message"].splitlines() == PLAN_LINES
    assert no_stacks()  # looking is all it did: nothing was written


@pytest.mark.anyio
async def test_what_decides_the_yes_is_in_the_lines_a_host_shows(client: MemoryClient) -> None:
    # Claude Code shows 3 lines of a question, each cut at the terminal's width, and
    # "(+N more lines)": whatever makes this deploy dangerous must be there.
    arguments: Json = {
        "stack": STACK,
        "parameters": {"Environment": "prod"},
        "capabilities": ["CAPABILITY_NAMED_IAM"],
    }

    second = await rounds(client, {"name": "deploy_to_aws", "arguments": arguments}, ARN)

    shown = second["inputRequests"]["confirm"]["params"]["message"].splitlines()[:SHOWN_LINES]
    assert shown == [
        f"Create stack 'prod-api' in account {ACCOUNT}, {REGION}?",
        "May change IAM (CAPABILITY_NAMED_IAM). Creates 2: Queue, QueueUrlParameter",
        'Set: Environment="prod"',
    ]
    assert all(len(line) <= SHOWN_WIDTH for line in shown)


# -- deploying -----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_confirmed_deploy_creates_the_stack_from_the_bundled_template(
    client: MemoryClient,
) -> None:
    result = await deploy(client)

    assert not result.is_error, result.text
    assert result.asked == (("role-arn",), ("confirm",))
    structured = result.structured
    assert structured["action"] == "created"
    assert structured["status"] == "CREATE_COMPLETE"
    assert structured["region"] == REGION
    assert structured["change_set"].startswith("mrtr-")
    assert len(structured["change_set"]) == len("mrtr-") + 12
    assert result.text.startswith(f"Created stack '{STACK}' in {REGION}: CREATE_COMPLETE.")
    assert structured["stack_id"] in result.text
    resources = cfn().list_stack_resources(StackName=STACK)["StackResourceSummaries"]
    assert sorted((item["LogicalResourceId"], item["ResourceType"]) for item in resources) == [
        ("Queue", "AWS::SQS::Queue"),
        ("QueueUrlParameter", "AWS::SSM::Parameter"),
    ]
    parameter = boto3.client("ssm", region_name=REGION).get_parameter(
        Name=f"/{STACK}/dev/queue-url"
    )
    queue_urls = boto3.client("sqs", region_name=REGION).list_queues()["QueueUrls"]
    assert parameter["Parameter"]["Value"] == queue_urls[0]


{% if cookiecutter.include_tasks == "yes" -%}
# -- as a task -----------------------------------------------------------------------------------


async def follow(client: MemoryClient, task_id: str) -> tuple[Json, list[str]]:
    """tasks/get until the task ends: its last state, and every statusMessage seen on the way."""
    seen: list[str] = []
    with anyio.fail_after(BOUND):
        while True:
            task = await client.request("tasks/get", {"taskId": task_id})
            message = task.get("statusMessage")
            if message and (not seen or seen[-1] != message):
                seen.append(message)
            if task["status"] not in ("working", "input_required"):
                return task, seen
            await anyio.sleep(0.05)


@pytest.mark.anyio
async def test_the_confirming_round_starts_a_task_that_deploys_once(aws: None) -> None:
    server = new_server()
    client = MemoryClient(server, capabilities=TASKS)
    call: Json = {"name": "deploy_to_aws", "arguments": {"stack": STACK}}
    second = await rounds(client, call, ARN)
    # The questions are ordinary rounds, never a task.
    assert second["resultType"] == "input_required"
    assert "taskId" not in second
    confirming = {**call, "inputResponses": CONFIRMED, "requestState": second["requestState"]}

    created = await client.request("tools/call", confirming)

    assert created["resultType"] == "task"
    assert created["status"] == "working"
    assert created["statusMessage"] == (
        f"Deploying stack '{STACK}' to AWS account {ACCOUNT}, {REGION}"
    )
    assert "requestState" not in created and "inputRequests" not in created
    task, _ = await follow(client, created["taskId"])
    assert task["status"] == "completed", task
    result = task["result"]
    assert result["structuredContent"]["action"] == "created"
    assert result["content"][0]["text"].startswith(f"Created stack '{STACK}' in {REGION}")
    assert len(cfn().list_stacks()["StackSummaries"]) == 1
    assert [item["ExecutionStatus"] for item in change_sets()] == ["EXECUTE_COMPLETE"]
    events = len(cfn().describe_stack_events(StackName=STACK)["StackEvents"])

    # The confirming round again, byte for byte: the same task, already done; nothing deployed.
    replayed = await client.request("tools/call", confirming)
    inline = await MemoryClient(server, capabilities=FORMS).request("tools/call", confirming)

    assert replayed["resultType"] == "task"
    assert replayed["taskId"] == created["taskId"]
    assert replayed["status"] == "completed"
    assert inline["structuredContent"] == result["structuredContent"]  # the stored result
    assert [item["ExecutionStatus"] for item in change_sets()] == ["EXECUTE_COMPLETE"]
    assert len(cfn().describe_stack_events(StackName=STACK)["StackEvents"]) == events


{% else -%}
# -- a confirmation replayed ---------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_confirming_round_replayed_deploys_once(aws: None) -> None:
    # Without the tasks wing the deploy runs inline; the runtime records the confirming round's
    # run, so the same confirmation sent again is answered from that record.
    client = MemoryClient(new_server(), capabilities=FORMS)
    call: Json = {"name": "deploy_to_aws", "arguments": {"stack": STACK}}
    second = await rounds(client, call, ARN)
    confirming = {**call, "inputResponses": CONFIRMED, "requestState": second["requestState"]}

    deployed = await client.request("tools/call", confirming)
    replayed = await client.request("tools/call", confirming)

    assert deployed["structuredContent"]["action"] == "created"
    assert replayed["structuredContent"] == deployed["structuredContent"]
    assert [item["ExecutionStatus"] for item in change_sets()] == ["EXECUTE_COMPLETE"]


{% endif -%}
# -- the yes is bound to the role, the plan and the stack as shown -------------------------------


def test_the_digest_binds_the_role_and_the_region() -> None:
    plan = engine.StackPlan(STACK, TEMPLATE, {})
    digests = {
        tool.digest(plan, role_arn=ROLE, region=REGION),
        tool.digest(plan, role_arn=ROLE.replace(ACCOUNT, "111122223333"), region=REGION),
        tool.digest(plan, role_arn=ROLE, region="eu-west-1"),
    }
    assert len(digests) == 3


# -- the user says no ----------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    "answer",
    [
        {"action": "decline"},
        {"action": "cancel"},
        {"action": "accept", "content": {"confirmed": False}},
    ],
    ids=["declined", "cancelled", "confirmed-false"],
)
async def test_no_to_the_confirmation_cancels_without_deploying(
    client: MemoryClient, monkeypatch: pytest.MonkeyPatch, answer: Json
) -> None:
    monkeypatch.setattr(tool, "run_deploy", _must_not_run)

    result = await deploy(client, answering(confirm=answer))

    assert not result.is_error
    cancelled = f"Deploy of stack '{STACK}' cancelled by the user; nothing was written to AWS."
    assert result.text == cancelled
    # A host may hand its model only this object (Claude Code does): the sentence is in it,
    # and nothing that does not apply is there as a null.
    assert result.structured == {
        "message": cancelled,
        "action": "cancelled",
        "stack": STACK,
        "outputs": {},
        "by_earlier_run": False,
    }
    assert no_stacks()


@pytest.mark.anyio
async def test_declining_the_role_question_cancels_before_aws_is_called(
    client: MemoryClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tool, "run_deploy", _must_not_run)
    monkeypatch.setattr(tool, "inspect_plan", _must_not_run)

    async def elicit(params: Json) -> Json:
        if "confirmed" in params["requestedSchema"]["properties"]:
            return {"action": "accept", "content": {"confirmed": True}}
        return {"action": "decline"}

    result = await deploy(client, elicit)

    assert result.text.startswith(f"Deploy of stack '{STACK}' cancelled by the user; nothing")
    assert result.asked == (("role-arn",),)


def _must_not_run(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("AWS must not be touched")


# -- a bad role ARN ------------------------------------------------------------------------------


# -- a confirmation proves the user was asked ----------------------------------------------------


@pytest.mark.anyio
async def test_answers_sent_with_the_first_call_deploy_nothing(client: MemoryClient) -> None:
    call = {
        "name": "deploy_to_aws",
        "arguments": {"stack": STACK},
        "inputResponses": {**ARN, **CONFIRMED},
    }
    first = await client.request("tools/call", call)
    assert first["resultType"] == "input_required"
    assert list(first["inputRequests"]) == ["role-arn"]
    assert no_stacks()


@pytest.mark.anyio
async def test_a_yes_sent_with_the_role_answer_deploys_nothing(client: MemoryClient) -> None:
    # The confirmation counts only as the answer to the question that showed the plan.
    call: Json = {"name": "deploy_to_aws", "arguments": {"stack": STACK}}
    second = await rounds(client, call, {**ARN, **CONFIRMED})
    assert list(second["inputRequests"]) == ["confirm"]
    assert no_stacks()


@pytest.mark.anyio
async def test_a_client_without_elicitation_cannot_deploy_by_pre_answering(aws: None) -> None:
    client = MemoryClient(new_server(), capabilities={})
    call = {
        "name": "deploy_to_aws",
        "arguments": {"stack": STACK},
        "inputResponses": {**ARN, **CONFIRMED},
    }
    with pytest.raises(RpcError) as raised:
        await client.request("tools/call", call)
    assert raised.value.code == -32021
    assert no_stacks()
