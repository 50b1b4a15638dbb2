"""The official MCP Python SDK (`mcp==2.3.0`, test-only) as an independent client of a baked server.

Our own client shares our own reading of the spec; this one was written by the SDK's authors.
Every stdio test spawns the baked server as a real subprocess through the SDK's stdio transport,
which passes the child only HOME, LOGNAME, PATH, SHELL, TERM and USER plus the `env` we give it.
The Streamable HTTP tests point the SDK's HTTP client at one `<slug> http` process instead; in
`legacy` mode (2025-11-25: `initialize`, `Mcp-Session-Id`) through a recording proxy
(tests/peers/http_proxy.py) whose transcript the tests print and check.

`deploy_to_aws` talks to moto's standalone server on 127.0.0.1 (AWS_ENDPOINT_URL, dummy
credentials). The conformance fixtures (the project's tests/conformance/fixtures.py) are dropped
into the same bake, so the AWS-free shapes (sampling, roots, several rounds, prompts, task tools)
meet the SDK too. Every server of the module keeps its tasks in a state directory of the
module's own (XDG_STATE_HOME), where the default task store lives.

Tasks (the `io.modelcontextprotocol/tasks` extension): mcp 2.3.0 has no tasks client. No module
of `mcp` names the extension, and `Client.call_tool` validates a tools/call answer as
CallToolResult or InputRequiredResult only (`mcp/client/session.py`, `_CallToolResultAdapter`),
so a plain `Client` never declares the extension and must get every task tool's result inline
(or -32021 for a task-only tool). What 2.3.0 ships is the API a host builds a follower with:
`mcp.client.extension` (`ClientExtension`, `ResultClaim`: a resolver for one more `resultType`
of tools/call, run by `Client.call_tool`) and `Request.name_param` (the `Mcp-Name` header of
tasks/*). `TaskFollower` below is such a follower, as a host would write it: it declares the
extension, claims `resultType: "task"`, polls tasks/get at the task's pollIntervalMs and answers
a running task's forms with tasks/update.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import boto3
import mcp_types as types
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.session import ClientRequestContext, ClientSession
from moto.server import ThreadedMotoServer
from peers.aws_moto import stack_id
from peers.aws_moto import stack_status as moto_stack_status
from peers.http_proxy import Proxy, answers, assert_legacy_session, questions
from peers.project import BakedProject, bake, serve_http

pytestmark = pytest.mark.anyio

ROLE_ARN = "arn:aws:iam::123456789012:role/deployer"
REGION = "us-east-1"
#: Generous: a cold server start plus a CloudFormation deploy against moto takes ~2 s here.
CALL_TIMEOUT_SECONDS = 60


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> BakedProject:
    baked = bake(tmp_path_factory.mktemp("sdk"), project_name="SDK Peer", aws=True)
    baked.add_conformance_tools()
    return baked


@pytest.fixture(scope="module")
def aws_env() -> Iterator[dict[str, str]]:
    """moto's standalone server on a free loopback port, and the env that points boto3 at it."""
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    host, port = moto.get_host_and_port()
    try:
        yield {
            "AWS_ENDPOINT_URL": f"http://{host}:{port}",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": REGION,
        }
    finally:
        moto.stop()


def state_env(project: BakedProject) -> dict[str, str]:
    """The per-user state directory (and so the default task store) of this module's servers."""
    return {"XDG_STATE_HOME": str(project.root.parent / "state")}


def server_params(
    project: BakedProject, extra_env: Mapping[str, str] | None = None
) -> StdioServerParameters:
    return StdioServerParameters(
        command=project.server_command()[0],
        args=project.server_command()[1:],
        env=project.server_env({**state_env(project), **(extra_env or {})}),
        cwd=str(project.root.parent),  # not the project: hosts start servers from anywhere
    )


