"""deploy_to_aws in process, beyond the pattern a project keeps: every way a plan is shown, the
task's progress and cancel, a yes bound to the role, the stack and the template, a bad ARN asked
again, loosely typed answers, and the 2025-11-25 bridge.

The project's own ``tests/test_deploy_to_aws.py`` keeps the tests of the pattern to copy (what
round 1 asks, the plan's first lines, one deploy inline and as a task, a replay, no, answers sent
ahead): few and fast. These run here, in the template's samples suite, with the
baked project's python against its package (``MRTR_PACKAGE``), on that module's own helpers and
fixtures (loaded from the bake by path), so the two never drift apart.
"""

from __future__ import annotations

import importlib.util
import json
import secrets
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import anyio.from_thread
import pytest

PROJECT = Path.cwd()


def project_tests() -> ModuleType:
    """The bake's tests/test_deploy_to_aws.py, as a module (its tests are not collected here)."""
    path = PROJECT / "tests" / "test_deploy_to_aws.py"
    spec = importlib.util.spec_from_file_location("project_test_deploy_to_aws", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


HANDLER = project_tests()
MemoryClient = HANDLER.MemoryClient
engine = HANDLER.engine
tool = HANDLER.tool
ARN = HANDLER.ARN
BOUND = HANDLER.BOUND
CONFIRMED = HANDLER.CONFIRMED
FORMS = HANDLER.FORMS
Json = HANDLER.Json
PLAN_LINES = HANDLER.PLAN_LINES
ROLE_REQUEST = HANDLER.ROLE_REQUEST
STACK = HANDLER.STACK
TASKS = HANDLER.TASKS
TEMPLATE = HANDLER.TEMPLATE
answering = HANDLER.answering
aws = HANDLER.aws
cfn = HANDLER.cfn
change_sets = HANDLER.change_sets
client = HANDLER.client
deploy = HANDLER.deploy
follow = HANDLER.follow
new_server = HANDLER.new_server
no_stacks = HANDLER.no_stacks
rounds = HANDLER.rounds


@pytest.mark.anyio
async def test_the_plan_shows_given_values_capabilities_and_a_stack_that_exists(
    client: MemoryClient,
) -> None:
    await deploy(client)
    status = cfn().describe_stacks(StackName=STACK)["Stacks"][0]["StackStatus"]
    arguments: Json = {
        "stack": STACK,
        "parameters": {"Environment": "prod", "MessageRetentionSeconds": "60"},
        "capabilities": ["CAPABILITY_IAM", "CAPABILITY_AUTO_EXPAND"],
    }

    second = await rounds(client, {"name": "deploy_to_aws", "arguments": arguments}, ARN)

    lines = second["inputRequests"]["confirm"]["params"]["message"].splitlines()
    assert lines[:3] == [
        f"Update stack '{STACK}' in account 123456789012, us-east-1?",
        "May change IAM (CAPABILITY_IAM), Runs macros (CAPABILITY_AUTO_EXPAND). Template unchanged",
        'Set: Environment="prod" (was "dev"), MessageRetentionSeconds="60" (was "345600")',
    ]
    assert lines[4].startswith(f"Stack now: {status}, last changed 20")
    assert lines[4].endswith("Z")
    assert lines[6] == "Capabilities: CAPABILITY_IAM, CAPABILITY_AUTO_EXPAND"
    assert lines[7] == 'Parameters: Environment="prod", MessageRetentionSeconds="60"'


@pytest.mark.anyio
async def test_resources_deleted_or_replaced_are_among_the_first_things_shown(
    client: MemoryClient, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Claude Code shows 3 lines of a question, each cut at the terminal's width: a deploy that
    # deletes or replaces resources says so there, before anything it merely adds.
    await deploy(client)
    renamed = TEMPLATE.replace("  QueueUrlParameter:\n", "  Published:\n").replace(
        "!Ref QueueUrlParameter\n", "!Ref Published\n"
    )
    replaced = renamed.replace(
        "  Queue:\n    Type: AWS::SQS::Queue", "  Queue:\n    Type: AWS::SNS::Topic"
    )
    (tmp_path / "next.yaml").write_text(replaced, encoding="utf-8")
    monkeypatch.setattr(engine, "TEMPLATE_DIR", tmp_path)
    arguments: Json = {"stack": STACK, "template": "next.yaml"}

    second = await rounds(client, {"name": "deploy_to_aws", "arguments": arguments}, ARN)

    lines = second["inputRequests"]["confirm"]["params"]["message"].splitlines()
    assert lines[:3] == [
        f"Update stack '{STACK}' in account 123456789012, us-east-1?",
        "DELETES 1: QueueUrlParameter. REPLACES 1: Queue. No IAM capabilities. Adds 1: Published",
        "Set: no parameter changes",
    ]
    assert len(lines[1].partition(". No IAM")[0]) <= HANDLER.SHOWN_WIDTH
    assert lines[-3:] == [
        "To delete: QueueUrlParameter (AWS::SSM::Parameter)",
        "To replace: Queue (AWS::SQS::Queue -> AWS::SNS::Topic)",
        "To add: Published (AWS::SSM::Parameter)",
    ]
    assert [item["ExecutionStatus"] for item in change_sets()] == ["EXECUTE_COMPLETE"]


@pytest.mark.anyio
async def test_noecho_parameters_are_masked_in_the_question(
    client: MemoryClient, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    secret_parameter = (
        "  ApiKey:\n    Type: String\n    NoEcho: true\n"
        "  Greeting:\n    Type: String\n    Default: hi\n"
    )
    (tmp_path / "secret.yaml").write_text(
        TEMPLATE.replace("Parameters:\n", "Parameters:\n" + secret_parameter, 1),
        encoding="utf-8",
    )
    monkeypatch.setattr(engine, "TEMPLATE_DIR", tmp_path)
    secret = "s3cr3t-Value-" + secrets.token_hex(8)
    arguments: Json = {
        "stack": STACK,
        "template": "secret.yaml",
        # A newline in a value cannot forge a line of the question: values are JSON-quoted.
        "parameters": {"ApiKey": secret, "Greeting": "hello\nCapabilities: none"},
    }

    second = await rounds(client, {"name": "deploy_to_aws", "arguments": arguments}, ARN)

    message = second["inputRequests"]["confirm"]["params"]["message"]
    assert message.splitlines()[2] == (
        'Set: ApiKey=**** (NoEcho), Greeting="hello\\nCapabilities: none"'
    )
    assert message.splitlines()[7] == (
        'Parameters: ApiKey=**** (NoEcho), Environment="dev" (default), '
        'Greeting="hello\\nCapabilities: none", MessageRetentionSeconds="345600" (default)'
    )
    assert len(message.splitlines()) == len(PLAN_LINES)
    assert secret not in json.dumps(second)


@pytest.mark.anyio
async def test_a_client_without_the_tasks_extension_gets_the_result_inline(
    client: MemoryClient,
) -> None:
    call: Json = {"name": "deploy_to_aws", "arguments": {"stack": STACK}}

    done = await rounds(client, call, ARN, CONFIRMED)

    assert done["resultType"] == "complete"
    assert "taskId" not in done
    assert done["structuredContent"]["action"] == "created"
    assert [item["ExecutionStatus"] for item in change_sets()] == ["EXECUTE_COMPLETE"]


@pytest.mark.anyio
async def test_the_deploys_progress_is_the_tasks_status_message(
    aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    shown, go_on = anyio.Event(), threading.Event()
    real_run_deploy = engine.run_deploy

    def run_deploy(*args: Any, progress: Callable[[str], None], **kwargs: Any) -> Any:
        progress("Waiting for the test")
        anyio.from_thread.run_sync(shown.set)
        assert go_on.wait(BOUND)
        return real_run_deploy(*args, progress=progress, **kwargs)

    monkeypatch.setattr(tool, "run_deploy", run_deploy)
    client = MemoryClient(new_server(), capabilities=TASKS)
    call: Json = {"name": "deploy_to_aws", "arguments": {"stack": STACK}}
    created = await rounds(client, call, ARN, CONFIRMED)
    with anyio.fail_after(BOUND):
        await shown.wait()
        while True:  # the engine writes a status at most every quarter of a second
            task = await client.request("tasks/get", {"taskId": created["taskId"]})
            if task.get("statusMessage") == "Waiting for the test":
                break
            await anyio.sleep(0.05)
    assert task["status"] == "working"
    go_on.set()

    done, seen = await follow(client, created["taskId"])

    assert done["status"] == "completed"
    assert done["result"]["structuredContent"]["action"] == "created"
    assert all(not message.startswith("Deploying stack") for message in seen)  # moved on


@pytest.mark.anyio
async def test_tasks_cancel_stops_the_deploy_before_its_next_aws_write(
    aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    started, go_on = anyio.Event(), threading.Event()
    real_run_deploy = engine.run_deploy

    def run_deploy(*args: Any, **kwargs: Any) -> Any:
        anyio.from_thread.run_sync(started.set)
        assert go_on.wait(BOUND)
        return real_run_deploy(*args, **kwargs)  # its first checkpoint sees the cancel

    monkeypatch.setattr(tool, "run_deploy", run_deploy)
    client = MemoryClient(new_server(), capabilities=TASKS)
    call: Json = {"name": "deploy_to_aws", "arguments": {"stack": STACK}}
    created = await rounds(client, call, ARN, CONFIRMED)
    with anyio.fail_after(BOUND):
        await started.wait()
    acknowledged = await client.request("tasks/cancel", {"taskId": created["taskId"]})
    go_on.set()

    task, _ = await follow(client, created["taskId"])

    assert acknowledged["resultType"] == "complete"
    assert task["status"] == "cancelled"
    assert "result" not in task
    assert no_stacks()


@pytest.mark.anyio
async def test_a_task_whose_template_changed_after_the_yes_deploys_nothing(
    aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The task runs the handler again from the top: if the template it loads is no longer
    # the one confirmed, it stops with the reason instead of deploying the other one.
    edited = TEMPLATE.replace("Default: dev\n", "Default: staging\n")
    looked: list[str] = []
    real_inspect = engine.inspect_plan

    def load_template(name: str) -> str:
        return edited if len(looked) >= 2 else TEMPLATE  # after the confirming round's look

    def inspect_plan(*args: Any, **kwargs: Any) -> Any:
        looked.append("look")
        return real_inspect(*args, **kwargs)

    monkeypatch.setattr(tool, "load_template", load_template)
    monkeypatch.setattr(tool, "inspect_plan", inspect_plan)
    client = MemoryClient(new_server(), capabilities=TASKS)
    call: Json = {"name": "deploy_to_aws", "arguments": {"stack": STACK}}

    created = await rounds(client, call, ARN, CONFIRMED)

    assert created["resultType"] == "task"
    task, _ = await follow(client, created["taskId"])
    assert task["status"] == "completed"
    assert task["result"]["isError"] is True
    assert task["result"]["content"][0]["text"].startswith(
        f"The plan for stack '{STACK}' changed after it was confirmed"
    )
    assert no_stacks()


@pytest.mark.anyio
async def test_call_tool_follows_the_task_to_its_result(aws: None) -> None:
    client = MemoryClient(new_server(), capabilities=FORMS, tasks=True)

    result = await deploy(client)

    assert not result.is_error, result.text
    assert result.structured["action"] == "created"
    assert [item["ExecutionStatus"] for item in change_sets()] == ["EXECUTE_COMPLETE"]


@pytest.mark.anyio
async def test_the_role_shown_is_the_role_the_deploy_assumes(client: MemoryClient) -> None:
    # The role was answered in round 1 and signed into the token: an answer to it sent with
    # the yes is no answer to a question of that round, so the deploy uses the role shown.
    other = "arn:aws:iam::111122223333:role/Deployer"
    call: Json = {"name": "deploy_to_aws", "arguments": {"stack": STACK}}
    theirs: Json = {"role-arn": {"action": "accept", "content": {"arn": other}}}
    second = await rounds(client, call, theirs)
    shown = second["inputRequests"]["confirm"]["params"]["message"].splitlines()
    assert shown[0] == f"Create stack '{STACK}' in account 111122223333, us-east-1?"
    assert shown[3] == f"Account 111122223333, region us-east-1, role {other}"

    retry = {
        **call,
        "inputResponses": {**CONFIRMED, **ARN},
        "requestState": second["requestState"],
    }
    done = await client.request("tools/call", retry)

    assert done["structuredContent"]["action"] == "created"
    assert ":111122223333:stack/" in done["structuredContent"]["stack_id"]
    assert no_stacks()  # nothing in the other account, the one the ignored answer named


@pytest.mark.anyio
async def test_a_stack_changed_between_the_question_and_the_yes_is_confirmed_again(
    client: MemoryClient,
) -> None:
    call: Json = {"name": "deploy_to_aws", "arguments": {"stack": STACK}}
    second = await rounds(client, call, ARN)
    # Someone else creates the stack, for another environment, after the user saw none.
    prod = [{"ParameterKey": "Environment", "ParameterValue": "prod"}]
    cfn().create_stack(StackName=STACK, TemplateBody=TEMPLATE, Parameters=prod)
    theirs = cfn().describe_stacks(StackName=STACK)["Stacks"][0]["StackStatus"]

    retry = {**call, "inputResponses": CONFIRMED, "requestState": second["requestState"]}
    third = await client.request("tools/call", retry)

    assert third["resultType"] == "input_required"
    assert list(third["inputRequests"]) == ["confirm"]
    lines = third["inputRequests"]["confirm"]["params"]["message"].splitlines()
    # What changed is said first, and the three lines a host shows still say what the yes is
    # for now: an update, of a stack whose Environment the user's plan changes back.
    assert lines[:4] == [
        f"Changed since your yes: update '{STACK}' in 123456789012, us-east-1?",
        "No IAM capabilities. Template unchanged",
        'Set: Environment="dev" (was "prod")',
        "Why again: The stack changed after you confirmed (it did not exist); check the plan "
        "again.",
    ]
    assert lines[5].startswith(f"Stack now: {theirs}, last changed ")
    assert change_sets() == []  # nothing of ours ran
    # The same confirming round again is asked again too: the stale yes never deploys.
    replay = await client.request("tools/call", retry)
    assert replay["resultType"] == "input_required"
    assert change_sets() == []

    done = await client.request(
        "tools/call",
        {**call, "inputResponses": CONFIRMED, "requestState": third["requestState"]},
    )
    assert done["structuredContent"]["action"] == "updated"  # to the plan confirmed again


@pytest.mark.anyio
async def test_a_template_changed_after_the_yes_is_confirmed_again_before_deploying(
    client: MemoryClient, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Deploy exactly what the user confirmed: the yes is bound to a digest of the plan.
    call: Json = {"name": "deploy_to_aws", "arguments": {"stack": STACK}}
    second = await rounds(client, call, ARN)
    edited = TEMPLATE.replace("Default: dev\n", "Default: staging\n")
    (tmp_path / "stack.yaml").write_text(edited, encoding="utf-8")
    monkeypatch.setattr(engine, "TEMPLATE_DIR", tmp_path)  # the file changes between rounds

    third = await client.request(
        "tools/call",
        {**call, "inputResponses": CONFIRMED, "requestState": second["requestState"]},
    )

    assert third["resultType"] == "input_required"
    assert list(third["inputRequests"]) == ["confirm"]  # the role answer still stands
    lines = third["inputRequests"]["confirm"]["params"]["message"].splitlines()
    assert lines[0] == f"Changed since your yes: create '{STACK}' in 123456789012, us-east-1?"
    assert lines[2] == "Set: every parameter at its template default"
    assert lines[3] == (
        "Why again: The plan changed after you confirmed (its template or the server's region)."
    )
    assert any(line.startswith('Parameters: Environment="staging" (default), ') for line in lines)
    assert no_stacks()
    # A retry without a new answer deploys nothing: the old yes was dropped with the re-ask.
    bare = await client.request("tools/call", {**call, "requestState": third["requestState"]})
    assert list(bare["inputRequests"]) == ["confirm"]
    assert no_stacks()

    fourth = await client.request(
        "tools/call",
        {**call, "inputResponses": CONFIRMED, "requestState": third["requestState"]},
    )

    assert fourth["structuredContent"]["action"] == "created"
    stack = cfn().describe_stacks(StackName=STACK)["Stacks"][0]
    environment = {item["ParameterKey"]: item["ParameterValue"] for item in stack["Parameters"]}
    assert environment["Environment"] == "staging"  # the plan confirmed the second time


@pytest.mark.anyio
@pytest.mark.parametrize("loose", ["yes", 1, "true", 1.0])
async def test_a_loosely_typed_yes_is_asked_again_and_deploys_nothing(
    client: MemoryClient, loose: object
) -> None:
    answer = {"confirm": {"action": "accept", "content": {"confirmed": loose}}}
    call = {"name": "deploy_to_aws", "arguments": {"stack": STACK}}
    result = await rounds(client, call, ARN, answer)
    assert result["resultType"] == "input_required"
    assert list(result["inputRequests"]) == ["confirm"]
    message = result["inputRequests"]["confirm"]["params"]["message"]
    assert "not valid (confirmed: Input should be a valid boolean" in message
    assert no_stacks()


@pytest.mark.anyio
async def test_a_legacy_user_who_declines_the_role_is_not_asked_to_confirm(aws: None) -> None:
    async def elicit(params: Json) -> Json:
        return {"action": "decline"}

    legacy = MemoryClient(new_server(), elicitation=elicit)
    await legacy.initialize()
    result = await legacy.call_tool("deploy_to_aws", {"stack": STACK})
    assert result.text.startswith(f"Deploy of stack '{STACK}' cancelled by the user; nothing")
    assert [request["params"] for request in legacy.server_requests] == [ROLE_REQUEST["params"]]


@pytest.mark.anyio
async def test_a_legacy_user_sees_the_same_plan(aws: None) -> None:
    legacy = MemoryClient(new_server(), elicitation=answering())
    await legacy.initialize()
    result = await legacy.call_tool("deploy_to_aws", {"stack": STACK})
    assert result.structured["action"] == "created"
    messages = [request["params"]["message"] for request in legacy.server_requests]
    assert messages == [ROLE_REQUEST["params"]["message"], "\n".join(PLAN_LINES)]


@pytest.mark.anyio
async def test_an_invalid_arn_is_asked_again_with_the_reason(client: MemoryClient) -> None:
    call: Json = {"name": "deploy_to_aws", "arguments": {"stack": STACK}}
    bad: Json = {"role-arn": {"action": "accept", "content": {"arn": "arn:aws:iam::1234:role/x"}}}

    second = await rounds(client, call, bad)

    assert second["resultType"] == "input_required"
    assert list(second["inputRequests"]) == ["role-arn"]
    asked = second["inputRequests"]["role-arn"]["params"]
    assert asked["message"] == (
        "That is not an IAM role ARN: the account ID must be 12 digits. "
        "Which IAM role should the deploy assume? Give its ARN."
    )
    assert asked["requestedSchema"] == ROLE_REQUEST["params"]["requestedSchema"]
    assert no_stacks()

    # The corrected answer, then the confirmation, which shows the corrected role.
    third = await client.request(
        "tools/call", {**call, "inputResponses": ARN, "requestState": second["requestState"]}
    )
    assert third["inputRequests"]["confirm"]["params"]["message"].splitlines() == PLAN_LINES
    fourth = await client.request(
        "tools/call",
        {**call, "inputResponses": CONFIRMED, "requestState": third["requestState"]},
    )

    assert fourth["structuredContent"]["action"] == "created"
