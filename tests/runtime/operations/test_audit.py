"""The consent audit trail (`_audit`, `MRTR_AUDIT_LOG`): a line per question asked, per decision,
per replay answered from the single-use record and per task that ended; in both eras; never an
answer's content."""

from __future__ import annotations

import json
import logging
import os
import stat
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

from mrtr_runtime import Cancelled, Declined
from mrtr_runtime._audit import AuditTrail, AuditTrailError, decision_of, plan_digest, round_id
from mrtr_runtime._config import Settings
from mrtr_runtime.server import Server
from mrtr_runtime.testing import MemoryClient, answers
from support import (
    ARN,
    BOTH_ANSWERS,
    DEPLOY,
    Json,
    accept,
    make_server,
    meta,
    raw_server,
    read_message,
    reader,
    request,
    send,
    server_env,
)
from task_tools import Flags, build

pytestmark = pytest.mark.anyio


class Lines:
    """An AuditTrail's lines, kept as parsed JSON."""

    def __init__(self) -> None:
        self.raw: list[str] = []

    def write(self, line: str) -> None:
        assert line.endswith("\n") and "\n" not in line[:-1]
        self.raw.append(line)

    @property
    def events(self) -> list[Json]:
        return [json.loads(line) for line in self.raw]

    def of(self, event: str) -> list[Json]:
        return [line for line in self.events if line["event"] == event]


def audited(server: Server) -> Lines:
    lines = Lines()
    server.audit = AuditTrail(lines.write)
    return lines


async def test_a_round_that_asks_and_the_round_that_answers_share_a_round_id() -> None:
    calls: Counter[str] = Counter()
    server = make_server(calls=calls)
    lines = audited(server)
    client = MemoryClient(server)
    first = await client.request("tools/call", {**DEPLOY, "_meta": meta()})
    (asked,) = lines.of("asked")
    assert asked["round"] == round_id(first["requestState"])
    assert asked["tool"] == "deploy_stack" and asked["era"] == "2026-07-28"
    shown = first["inputRequests"]
    assert asked["questions"] == {
        key: {
            "method": request["method"],
            "plan": plan_digest(request["method"], request["params"]),
        }
        for key, request in shown.items()
    }
    retry = {
        **DEPLOY,
        "inputResponses": BOTH_ANSWERS,
        "requestState": first["requestState"],
        "_meta": meta(),
    }
    await client.request("tools/call", retry)
    (decided,) = lines.of("decided")
    assert decided["round"] == asked["round"]
    assert decided["decisions"] == {"confirm": "accepted", "role-arn": "accepted"}
    (finished,) = lines.of("finished")
    assert (finished["round"], finished["outcome"]) == (asked["round"], "complete")
    # The answers' content (the role the user typed) is in no line.
    assert not any(ARN in line for line in lines.raw)


async def test_a_replay_answered_from_the_record_is_its_own_decision() -> None:
    calls: Counter[str] = Counter()
    server = make_server(calls=calls)
    lines = audited(server)
    client = MemoryClient(server)
    first = await client.request("tools/call", {**DEPLOY, "_meta": meta()})
    retry = {
        **DEPLOY,
        "inputResponses": BOTH_ANSWERS,
        "requestState": first["requestState"],
        "_meta": meta(),
    }
    await client.request("tools/call", retry)
    ran = calls["deploy_stack"]
    await client.request("tools/call", retry)
    assert calls["deploy_stack"] == ran
    replays = [line for line in lines.of("decided") if "decision" in line]
    assert [(line["decision"], line["round"]) for line in replays] == [
        ("replayed-from-record", round_id(first["requestState"]))
    ]


