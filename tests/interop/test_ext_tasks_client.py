"""The official tasks requester library (`@modelcontextprotocol/ext-tasks` 0.2.2) follows our tasks.

ext-tasks is what the extension's authors ship for hosts: on the TypeScript SDK's v2 `Client`,
it calls a tool, answers the MRTR questions through the application's input handler, follows
the task the server makes of the call (`tasks/get`, `tasks/update`, `tasks/cancel`) and
validates every message against the extension's published schema: a completed task's inlined
result included, which like every 2026-07-28 result carries `resultType` (before 0.8.0 ours did
not, and the library reported every completed deploy `failed`). For a 2026-07-28 tasks server
the host supplies the raw request path; `tests/peers/ext_tasks_driver.mjs` does, over stdio
and over Streamable HTTP. `deploy_to_aws` deploys to moto's standalone server on loopback; the
conformance fixtures give a long task to cancel and one that asks inside its task.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from peers.aws_moto import moto_server, role_in
from peers.aws_moto import stack_status as moto_stack_status
from peers.node import NodePeers, PeersUnavailableError, ensure_node_peers
from peers.project import BakedProject, bake, serve_http

ROLE_ACCOUNT = "123456789012"
DRIVER_TIMEOUT_SECONDS = 180


@pytest.fixture(scope="module")
def peers() -> NodePeers:
    try:
        return ensure_node_peers()
    except PeersUnavailableError as exc:
        pytest.fail(f"the Node peers cannot be installed: {exc}", pytrace=False)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> BakedProject:
    baked = bake(tmp_path_factory.mktemp("ext-tasks"), project_name="Ext Tasks Peer", aws=True)
    baked.add_conformance_tools()
    return baked


@pytest.fixture(scope="module")
def aws_env() -> Iterator[dict[str, str]]:
    with moto_server() as env:
        yield env


def stdio(project: BakedProject, aws_env: Mapping[str, str]) -> dict[str, Any]:
    return project.stdio_launch(aws_env)


@pytest.fixture(scope="module")
def http_server(
    project: BakedProject, aws_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    log = tmp_path_factory.mktemp("ext-tasks-http") / "server.log"
    with serve_http(project, log, project.state_env(aws_env)) as server:
        yield {"url": server.url}


def drive(
    peers: NodePeers, server: Mapping[str, Any], scenario: str, tool: str, **arguments: Any
) -> Any:
    plan = json.dumps(
        {"server": server, "scenario": scenario, "tool": tool, "arguments": arguments}
    )
    done = subprocess.run(
        peers.ext_tasks_command(plan),
        capture_output=True,
        text=True,
        timeout=DRIVER_TIMEOUT_SECONDS,
        check=False,
    )
    assert done.stdout.strip(), done.stderr[-3000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    print(json.dumps(seen, indent=2)[:4000])  # noqa: T201 - the transcript, in the test output
    assert "fatal" not in seen and "error" not in seen, seen
    return seen


def stack_status(aws_env: dict[str, str], stack: str) -> str | None:
    return moto_stack_status(aws_env, stack, role_arn=role_in(ROLE_ACCOUNT))


@pytest.mark.parametrize("over", ["stdio", "http"])
def test_ext_tasks_deploys_following_the_task(
    peers: NodePeers,
    project: BakedProject,
    aws_env: dict[str, str],
    request: pytest.FixtureRequest,
    over: str,
) -> None:
    server = stdio(project, aws_env) if over == "stdio" else request.getfixturevalue("http_server")
    stack = f"ext-tasks-{over}"
    seen = drive(peers, server, "deploy", "deploy_to_aws", stack=stack)
    assert seen["kind"] == "task" and seen["taskId"]
    assert seen["settled"]["status"] == "completed"
    result = seen["result"]
    assert result["resultType"] == "complete"
    assert result["content"][0]["text"].startswith(
        f"Created stack '{stack}' in us-east-1: CREATE_COMPLETE."
    )
    assert seen["asked"][0] == "Which IAM role should the deploy assume? Give its ARN."
    assert seen["asked"][1].startswith(f"Create stack '{stack}' in account ")
    assert stack_status(aws_env, stack) == "CREATE_COMPLETE"


@pytest.mark.parametrize("over", ["stdio", "http"])
def test_ext_tasks_answers_a_question_asked_inside_a_task(
    peers: NodePeers,
    project: BakedProject,
    aws_env: dict[str, str],
    request: pytest.FixtureRequest,
    over: str,
) -> None:
    server = stdio(project, aws_env) if over == "stdio" else request.getfixturevalue("http_server")
    seen = drive(peers, server, "question_in_task", "confirm_delete", filename=f"{over}.txt")
    assert seen["kind"] == "task"
    assert seen["settled"]["status"] == "completed"
    assert seen["asked"] == [f"Delete {over}.txt?"]
    assert f"{over}.txt" in seen["result"]["content"][0]["text"]


@pytest.mark.parametrize("over", ["stdio", "http"])
def test_ext_tasks_cancels_a_running_task(
    peers: NodePeers,
    project: BakedProject,
    aws_env: dict[str, str],
    request: pytest.FixtureRequest,
    over: str,
) -> None:
    server = stdio(project, aws_env) if over == "stdio" else request.getfixturevalue("http_server")
    seen = drive(peers, server, "cancel", "slow_compute", seconds=600, label="x")
    assert seen["kind"] == "task"
    assert seen["outcome"] == "cancelled", seen
