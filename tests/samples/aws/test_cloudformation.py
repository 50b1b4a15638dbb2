"""The AWS sample's change-set engine (`tools/_cloudformation.py`) and what deploy_to_aws does
with it: creates, updates, no-op deploys, retries, progress, waiting, AWS errors, cancels,
credentials kept out of results and logs.

moto (``mock_aws``) stands in for AWS. Where moto cannot reach a state (a busy stack, a
change set AWS marks FAILED, outputs of a change-set deploy) the engine is driven with
botocore's Stubber, which checks every call and response against the real API model.

Part of the template's samples suite: it runs with a baked project's python against its
package (``MRTR_PACKAGE``). The handler's own tests (what it asks, and that nothing deploys
without a yes) stay in the project, in ``tests/test_deploy_to_aws.py``.
"""

from __future__ import annotations

import importlib
import json
import os
import secrets
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import boto3
import botocore.client
import pytest
from botocore.exceptions import ClientError
from botocore.stub import ANY, Stubber
from moto import mock_aws
from moto.cloudformation.models import cloudformation_backends

PACKAGE = os.environ["MRTR_PACKAGE"]
app = importlib.import_module(f"{PACKAGE}.app")
build_server = app.build_server
runtime = importlib.import_module(f"{PACKAGE}.mrtr_runtime")
testing = importlib.import_module(f"{PACKAGE}.mrtr_runtime.testing")
engine = importlib.import_module(f"{PACKAGE}.tools._cloudformation")
tool = importlib.import_module(f"{PACKAGE}.tools.deploy_to_aws")
RequestCancelled, ToolError = runtime.RequestCancelled, runtime.ToolError
MemoryClient, RpcError = testing.MemoryClient, testing.RpcError

BOUND = 10  # seconds; every test that waits on a task or a thread is bounded
#: A whole deploy through every round (the questions read AWS as the role, too), on moto.
DEPLOY_BOUND = 60
REGION = "us-east-1"
ACCOUNT = "123456789012"  # moto's default account: the role lives there, so do the stacks
ROLE = f"arn:aws:iam::{ACCOUNT}:role/Deployer"
# The distribution whose `aws` extra has boto3: the project's slug, also the server's name.
PROJECT = app.PROJECT.name
STACK = "prod-api"
TEMPLATE = engine.load_template("stack.yaml")

Json = dict[str, Any]
Elicit = Callable[[Json], Awaitable[Json]]

FORMS: Json = {"elicitation": {"form": {}}}

# The two questions: the role (round 1), then a yes to the resolved plan (round 2).
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


def new_server(key: str | None = None) -> Any:
    # A task store of its own: what one server records, another does not see.
    settings = {"MRTR_SIGNING_KEY": key or secrets.token_hex(32), "MRTR_TASK_STORE": "memory:"}
    return build_server(settings)


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


async def deploy(client: MemoryClient, elicit: Elicit | None = None, **arguments: Any) -> Any:
    """deploy_to_aws through every round on `client`'s server, answered by `elicit`: the
    runtime's ToolCallResult (.text, .structured, .is_error)."""
    arguments.setdefault("stack", STACK)
    asking = MemoryClient(
        client.server, capabilities=client.capabilities, elicitation=elicit or answering()
    )
    return await asking.call_tool("deploy_to_aws", arguments)


def cfn() -> Any:
    return engine.aws_session(boto3).client("cloudformation", region_name=REGION)


def stack_events(name: str = STACK) -> int:
    return len(cfn().describe_stack_events(StackName=name)["StackEvents"])


def moto_stack(name: str = STACK) -> Any:
    stacks = cloudformation_backends[ACCOUNT][REGION].stacks.values()
    return next(stack for stack in stacks if stack.name == name)


def no_stacks() -> bool:
    return not cfn().list_stacks()["StackSummaries"]


def text_of(result: Any) -> str:
    """The text of a wire result (a dict) or of call_tool's result."""
    if isinstance(result, dict):
        return "".join(block["text"] for block in result["content"])
    text: str = result.text
    return text


YES: tuple[Json, Json] = (
    {"role-arn": {"action": "accept", "content": {"arn": ROLE}}},
    {"confirm": {"action": "accept", "content": {"confirmed": True}}},
)


async def two_rounds(client: MemoryClient, call: Json, answers: tuple[Json, ...] = YES) -> Json:
    """The first call, then one retry per set of `answers` (the role, then the yes), by hand,
    each echoing the last requestState: the call's last answer."""
    result = await client.request("tools/call", call)
    for given in answers:
        assert result["resultType"] == "input_required", result
        retry = {**call, "inputResponses": given, "requestState": result["requestState"]}
        result = await client.request("tools/call", retry)
    return result


def progress_meta(client: MemoryClient, token: str | int) -> Json:
    return {
        "io.modelcontextprotocol/protocolVersion": client.protocol_version,
        "io.modelcontextprotocol/clientCapabilities": client.capabilities,
        "progressToken": token,
    }


# -- the legacy bridge -----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_legacy_client_is_asked_with_real_elicitation_requests(aws: None) -> None:
    legacy = MemoryClient(new_server(), elicitation=answering())
    await legacy.initialize()  # 2025-11-25: the server bridges input rounds to real requests

    result = await legacy.request(
        "tools/call", {"name": "deploy_to_aws", "arguments": {"stack": STACK}}
    )

    asked = [request["params"] for request in legacy.server_requests]
    assert asked[0] == ROLE_REQUEST["params"]
    assert asked[1]["message"].startswith(f"Create stack '{STACK}' in account {ACCOUNT}, ")
    assert len(asked) == 2
    assert result["structuredContent"]["action"] == "created"


@pytest.mark.anyio
async def test_a_legacy_client_without_elicitation_gets_an_error_result(aws: None) -> None:
    legacy = MemoryClient(new_server(), capabilities={})
    await legacy.initialize()

    result = await legacy.request(
        "tools/call", {"name": "deploy_to_aws", "arguments": {"stack": STACK}}
    )

    assert result["isError"] is True
    assert "elicitation" in text_of(result)
    assert cfn().list_stacks()["StackSummaries"] == []


