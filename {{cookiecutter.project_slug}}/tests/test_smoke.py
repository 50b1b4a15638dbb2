"""Smoke: this project's real server, started as hosts start it, over real pipes.

Both protocol eras end to end (2026-07-28 per request; 2025-11-25 after ``initialize``), a
tampered ``requestState`` refused with -32602, and the start-up promise: the first answer does
not wait for the tool modules, nor for pydantic, which comes with them.

The runtime's own suite (protocol, tokens, fuzzing, bad input, the stdio transport, the legacy
bridge, the clients) lives in the mrtr-server template and runs there against every option
combination of this project; the tools' own tests are beside this file.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from {{ cookiecutter.package_name }}.mrtr_runtime.testing import (
    ClientSession,
    RpcError,
)

pytestmark = pytest.mark.anyio

PACKAGE = "{{ cookiecutter.package_name }}"
BOUND = 30  # seconds for a whole conversation, process start and exit included
PLAN: dict[str, Any] = {
    "project": "demo",
    "previous_version": "1.4.2",
    "changes": ["feat: add --json output", "fix(cli): exit 2 on a bad flag"],
}
#: plan_release's three forms, answered by their first field.
FORMS: Mapping[str, Mapping[str, object]] = {
    "version": {"version": "1.5.0", "kind": "minor"},
    "highlights": {"highlights": "JSON output; clearer errors"},
    "confirmed": {"confirmed": True},
}


def fill_in_sync(params: Mapping[str, Any]) -> dict[str, Any]:
    if params.get("mode") == "url":  # a page to read (the release notes): "opened"
        return {"action": "accept"}
    field = next(iter(params["requestedSchema"]["properties"]))
    return {"action": "accept", "content": dict(FORMS[field])}


async def fill_in(params: Mapping[str, Any]) -> dict[str, Any]:
    return fill_in_sync(params)


def assert_clean(session: ClientSession) -> None:
    assert session.protocol_violations == []
    assert "Traceback" not in session.stderr_text(), session.stderr_text()


@pytest.fixture(scope="module")
async def modern_session(
    server_command: list[str],
    module_server_env: dict[str, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[ClientSession]:
    """One real server for the 2026-07-28 tests: every request of that era stands alone (its
    version and capabilities ride in `_meta`), so the tests share the process; starting one is
    most of a second."""
    cwd = tmp_path_factory.mktemp("modern")
    async with ClientSession.spawn(
        server_command, env=module_server_env, cwd=cwd, elicitation=fill_in
    ) as session:
        yield session


async def test_a_modern_client_discovers_lists_and_finishes_a_multi_round_call(
    modern_session: ClientSession,
) -> None:
    with anyio.fail_after(BOUND):
        discover = await modern_session.request("server/discover", {})
        tools = await modern_session.request("tools/list", {})
        result = await modern_session.call_tool("plan_release", PLAN)
    assert_clean(modern_session)
    assert "2026-07-28" in discover["supportedVersions"]
    assert "plan_release" in {tool["name"] for tool in tools["tools"]}
    assert result.rounds == 3  # the release, its highlights, the confirmation
    plan = result.structured
    assert (plan["status"], plan["version"], plan["tag"]) == ("confirmed", "1.5.0", "v1.5.0")


async def test_a_legacy_client_initializes_and_is_asked_with_real_requests(
    server_command: list[str], server_env: dict[str, str], tmp_path: Path
) -> None:
    with anyio.fail_after(BOUND):
        async with ClientSession.spawn(
            server_command, env=server_env, cwd=tmp_path, era="legacy", elicitation=fill_in
        ) as session:
            assert session.initialize_result is not None
            result = await session.request(
                "tools/call", {"name": "plan_release", "arguments": PLAN}
            )
            assert_clean(session)
    assert "resultType" not in result
    assert result["structuredContent"]["status"] == "confirmed"


async def test_a_tampered_request_state_is_refused_with_invalid_params(
    modern_session: ClientSession,
) -> None:
    params: dict[str, Any] = {"name": "plan_release", "arguments": PLAN}
    with anyio.fail_after(BOUND):
        first = await modern_session.request("tools/call", params)
        token: str = first["requestState"]
        flipped = token[:-1] + ("A" if token[-1] != "A" else "B")
        with pytest.raises(RpcError) as refused:
            await modern_session.request("tools/call", {**params, "requestState": flipped})
    assert_clean(modern_session)
    assert first["resultType"] == "input_required"
    assert refused.value.code == -32602
    assert "requestState" in refused.value.message


# -- start-up ------------------------------------------------------------------------------------

# Starts the real CLI, but a tool module's import reports whether pydantic was already loaded,
# then fails: if the first answer still arrives, it did not wait for the tools.
LAUNCHER = """
import sys
from importlib.abc import MetaPathFinder


class ToolsProbe(MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.startswith("PACKAGE.tools.") and not name.rpartition(".")[2].startswith("_"):
            print("pydantic before tools:", "pydantic" in sys.modules, file=sys.stderr)
            raise RuntimeError("probe: a tool module was imported")
        return None


sys.meta_path.insert(0, ToolsProbe())
from PACKAGE.app import main

sys.exit(main([]))
"""


def test_the_first_answer_comes_before_the_tools_and_pydantic(
    server_env: dict[str, str], tmp_path: Path
) -> None:
    launcher = tmp_path / "launch.py"
    launcher.write_text(LAUNCHER.replace("PACKAGE", PACKAGE), encoding="utf-8")
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    discover = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}}
    done = subprocess.run(
        [sys.executable, str(launcher)],
        input=json.dumps(discover) + "\n",
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=server_env,
        cwd=tmp_path,
        timeout=BOUND,
        check=False,
    )
    responses = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(response["id"], "result" in response) for response in responses] == [(1, True)]
    assert "pydantic before tools: False" in done.stderr
    # The tools were loaded right after that answer; a tool that cannot be imported ends the
    # server with status 1 and says why.
    assert "probe: a tool module was imported" in done.stderr
    assert "the tools could not be loaded" in done.stderr
    assert done.returncode == 1
