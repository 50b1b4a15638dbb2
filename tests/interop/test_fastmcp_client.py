"""FastMCP's client (`fastmcp` 4.1.4 with `fastmcp-tasks` 4.1.4, test-only) follows our tasks.

An independent requester of the tasks extension, written by FastMCP's authors: its
`Client.call_tool` answers our MRTR questions with its elicitation handler and follows the task
the server makes of the call, transparently (`tasks/get`, `tasks/update`); its
`call_tool_task` handle cancels (`tasks/cancel`). It runs in a venv of its own
(`tests/peers/fastmcp_peer.py`, from PyPI) through `tests/peers/fastmcp_driver.py`, which prints
what it saw. `deploy_to_aws` deploys to moto's standalone server on loopback; the conformance
fixtures give a long task to cancel and one that asks inside its task.

Over Streamable HTTP FastMCP 4.1.4 sends no `Mcp-Name` on `tasks/*` (the tasks extension makes it
the client's duty): the server serves such a request by its body's taskId (see
`http/_rules.check_headers`), and refuses a header that disagrees. Both are checked here, with
the client as it ships and with the header added as the extension asks.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from peers.aws_moto import moto_server, role_in
from peers.aws_moto import stack_status as moto_stack_status
from peers.fastmcp_peer import DRIVER, FastMcpUnavailableError, fastmcp_python
from peers.project import BakedProject, bake, serve_http

ROLE_ACCOUNT = "123456789012"
DRIVER_TIMEOUT_SECONDS = 180


@pytest.fixture(scope="module")
def python() -> Path:
    try:
        return fastmcp_python()
    except FastMcpUnavailableError as exc:
        pytest.fail(f"FastMCP's client cannot be installed: {exc}", pytrace=False)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> BakedProject:
    baked = bake(tmp_path_factory.mktemp("fastmcp"), project_name="FastMCP Peer", aws=True)
    baked.add_conformance_tools()
    return baked


@pytest.fixture(scope="module")
def aws_env() -> Iterator[dict[str, str]]:
    with moto_server() as env:
        yield env


def stdio(project: BakedProject, aws_env: Mapping[str, str]) -> dict[str, Any]:
    return {"kind": "stdio", **project.stdio_launch(aws_env)}


@pytest.fixture(scope="module")
def http_url(
    project: BakedProject, aws_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    log = tmp_path_factory.mktemp("fastmcp-http") / "server.log"
    with serve_http(project, log, project.state_env(aws_env)) as server:
        yield server.url


def drive(python: Path, target: Mapping[str, Any], scenario: str, **arguments: Any) -> Any:
    config = {"target": target, "scenario": scenario, "arguments": arguments}
    done = subprocess.run(
        [str(python), str(DRIVER), json.dumps(config)],
        capture_output=True,
        text=True,
        timeout=DRIVER_TIMEOUT_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    print(json.dumps(seen, indent=2))  # noqa: T201 - the transcript, in the test output
    return seen


def stack_status(aws_env: dict[str, str], stack: str) -> str | None:
    # The deploy assumes the role the user named; moto keeps the stack in that role's account.
    return moto_stack_status(aws_env, stack, role_arn=role_in(ROLE_ACCOUNT))


def tasks_of(project: BakedProject) -> list[tuple[str, str]]:
    """(tool, status) of every task the project's stdio servers stored (the default store)."""
    found = list((project.root.parent / "state").rglob("tasks.sqlite3"))
    assert found, "no task store was written"
    with sqlite3.connect(found[0]) as db:
        rows = db.execute("SELECT status, record FROM tasks").fetchall()
    return [(json.loads(record)["target"], status) for status, record in rows]


def test_fastmcp_deploys_over_stdio_following_the_task(
    python: Path, project: BakedProject, aws_env: dict[str, str]
) -> None:
    seen = drive(python, stdio(project, aws_env), "deploy", stack="fastmcp-stdio")
    assert "error" not in seen, seen
    assert seen["text"].startswith("Created stack 'fastmcp-stdio' in us-east-1: CREATE_COMPLETE.")
    assert seen["structured"]["action"] == "created"
    assert seen["asked"][0] == "Which IAM role should the deploy assume? Give its ARN."
    assert seen["asked"][1].startswith("Create stack 'fastmcp-stdio' in account ")
    assert ("deploy_to_aws", "completed") in tasks_of(project)  # it ran as a task
    assert stack_status(aws_env, "fastmcp-stdio") == "CREATE_COMPLETE"


def test_fastmcp_answers_a_question_asked_inside_a_task_with_tasks_update(
    python: Path, project: BakedProject, aws_env: dict[str, str]
) -> None:
    seen = drive(
        python, stdio(project, aws_env), "question_in_task", tool="confirm_delete", filename="a.txt"
    )
    assert "error" not in seen, seen
    assert seen["created"] == "working"
    assert "input_required" in seen["statuses"]
    assert seen["asked"] and "a.txt" in seen["asked"][0]
    assert "a.txt" in seen["text"]


def test_fastmcp_cancels_a_running_task(
    python: Path, project: BakedProject, aws_env: dict[str, str]
) -> None:
    seen = drive(
        python, stdio(project, aws_env), "cancel", tool="slow_compute", seconds=600, label="x"
    )
    assert "error" not in seen, seen
    assert seen["status"] == "cancelled"


@pytest.mark.parametrize("name_header", [False, True], ids=["as-shipped", "with-mcp-name"])
def test_fastmcp_deploys_over_streamable_http(
    python: Path, http_url: str, aws_env: dict[str, str], name_header: bool
) -> None:
    # As shipped, FastMCP 4.1.4 sends tasks/get without Mcp-Name: served by the body.
    stack = f"fastmcp-http-{'named' if name_header else 'unnamed'}"
    target = {"kind": "http", "url": http_url, "name_header": name_header}
    seen = drive(python, target, "deploy", stack=stack)
    assert "error" not in seen, seen
    assert seen["text"].startswith(f"Created stack '{stack}' in us-east-1: CREATE_COMPLETE.")
    assert stack_status(aws_env, stack) == "CREATE_COMPLETE"
