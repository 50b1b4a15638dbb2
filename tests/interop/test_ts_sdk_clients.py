"""The official TypeScript SDK clients, v2 (`@modelcontextprotocol/client` 2.4.0) and v1
(`@modelcontextprotocol/sdk` 1.32.2): `deploy_to_aws` over Streamable HTTP in the 2025-11-25 era,
and a baked server's task tools over stdio.

Over HTTP (the second half of this file) each client runs as a host would: v1 speaks only
2025-11-25, v2 in its default mode (no `versionNegotiation` option: 2.4.0's
DEFAULT_VERSION_NEGOTIATION_MODE is "legacy", so it sends `initialize`). Each answers the
deploy's two questions (the role, then a yes to the plan) through its own elicitation handler,
against `<slug> http` pointed at moto's standalone server, through a recording proxy
(tests/peers/http_proxy.py) whose transcript is printed (`pytest -rA`) and checked: `initialize`,
the session id on every later request, the questions on the POST's SSE stream, the answers
POSTed back. moto then holds the stack in the account of the role the client answered.

Tasks, over stdio:

Neither can follow a task of the tasks extension (`io.modelcontextprotocol/tasks`), so what is
pinned here is what the spec asks of the server for such clients (tasks "Capability
Negotiation": no CreateTaskResult to a request that did not declare the extension; -32021 naming
it for a request only a task can serve), and what each client does when it meets a task:

- v2 2.4.0 declares no extension of its own. Its 2026-07-28 result decoder knows
  `resultType` "complete" and "input_required" only and turns any other into
  `SdkError(UNSUPPORTED_RESULT_TYPE)` (core-internal `wire/rev2026` decodeResult, bundled in
  `dist/src-*.mjs`); no API polls tasks/get. A host that declares the extension by hand
  (`capabilities.extensions`) therefore gets a task it cannot read, shown here too: proof that
  the server answers with a task exactly when the request declares the extension.
- v1 1.32.2 speaks 2025-11-25 and older (`LATEST_PROTOCOL_VERSION`), whose experimental tasks
  (`client.experimental.tasks.callToolStream`: a `task` parameter on tools/call, a nested
  `task` in the answer, tasks/result) are not this extension, and it starts one only for a
  tool listed with `execution.taskSupport`, which this server never lists.

The client side is `tests/peers/ts_clients.cjs`, run with the pinned Node peers
(`tests/peers/node.py`); the task tools are the conformance fixtures (`slow_compute`,
optional; `failing_job`, task-only).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from peers.aws_moto import moto_server, role_in, stack_id, stack_status
from peers.http_proxy import Proxy, answers, assert_legacy_session, questions
from peers.node import NodePeers, ensure_node_peers
from peers.project import BakedProject, bake, serve_http

TASKS = "io.modelcontextprotocol/tasks"
#: Each run spawns one server (a cold Python start) and makes a few sub-second calls.
RUN_TIMEOUT_SECONDS = 120
SLOW_COMPUTE = {"tool": "slow_compute", "arguments": {"seconds": 0.2, "label": "ts"}}
FAILING_JOB = {"tool": "failing_job", "arguments": {}}
INLINE_TEXT = "Computed 'ts' in 0.2 s."
TASKS_REQUIRED = {"requiredCapabilities": {"extensions": {TASKS: {}}}}


@pytest.fixture(scope="module")
def peers() -> NodePeers:
    return ensure_node_peers()


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> BakedProject:
    baked = bake(tmp_path_factory.mktemp("ts"), project_name="TS Peer", aws=True)
    baked.add_conformance_tools()
    return baked


def run_client(
    peers: NodePeers,
    project: BakedProject,
    client: str,
    calls: list[Mapping[str, Any]],
    capabilities: Mapping[str, Any] | None = None,
    *,
    url: str | None = None,
    **options: Any,
) -> dict[str, Any]:
    """One `ts_clients.cjs` run: `client` spawns the server (or connects to `url`) and makes
    `calls`; its report. `options` go into the plan as they are (`negotiation`, `elicit`)."""
    stdio = {
        "command": sys.executable,
        "args": project.server_command()[1:],
        # The default task store lives in the per-user state directory: this module's own.
        "env": project.server_env({"XDG_STATE_HOME": str(project.root.parent / "state")}),
        "cwd": str(project.root.parent),
    }
    plan = {
        "client": client,
        "capabilities": dict(capabilities or {}),
        "server": {"url": url} if url else stdio,
        "calls": calls,
        **options,
    }
    done = subprocess.run(
        peers.ts_clients_command(json.dumps(plan)),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def text_of(result: Mapping[str, Any]) -> str:
    return "".join(block["text"] for block in result["content"] if block["type"] == "text")


@pytest.fixture(scope="module")
def v2_plain(peers: NodePeers, project: BakedProject) -> dict[str, Any]:
    return run_client(peers, project, "v2", [SLOW_COMPUTE, FAILING_JOB])


@pytest.fixture(scope="module")
def v2_declaring(peers: NodePeers, project: BakedProject) -> dict[str, Any]:
    return run_client(
        peers, project, "v2", [SLOW_COMPUTE], capabilities={"extensions": {TASKS: {}}}
    )


@pytest.fixture(scope="module")
def v1(peers: NodePeers, project: BakedProject) -> dict[str, Any]:
    calls = [SLOW_COMPUTE, {**SLOW_COMPUTE, "stream": True}, FAILING_JOB]
    return run_client(peers, project, "v1", calls)


def test_ts_v2_client_gets_an_optional_task_tool_inline(
    v2_plain: dict[str, Any],
) -> None:
    assert v2_plain["protocolVersion"] == "2026-07-28"
    inline = v2_plain["calls"][0]
    assert "error" not in inline, inline
    assert text_of(inline["result"]) == INLINE_TEXT
    assert "taskId" not in inline["result"]


def test_ts_v2_client_is_refused_a_task_only_tool_with_32021(
    v2_plain: dict[str, Any],
) -> None:
    refused = v2_plain["calls"][1]["error"]
    assert refused["name"] == "MissingRequiredClientCapabilityError"
    assert refused["code"] == -32021
    assert refused["data"] == TASKS_REQUIRED


def test_ts_v2_client_declaring_the_extension_gets_a_task_it_cannot_follow(
    v2_declaring: dict[str, Any],
) -> None:
    """The same call, declared: the server answers with a task, which v2 2.4.0 cannot read."""
    assert v2_declaring["protocolVersion"] == "2026-07-28"
    error = v2_declaring["calls"][0]["error"]
    assert error["code"] == "UNSUPPORTED_RESULT_TYPE"
    assert error["data"] == {"resultType": "task", "method": "tools/call"}


def test_ts_v1_client_speaks_2025_11_25_and_gets_a_task_tool_inline(
    v1: dict[str, Any],
) -> None:
    assert v1["protocolVersion"] == "2025-11-25"
    inline = v1["calls"][0]
    assert "error" not in inline, inline
    assert text_of(inline["result"]) == INLINE_TEXT


def test_ts_v1_task_stream_starts_no_task_and_yields_the_inline_result(
    v1: dict[str, Any],
) -> None:
    """v1's own (2025-11-25 experimental) task API: no taskCreated or taskStatus, one result."""
    messages = v1["calls"][1]["messages"]
    assert [message["type"] for message in messages] == ["result"]
    assert text_of(messages[0]["result"]) == INLINE_TEXT