# -- deploying -------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_stack_is_deployed_with_the_assumed_roles_credentials(
    client: MemoryClient,
) -> None:
    other = "arn:aws:iam::111122223333:role/Deployer"

    result = await deploy(client, answering(arn=other))

    assert result.structured["action"] == "created"
    assert ":111122223333:stack/" in result.structured["stack_id"]
    # moto switches accounts with the role: the caller's own account has no such stack.
    assert cfn().list_stacks()["StackSummaries"] == []


@pytest.mark.anyio
async def test_a_changed_parameter_updates_the_stack(client: MemoryClient) -> None:
    await deploy(client)

    result = await deploy(client, parameters={"Environment": "prod"})

    assert result.structured["action"] == "updated"
    assert result.structured["status"] == "UPDATE_COMPLETE"
    assert text_of(result).startswith(f"Updated stack '{STACK}'")
    stack = cfn().describe_stacks(StackName=STACK)["Stacks"][0]
    assert {item["ParameterKey"]: item["ParameterValue"] for item in stack["Parameters"]} == {
        "Environment": "prod",
        "MessageRetentionSeconds": "345600",
    }


@pytest.mark.anyio
async def test_the_same_arguments_again_deploy_nothing(client: MemoryClient) -> None:
    first = await deploy(client, parameters={"Environment": "staging"})
    events = stack_events()

    again = await deploy(client, parameters={"Environment": "staging"})

    assert not again.is_error
    assert again.structured["action"] == "unchanged"
    assert "already up to date" in text_of(again)
    assert again.structured["stack_id"] == first.structured["stack_id"]
    assert again.structured["change_set"] == first.structured["change_set"]
    assert stack_events() == events


@pytest.mark.anyio
async def test_spelling_out_a_default_is_the_same_deploy(client: MemoryClient) -> None:
    first = await deploy(client)

    again = await deploy(client, parameters={"Environment": "dev"})

    assert again.structured["action"] == "unchanged"
    assert again.structured["change_set"] == first.structured["change_set"]


def executed_change_sets(name: str = STACK) -> int:
    summaries = cfn().list_change_sets(StackName=name)["Summaries"]
    return sum(item["ExecutionStatus"] == "EXECUTE_COMPLETE" for item in summaries)


async def confirmation(client: MemoryClient, arguments: Json) -> Json:
    """The confirming round of a deploy of `arguments` (to replay it), once it has run."""
    call: Json = {"name": "deploy_to_aws", "arguments": arguments}
    second = await two_rounds(client, call, YES[:1])
    retry: Json = {**call, "inputResponses": YES[1], "requestState": second["requestState"]}
    done = await client.request("tools/call", retry)
    assert done["resultType"] == "complete", done
    return retry


@pytest.mark.anyio
async def test_a_replayed_confirmation_on_a_server_without_its_record_deploys_nothing(
    aws: None,
) -> None:
    # The stateless half of "confirmed once", where no record of the run is shared (another
    # server with the same key and a store of its own): the stack already is the plan
    # confirmed, so the replay finds nothing to do.
    key = secrets.token_hex(32)
    here = MemoryClient(new_server(key), capabilities=FORMS)
    elsewhere = MemoryClient(new_server(key), capabilities=FORMS)
    retry = await confirmation(here, {"stack": STACK})
    events = stack_events()

    again = await elsewhere.request("tools/call", retry)  # same token, same answers

    assert again["structuredContent"]["action"] == "unchanged"
    assert "already up to date" in text_of(again)
    assert stack_events() == events
    assert executed_change_sets() == 1


@pytest.mark.anyio
async def test_a_confirmation_replayed_after_a_later_deploy_gets_its_own_outcome(
    aws: None,
) -> None:
    # The rollback, where the round's record is shared: confirm staging, then prod;
    # the staging round sent again is answered from its record (what it did then), and
    # neither runs nor asks anything (single use, before the handler runs).
    key = secrets.token_hex(32)
    here = MemoryClient(new_server(key), capabilities=FORMS)
    staging = await confirmation(here, {"stack": STACK, "parameters": {"Environment": "staging"}})
    first = await here.request("tools/call", staging)
    await confirmation(here, {"stack": STACK, "parameters": {"Environment": "prod"}})
    events = stack_events()

    again = await here.request("tools/call", staging)

    assert again == first
    assert again["structuredContent"]["action"] == "created"
    assert stack_events() == events
    assert executed_change_sets() == 2
    stack = cfn().describe_stacks(StackName=STACK)["Stacks"][0]
    assert {"ParameterKey": "Environment", "ParameterValue": "prod"} in stack["Parameters"]


@pytest.mark.anyio
async def test_a_confirmation_replayed_after_a_later_deploy_elsewhere_asks_again(
    aws: None,
) -> None:
    # Where the record is not shared (another server with a store of its own), the rollback
    # is still never silent: the stack changed since the yes, so the question comes back.
    key = secrets.token_hex(32)
    here = MemoryClient(new_server(key), capabilities=FORMS)
    replayer = MemoryClient(new_server(key), capabilities=FORMS)
    staging = await confirmation(here, {"stack": STACK, "parameters": {"Environment": "staging"}})
    await confirmation(here, {"stack": STACK, "parameters": {"Environment": "prod"}})
    events = stack_events()

    again = await replayer.request("tools/call", staging)

    assert again["resultType"] == "input_required"
    assert list(again["inputRequests"]) == ["confirm"]
    lines = again["inputRequests"]["confirm"]["params"]["message"].splitlines()
    assert lines[0] == f"Changed since your yes: update '{STACK}' in {ACCOUNT}, {REGION}?"
    assert lines[3] == (
        "Why again: The stack changed after you confirmed (it did not exist); check the plan again."
    )
    assert lines[5].startswith("Stack now: UPDATE_COMPLETE, last changed ")
    assert stack_events() == events
    assert executed_change_sets() == 2
    stack = cfn().describe_stacks(StackName=STACK)["Stacks"][0]
    assert {"ParameterKey": "Environment", "ParameterValue": "prod"} in stack["Parameters"]


@pytest.mark.anyio
async def test_progress_relays_the_deploy_steps_and_stack_events(client: MemoryClient) -> None:
    call: Json = {
        "name": "deploy_to_aws",
        "arguments": {"stack": STACK},
        "_meta": progress_meta(client, "deploy-1"),
    }

    await two_rounds(client, call)

    params = [note["params"] for note in client.notifications]
    assert {note["method"] for note in client.notifications} == {"notifications/progress"}
    assert {entry["progressToken"] for entry in params} == {"deploy-1"}
    values = [entry["progress"] for entry in params]
    assert values == sorted(set(values))
    messages = [entry["message"] for entry in params]
    assert messages[0] == f"Assuming role {ROLE}"
    assert any(message.startswith("Creating change set mrtr-") for message in messages)
    assert f"{STACK} (AWS::CloudFormation::Stack): CREATE_COMPLETE" in messages