@dataclass
class User:
    """Answers elicitations the way a person at a host would, and remembers what was asked."""

    decline: bool = False
    arn: str = ROLE_ARN  # the role the user names for deploy_to_aws
    reply: str = "Hi!"  # what the "model" says when sampled
    asked: list[tuple[object, str]] = field(default_factory=list)

    async def elicit(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        return self.fill(context.request_id, params)

    def fill(self, request_id: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        """The form `params` asks for, filled in (or declined); `request_id` names the question."""
        self.asked.append((request_id, params.message))
        if self.decline:
            return types.ElicitResult(action="decline")
        properties = getattr(params, "requested_schema", {}).get("properties", {})
        answers: dict[str, Any] = {
            "confirmed": True,  # deploy_to_aws, plan_release
            "arn": self.arn,
            "version": "1.3.0",  # plan_release
            "kind": "minor",
            "highlights": "Faster builds; fewer surprises",
            "audience": "developers",  # release_announcement
            "channel": "chat",
            "name": "Ada",  # the conformance fixtures
            "color": "teal",
            "context": "peer review",
            "ok": True,
            "confirm": True,  # confirm_delete, multi_input (asked inside their tasks)
        }
        return types.ElicitResult(
            action="accept", content={key: answers[key] for key in properties}
        )

    async def sample(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        self.asked.append((context.request_id, "sampling"))
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text=self.reply), model="peer"
        )

    async def roots(self, context: ClientRequestContext) -> types.ListRootsResult:
        self.asked.append((context.request_id, "roots"))
        return types.ListRootsResult(roots=[types.Root(uri="file:///srv/peer", name="peer")])

    def client(
        self,
        params: StdioServerParameters | str,
        *,
        mode: str = "2026-07-28",
        extensions: list[ClientExtension] | None = None,
    ) -> Client:
        return Client(
            params,
            mode=mode,
            elicitation_callback=self.elicit,
            sampling_callback=self.sample,
            list_roots_callback=self.roots,
            extensions=extensions,
        )


def cloudformation(aws_env: Mapping[str, str]) -> Any:
    return boto3.client(
        "cloudformation",
        region_name=REGION,
        endpoint_url=aws_env["AWS_ENDPOINT_URL"],
        aws_access_key_id=aws_env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=aws_env["AWS_SECRET_ACCESS_KEY"],
    )


def stack_status(aws_env: Mapping[str, str], stack: str) -> str | None:
    stacks = cloudformation(aws_env).list_stacks()["StackSummaries"]
    found = [summary["StackStatus"] for summary in stacks if summary["StackName"] == stack]
    return found[-1] if found else None


def change_sets(aws_env: Mapping[str, str], stack: str) -> list[tuple[str, str]]:
    """(name, execution status) of every change set moto holds for `stack`."""
    summaries = cloudformation(aws_env).list_change_sets(StackName=stack)["Summaries"]
    # moto lists every stack's change sets whatever StackName says: keep this stack's own.
    return [
        (summary["ChangeSetName"], summary["ExecutionStatus"])
        for summary in summaries
        if summary["StackName"] == stack
    ]


def registered_names(project: BakedProject) -> dict[str, list[str]]:
    """What the baked package itself registers, asked without any MCP client."""
    script = (
        "import json, sys\n"
        f"from {project.package}.app import build_server\n"
        "server = build_server({})\n"
        "server.warm_up()\n"
        "registry = server.registry\n"
        "names = {'tools': list(registry.tools), 'prompts': list(registry.prompts)}\n"
        "json.dump(names, sys.stdout)\n"
    )
    env = {**os.environ, **project.server_env()}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True
    )
    names: dict[str, list[str]] = json.loads(done.stdout)
    return names