@pytest.mark.parametrize(
    ("answer", "decision"), [(Declined(), "declined"), (Cancelled(), "cancelled")]
)
async def test_a_no_is_recorded_as_what_it_was(answer: object, decision: str) -> None:
    server = make_server()
    lines = audited(server)
    client = MemoryClient(
        server, elicitation=answers({"confirm": answer, "role-arn": {"arn": ARN}})
    )
    await client.call_tool("deploy_stack", {"stack": "prod-api"})
    decided = lines.of("decided")
    assert decided and decided[0]["decisions"]["confirm"] == decision


async def test_the_2025_11_25_bridge_records_each_decision_with_what_it_was_on() -> None:
    server = make_server()
    lines = audited(server)
    client = MemoryClient(
        server,
        era="legacy",
        elicitation=answers({"confirm": {"confirmed": True}, "role-arn": {"arn": ARN}}),
    )
    await client.call_tool("deploy_stack", {"stack": "prod-api"})
    decided = lines.of("decided")
    assert [line["era"] for line in decided] == ["2025-11-25"] * len(decided)
    decisions = {key: value for line in decided for key, value in line["decisions"].items()}
    assert decisions == {"confirm": "accepted", "role-arn": "accepted"}
    plans = {key: value for line in decided for key, value in line["plans"].items()}
    asked = {request["params"]["message"]: request for request in client.server_requests}
    assert set(plans.values()) == {
        plan_digest(request["method"], request["params"]) for request in asked.values()
    } - {None}
    (finished,) = lines.of("finished")
    assert finished["outcome"] == "complete"
    assert not any(ARN in line for line in lines.raw)
    # What was asked is a line too, and every line of this call shares one id.
    asked_keys = {key for line in lines.of("asked") for key in line["questions"]}
    assert asked_keys == {"confirm", "role-arn"}
    ids = {line["round"] for line in lines.events}
    assert len(ids) == 1 and None not in ids


async def test_a_task_that_ends_is_a_line_with_its_status() -> None:
    flags = Flags()
    server = make_server(registry=build(flags))
    lines = audited(server)
    client = MemoryClient(server, tasks=True)
    result = await client.call_tool("required_job", {})
    assert not result.is_error
    (ended,) = lines.of("task")
    assert (ended["tool"], ended["status"]) == ("required_job", "completed")
    assert isinstance(ended["task"], str)


def test_decisions_come_from_an_answer_s_shape_alone() -> None:
    assert decision_of("elicitation/create", {"action": "accept", "content": {"x": 1}}) == (
        "accepted"
    )
    assert decision_of("elicitation/create", {"action": "decline"}) == "declined"
    assert decision_of("elicitation/create", {"action": "cancel"}) == "cancelled"
    assert decision_of("sampling/createMessage", {"role": "assistant"}) == "answered"
    # The plan ignores _meta (where a client's trace context may go), nothing else.
    params: dict[str, Any] = {"message": "Deploy?", "requestedSchema": {"type": "object"}}
    assert plan_digest("elicitation/create", params) == plan_digest(
        "elicitation/create", {**params, "_meta": {"x": 1}}
    )
    assert plan_digest("elicitation/create", params) != plan_digest(
        "elicitation/create", {**params, "message": "Deploy to prod?"}
    )