@pytest.mark.anyio
async def test_other_requests_are_served_while_a_deploy_runs(
    client: MemoryClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    started, release = anyio.Event(), threading.Event()
    real_run_deploy = engine.run_deploy

    def slow_run_deploy(*args: Any, **kwargs: Any) -> Any:
        anyio.from_thread.run_sync(started.set)
        assert release.wait(DEPLOY_BOUND)
        return real_run_deploy(*args, **kwargs)

    monkeypatch.setattr(tool, "run_deploy", slow_run_deploy)
    results: list[Any] = []

    async def run() -> None:
        results.append(await deploy(client))

    with anyio.fail_after(DEPLOY_BOUND):
        async with anyio.create_task_group() as group:
            group.start_soon(run)
            await started.wait()
            listed = await client.request("tools/list", {})
            assert not results  # the deploy is still blocked in its worker thread
            release.set()

    assert any(entry["name"] == "deploy_to_aws" for entry in listed["tools"])
    assert results[0].structured["action"] == "created"


# -- the plan's digest and the role ARN ------------------------------------------------------------


def test_the_digest_covers_everything_the_deploy_would_do() -> None:
    plan = engine.StackPlan(STACK, TEMPLATE, {"Environment": "dev"})
    same = engine.StackPlan(STACK, TEMPLATE, {"Environment": "dev"})
    others = [
        engine.StackPlan("other", TEMPLATE, {"Environment": "dev"}),
        engine.StackPlan(STACK, TEMPLATE + "\n", {"Environment": "dev"}),
        engine.StackPlan(STACK, TEMPLATE, {"Environment": "prod"}),
        engine.StackPlan(STACK, TEMPLATE, {"Environment": "dev"}, ("CAPABILITY_IAM",)),
    ]

    def digest(plan: Any, role_arn: str = ROLE, region: str = REGION) -> str:
        return str(tool.digest(plan, role_arn=role_arn, region=region))

    assert digest(plan) == digest(same)
    variants = {
        *map(digest, others),
        digest(plan, role_arn=ROLE.replace(ACCOUNT, "111122223333")),
        digest(plan, region="eu-west-1"),
    }
    assert len({digest(plan), *variants}) == 1 + len(others) + 2


@pytest.mark.parametrize(
    ("arn", "reason"),
    [
        ("Deployer", "it is not an ARN"),
        ("arn:aws:iam::123456789012", "it is not an ARN"),
        ("arn:azure:iam::123456789012:role/Deployer", "the partition must be"),
        ("arn:aws:sts::123456789012:assumed-role/Deployer/s", "it is not an IAM ARN"),
        ("arn:aws:iam:us-east-1:123456789012:role/Deployer", "it is not an IAM ARN"),
        ("arn:aws:iam::12345678901x:role/Deployer", "the account ID must be 12 digits"),
        ("arn:aws:iam::123456789012:user/alice", "it names an IAM 'user', not a role"),
        ("arn:aws:iam::123456789012:role/", "characters IAM does not allow"),
        ("arn:aws:iam::123456789012:role/bad name", "characters IAM does not allow"),
        ("arn:aws:iam::123456789012:role/" + "r" * 65, "characters IAM does not allow"),
    ],
)
def test_role_arn_problem_says_what_is_wrong(arn: str, reason: str) -> None:
    problem = engine.role_arn_problem(arn)

    assert problem is not None
    assert reason in problem


@pytest.mark.parametrize(
    "arn",
    [
        "arn:aws:iam::123456789012:role/Deployer",
        "arn:aws-cn:iam::123456789012:role/Deployer",
        "arn:aws-us-gov:iam::123456789012:role/Deployer",
        "arn:aws:iam::123456789012:role/team/ci/Deploy+er=,.@-_1",
        "arn:aws:iam::123456789012:role/" + "r" * 64,
    ],
)
def test_role_arns_of_every_partition_and_with_paths_are_accepted(arn: str) -> None:
    assert engine.role_arn_problem(arn) is None


# -- errors ----------------------------------------------------------------------------------------


def failing(monkeypatch: pytest.MonkeyPatch, operation: str, code: str, message: str) -> list[str]:
    """Make every boto3 call of `operation` fail with an AWS error; returns the calls seen."""
    real = botocore.client.BaseClient._make_api_call
    seen: list[str] = []

    def make_api_call(self: Any, operation_name: str, api_params: Any) -> Any:
        seen.append(operation_name)
        if operation_name == operation:
            error = {"Error": {"Code": code, "Message": message}}
            raise ClientError(error, operation_name)
        return real(self, operation_name, api_params)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", make_api_call)
    return seen


@pytest.mark.anyio
async def test_access_denied_is_an_error_result_with_the_aws_code_and_message(
    client: MemoryClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    denied = f"User is not authorized to perform: sts:AssumeRole on resource: {ROLE}"
    seen = failing(monkeypatch, "AssumeRole", "AccessDenied", denied)

    result = await deploy(client)

    assert result.is_error
    assert text_of(result) == f"AWS AssumeRole failed: AccessDenied: {denied}"
    assert "CreateChangeSet" not in seen


@pytest.mark.anyio
async def test_throttling_is_an_error_result_and_leaves_nothing_behind(
    client: MemoryClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    failing(monkeypatch, "CreateChangeSet", "Throttling", "Rate exceeded")

    result = await deploy(client)

    assert result.is_error
    assert text_of(result) == "AWS CreateChangeSet failed: Throttling: Rate exceeded"
    assert cfn().list_stacks()["StackSummaries"] == []


@pytest.mark.anyio
async def test_a_template_cloudformation_rejects_is_an_error_result(
    client: MemoryClient, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "broken.yaml").write_text(
        TEMPLATE.replace(
            "Value: !Ref Queue\n      Description", "Value: !GetAtt Queue.Nope\n      D"
        ),
        encoding="utf-8",
    )
    monkeypatch.setattr(engine, "TEMPLATE_DIR", tmp_path)

    result = await deploy(client, template="broken.yaml")

    assert result.is_error
    assert text_of(result).startswith(
        "AWS ExecuteChangeSet failed: ValidationError: Template error"
    )
    assert "Nope" in text_of(result)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"parameters": {"Nope": "x"}}, "The template has no parameter Nope; it declares: "),
        ({"template": "missing.yaml"}, "No template named 'missing.yaml'"),
        ({"template": "../../app.py"}, "No template named '../../app.py'"),
    ],
    ids=["unknown-parameter", "unknown-template", "path-traversal"],
)
async def test_arguments_the_deploy_cannot_use_are_error_results(
    client: MemoryClient, arguments: Json, message: str
) -> None:
    result = await deploy(client, **arguments)

    assert result.is_error
    assert message in text_of(result)
    assert cfn().list_stacks()["StackSummaries"] == []


