"""plan_release and release_announcement end to end: the real server process, over real pipes.

The server is started the way hosts start it (`python -m <package>`, from another working
directory) and driven with the project's own client, `ClientSession`: its `call_tool` drives
every 2026-07-28 round, and a `mode=legacy` session answers the server's real
`elicitation/create` requests for 2025-11-25.

Part of the template's samples suite: it runs with a baked project's python against its
package (``MRTR_PACKAGE``); the project's own ``tests/test_smoke.py`` keeps one three-round
plan_release over pipes.
"""

from __future__ import annotations

import html
import importlib
import os
import sys
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

PACKAGE = os.environ["MRTR_PACKAGE"]
testing = importlib.import_module(f"{PACKAGE}.mrtr_runtime.testing")
ClientSession = testing.ClientSession

Json = dict[str, Any]

# The project's src directory (it is installed editable: a src layout).
SRC = Path(importlib.import_module(PACKAGE).__file__ or "").resolve().parents[1]
COMMAND = [sys.executable, "-m", PACKAGE]
BOUND = 30  # seconds for a whole conversation, process start and exit included
KEY_HEX = "8b0f2e4d6c1a3957e8f0b2d4c6a81357e9f1b3d5c7a90246f8e0d2b4c6a81357"
ARGS: Json = {
    "project": "demo",
    "previous_version": "1.4.2",
    "changes": ["feat: add --json output", "fix(cli): exit 2 on a bad flag"],
}
ANSWERS: Mapping[str, Json] = {
    "version": {"action": "accept", "content": {"version": "1.5.0", "kind": "minor"}},
    "highlights": {"action": "accept", "content": {"highlights": "JSON output; clearer errors"}},
    "confirmed": {"action": "accept", "content": {"confirmed": True}},
    "audience": {"action": "accept", "content": {"audience": "operators", "channel": "chat"}},
}


@pytest.fixture
def server_env() -> dict[str, str]:
    # The key is fixed so that a second process can finish a round the first one started.
    path = os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, "MRTR_SIGNING_KEY": KEY_HEX}