def test_the_trail_goes_to_a_file_only_its_owner_reads(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    trail = AuditTrail.open_target(str(path))
    assert trail is not None
    trail.task_ended(task="t1", tool="deploy", status="completed", message=None)
    trail.task_ended(task="t2", tool="deploy", status="failed", message="boom")
    written = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [line["task"] for line in written] == ["t1", "t2"]
    assert "message" not in written[0] and written[1]["message"] == "boom"
    if os.name == "posix":
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert AuditTrail.open_target("") is None
    assert Settings.from_environment({"MRTR_AUDIT_LOG": str(path)}).audit_log == str(path)


def test_a_trail_that_cannot_be_kept_stops_the_server_saying_why(tmp_path: Path) -> None:
    with pytest.raises(AuditTrailError, match="cannot be the audit trail"):
        AuditTrail.open_target(str(tmp_path / "missing" / "audit.jsonl"))
    victim = tmp_path / "victim.txt"
    victim.write_text("", encoding="utf-8")
    link = tmp_path / "link.jsonl"
    link.symlink_to(victim)
    with pytest.raises(AuditTrailError, match="symbolic link"):
        AuditTrail.open_target(str(link))
    shared = tmp_path / "shared.jsonl"
    shared.write_text("", encoding="utf-8")
    shared.chmod(0o644)
    with pytest.raises(AuditTrailError, match="chmod 600"):
        AuditTrail.open_target(str(shared))
    with pytest.raises(AuditTrailError, match=r"Is a directory|not a regular file"):
        AuditTrail.open_target(str(tmp_path))


def test_a_line_that_cannot_be_written_later_is_reported_not_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    trail = AuditTrail.open_target(str(folder / "audit.jsonl"))
    assert trail is not None
    (folder / "audit.jsonl").unlink()
    folder.rmdir()  # the disk went away under it
    with caplog.at_level(logging.ERROR, logger="mrtr_runtime"):
        for _ in range(3):
            trail.task_ended(task="t", tool="deploy", status="completed", message=None)
    reports = [r for r in caplog.records if "audit trail" in r.getMessage()]
    assert len(reports) == 1
    assert "MRTR_AUDIT_LOG" in reports[0].getMessage()


async def test_no_trail_no_lines_and_the_same_answers() -> None:
    # Without a trail nothing is written and the rounds go exactly as with one.
    server = make_server()
    assert server.audit is None
    client = MemoryClient(server)
    first = await client.request("tools/call", {**DEPLOY, "_meta": meta()})
    assert first["resultType"] == "input_required"
    accept_all = {"confirm": accept(confirmed=True), "role-arn": accept(arn=ARN)}
    retry = {
        **DEPLOY,
        "inputResponses": accept_all,
        "requestState": first["requestState"],
        "_meta": meta(),
    }
    assert (await client.request("tools/call", retry))["resultType"] == "complete"


async def test_over_stdio_the_trail_goes_to_its_file_and_stdout_stays_the_wire(
    server_command: list[str], tmp_path: Path
) -> None:
    # The project's own server, as a host starts it, its settings from the environment.
    path = tmp_path / "audit.jsonl"
    release = {
        "name": "plan_release",
        "arguments": {"project": "Demo", "previous_version": "1.2.0", "changes": ["feat: x"]},
    }
    with anyio.fail_after(60):
        async with raw_server(server_command, server_env(MRTR_AUDIT_LOG=str(path))) as process:
            stdout = reader(process)
            await send(process, request(1, "tools/call", release))
            first = await read_message(stdout)
    result = first["result"]
    assert result["resultType"] == "input_required"
    (asked,) = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert asked["event"] == "asked" and asked["tool"] == "plan_release"
    assert asked["round"] == round_id(result["requestState"])
    assert set(asked["questions"]) == set(result["inputRequests"])


async def test_a_task_s_own_questions_and_their_answers_by_tasks_update_are_lines() -> None:
    flags = Flags()
    server = make_server(registry=build(flags))
    lines = audited(server)
    client = MemoryClient(
        server,
        tasks=True,
        elicitation=answers({"name": {"name": "Ada"}, "confirm": {"confirmed": True}}),
    )
    result = await client.call_tool("two_questions", {})
    assert not result.is_error
    (asked,) = [line for line in lines.of("asked") if "task" in line]
    decided = [line for line in lines.of("decided") if "task" in line]
    assert decided and {line["task"] for line in decided} == {asked["task"]}
    keys = {key for line in decided for key in line["decisions"]}
    assert keys == set(asked["questions"])
    assert all(value == "accepted" for line in decided for value in line["decisions"].values())
    assert not any("Ada" in line for line in lines.raw)
    (ended,) = lines.of("task")
    assert ended["task"] == asked["task"] and ended["status"] == "completed"