@pytest.mark.anyio
async def test_a_template_parameter_without_default_must_be_given(
    client: MemoryClient, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "strict.yaml").write_text(
        TEMPLATE.replace("    Default: dev\n", ""), encoding="utf-8"
    )
    monkeypatch.setattr(engine, "TEMPLATE_DIR", tmp_path)

    missing = await deploy(client, template="strict.yaml")
    given = await deploy(client, template="strict.yaml", parameters={"Environment": "prod"})

    assert missing.is_error
    assert "Environment have no default; pass them in `parameters`" in text_of(missing)
    assert given.structured["action"] == "created"


@pytest.mark.anyio
async def test_a_failed_create_left_in_rollback_complete_is_replaced(client: MemoryClient) -> None:
    first = await deploy(client)
    moto_stack().status = "ROLLBACK_COMPLETE"

    result = await deploy(client)

    assert result.structured["action"] == "created"
    assert result.structured["stack_id"] != first.structured["stack_id"]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("status", "message"),
    [
        ("UPDATE_IN_PROGRESS", "is busy (UPDATE_IN_PROGRESS); try again once"),
        ("UPDATE_ROLLBACK_FAILED", "is in UPDATE_ROLLBACK_FAILED and cannot be updated"),
    ],
)
async def test_a_stack_that_cannot_take_a_deploy_is_an_error_result(
    client: MemoryClient, status: str, message: str
) -> None:
    await deploy(client)
    moto_stack().status = status
    events = stack_events()

    result = await deploy(client, parameters={"Environment": "prod"})

    assert result.is_error
    assert message in text_of(result)
    assert stack_events() == events


@pytest.mark.anyio
async def test_without_boto3_the_tool_names_the_extra_to_install(
    client: MemoryClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "boto3", None)  # import boto3 -> ImportError

    result = await client.request(
        "tools/call", {"name": "deploy_to_aws", "arguments": {"stack": STACK}}
    )

    assert result["isError"] is True
    assert text_of(result) == (
        f"deploy_to_aws needs boto3, which is not installed: pip install '{PROJECT}[aws]'"
    )


def test_the_server_starts_without_importing_boto3(tmp_path: Path) -> None:
    package = importlib.import_module(tool.__name__.partition(".")[0])
    code = (
        "import sys\n"
        f"from {package.__name__}.app import build_server\n"
        f"server = build_server(dict(MRTR_SIGNING_KEY={secrets.token_hex(32)!r}))\n"
        "server.warm_up()\n"
        "assert 'deploy_to_aws' in server.registry.tools\n"
        "assert 'boto3' not in sys.modules and 'botocore' not in sys.modules, 'imported early'\n"
    )
    src = str(Path(package.__file__ or "").resolve().parents[1])
    completed = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": src, "PATH": os.defpath, "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        check=False,
    )

    assert completed.returncode == 0, completed.stderr


