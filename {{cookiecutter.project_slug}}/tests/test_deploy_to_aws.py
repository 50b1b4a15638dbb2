"""deploy_to_aws in process: what the tool asks, and that nothing is deployed without a yes.

The MRTR rounds run through MemoryClient; moto (``mock_aws``) stands in for AWS. These tests are
about the handler, the part to copy for a tool of your own: the first round asks both questions
and touches nothing, only a real boolean yes deploys, a bad answer is asked again alone with the
reason, and a yes is bound to the plan it was given for. The change-set engine behind it
(`tools/_cloudformation.py`: updates, retries, waiting, errors, credentials) is maintained and
tested by the mrtr-server template, like the runtime.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

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

# Round 1: both questions at once, key for key and field for field.
ROUND_ONE_REQUESTS: Json = {
    "confirm": {
        "method": "elicitation/create",
        "params": {
            "message": "Deploy stack 'prod-api' to AWS production?",
            "requestedSchema": {
                "type": "object",
                "properties": {"confirmed": {"type": "boolean"}},
                "required": ["confirmed"],
            },
        },
    },
    "role-arn": {
        "method": "elicitation/create",
        "params": {
            "message": "Provide the IAM role ARN to assume:",
            "requestedSchema": {
                "type": "object",
                "properties": {"arn": {"type": "string", "pattern": "^arn:aws:iam::"}},
                "required": ["arn"],
            },
        },
    },
}


def new_server() -> Any:
    return build_server({"MRTR_SIGNING_KEY": secrets.token_hex(32)})


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
    return boto3.client("cloudformation", region_name=REGION)


def no_stacks() -> bool:
    return not cfn().list_stacks()["StackSummaries"]


YES: Json = {
    "confirm": {"action": "accept", "content": {"confirmed": True}},
    "role-arn": {"action": "accept", "content": {"arn": ROLE}},
}


async def two_rounds(client: MemoryClient, call: Json, answers: Json = YES) -> Json:
    """Round 1, then round 2 with `answers` and the echoed requestState, by hand."""
    first = await client.request("tools/call", call)
    assert first["resultType"] == "input_required"
    retry = {**call, "inputResponses": answers, "requestState": first["requestState"]}
    return await client.request("tools/call", retry)


# -- round 1 -------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_first_round_asks_both_questions_at_once_and_touches_nothing(
    client: MemoryClient,
) -> None:
    result = await client.request(
        "tools/call", {"name": "deploy_to_aws", "arguments": {"stack": STACK}}
    )

    assert result["resultType"] == "input_required"
    assert isinstance(result["requestState"], str)
    assert result["inputRequests"] == ROUND_ONE_REQUESTS
    assert list(result["inputRequests"]) == ["confirm", "role-arn"]
    assert cfn().list_stacks()["StackSummaries"] == []


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


# -- deploying -----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_confirmed_deploy_creates_the_stack_from_the_bundled_template(
    client: MemoryClient,
) -> None:
    result = await deploy(client)

    assert not result.is_error, result.text
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
async def test_no_to_the_confirmation_cancels_without_touching_aws(
    client: MemoryClient, monkeypatch: pytest.MonkeyPatch, answer: Json
) -> None:
    monkeypatch.setattr(tool, "run_deploy", _must_not_run)

    result = await deploy(client, answering(confirm=answer))

    assert not result.is_error
    assert result.text == "Deploy cancelled by user."
    assert result.structured == {
        "action": "cancelled",
        "stack": STACK,
        "region": None,
        "stack_id": None,
        "status": None,
        "change_set": None,
        "outputs": {},
    }
    assert cfn().list_stacks()["StackSummaries"] == []


@pytest.mark.anyio
async def test_declining_the_role_question_cancels_too(
    client: MemoryClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tool, "run_deploy", _must_not_run)

    async def elicit(params: Json) -> Json:
        if "confirmed" in params["requestedSchema"]["properties"]:
            return {"action": "accept", "content": {"confirmed": True}}
        return {"action": "decline"}

    result = await deploy(client, elicit)

    assert result.text == "Deploy cancelled by user."


def _must_not_run(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("AWS must not be touched")


# -- a bad role ARN ------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_an_invalid_arn_is_asked_again_alone_with_the_reason(client: MemoryClient) -> None:
    call: Json = {"name": "deploy_to_aws", "arguments": {"stack": STACK}}
    first = await client.request("tools/call", call)

    second = await client.request(
        "tools/call",
        {
            **call,
            "inputResponses": {
                "confirm": {"action": "accept", "content": {"confirmed": True}},
                "role-arn": {"action": "accept", "content": {"arn": "arn:aws:iam::1234:role/x"}},
            },
            "requestState": first["requestState"],
        },
    )

    assert second["resultType"] == "input_required"
    assert list(second["inputRequests"]) == ["role-arn"]
    asked = second["inputRequests"]["role-arn"]["params"]
    assert asked["message"] == (
        "That is not an IAM role ARN: the account ID must be 12 digits. "
        "Provide the IAM role ARN to assume:"
    )
    assert asked["requestedSchema"] == ROUND_ONE_REQUESTS["role-arn"]["params"]["requestedSchema"]

    # Only the corrected answer comes back; the confirmation travels in the requestState.
    third = await client.request(
        "tools/call",
        {
            **call,
            "inputResponses": {"role-arn": {"action": "accept", "content": {"arn": ROLE}}},
            "requestState": second["requestState"],
        },
    )

    assert third["structuredContent"]["action"] == "created"


@pytest.mark.anyio
async def test_a_template_changed_after_the_yes_is_confirmed_again_before_deploying(
    client: MemoryClient, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Deploy exactly what the user confirmed: the yes is bound to a digest of the plan.
    call: Json = {"name": "deploy_to_aws", "arguments": {"stack": STACK}}
    first = await client.request("tools/call", call)
    edited = TEMPLATE.replace("Default: dev\n", "Default: staging\n")
    (tmp_path / "stack.yaml").write_text(edited, encoding="utf-8")
    monkeypatch.setattr(engine, "TEMPLATE_DIR", tmp_path)  # the file changes between rounds

    second = await client.request(
        "tools/call",
        {**call, "inputResponses": YES, "requestState": first["requestState"]},
    )

    assert second["resultType"] == "input_required"
    assert list(second["inputRequests"]) == ["confirm"]  # the role answer still stands
    assert second["inputRequests"]["confirm"]["params"]["message"] == (
        f"The stack's template changed after you confirmed. Deploy stack '{STACK}' to AWS "
        "production?"
    )
    assert no_stacks()
    # A retry without a new answer deploys nothing: the old yes was dropped with the re-ask.
    bare = await client.request("tools/call", {**call, "requestState": second["requestState"]})
    assert list(bare["inputRequests"]) == ["confirm"]
    assert no_stacks()

    third = await client.request(
        "tools/call",
        {
            **call,
            "inputResponses": {"confirm": YES["confirm"]},
            "requestState": second["requestState"],
        },
    )

    assert third["structuredContent"]["action"] == "created"
    stack = cfn().describe_stacks(StackName=STACK)["Stacks"][0]
    environment = {item["ParameterKey"]: item["ParameterValue"] for item in stack["Parameters"]}
    assert environment["Environment"] == "staging"  # the plan confirmed the second time


# -- a confirmation proves the user was asked ----------------------------------------------------


@pytest.mark.anyio
async def test_answers_sent_with_the_first_call_deploy_nothing(client: MemoryClient) -> None:
    call = {"name": "deploy_to_aws", "arguments": {"stack": STACK}, "inputResponses": YES}
    first = await client.request("tools/call", call)
    assert first["resultType"] == "input_required"
    assert sorted(first["inputRequests"]) == ["confirm", "role-arn"]
    assert no_stacks()


@pytest.mark.anyio
async def test_a_client_without_elicitation_cannot_deploy_by_pre_answering(aws: None) -> None:
    client = MemoryClient(new_server(), capabilities={})
    call = {"name": "deploy_to_aws", "arguments": {"stack": STACK}, "inputResponses": YES}
    with pytest.raises(RpcError) as raised:
        await client.request("tools/call", call)
    assert raised.value.code == -32021
    assert no_stacks()


@pytest.mark.anyio
@pytest.mark.parametrize("loose", ["yes", 1, "true", 1.0])
async def test_a_loosely_typed_yes_is_asked_again_and_deploys_nothing(
    client: MemoryClient, loose: object
) -> None:
    answers = {**YES, "confirm": {"action": "accept", "content": {"confirmed": loose}}}
    call = {"name": "deploy_to_aws", "arguments": {"stack": STACK}}
    result = await two_rounds(client, call, answers)
    assert result["resultType"] == "input_required"
    assert list(result["inputRequests"]) == ["confirm"]
    message = result["inputRequests"]["confirm"]["params"]["message"]
    assert "not valid (confirmed: Input should be a valid boolean" in message
    assert no_stacks()


@pytest.mark.anyio
async def test_a_legacy_user_who_declines_is_not_asked_for_the_role(aws: None) -> None:
    legacy = MemoryClient(
        new_server(),
        elicitation=answering(confirm={"action": "decline"}),
    )
    await legacy.initialize()
    result = await legacy.call_tool("deploy_to_aws", {"stack": STACK})
    assert result.text == "Deploy cancelled by user."
    assert [request["params"] for request in legacy.server_requests] == [
        ROUND_ONE_REQUESTS["confirm"]["params"]
    ]