class Person:
    """Fills each form by its first field from ANSWERS; opens a linked page ("page") and keeps
    what it read; remembers the fields and messages."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.params: list[Mapping[str, object]] = []
        self.pages: list[str] = []

    async def __call__(self, params: Mapping[str, object]) -> Json:
        if params.get("mode") == "url":
            url = str(params["url"])
            assert url.startswith("http://127.0.0.1:"), url
            self.asked.append("page")
            self.pages.append(await anyio.to_thread.run_sync(read_page, url))
            return {"action": "accept"}
        schema = params["requestedSchema"]
        assert isinstance(schema, dict)
        field = next(iter(schema["properties"]))
        self.asked.append(field)
        self.params.append(params)
        return ANSWERS[field]


def read_page(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 (loopback, ours)
        assert response.status == 200
        return html.unescape(response.read().decode())


def assert_clean(session: ClientSession) -> None:
    assert session.protocol_violations == []
    assert "Traceback" not in session.stderr_text()


@pytest.mark.anyio
async def test_three_rounds_complete_over_pipes(server_env: dict[str, str], tmp_path: Path) -> None:
    person = Person()
    with anyio.fail_after(BOUND):
        async with ClientSession.spawn(
            COMMAND, env=server_env, cwd=tmp_path, elicitation=person
        ) as session:
            result = await session.call_tool("plan_release", ARGS)
            assert_clean(session)
    assert result.rounds == 3
    # The last round links the full notes (a host shows 3 lines of a question), beside the
    # yes; this client answers a round's questions in key order (confirm-..., notes-...).
    assert person.asked == ["version", "highlights", "confirmed", "page"]
    assert "demo 1.5.0, a minor release" in str(person.params[1]["message"])
    plan = result.structured
    assert (plan["status"], plan["version"], plan["tag"]) == ("confirmed", "1.5.0", "v1.5.0")
    assert plan["highlights"] == ["JSON output", "clearer errors"]
    (page,) = person.pages
    assert plan["notes_markdown"].strip() in page  # every line of what the yes approved
    assert "at the link and below" in str(person.params[2]["message"])
    assert session.returncode == 0


@pytest.mark.anyio
async def test_a_round_started_in_one_process_finishes_in_another(
    server_env: dict[str, str], tmp_path: Path
) -> None:
    # MRTR's reason to exist: the server keeps nothing between rounds, so a restart (same
    # key) in the middle of a conversation loses nothing.
    params: Json = {"name": "plan_release", "arguments": ARGS}
    with anyio.fail_after(BOUND):
        async with ClientSession.spawn(
            COMMAND, env=server_env, cwd=tmp_path, elicitation=Person()
        ) as first_process:
            first = await first_process.request("tools/call", params)
        assert first["resultType"] == "input_required"
        async with ClientSession.spawn(
            COMMAND, env=server_env, cwd=tmp_path, elicitation=Person()
        ) as second_process:
            # The second process takes round 1's answer and token, then asks the rest itself;
            # each retry carries only its round's answers and the token it was given.
            person = Person()
            responses: Json = {"release": ANSWERS["version"]}
            result = first
            while result["resultType"] == "input_required":
                retry = {**params, "inputResponses": responses}
                result = await second_process.request(
                    "tools/call", {**retry, "requestState": result["requestState"]}
                )
                requests = result.get("inputRequests", {})
                responses = {key: await person(asked["params"]) for key, asked in requests.items()}
            assert_clean(second_process)
    assert person.asked == ["highlights", "page", "confirmed"]  # in the server's order
    plan = result["structuredContent"]
    assert isinstance(plan, dict)
    assert (plan["status"], plan["version"]) == ("confirmed", "1.5.0")


@pytest.mark.anyio
async def test_a_legacy_session_completes_through_real_elicitation_requests(
    server_env: dict[str, str], tmp_path: Path
) -> None:
    person = Person()
    with anyio.fail_after(BOUND):
        async with ClientSession.spawn(
            COMMAND, env=server_env, cwd=tmp_path, era="legacy", elicitation=person
        ) as session:
            assert session.initialize_result is not None
            result = await session.request(
                "tools/call", {"name": "plan_release", "arguments": ARGS}
            )
            assert_clean(session)
    # 2025-11-25: no resultType, and the three questions arrived as real server requests.
    assert "resultType" not in result
    # The bridge asks in the handler's order: the page of notes, then the yes.
    assert person.asked == ["version", "highlights", "page", "confirmed"]
    assert all("requestedSchema" in params for params in person.params)
    plan = result["structuredContent"]
    assert isinstance(plan, dict)
    assert (plan["status"], plan["version"]) == ("confirmed", "1.5.0")


@pytest.mark.anyio
async def test_a_host_with_sampling_only_gets_a_plan_drafted_by_its_model(
    server_env: dict[str, str], tmp_path: Path
) -> None:
    prompts: list[str] = []

    async def model(params: Mapping[str, object]) -> Json:
        messages = params["messages"]
        assert isinstance(messages, list)
        prompts.append(messages[0]["content"]["text"])
        return {"role": "assistant", "content": {"type": "text", "text": "- JSON!"}, "model": "m"}

    with anyio.fail_after(BOUND):
        async with ClientSession.spawn(
            COMMAND, env=server_env, cwd=tmp_path, sampling=model
        ) as session:
            result = await session.call_tool("plan_release", ARGS)
            assert_clean(session)
    assert len(prompts) == 1
    assert "- feat: add --json output" in prompts[0]
    plan = result.structured
    assert (plan["status"], plan["highlights"]) == ("drafted", ["JSON!"])


@pytest.mark.anyio
async def test_the_prompt_asks_for_its_readers_over_pipes(
    server_env: dict[str, str], tmp_path: Path
) -> None:
    person = Person()
    params: Json = {
        "name": "release_announcement",
        "arguments": {"project": "demo", "version": "1.5.0"},
    }
    with anyio.fail_after(BOUND):
        async with ClientSession.spawn(
            COMMAND, env=server_env, cwd=tmp_path, elicitation=person
        ) as session:
            result = await session.get_prompt(params["name"], params["arguments"])
            assert_clean(session)
    assert person.asked == ["audience"]
    messages = result["messages"]
    assert isinstance(messages, list)
    text = messages[0]["content"]["text"]
    assert "the people who run it" in text
    assert "a chat message" in text