def test_ts_v1_client_is_refused_a_task_only_tool_with_32021(
    v1: dict[str, Any],
) -> None:
    refused = v1["calls"][2]["error"]
    assert refused["code"] == -32021
    assert refused["data"] == TASKS_REQUIRED


# -- deploy_to_aws over Streamable HTTP, in the 2025-11-25 era -------------------------------------

#: Each client answers a role in an account of its own: moto shows which answer was deployed.
ACCOUNTS = {"v1": "210000000001", "v2": "210000000002"}


@pytest.fixture(scope="module")
def aws_env() -> Iterator[dict[str, str]]:
    with moto_server() as env:
        yield env


@pytest.fixture(scope="module")
def http_proxy(
    project: BakedProject,
    aws_env: dict[str, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Proxy]:
    """One `<slug> http` (pointed at moto) behind the recording proxy; it must stop cleanly."""
    log_path = tmp_path_factory.mktemp("ts-http") / "server.log"
    state = {"XDG_STATE_HOME": str(project.root.parent / "state")}
    with serve_http(project, log_path, {**state, **aws_env}) as server:
        with Proxy([server.url]) as proxy:
            yield proxy
        assert server.stop() == 0, server.log()


def deploy_over_http(
    peers: NodePeers,
    project: BakedProject,
    proxy: Proxy,
    client: str,
    stack: str,
    **elicit: Any,
) -> tuple[dict[str, Any], list[Any]]:
    """`client` (v2 in its default mode) calls deploy_to_aws through the proxy, answering with
    its own elicitation handler; its report, and what crossed the wire (printed)."""
    answers_given = {"arn": role_in(ACCOUNTS[client]), "confirmed": True}
    start = len(proxy.exchanges)
    report = run_client(
        peers,
        project,
        client,
        [{"tool": "deploy_to_aws", "arguments": {"stack": stack}}],
        url=proxy.url,
        negotiation="default",
        elicit={"answers": answers_given, **elicit},
    )
    exchanges = proxy.since(start)
    print(f"\n{client} deploy_to_aws {stack} over Streamable HTTP:")  # noqa: T201 (the note)
    print("\n".join(proxy.transcript(start)))  # noqa: T201
    print(f"  the client's result: {json.dumps(report['calls'][0])[:400]}")  # noqa: T201
    return report, exchanges


@pytest.mark.parametrize("client", ["v1", "v2"])
def test_ts_client_deploys_to_moto_over_http_in_the_2025_11_25_era(
    peers: NodePeers,
    project: BakedProject,
    http_proxy: Proxy,
    aws_env: dict[str, str],
    client: str,
) -> None:
    stack = f"ts-{client}-http"
    report, exchanges = deploy_over_http(peers, project, http_proxy, client, stack)

    # The client's side: 2025-11-25 negotiated, the result is the deploy's.
    assert report["protocolVersion"] == "2025-11-25"
    (call,) = report["calls"]
    assert "error" not in call, call
    assert text_of(call["result"]).startswith(f"Created stack '{stack}' in us-east-1")
    assert [question["properties"] for question in report["asked"]] == [
        ["arn"],
        ["confirmed"],
    ]
    # The wire: initialize, then the session on every request; both questions came as
    # elicitation/create requests on the tools/call's SSE stream and went back as POSTs.
    session = assert_legacy_session(exchanges)
    assert report["sessionId"] == session
    (call_post,) = [e for e in exchanges if e.methods() == ["tools/call"]]
    assert call_post.content_type.startswith("text/event-stream")
    assert call_post.received_methods() == ["elicitation/create", "elicitation/create"]
    sent_back = answers(exchanges)
    assert [answer["id"] for answer in sent_back] == [q["id"] for q in questions(exchanges)]
    assert [answer["result"]["action"] for answer in sent_back] == ["accept", "accept"]
    # moto's side: the stack, in the account of the role this client answered, and only there.
    role = role_in(ACCOUNTS[client])
    assert stack_status(aws_env, stack, role_arn=role) == "CREATE_COMPLETE"
    assert f":{ACCOUNTS[client]}:stack/{stack}/" in stack_id(aws_env, stack, role_arn=role)
    assert stack_status(aws_env, stack, role_arn=None) is None


@pytest.mark.parametrize("client", ["v1", "v2"])
def test_ts_client_declining_over_http_deploys_nothing(
    peers: NodePeers,
    project: BakedProject,
    http_proxy: Proxy,
    aws_env: dict[str, str],
    client: str,
) -> None:
    stack = f"ts-{client}-declined"
    report, exchanges = deploy_over_http(peers, project, http_proxy, client, stack, decline=True)

    (call,) = report["calls"]
    assert "error" not in call, call
    assert text_of(call["result"]).startswith(f"Deploy of stack '{stack}' cancelled by the user")
    assert call["result"]["structuredContent"]["action"] == "cancelled"
    assert_legacy_session(exchanges)
    assert [answer["result"]["action"] for answer in answers(exchanges)] == ["decline"]
    assert stack_status(aws_env, stack, role_arn=role_in(ACCOUNTS[client])) is None
    assert stack_status(aws_env, stack, role_arn=None) is None


def test_ts_v2_client_in_its_default_mode_speaks_2025_11_25_over_stdio_too(
    peers: NodePeers, project: BakedProject
) -> None:
    """The README's line for v2: no `versionNegotiation`, the legacy era, whatever the transport."""
    report = run_client(peers, project, "v2", [SLOW_COMPUTE], negotiation="default")

    assert report["protocolVersion"] == "2025-11-25"
    assert text_of(report["calls"][0]["result"]) == INLINE_TEXT


def test_ts_v2_client_pinned_to_2026_07_28_over_http_sends_no_initialize(
    peers: NodePeers, project: BakedProject, http_proxy: Proxy
) -> None:
    """The README's switch for v2: `versionNegotiation: {mode: {pin: "2026-07-28"}}`."""
    start = len(http_proxy.exchanges)
    report = run_client(peers, project, "v2", [SLOW_COMPUTE], url=http_proxy.url)
    exchanges = http_proxy.since(start)

    assert report["protocolVersion"] == "2026-07-28"
    assert text_of(report["calls"][0]["result"]) == INLINE_TEXT
    assert not [e for e in exchanges if "initialize" in e.methods()]
    assert not [e for e in exchanges if e.new_session]  # no session: each request stands alone


def test_ts_v2_client_in_auto_mode_over_http_finds_2026_07_28_first(
    peers: NodePeers, project: BakedProject, http_proxy: Proxy
) -> None:
    """The README's other switch for v2: `versionNegotiation: {mode: "auto"}` probes first."""
    start = len(http_proxy.exchanges)
    report = run_client(
        peers, project, "v2", [SLOW_COMPUTE], url=http_proxy.url, negotiation="auto"
    )
    exchanges = http_proxy.since(start)

    assert report["protocolVersion"] == "2026-07-28"
    assert exchanges[0].methods() == ["server/discover"]
    assert not [e for e in exchanges if "initialize" in e.methods()]


# == caching (issue 22): a changing resource, and a tool declared at runtime ======================
# One block, kept apart from the task tests above. The v2 client 2.4.0 keeps a response cache
# (its `ResponseCacheStore`, in memory by default) and serves a result again while its `ttlMs`
# lasts (2026-07-28 server/utilities/caching). The plan is the caching one of ts_clients.cjs;
# the fixtures are tests/peers/caching_tools.py. Each run gets a fresh server.


@pytest.fixture(scope="module")
def caching_project(tmp_path_factory: pytest.TempPathFactory) -> BakedProject:
    from peers.project import HERE as PEERS

    baked = bake(tmp_path_factory.mktemp("ts-caching"), project_name="TS Caching", aws=False)
    name = "caching_tools.py"
    (baked.tools_dir / name).write_bytes((PEERS / name).read_bytes())
    return baked


def run_caching_plan(peers: NodePeers, project: BakedProject, url: str | None) -> dict[str, Any]:
    state = {"XDG_STATE_HOME": str(project.root.parent / "state")}
    plan = {
        "caching": {"url": url},
        "server": {
            "command": sys.executable,
            "args": project.server_command()[1:],
            "env": project.server_env(state),
            "cwd": str(project.root.parent),
        },
    }
    done = subprocess.run(
        peers.ts_clients_command(json.dumps(plan)),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    report: dict[str, Any] = json.loads(done.stdout)
    return report


@pytest.fixture(params=["stdio", "http"], scope="module")
def caching_report(
    request: pytest.FixtureRequest,
    peers: NodePeers,
    caching_project: BakedProject,
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[str, dict[str, Any]]:
    """One caching run of the v2 client over `request.param`, and what it reported."""
    from peers.project import serve_http

    if request.param == "stdio":
        return "stdio", run_caching_plan(peers, caching_project, None)
    log = tmp_path_factory.mktemp("ts-caching-http") / "server.log"
    state = {"XDG_STATE_HOME": str(caching_project.root.parent / "state")}
    with serve_http(caching_project, log, state) as server:
        report = run_caching_plan(peers, caching_project, server.url)
        assert server.stop() == 0, server.log()
    return "http", report


def test_ts_v2_client_reads_a_changing_resource_twice_and_sees_both_values(
    caching_report: tuple[str, dict[str, Any]],
) -> None:
    transport, report = caching_report
    changing = report["reads"]["caching://changing"]
    declared = report["reads"]["caching://declared"]
    sys.stdout.write(
        f"\nts client 2.4.0 (v2), {transport}, {report['protocolVersion']}: caching://changing "
        f"(ttlMs {changing[0]['ttlMs']}, {changing[0]['cacheScope']}) read twice: "
        f"{[read['text'] for read in changing]}; caching://declared (ttlMs "
        f"{declared[0]['ttlMs']}, {declared[0]['cacheScope']}) read twice: "
        f"{[read['text'] for read in declared]}\n"
    )
    assert report["protocolVersion"] == "2026-07-28"
    # The second read reached the server: the default hints (ttlMs 0, private) let it.
    assert [read["text"] for read in changing] == ["read 1", "read 2"]
    assert (changing[0]["ttlMs"], changing[0]["cacheScope"]) == (0, "private")
    # The client does cache what a resource declares: the same first value, twice.
    assert [read["text"] for read in declared] == ["declared read 1", "declared read 1"]
    assert (declared[0]["ttlMs"], declared[0]["cacheScope"]) == (600_000, "private")


def test_ts_v2_client_sees_a_tool_declared_at_runtime_in_its_next_tools_list(
    caching_report: tuple[str, dict[str, Any]],
) -> None:
    transport, report = caching_report
    before, after = report["toolsBefore"], report["toolsAfter"]
    new = sorted(set(after["names"]) - set(before["names"]))
    sys.stdout.write(
        f"\nts client 2.4.0 (v2), {transport}: tools/list (ttlMs {before['ttlMs']}, "
        f"{before['cacheScope']}) before declare_tool: {len(before['names'])} tools; "
        f"after: {len(after['names'])}, new: {new}\n"
    )
    assert text_of(report["declared"]) == "declared late_tool"
    # An unsealed registry's lists are immediately stale (ttlMs 0), so the client asked again.
    assert "late_tool" not in before["names"]
    assert after["names"] == [*before["names"], "late_tool"]
    assert (before["ttlMs"], before["cacheScope"]) == (0, "public")