@pytest.mark.anyio
async def test_credentials_never_reach_results_progress_or_logs(
    client: MemoryClient, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("DEBUG")
    issued: list[engine.AwsCredentials] = []
    leak = threading.Event()
    real_assume_role = engine.assume_role

    def spy(*args: Any, **kwargs: Any) -> engine.AwsCredentials:
        credentials = real_assume_role(*args, **kwargs)
        issued.append(credentials)
        if leak.is_set():  # an AWS error quoting the signed request, as SignatureDoesNotMatch does
            quoted = f"x-amz-security-token:{credentials.session_token}"
            failing(monkeypatch, "CreateChangeSet", "SignatureDoesNotMatch", quoted)
        return credentials

    monkeypatch.setattr(engine, "assume_role", spy)
    call: Json = {"name": "deploy_to_aws", "_meta": progress_meta(client, 7)}

    deployed = await two_rounds(client, {**call, "arguments": {"stack": STACK}})
    leak.set()
    failed = await two_rounds(client, {**call, "arguments": {"stack": "other-api"}})

    assert deployed["structuredContent"]["action"] == "created"
    assert client.notifications
    assert failed["isError"] is True
    assert text_of(failed) == (
        "AWS CreateChangeSet failed: SignatureDoesNotMatch: x-amz-security-token:[redacted]"
    )
    everything = json.dumps([deployed, failed, client.notifications]) + caplog.text
    # Each confirmation reads the stack as the role, and so does the deploy: all redacted.
    assert len(issued) >= 2
    for credentials in issued:
        assert repr(credentials) == "AwsCredentials(<redacted>)"
        for secret in credentials.secrets():
            assert secret not in everything


# -- the AWS half on its own: states moto cannot reach, checked with botocore's Stubber ------------

NOW = datetime(2026, 7, 28, tzinfo=UTC)
STACK_ID = f"arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/{STACK}/11111111-2222"
SUMMARY: Json = {
    "Parameters": [
        {"ParameterKey": "Environment", "DefaultValue": "dev", "NoEcho": False},
        {"ParameterKey": "Password", "NoEcho": True},
    ]
}
PLAN = engine.StackPlan(STACK, TEMPLATE, {"Password": "hunter2"})
RESOLVED = {"Environment": "dev", "Password": "hunter2"}
NAME = engine.change_set_name(TEMPLATE, RESOLVED, secret_keys=frozenset({"Password"}))
CHANGE_SET_ID = f"arn:aws:cloudformation:{REGION}:{ACCOUNT}:changeSet/{NAME}/33333333"


def stack_response(status: str, **extra: Any) -> Json:
    stack = {"StackId": STACK_ID, "StackName": STACK, "CreationTime": NOW, "StackStatus": status}
    return {"Stacks": [{**stack, **extra}]}


def events_response(*entries: tuple[str, str, str, str | None]) -> Json:
    events = []
    for event_id, logical_id, status, reason in entries:
        event = {
            "StackId": STACK_ID,
            "EventId": event_id,
            "StackName": STACK,
            "LogicalResourceId": logical_id,
            "ResourceType": "AWS::SQS::Queue",
            "Timestamp": NOW,
            "ResourceStatus": status,
        }
        if reason is not None:
            event["ResourceStatusReason"] = reason
        events.append(event)
    return {"StackEvents": events}


def not_found(stubber: Stubber) -> None:
    stubber.add_client_error(
        "describe_stacks",
        service_error_code="ValidationError",
        service_message=f"Stack with id {STACK} does not exist",
        http_status_code=400,
    )


class Recorder:
    def __init__(self) -> None:
        self.messages: list[str] = []
        self.sleeps: list[float] = []

    def progress(self, message: str) -> None:
        self.messages.append(message)

    def policy(self, budget: float = 100.0) -> engine.WaitPolicy:
        return engine.WaitPolicy(delay_seconds=5.0, budget_seconds=budget, sleep=self.sleeps.append)


@pytest.fixture
def stubbed() -> Iterator[tuple[Any, Stubber]]:
    client = engine.aws_session(boto3).client(
        "cloudformation",
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


def test_a_create_waits_relays_events_and_collects_outputs(
    stubbed: tuple[Any, Stubber],
) -> None:
    client, stubber = stubbed
    record = Recorder()
    stubber.add_response("get_template_summary", SUMMARY, {"TemplateBody": TEMPLATE})
    not_found(stubber)
    stubber.add_response(
        "create_change_set",
        {"Id": CHANGE_SET_ID, "StackId": STACK_ID},
        {
            "StackName": STACK,
            "ChangeSetName": NAME,
            "ChangeSetType": "CREATE",
            "TemplateBody": TEMPLATE,
            "Parameters": [
                {"ParameterKey": "Environment", "ParameterValue": "dev"},
                {"ParameterKey": "Password", "ParameterValue": "hunter2"},
            ],
            "Capabilities": [],
            "Description": "deploy_to_aws (MCP tool)",
            "ClientToken": engine._token("mrtr-cs", NAME, STACK, "", ""),
            "OnStackFailure": "DELETE",
        },
    )
    stubber.add_response(
        "describe_change_set",
        {"ChangeSetId": CHANGE_SET_ID, "Status": "CREATE_COMPLETE", "ExecutionStatus": "AVAILABLE"},
        {"ChangeSetName": CHANGE_SET_ID},
    )
    stubber.add_response("describe_stack_events", events_response(("e0", STACK, "REVIEW", None)))
    stubber.add_response(
        "execute_change_set",
        {},
        {
            "ChangeSetName": CHANGE_SET_ID,
            "ClientRequestToken": engine._token("mrtr-exec", CHANGE_SET_ID),
        },
    )
    stubber.add_response(
        "describe_stack_events",
        events_response(("e1", "Queue", "CREATE_IN_PROGRESS", None), ("e0", STACK, "REVIEW", None)),
    )
    stubber.add_response("describe_stacks", stack_response("CREATE_IN_PROGRESS"))
    stubber.add_response(
        "describe_stack_events",
        events_response(
            ("e2", "Queue", "CREATE_COMPLETE", None),
            ("e1", "Queue", "CREATE_IN_PROGRESS", None),
        ),
    )
    stubber.add_response(
        "describe_stacks",
        stack_response(
            "CREATE_COMPLETE", Outputs=[{"OutputKey": "QueueUrl", "OutputValue": "https://q"}]
        ),
    )

    outcome = engine.deploy_stack(client, PLAN, progress=record.progress, waits=record.policy())

    assert outcome == engine.DeployOutcome(
        "created", STACK_ID, "CREATE_COMPLETE", NAME, {"QueueUrl": "https://q"}
    )
    assert record.messages == [
        f"Creating change set {NAME}",
        f"Executing change set {NAME}",
        "Queue (AWS::SQS::Queue): CREATE_IN_PROGRESS",
        "Queue (AWS::SQS::Queue): CREATE_COMPLETE",
    ]
    assert record.sleeps == [5.0]


def test_noecho_values_stay_out_of_the_change_set_name() -> None:
    secret = frozenset({"Password"})

    assert engine.change_set_name(TEMPLATE, {"Password": "a"}, secret_keys=secret) == (
        engine.change_set_name(TEMPLATE, {"Password": "b"}, secret_keys=secret)
    )
    assert engine.change_set_name(TEMPLATE, {"Password": "a"}) != (
        engine.change_set_name(TEMPLATE, {"Password": "b"})
    )
    assert engine.change_set_name(TEMPLATE, {"A": "1", "B": "2"}) == (
        engine.change_set_name(TEMPLATE, {"B": "2", "A": "1"})
    )
    assert engine.change_set_name(TEMPLATE + "\n", {}) != engine.change_set_name(TEMPLATE, {})


def _existing_stack(stubber: Stubber, status: str = "UPDATE_COMPLETE") -> None:
    stubber.add_response("get_template_summary", SUMMARY, {"TemplateBody": TEMPLATE})
    stubber.add_response(
        "describe_stacks",
        stack_response(
            status,
            Parameters=[
                {"ParameterKey": "Environment", "ParameterValue": "dev"},
                {"ParameterKey": "Password", "ParameterValue": "****"},
            ],
        ),
    )


def _no_leftover_change_set(stubber: Stubber) -> None:
    stubber.add_client_error(
        "describe_change_set", service_error_code="ChangeSetNotFound", http_status_code=404
    )


def test_an_update_cloudformation_finds_empty_is_already_up_to_date(
    stubbed: tuple[Any, Stubber],
) -> None:
    client, stubber = stubbed
    _existing_stack(stubber)
    _no_leftover_change_set(stubber)
    stubber.add_response("create_change_set", {"Id": CHANGE_SET_ID, "StackId": STACK_ID})
    reason = "The submitted information didn't contain changes. Submit different information."
    stubber.add_response(
        "describe_change_set",
        {"ChangeSetId": CHANGE_SET_ID, "Status": "FAILED", "StatusReason": reason},
    )
    stubber.add_response("delete_change_set", {}, {"ChangeSetName": CHANGE_SET_ID})

    outcome = engine.deploy_stack(client, PLAN, waits=Recorder().policy())

    assert outcome.action == "unchanged"
    assert outcome.status == "UPDATE_COMPLETE"


def test_no_updates_are_to_be_performed_is_already_up_to_date(
    stubbed: tuple[Any, Stubber],
) -> None:
    client, stubber = stubbed
    _existing_stack(stubber)
    _no_leftover_change_set(stubber)
    stubber.add_client_error(
        "create_change_set",
        service_error_code="ValidationError",
        service_message="No updates are to be performed.",
    )

    outcome = engine.deploy_stack(client, PLAN, waits=Recorder().policy())

    assert outcome.action == "unchanged"


def test_a_change_set_that_fails_for_another_reason_is_an_error(
    stubbed: tuple[Any, Stubber],
) -> None:
    client, stubber = stubbed
    _existing_stack(stubber)
    _no_leftover_change_set(stubber)
    stubber.add_response("create_change_set", {"Id": CHANGE_SET_ID, "StackId": STACK_ID})
    stubber.add_response(
        "describe_change_set",
        {
            "ChangeSetId": CHANGE_SET_ID,
            "Status": "FAILED",
            "StatusReason": "Requires CAPABILITY_IAM",
        },
    )

    # The failed proposal is taken back; the stack itself is not touched.
    stubber.add_response("delete_change_set", {}, {"ChangeSetName": CHANGE_SET_ID})

    with pytest.raises(ToolError, match=f"Change set {NAME} could not be created: Requires"):
        engine.deploy_stack(client, PLAN, waits=Recorder().policy())
    stubber.assert_no_pending_responses()


def test_a_change_set_that_fails_for_a_new_stack_leaves_no_stack_behind(
    stubbed: tuple[Any, Stubber],
) -> None:
    # A create's change set made a stack to hold it (REVIEW_IN_PROGRESS, no resources): when
    # the change set fails, that stack is deleted too, so the account is as it was.
    client, stubber = stubbed
    stubber.add_response("get_template_summary", SUMMARY, {"TemplateBody": TEMPLATE})
    not_found(stubber)
    stubber.add_response("create_change_set", {"Id": CHANGE_SET_ID, "StackId": STACK_ID})
    stubber.add_response(
        "describe_change_set",
        {
            "ChangeSetId": CHANGE_SET_ID,
            "Status": "FAILED",
            "StatusReason": "Requires CAPABILITY_IAM",
        },
    )
    stubber.add_response("describe_stacks", stack_response("REVIEW_IN_PROGRESS"))
    stubber.add_response("delete_stack", {}, {"StackName": STACK_ID, "ClientRequestToken": ANY})

    with pytest.raises(ToolError, match=f"Change set {NAME} could not be created: Requires"):
        engine.deploy_stack(client, PLAN, waits=Recorder().policy())
    stubber.assert_no_pending_responses()


def test_a_leftover_change_set_of_the_same_name_is_rebuilt_not_executed(
    stubbed: tuple[Any, Stubber],
) -> None:
    client, stubber = stubbed
    leftover = CHANGE_SET_ID.replace("33333333", "00000000")
    _existing_stack(stubber)
    stubber.add_response(
        "describe_change_set",
        {"ChangeSetId": leftover, "StackId": STACK_ID, "ExecutionStatus": "AVAILABLE"},
    )
    stubber.add_response("delete_change_set", {}, {"ChangeSetName": leftover})
    stubber.add_client_error("create_change_set", service_error_code="Throttling")

    with pytest.raises(ClientError, match="Throttling"):
        engine.deploy_stack(client, PLAN, waits=Recorder().policy())


def test_a_create_interrupted_before_its_execution_executes_its_own_change_set(
    stubbed: tuple[Any, Stubber],
) -> None:
    # The process died between CreateChangeSet and ExecuteChangeSet (a task resumed by another
    # process): the stack is only that proposal, named for this very plan. It is executed, not
    # rebuilt: no second proposal, no DeleteChangeSet, no CreateChangeSet.
    client, stubber = stubbed
    _existing_stack(stubber, "REVIEW_IN_PROGRESS")
    stubber.add_response(
        "describe_change_set",
        {
            "ChangeSetId": CHANGE_SET_ID,
            "StackId": STACK_ID,
            "Status": "CREATE_COMPLETE",
            "ExecutionStatus": "AVAILABLE",
            "Capabilities": [],
        },
    )
    stubber.add_response("describe_stack_events", events_response(("e0", STACK, "REVIEW", None)))
    stubber.add_response(
        "execute_change_set",
        {},
        {
            "ChangeSetName": CHANGE_SET_ID,
            "ClientRequestToken": engine._token("mrtr-exec", CHANGE_SET_ID),
        },
    )
    stubber.add_response(
        "describe_stack_events",
        events_response(("e1", "Queue", "CREATE_COMPLETE", None), ("e0", STACK, "REVIEW", None)),
    )
    stubber.add_response("describe_stacks", stack_response("CREATE_COMPLETE"))
    record = Recorder()

    outcome = engine.deploy_stack(client, PLAN, progress=record.progress, waits=record.policy())

    assert outcome.action == "created"
    assert outcome.status == "CREATE_COMPLETE"
    assert record.messages[0] == f"Executing change set {NAME}"
    stubber.assert_no_pending_responses()


def test_an_interrupted_create_whose_change_set_lacks_the_plans_capabilities_is_rebuilt(
    stubbed: tuple[Any, Stubber],
) -> None:
    client, stubber = stubbed
    plan = engine.StackPlan(STACK, TEMPLATE, {"Password": "hunter2"}, ("CAPABILITY_IAM",))
    _existing_stack(stubber, "REVIEW_IN_PROGRESS")
    stubber.add_response(
        "describe_change_set",
        {
            "ChangeSetId": CHANGE_SET_ID,
            "StackId": STACK_ID,
            "Status": "CREATE_COMPLETE",
            "ExecutionStatus": "AVAILABLE",
            "Capabilities": [],
        },
    )
    stubber.add_response("delete_change_set", {}, {"ChangeSetName": CHANGE_SET_ID})
    stubber.add_client_error("create_change_set", service_error_code="Throttling")

    with pytest.raises(ClientError, match="Throttling"):
        engine.deploy_stack(client, plan, waits=Recorder().policy())


def test_a_retry_while_its_change_set_executes_waits_for_it(
    stubbed: tuple[Any, Stubber],
) -> None:
    client, stubber = stubbed
    record = Recorder()
    _existing_stack(stubber, "UPDATE_IN_PROGRESS")
    stubber.add_response(
        "describe_change_set",
        {
            "ChangeSetId": CHANGE_SET_ID,
            "StackId": STACK_ID,
            "ExecutionStatus": "EXECUTE_IN_PROGRESS",
        },
    )
    stubber.add_response("describe_stack_events", events_response(("e1", STACK, "UPDATE", None)))
    stubber.add_response("describe_stack_events", events_response(("e1", STACK, "UPDATE", None)))
    stubber.add_response("describe_stacks", stack_response("UPDATE_COMPLETE"))

    outcome = engine.deploy_stack(client, PLAN, progress=record.progress, waits=record.policy())

    assert outcome.action == "updated"
    assert record.messages == [f"Change set {NAME} is already executing; waiting for it"]


def test_a_failed_update_reports_the_failure_reasons(stubbed: tuple[Any, Stubber]) -> None:
    client, stubber = stubbed
    stubber.add_response(
        "describe_stack_events",
        events_response(
            ("e3", STACK, "UPDATE_ROLLBACK_COMPLETE", None),
            ("e2", "Queue", "UPDATE_FAILED", "Resource handler returned message: denied"),
        ),
    )
    stubber.add_response("describe_stacks", stack_response("UPDATE_ROLLBACK_COMPLETE"))
    deadline = engine._Deadline(Recorder().policy())

    with pytest.raises(ToolError) as raised:
        engine._wait_for_stack(client, STACK_ID, set(), engine._ignore_progress, deadline)

    assert str(raised.value) == (
        f"Deploying stack {STACK_ID} ended in UPDATE_ROLLBACK_COMPLETE: "
        "Queue: Resource handler returned message: denied"
    )


def test_waiting_is_bounded_and_says_how_to_resume(stubbed: tuple[Any, Stubber]) -> None:
    client, stubber = stubbed
    record = Recorder()
    for _ in range(3):  # a 15 s budget at 5 s a poll: three polls, two sleeps
        stubber.add_response("describe_stack_events", events_response())
        stubber.add_response("describe_stacks", stack_response("UPDATE_IN_PROGRESS"))
    deadline = engine._Deadline(record.policy(budget=15.0))

    with pytest.raises(ToolError, match="still UPDATE_IN_PROGRESS after 15 s"):
        engine._wait_for_stack(client, STACK_ID, set(), engine._ignore_progress, deadline)

    assert record.sleeps == [5.0, 5.0]


def test_the_bundled_template_ships_inside_the_package() -> None:
    assert engine.TEMPLATE_DIR.joinpath("stack.yaml").is_file()
    assert "AWS::SQS::Queue" in TEMPLATE
    assert len(TEMPLATE.encode()) < engine.TEMPLATE_BODY_LIMIT


def test_tokens_fit_cloudformations_pattern() -> None:
    token = engine._token("mrtr-exec", CHANGE_SET_ID)

    assert len(token) <= 128
    assert token.replace("-", "").isalnum()
    assert token == engine._token("mrtr-exec", CHANGE_SET_ID)


# -- a cancel stops the deploy ---------------------------------------------------------------------


class CancelAfter:
    """A checkpoint that cancels once progress has said `step`, as a client's cancel would."""

    def __init__(self, step: str) -> None:
        self.step = step
        self.cancelled = False
        self.seen: list[str] = []

    def progress(self, message: str) -> None:
        self.seen.append(message)
        self.cancelled = self.cancelled or message.startswith(self.step)

    def checkpoint(self) -> None:
        if self.cancelled:
            raise RequestCancelled("cancelled")


@pytest.mark.parametrize("step", ["Assuming role", "Creating change set"])
def test_a_cancel_before_the_change_set_leaves_no_stack(aws: None, step: str) -> None:
    cancel = CancelAfter(step)
    plan = engine.StackPlan(STACK, TEMPLATE, {})
    with pytest.raises(RequestCancelled):
        engine.run_deploy(
            plan,
            role_arn=ROLE,
            region=REGION,
            progress=cancel.progress,
            checkpoint=cancel.checkpoint,
        )
    assert no_stacks()
    assert cancel.seen[-1].startswith(step)


def test_a_cancel_before_execution_leaves_the_account_as_it_found_it(aws: None) -> None:
    # A create's change set makes a stack to hold it (REVIEW_IN_PROGRESS, no resources). A
    # cancel before the execution takes both back: no stack is left to explain.
    cancel = CancelAfter("Executing change set")
    plan = engine.StackPlan(STACK, TEMPLATE, {})
    client = cfn()
    calls = recording(client)
    with pytest.raises(RequestCancelled):
        engine.deploy_stack(client, plan, progress=cancel.progress, checkpoint=cancel.checkpoint)
    assert "ExecuteChangeSet" not in calls
    assert calls[-2:] == ["DescribeStacks", "DeleteStack"]
    assert live_stacks() == []


def test_a_cancelled_update_takes_back_its_change_set_and_leaves_the_stack_alone(
    aws: None,
) -> None:
    client = cfn()
    engine.deploy_stack(client, moto_plan())
    before = client.describe_stacks(StackName=STACK)["Stacks"][0]
    cancel = CancelAfter("Executing change set")
    prod = engine.StackPlan(STACK, TEMPLATE, {"Environment": "prod"}, ())
    with pytest.raises(RequestCancelled):
        engine.deploy_stack(client, prod, progress=cancel.progress, checkpoint=cancel.checkpoint)
    after = client.describe_stacks(StackName=STACK)["Stacks"][0]
    assert after == before
    statuses = [
        item["ExecutionStatus"] for item in client.list_change_sets(StackName=STACK)["Summaries"]
    ]
    assert statuses == ["EXECUTE_COMPLETE"]  # the first deploy's; the cancelled one is gone


def live_stacks() -> list[str]:
    """Every stack moto holds that is not deleted."""
    return [
        item["StackName"]
        for item in cfn().list_stacks()["StackSummaries"]
        if item["StackStatus"] != "DELETE_COMPLETE"
    ]


@pytest.mark.anyio
async def test_credentials_in_the_endpoint_url_never_reach_the_result(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # No moto here: nobody listens on the endpoint, and botocore's connection error quotes
    # the URL it tried, user:password@ included.
    for name in ("AWS_PROFILE", "AWS_REGION", "AWS_ROLE_ARN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://deployer:hunter2secret@127.0.0.1:9/")
    client = MemoryClient(new_server(), capabilities=FORMS)
    result = await deploy(client)
    assert result.is_error
    assert "[redacted]@127.0.0.1" in text_of(result)
    assert "hunter2secret" not in json.dumps([result.content, result.structured])


# -- the point of no return: marked right before each call that changes the stack -------------


def recording(client: Any) -> list[str]:
    """The name of every AWS operation `client` calls, in order."""
    calls: list[str] = []

    def before_call(model: Any, **_: Any) -> None:
        calls.append(model.name)

    client.meta.events.register("before-call.cloudformation.*", before_call)
    return calls


def moto_plan(stack: str = STACK) -> Any:
    return engine.StackPlan(stack, TEMPLATE, {"Environment": "dev"}, ())


def test_the_point_of_no_return_comes_right_before_execute_change_set_and_only_there(
    aws: None,
) -> None:
    client = cfn()
    calls = recording(client)
    engine.deploy_stack(client, moto_plan(), commit=lambda: calls.append("COMMIT"))
    assert calls.count("COMMIT") == 1
    assert calls[calls.index("COMMIT") + 1] == "ExecuteChangeSet"
    assert calls.index("CreateChangeSet") < calls.index("COMMIT")  # a proposal changes nothing


def test_the_point_of_no_return_comes_right_before_a_failed_create_is_deleted(aws: None) -> None:
    client = cfn()
    engine.deploy_stack(client, moto_plan())
    moto_stack().status = "ROLLBACK_COMPLETE"
    calls = recording(client)
    engine.deploy_stack(client, moto_plan(), commit=lambda: calls.append("COMMIT"))
    assert calls[calls.index("DeleteStack") - 1] == "COMMIT"
    assert calls[calls.index("ExecuteChangeSet") - 1] == "COMMIT"


def test_a_point_of_no_return_refused_leaves_the_change_set_unexecuted(aws: None) -> None:
    # The request was cancelled before its mark (`ctx.point_of_no_return` raises): the stack
    # gets only the proposal, never its execution.
    def refuse() -> None:
        raise RequestCancelled("cancelled before the point of no return")

    client = cfn()
    calls = recording(client)
    with pytest.raises(RequestCancelled):
        engine.deploy_stack(client, moto_plan(), commit=refuse)
    assert "ExecuteChangeSet" not in calls
    assert (
        client.describe_stacks(StackName=STACK)["Stacks"][0]["StackStatus"] == "REVIEW_IN_PROGRESS"
    )


# -- a deploy resumed after its server stopped past the execution ------------------------------


def test_a_resumed_deploy_that_finds_its_own_execution_done_says_it_was_carried_out(
    aws: None,
) -> None:
    # The task's first run executed the change set, then the server died; the run that took
    # the task over finds the stack already as planned. It must not say "nothing was
    # deployed": this deploy did it.
    client = cfn()
    first = engine.deploy_stack(client, moto_plan())
    calls = recording(client)
    resumed = engine.deploy_stack(client, moto_plan(), resumed=True)
    assert (resumed.action, resumed.by_earlier_run) == ("created", True)
    assert resumed.change_set == first.change_set
    assert "ExecuteChangeSet" not in calls and "CreateChangeSet" not in calls
    text = tool._summarized(
        tool.DeployResult(
            action=resumed.action,
            stack=STACK,
            region="us-east-1",
            stack_id=resumed.stack_id,
            status=resumed.status,
            change_set=resumed.change_set,
            by_earlier_run=True,
        )
    ).content[0]["text"]
    assert text.startswith(f"Created stack '{STACK}' in us-east-1: CREATE_COMPLETE. This task's")
    assert "earlier run did it before the server stopped" in text
    # A run that is not resumed (a new call with the same arguments) is "already up to date".
    assert engine.deploy_stack(client, moto_plan()).action == "unchanged"


@pytest.mark.anyio
async def test_a_confirmation_replayed_while_its_change_set_is_under_review_gets_its_task(
    aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The deploy runs as a task; its change set exists and the stack is REVIEW_IN_PROGRESS
    # (held there before the execution). The same confirmation sent again, with extra
    # fields, gets the same task and no question: before, the handler ran first, saw a stack
    # it did not show the user, and asked again.
    under_review = threading.Event()
    go_on = threading.Event()
    execute = engine._execute

    def held(*args: Any, **kwargs: Any) -> Any:
        under_review.set()
        assert go_on.wait(30)
        return execute(*args, **kwargs)

    monkeypatch.setattr(engine, "_execute", held)
    client = MemoryClient(new_server(), capabilities=FORMS, tasks=True)
    call: Json = {"name": "deploy_to_aws", "arguments": {"stack": STACK}}
    second = await two_rounds(client, call, YES[:1])
    confirming = {**call, "inputResponses": YES[1], "requestState": second["requestState"]}
    made = await client.request("tools/call", confirming)
    assert made["resultType"] == "task"
    for _ in range(3000):
        if under_review.is_set():
            break
        await anyio.sleep(0.01)
    assert moto_stack().status == "REVIEW_IN_PROGRESS"
    extra = {
        **confirming,
        "inputResponses": {"confirm": {"action": "accept", "content": {"confirmed": True, "x": 1}}},
    }
    try:
        for replay in (confirming, extra):
            again = await client.request("tools/call", replay)
            assert again["resultType"] == "task", again
            assert again["taskId"] == made["taskId"]
            assert "inputRequests" not in again
    finally:
        go_on.set()
    for _ in range(1500):
        task = await client.request("tasks/get", {"taskId": made["taskId"]})
        if task["status"] != "working":
            break
        await anyio.sleep(0.02)
    assert task["status"] == "completed"
    assert task["result"]["structuredContent"]["action"] == "created"
    assert executed_change_sets() == 1