def text_of(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


# -- a tasks follower built on the SDK's extension API -------------------------------------------

TASKS = "io.modelcontextprotocol/tasks"


class CreatedTask(types.Result):
    """CreateTaskResult (tasks "Creating Tasks"): the task's fields, flat, tagged "task"."""

    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int | None = None


class TaskParams(types.RequestParams):
    task_id: str


class GetTask(types.Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    # tasks "Streamable HTTP: Routing Headers": tasks/* carry `Mcp-Name: <taskId>`.
    name_param = "taskId"


class DetailedTask(types.Result):
    """What tasks/get answers: the task, with its result or error once it has ended, or the
    questions it waits on (`input_required`)."""

    task_id: str
    status: str
    status_message: str | None = None
    poll_interval_ms: int | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, dict[str, Any]] | None = None


class UpdateParams(types.RequestParams):
    task_id: str
    input_responses: dict[str, Any]


class UpdateTask(types.Request[UpdateParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    name_param = "taskId"


class Acknowledged(types.Result):
    """tasks/update's answer: `{"resultType": "complete"}` and nothing of the task."""

    result_type: Literal["complete"]


class TaskEnded(Exception):
    """The task ended without a result: `failed` (with its JSON-RPC error) or `cancelled`."""

    def __init__(self, task: DetailedTask) -> None:
        super().__init__(f"task {task.task_id} ended {task.status}: {task.error}")
        self.task = task


class TaskFollower(ClientExtension):
    """Follows a task to its end the way the spec asks a client to (tasks "Polling Tasks"),
    answering the forms a task asks for (`input_required`) through `user` with tasks/update.

    Remembers each status it saw, in order, and the keys it answered.
    """

    identifier = TASKS

    def __init__(self, user: User | None = None) -> None:
        self.user = user or User()
        self.seen: list[tuple[str, str, str | None]] = []  # (taskId, status, statusMessage)
        self.answered: list[str] = []

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=self.follow)]

    async def follow(self, created: CreatedTask, context: ClaimContext) -> types.CallToolResult:
        self.seen.append((created.task_id, created.status, created.status_message))
        interval_ms = created.poll_interval_ms
        while True:
            # tasks "Polling Tasks": clients SHOULD wait pollIntervalMs between polls.
            await anyio.sleep((interval_ms if interval_ms is not None else 1000) / 1000)
            task = await context.session.send_request(
                GetTask(params=TaskParams(task_id=created.task_id)), DetailedTask
            )
            self.seen.append((task.task_id, task.status, task.status_message))
            interval_ms = task.poll_interval_ms
            if task.status == "completed":
                return types.CallToolResult.model_validate(task.result)
            if task.status in ("failed", "cancelled"):
                raise TaskEnded(task)
            if task.status == "input_required":
                await self.answer(context, task)

    async def answer(self, context: ClaimContext, task: DetailedTask) -> None:
        # tasks "Input Requests": keys are unique over the task's life, so a key answered
        # once is never answered again, however many polls still show it.
        responses: dict[str, Any] = {}
        for key, request in (task.input_requests or {}).items():
            if key in self.answered:
                continue
            if request.get("method") != "elicitation/create":
                raise AssertionError(f"{context.tool_name} asked {request!r} inside its task")
            params = types.ElicitRequestFormParams.model_validate(request["params"])
            answer = self.user.fill(key, params)
            responses[key] = answer.model_dump(by_alias=True, mode="json", exclude_none=True)
            self.answered.append(key)
        if responses:
            update = UpdateParams(task_id=task.task_id, input_responses=responses)
            await context.session.send_request(UpdateTask(params=update), Acknowledged)

    def statuses(self) -> list[str]:
        return [status for _, status, _ in self.seen]


# -- discovery -----------------------------------------------------------------------------------


async def test_sdk_lists_exactly_the_tools_and_prompts_the_project_registers(
    project: BakedProject,
) -> None:
    expected = registered_names(project)
    with anyio.fail_after(CALL_TIMEOUT_SECONDS):
        async with User().client(server_params(project)) as client:
            tools = await client.list_tools()
            prompts = await client.list_prompts()

    assert [tool.name for tool in tools.tools] == expected["tools"]
    assert "deploy_to_aws" in expected["tools"]
    assert [prompt.name for prompt in prompts.prompts] == expected["prompts"]


async def test_sdk_default_auto_mode_negotiates_2026_07_28_through_server_discover(
    project: BakedProject,
) -> None:
    with anyio.fail_after(CALL_TIMEOUT_SECONDS):
        async with Client(server_params(project)) as client:
            assert client.protocol_version == "2026-07-28"
            assert client.server_info is not None
            assert client.server_info.name == project.root.name
            tools = await client.list_tools()

    assert "deploy_to_aws" in [tool.name for tool in tools.tools]


# -- deploy_to_aws ------------------------------------------------------------------------------


async def test_sdk_deploys_to_moto_through_its_automatic_input_required_loop(
    project: BakedProject, aws_env: dict[str, str]
) -> None:
    user = User()
    with anyio.fail_after(CALL_TIMEOUT_SECONDS):
        async with user.client(server_params(project, aws_env)) as client:
            result = await client.call_tool("deploy_to_aws", {"stack": "sdk-modern"})

    assert not result.is_error, text_of(result)
    assert text_of(result).startswith("Created stack 'sdk-modern' in us-east-1: CREATE_COMPLETE.")
    assert result.structured_content is not None
    assert result.structured_content["action"] == "created"
    # The role, then the yes to the plan it shows, keyed by the server's inputRequests keys.
    assert [str(request_id) for request_id, _ in user.asked] == ["role-arn", "confirm"]
    assert stack_status(aws_env, "sdk-modern") == "CREATE_COMPLETE"


async def test_sdk_declining_gives_the_cancelled_result_and_deploys_nothing(
    project: BakedProject, aws_env: dict[str, str]
) -> None:
    user = User(decline=True)
    with anyio.fail_after(CALL_TIMEOUT_SECONDS):
        async with user.client(server_params(project, aws_env)) as client:
            result = await client.call_tool("deploy_to_aws", {"stack": "sdk-declined"})

    assert not result.is_error
    said = "Deploy of stack 'sdk-declined' cancelled by the user; nothing was written to AWS."
    assert text_of(result) == said
    assert result.structured_content is not None
    assert result.structured_content["action"] == "cancelled"
    assert result.structured_content["message"] == said
    assert None not in result.structured_content.values()
    assert stack_status(aws_env, "sdk-declined") is None


async def test_sdk_without_the_loop_sees_each_raw_round_and_can_finish_by_hand(
    project: BakedProject, aws_env: dict[str, str]
) -> None:
    arguments = {"stack": "sdk-by-hand"}
    with anyio.fail_after(CALL_TIMEOUT_SECONDS):
        async with User().client(server_params(project, aws_env)) as client:
            first = await client.session.call_tool(
                "deploy_to_aws", arguments, allow_input_required=True
            )
            assert isinstance(first, types.InputRequiredResult)
            assert first.input_requests is not None
            assert sorted(first.input_requests) == ["role-arn"]  # the role comes first
            assert isinstance(first.request_state, str) and first.request_state

            role: types.InputResponses = {
                "role-arn": types.ElicitResult(action="accept", content={"arn": ROLE_ARN})
            }
            second = await client.session.call_tool(
                "deploy_to_aws",
                arguments,
                input_responses=role,
                request_state=first.request_state,
                allow_input_required=True,
            )
            assert isinstance(second, types.InputRequiredResult)
            assert second.input_requests is not None
            assert sorted(second.input_requests) == ["confirm"]
            (confirm,) = second.input_requests.values()
            assert confirm.method == "elicitation/create"
            # The plan shows in the question's first line: what, where and which account.
            question = getattr(confirm.params, "message", "")
            assert question.splitlines()[0] == (
                "Create stack 'sdk-by-hand' in account 123456789012, us-east-1?"
            )
            assert isinstance(second.request_state, str) and second.request_state
            assert stack_status(aws_env, "sdk-by-hand") is None  # nothing happened yet

            yes: types.InputResponses = {
                "confirm": types.ElicitResult(action="accept", content={"confirmed": True})
            }
            third = await client.session.call_tool(
                "deploy_to_aws",
                arguments,
                input_responses=yes,
                request_state=second.request_state,
                allow_input_required=True,
            )

    assert isinstance(third, types.CallToolResult), third
    assert not third.is_error, text_of(third)
    assert stack_status(aws_env, "sdk-by-hand") == "CREATE_COMPLETE"


async def test_sdk_legacy_mode_deploys_through_real_elicitation_requests(
    project: BakedProject, aws_env: dict[str, str]
) -> None:
    user = User()
    with anyio.fail_after(CALL_TIMEOUT_SECONDS):
        async with user.client(server_params(project, aws_env), mode="legacy") as client:
            assert client.protocol_version == "2025-11-25"
            result = await client.call_tool("deploy_to_aws", {"stack": "sdk-legacy"})

    assert not result.is_error, text_of(result)
    assert text_of(result).startswith("Created stack 'sdk-legacy' in us-east-1: CREATE_COMPLETE.")
    # Both questions arrived as server-to-client JSON-RPC requests (ids chosen by the server),
    # not as inputRequests keys, which a 2025-11-25 client would not understand.
    messages = [message for _, message in user.asked]
    assert len(messages) == 2
    assert messages[1].startswith("Create stack 'sdk-legacy' in account ")
    assert not {str(request_id) for request_id, _ in user.asked} & {"confirm", "role-arn"}
    assert stack_status(aws_env, "sdk-legacy") == "CREATE_COMPLETE"


# -- the AWS-free shapes, through the conformance fixtures ---------------------------------------


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
async def test_sdk_answers_elicitation_sampling_and_roots_asked_at_once(
    project: BakedProject, mode: str
) -> None:
    user = User()
    with anyio.fail_after(CALL_TIMEOUT_SECONDS):
        async with user.client(server_params(project), mode=mode) as client:
            result = await client.call_tool("test_input_required_result_multiple_inputs", {})

    assert not result.is_error, text_of(result)
    assert text_of(result) == "Hi! Ada (1 root(s): file:///srv/peer)"
    assert sorted(what for _, what in user.asked) == ["What is your name?", "roots", "sampling"]


async def test_sdk_follows_a_tool_through_three_rounds(project: BakedProject) -> None:
    user = User()
    with anyio.fail_after(CALL_TIMEOUT_SECONDS):
        async with user.client(server_params(project)) as client:
            result = await client.call_tool("test_input_required_result_multi_round", {})

    assert text_of(result) == "Ada likes teal"
    assert [str(request_id) for request_id, _ in user.asked] == ["step1", "step2"]


async def test_sdk_gets_a_prompt_that_asks_for_input_first(project: BakedProject) -> None:
    user = User()
    with anyio.fail_after(CALL_TIMEOUT_SECONDS):
        async with user.client(server_params(project)) as client:
            prompt = await client.get_prompt("test_input_required_result_prompt")

    assert [message.role for message in prompt.messages] == ["user"]
    content = prompt.messages[0].content
    assert isinstance(content, types.TextContent)
    assert content.text == "Context: peer review"


async def test_sdk_gets_invalid_params_for_a_tampered_request_state(project: BakedProject) -> None:
    with anyio.fail_after(CALL_TIMEOUT_SECONDS):
        async with User().client(server_params(project)) as client:
            first = await client.session.call_tool(
                "test_input_required_result_tampered_state", {}, allow_input_required=True
            )
            assert isinstance(first, types.InputRequiredResult)
            assert first.request_state is not None
            with pytest.raises(MCPError) as raised:
                await client.session.call_tool(
                    "test_input_required_result_tampered_state",
                    {},
                    input_responses={
                        "confirm": types.ElicitResult(action="accept", content={"ok": True})
                    },
                    request_state=first.request_state + "-TAMPERED",
                    allow_input_required=True,
                )

    assert raised.value.error.code == types.INVALID_PARAMS
    assert raised.value.error.message.startswith("Invalid requestState")


# -- the AWS-free sample tool and prompt --------------------------------------------------------

RELEASE_ARGS = {
    "project": "Peer",
    "previous_version": "1.2.0",
    "changes": ["feat: parallel builds", "fix: stale cache"],
}


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
async def test_sdk_plans_a_release_through_three_forms_and_its_notes_page(
    project: BakedProject, mode: str
) -> None:
    user = User()
    with anyio.fail_after(CALL_TIMEOUT_SECONDS):
        async with user.client(server_params(project), mode=mode) as client:
            result = await client.call_tool("plan_release", RELEASE_ARGS)

    assert not result.is_error, text_of(result)
    assert result.structured_content is not None
    assert result.structured_content["status"] == "confirmed"
    assert result.structured_content["version"] == "1.3.0"
    assert result.structured_content["highlights"] == ["Faster builds", "fewer surprises"]
    # Version and kind; highlights; the full notes on a review page (URL mode, which the SDK
    # declares); yes to the finished plan.
    assert len(user.asked) == 4


async def test_sdk_client_with_sampling_only_gets_a_drafted_release_plan(
    project: BakedProject,
) -> None:
    user = User(reply="Peer 1.3.0 brings parallel builds and fixes a stale cache.")
    params = server_params(project)
    with anyio.fail_after(CALL_TIMEOUT_SECONDS):
        # No elicitation callback: the SDK declares only sampling, so no form may be sent.
        async with Client(params, mode="2026-07-28", sampling_callback=user.sample) as client:
            result = await client.call_tool("plan_release", RELEASE_ARGS)

    assert not result.is_error, text_of(result)
    assert result.structured_content is not None
    assert result.structured_content["status"] == "drafted"
    assert [what for _, what in user.asked] == ["sampling"]


async def test_sdk_gets_the_release_announcement_prompt_after_its_question(
    project: BakedProject,
) -> None:
    user = User()
    with anyio.fail_after(CALL_TIMEOUT_SECONDS):
        async with user.client(server_params(project)) as client:
            prompt = await client.get_prompt(
                "release_announcement", {"project": "Peer", "version": "1.3.0"}
            )

    assert len(user.asked) == 1
    content = prompt.messages[0].content
    assert isinstance(content, types.TextContent)
    assert "developers who build on it" in content.text
    assert "a chat message" in content.text


# -- tasks: a client that follows them, and clients that do not -----------------------------------


async def test_sdk_host_with_the_tasks_extension_follows_the_deploy_task_to_its_result(
    project: BakedProject, aws_env: dict[str, str]
) -> None:
    user, follower = User(), TaskFollower()
    with anyio.fail_after(CALL_TIMEOUT_SECONDS):
        async with user.client(server_params(project, aws_env), extensions=[follower]) as client:
            result = await client.call_tool("deploy_to_aws", {"stack": "sdk-task"})

    assert not result.is_error, text_of(result)
    assert text_of(result).startswith("Created stack 'sdk-task' in us-east-1: CREATE_COMPLETE.")
    assert result.structured_content is not None
    assert result.structured_content["action"] == "created"
    # The questions came first, in ordinary rounds; the confirming round started the task.
    assert [str(request_id) for request_id, _ in user.asked] == ["role-arn", "confirm"]
    assert len({task_id for task_id, _, _ in follower.seen}) == 1
    statuses = follower.statuses()
    assert statuses[0] == "working" and statuses[-1] == "completed", follower.seen
    assert set(statuses) == {"working", "completed"}
    first_message = follower.seen[0][2]
    assert first_message is not None
    assert first_message.startswith("Deploying stack 'sdk-task' to AWS account 123456789012")
    assert stack_status(aws_env, "sdk-task") == "CREATE_COMPLETE"


async def test_sdk_host_answers_the_question_a_running_task_asks_through_tasks_update(
    project: BakedProject,
) -> None:
    user = User()
    follower = TaskFollower(user)
    with anyio.fail_after(CALL_TIMEOUT_SECONDS):
        async with user.client(server_params(project), extensions=[follower]) as client:
            result = await client.call_tool("confirm_delete", {"filename": "notes.txt"})

    assert not result.is_error, text_of(result)
    assert text_of(result) == "Deleted notes.txt (a fixture: no file was touched)."
    assert "input_required" in follower.statuses()
    assert follower.statuses()[-1] == "completed"
    # Asked once, inside the task: on tasks/get, never as an input_required round of tools/call.
    assert [message for _, message in user.asked] == ["Delete notes.txt?"]
    assert len(follower.answered) == 1


async def test_sdk_host_answers_two_questions_of_one_task_at_once(project: BakedProject) -> None:
    user = User()
    follower = TaskFollower(user)
    with anyio.fail_after(CALL_TIMEOUT_SECONDS):
        async with user.client(server_params(project), extensions=[follower]) as client:
            result = await client.call_tool("multi_input", {})

    assert text_of(result) == "Approved by 2 of 2: Ada, Ada."
    assert len(follower.answered) == 2
    assert len(set(follower.answered)) == 2


async def test_sdk_host_sees_a_tool_error_as_the_completed_task_result(
    project: BakedProject,
) -> None:
    follower = TaskFollower()
    with anyio.fail_after(CALL_TIMEOUT_SECONDS):
        async with User().client(server_params(project), extensions=[follower]) as client:
            result = await client.call_tool("failing_job", {})

    # tasks "Task Execution Errors": isError is a result, so the task ends `completed`.
    assert result.is_error
    assert text_of(result) == "failing_job failed, as it always does"
    assert follower.statuses()[-1] == "completed"


async def test_sdk_host_sees_a_broken_task_end_failed_with_its_json_rpc_error(
    project: BakedProject,
) -> None:
    follower = TaskFollower()
    with anyio.fail_after(CALL_TIMEOUT_SECONDS):
        async with User().client(server_params(project), extensions=[follower]) as client:
            with pytest.raises(TaskEnded) as ended:
                await client.call_tool("protocol_error_job", {})

    task = ended.value.task
    assert task.status == "failed"
    assert task.result is None
    # tasks "Task Execution Errors": `error` MUST contain the JSON-RPC error the tool raised.
    assert task.error == {
        "code": types.INTERNAL_ERROR,
        "message": "protocol_error_job broke on purpose",
    }


async def test_sdk_without_the_tasks_extension_gets_a_task_tool_result_inline(
    project: BakedProject,
) -> None:
    """tasks "Capability Negotiation": no CreateTaskResult for a request that did not declare
    the extension; a plain SDK client (it cannot follow one) gets the tool's result inline."""
    with anyio.fail_after(CALL_TIMEOUT_SECONDS):
        async with User().client(server_params(project)) as client:
            result = await client.call_tool("slow_compute", {"seconds": 0.1, "label": "inline"})

    assert not result.is_error, text_of(result)
    assert text_of(result) == "Computed 'inline' in 0.1 s."


async def test_sdk_without_the_tasks_extension_is_refused_a_task_only_tool_with_32021(
    project: BakedProject,
) -> None:
    with anyio.fail_after(CALL_TIMEOUT_SECONDS):
        async with User().client(server_params(project)) as client:
            with pytest.raises(MCPError) as raised:
                await client.call_tool("failing_job", {})

    assert raised.value.error.code == -32021  # MissingRequiredClientCapabilityError
    assert raised.value.error.data == {"requiredCapabilities": {"extensions": {TASKS: {}}}}


# -- over Streamable HTTP -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def http_url(
    project: BakedProject, aws_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """One `<slug> http` for the module (pointed at moto); it must stop cleanly on SIGTERM."""
    log_path = tmp_path_factory.mktemp("sdk-http") / "server.log"
    with serve_http(project, log_path, {**state_env(project), **aws_env}) as server:
        yield server.url
        assert server.stop() == 0, server.log()


async def test_sdk_deploys_to_moto_over_streamable_http(
    http_url: str, aws_env: dict[str, str]
) -> None:
    user = User()
    with anyio.fail_after(CALL_TIMEOUT_SECONDS):
        async with user.client(http_url) as client:
            result = await client.call_tool("deploy_to_aws", {"stack": "sdk-http"})

    assert not result.is_error, text_of(result)
    assert text_of(result).startswith("Created stack 'sdk-http' in us-east-1: CREATE_COMPLETE.")
    assert [str(request_id) for request_id, _ in user.asked] == ["role-arn", "confirm"]
    assert stack_status(aws_env, "sdk-http") == "CREATE_COMPLETE"


async def test_sdk_auto_mode_plans_a_release_through_three_rounds_over_streamable_http(
    http_url: str,
) -> None:
    user = User()
    with anyio.fail_after(CALL_TIMEOUT_SECONDS):
        async with user.client(http_url, mode="auto") as client:
            assert client.protocol_version == "2026-07-28"  # negotiated by server/discover
            result = await client.call_tool("plan_release", RELEASE_ARGS)

    assert not result.is_error, text_of(result)
    assert result.structured_content is not None
    assert result.structured_content["status"] == "confirmed"
    assert result.structured_content["version"] == "1.3.0"
    assert len(user.asked) == 3  # each round's question came back through a new POST


@pytest.fixture(scope="module")
def http_proxy(http_url: str) -> Iterator[Proxy]:
    """The recording proxy in front of the module's `<slug> http`: the transcript of the wire."""
    with Proxy([http_url]) as proxy:
        yield proxy


#: The legacy deploy answers a role in an account of its own: moto shows which answer it used.
LEGACY_ACCOUNT = "210000000003"


async def deploy_in_legacy_mode(proxy: Proxy, user: User, stack: str) -> types.CallToolResult:
    """`mode="legacy"` calls deploy_to_aws through the proxy; the transcript is printed."""
    start = len(proxy.exchanges)
    with anyio.fail_after(CALL_TIMEOUT_SECONDS):
        async with user.client(proxy.url, mode="legacy") as client:
            assert client.protocol_version == "2025-11-25"
            result = await client.call_tool("deploy_to_aws", {"stack": stack})
    print(f"\nPython SDK (legacy) deploy_to_aws {stack} over Streamable HTTP:")  # noqa: T201
    print("\n".join(proxy.transcript(start)))  # noqa: T201
    print(f"  the client's result: {text_of(result)[:300]!r}")  # noqa: T201
    return result


async def test_sdk_default_mode_over_streamable_http_is_2026_07_28_without_initialize(
    http_proxy: Proxy,
) -> None:
    """The README's line for the Python SDK: no `mode`, "auto": server/discover, no session."""
    start = len(http_proxy.exchanges)
    with anyio.fail_after(CALL_TIMEOUT_SECONDS):
        async with Client(http_proxy.url) as client:
            assert client.protocol_version == "2026-07-28"
            await client.list_tools()
    exchanges = http_proxy.since(start)

    assert exchanges[0].methods() == ["server/discover"]
    assert not [exchange for exchange in exchanges if "initialize" in exchange.methods()]
    assert not [exchange for exchange in exchanges if exchange.new_session]


async def test_sdk_legacy_mode_deploys_to_moto_over_streamable_http(
    http_proxy: Proxy, aws_env: dict[str, str]
) -> None:
    """2025-11-25 over Streamable HTTP (basic/transports "Streamable HTTP"): `initialize`, a
    session, both questions as elicitation/create on the tools/call's SSE stream, the answers
    POSTed back; the stack lands in the account of the role the SDK's callback answered."""
    start = len(http_proxy.exchanges)
    role = f"arn:aws:iam::{LEGACY_ACCOUNT}:role/deployer"
    user = User(arn=role)
    result = await deploy_in_legacy_mode(http_proxy, user, "sdk-legacy-http")
    exchanges = http_proxy.since(start)

    assert not result.is_error, text_of(result)
    assert text_of(result).startswith("Created stack 'sdk-legacy-http' in us-east-1")
    assert len(user.asked) == 2
    assert_legacy_session(exchanges)
    (call,) = [exchange for exchange in exchanges if exchange.methods() == ["tools/call"]]
    assert call.content_type.startswith("text/event-stream")
    assert call.received_methods() == ["elicitation/create", "elicitation/create"]
    sent_back = answers(exchanges)
    assert [answer["id"] for answer in sent_back] == [q["id"] for q in questions(exchanges)]
    assert [answer["result"]["action"] for answer in sent_back] == ["accept", "accept"]
    assert sent_back[0]["result"]["content"] == {"arn": role}
    # moto: the stack exists in the role's account, and not in the caller's.
    assert moto_stack_status(aws_env, "sdk-legacy-http", role_arn=role) == "CREATE_COMPLETE"
    assert f":{LEGACY_ACCOUNT}:stack/" in stack_id(aws_env, "sdk-legacy-http", role_arn=role)
    assert stack_status(aws_env, "sdk-legacy-http") is None


async def test_sdk_legacy_mode_declining_over_streamable_http_deploys_nothing(
    http_proxy: Proxy, aws_env: dict[str, str]
) -> None:
    start = len(http_proxy.exchanges)
    role = f"arn:aws:iam::{LEGACY_ACCOUNT}:role/deployer"
    result = await deploy_in_legacy_mode(http_proxy, User(decline=True), "sdk-legacy-declined")
    exchanges = http_proxy.since(start)

    assert not result.is_error
    assert text_of(result).startswith("Deploy of stack 'sdk-legacy-declined' cancelled by the user")
    assert_legacy_session(exchanges)
    assert [answer["result"]["action"] for answer in answers(exchanges)] == ["decline"]
    assert moto_stack_status(aws_env, "sdk-legacy-declined", role_arn=role) is None
    assert stack_status(aws_env, "sdk-legacy-declined") is None


async def test_sdk_host_follows_the_deploy_task_over_streamable_http(
    http_url: str, aws_env: dict[str, str]
) -> None:
    """tasks/get over HTTP carries `Mcp-Name: <taskId>` (the SDK's name_param)."""
    user, follower = User(), TaskFollower()
    with anyio.fail_after(CALL_TIMEOUT_SECONDS):
        async with user.client(http_url, extensions=[follower]) as client:
            result = await client.call_tool("deploy_to_aws", {"stack": "sdk-http-task"})

    assert not result.is_error, text_of(result)
    assert text_of(result).startswith(
        "Created stack 'sdk-http-task' in us-east-1: CREATE_COMPLETE."
    )
    assert follower.statuses()[0] == "working"
    assert follower.statuses()[-1] == "completed"
    assert stack_status(aws_env, "sdk-http-task") == "CREATE_COMPLETE"


async def test_sdk_replaying_a_finished_deploys_confirmation_over_http_runs_nothing_again(
    http_url: str, aws_env: dict[str, str]
) -> None:
    """Confirmed once, across clients: the confirming round, replayed byte for byte after its
    task completed, by the host that follows tasks and then by another that does not, never
    deploys again. What each may get back: that task, that run's result, or the question again
    (the stack changed since the yes); never a second task or a second run."""
    arguments = {"stack": "sdk-replay"}
    follower = TaskFollower()
    role = {"role-arn": types.ElicitResult(action="accept", content={"arn": ROLE_ARN})}
    yes = {"confirm": types.ElicitResult(action="accept", content={"confirmed": True})}
    with anyio.fail_after(CALL_TIMEOUT_SECONDS):
        async with User().client(http_url, extensions=[follower]) as client:
            session = client.session
            first = await session.call_tool(
                "deploy_to_aws", arguments, allow_input_required=True, allow_claimed=True
            )
            assert isinstance(first, types.InputRequiredResult)
            second = await session.call_tool(
                "deploy_to_aws",
                arguments,
                input_responses=role,
                request_state=first.request_state,
                allow_input_required=True,
                allow_claimed=True,
            )
            assert isinstance(second, types.InputRequiredResult)
            assert second.request_state is not None
            state = second.request_state

            async def confirm(session: ClientSession, *, claimed: bool) -> object:
                """The confirming round, byte for byte: the same answer, the same token."""
                return await session.call_tool(
                    "deploy_to_aws",
                    arguments,
                    input_responses=yes,
                    request_state=state,
                    allow_input_required=True,
                    allow_claimed=claimed,
                )

            created = await confirm(session, claimed=True)
            assert isinstance(created, CreatedTask), created
            context = ClaimContext(
                session=session, tool_name="deploy_to_aws", read_timeout_seconds=None
            )
            done = await follower.follow(created, context)
            assert not done.is_error, text_of(done)
            executed = change_sets(aws_env, "sdk-replay")
            assert [status for _, status in executed] == ["EXECUTE_COMPLETE"]

            replays = [await confirm(session, claimed=True)]
        async with User().client(http_url) as plain:
            replays.append(await confirm(plain.session, claimed=False))

    for replay in replays:
        if isinstance(replay, CreatedTask):
            assert replay.task_id == created.task_id  # that task, never a second one
        elif isinstance(replay, types.CallToolResult):
            assert replay.structured_content == done.structured_content  # that run's result
        else:
            assert isinstance(replay, types.InputRequiredResult), replay
            assert replay.input_requests is not None
            (question,) = replay.input_requests.values()
            message = getattr(question.params, "message", "")
            assert message.startswith("The stack changed after you confirmed"), message
    assert change_sets(aws_env, "sdk-replay") == executed  # the one change set, run once


# == caching (issue 22): a changing resource, and a tool declared at runtime ======================
# One block, kept apart from the rest of the module. 2026-07-28 server/utilities/caching: a
# client MAY treat a result as fresh for its `ttlMs`, and the SDK's `Client` does by default
# (`CacheConfig()`: an in-memory store honouring `ttlMs`/`cacheScope`). The fixtures are
# tests/peers/caching_tools.py: `caching://changing` changes on every read and declares nothing,
# `caching://declared` changes too but declares a TTL (so the client's cache is seen at work),
# `declare_tool` declares a tool after start-up. Each transport gets a fresh server, so every
# read counter starts at 1.

CachingTransport = Literal["stdio", "http"]


@pytest.fixture(scope="module")
def caching_project(tmp_path_factory: pytest.TempPathFactory) -> BakedProject:
    from peers.project import HERE as PEERS

    baked = bake(tmp_path_factory.mktemp("sdk-caching"), project_name="SDK Caching", aws=False)
    name = "caching_tools.py"
    (baked.tools_dir / name).write_bytes((PEERS / name).read_bytes())
    return baked


@pytest.fixture(params=["stdio", "http"])
def caching_server(
    request: pytest.FixtureRequest, caching_project: BakedProject, tmp_path: Any
) -> Iterator[tuple[CachingTransport, StdioServerParameters | str]]:
    """What `Client` connects to: a spawned stdio server, or the URL of a `<slug> http`."""
    transport: CachingTransport = request.param
    if transport == "stdio":
        yield transport, server_params(caching_project)
        return
    with serve_http(caching_project, tmp_path / "server.log", state_env(caching_project)) as server:
        yield transport, server.url
        assert server.stop() == 0, server.log()


def resource_text(result: types.ReadResourceResult) -> str:
    (contents,) = result.contents
    assert isinstance(contents, types.TextResourceContents)
    return contents.text


async def test_sdk_reads_a_changing_resource_twice_and_sees_both_values(
    caching_server: tuple[CachingTransport, StdioServerParameters | str],
) -> None:
    transport, server = caching_server
    with anyio.fail_after(CALL_TIMEOUT_SECONDS):
        async with Client(server, mode="2026-07-28") as client:
            changing = [await client.read_resource("caching://changing") for _ in range(2)]
            declared = [await client.read_resource("caching://declared") for _ in range(2)]

    seen = [resource_text(result) for result in changing]
    cached = [resource_text(result) for result in declared]
    sys.stdout.write(
        f"\npython sdk 2.3.0, {transport}: caching://changing "
        f"(ttlMs {changing[0].ttl_ms}, {changing[0].cache_scope}) read twice: {seen}; "
        f"caching://declared (ttlMs {declared[0].ttl_ms}, {declared[0].cache_scope}) "
        f"read twice: {cached}\n"
    )
    # The second read reached the server: the default hints (ttlMs 0, private) let it.
    assert seen == ["read 1", "read 2"]
    assert (changing[0].ttl_ms, changing[0].cache_scope) == (0, "private")
    # The client does cache what a resource declares: the same first value, twice.
    assert cached == ["declared read 1", "declared read 1"]
    assert (declared[0].ttl_ms, declared[0].cache_scope) == (600_000, "private")


async def test_sdk_sees_a_tool_declared_at_runtime_in_its_next_tools_list(
    caching_server: tuple[CachingTransport, StdioServerParameters | str],
) -> None:
    transport, server = caching_server
    with anyio.fail_after(CALL_TIMEOUT_SECONDS):
        async with Client(server, mode="2026-07-28") as client:
            before = await client.list_tools()
            declared = await client.call_tool("declare_tool", {"name": "late_tool"})
            after = await client.list_tools()
            ran = await client.call_tool("late_tool", {})

    assert not declared.is_error, text_of(declared)
    names_before = [tool.name for tool in before.tools]
    names_after = [tool.name for tool in after.tools]
    sys.stdout.write(
        f"\npython sdk 2.3.0, {transport}: tools/list (ttlMs {before.ttl_ms}, "
        f"{before.cache_scope}) before declare_tool: {len(names_before)} tools; "
        f"after: {len(names_after)}, new: {sorted(set(names_after) - set(names_before))}\n"
    )
    # An unsealed registry's lists are immediately stale (ttlMs 0), so the client asked again.
    assert "late_tool" not in names_before
    assert names_after == [*names_before, "late_tool"]
    assert (before.ttl_ms, before.cache_scope) == (0, "public")
    assert text_of(ran) == "late_tool ran"
