"""The client side: the MRTR retry loop, `answers`, MemoryClient and ClientSession.

The loop runs against a scripted in-process requester; `MemoryClient` against the suite's own
server (`support.make_server`); `ClientSession` over real pipes against
``fake_stdio_server.py``, a scripted stdlib server, so the client is checked on its own.
"""

from __future__ import annotations

import copy
import signal
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, cast

import anyio
import pytest

from mrtr_runtime._answers import Accepted
from mrtr_runtime._jsonrpc import LineSplitter
from mrtr_runtime.server import Server
from mrtr_runtime.testing import (
    ClientSession,
    Declined,
    MemoryClient,
    RpcError,
    TooManyRounds,
    answers,
)
from mrtr_runtime.testing._client import SessionClosed
from mrtr_runtime.testing._rounds import (
    InvalidServerResponse,
    UnexpectedInput,
    call_tool_with_inputs,
    default_input_handler,
    request_with_inputs,
)
from support import ARN, make_server, text_of

FAKE_SERVER = Path(__file__).parents[1] / "fake_stdio_server.py"
BOUND = 10  # seconds; every test that waits on another task or process is bounded

Json = dict[str, Any]

ELICITATION: Json = {"elicitation": {"form": {}, "url": {}}}
DEPLOY_YES: Json = {"confirm": {"confirmed": True}, "role-arn": {"arn": ARN}}


def fake(mode: str = "modern") -> list[str]:
    return [sys.executable, str(FAKE_SERVER), mode]


class ScriptedRequester:
    """An in-process Requester: records each call, answers with ``respond(call_number, params)``."""

    def __init__(self, respond: Callable[[int, Json], Json]) -> None:
        self.respond = respond
        self.calls: list[tuple[str, Json]] = []

    async def request(self, method: str, params: Mapping[str, object]) -> Json:
        self.calls.append((method, copy.deepcopy(dict(params))))
        return self.respond(len(self.calls), dict(params))


def asks(**entries: Json) -> Json:
    return {"resultType": "input_required", "inputRequests": entries}


def elicit(message: str = "Name?") -> Json:
    schema = {"type": "object", "properties": {"name": {"type": "string"}}}
    return {
        "method": "elicitation/create",
        "params": {"message": message, "requestedSchema": schema},
    }


DONE: Json = {"resultType": "complete", "content": []}


async def accept_ada(params: Json) -> Json:
    return {"action": "accept", "content": {"name": "Ada"}}


async def sample_hi(params: Json) -> Json:
    return {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}


async def no_roots(params: Json) -> Json:
    return {"roots": []}


async def must_not_be_called(params: Json) -> Json:
    raise AssertionError("the input handler must not be called")


async def received(session: ClientSession) -> list[Json]:
    """What the fake server received (all messages before this request)."""
    result = await session.request("fake/received", {})
    messages = result["messages"]
    assert isinstance(messages, list)
    return messages


def tool_calls(messages: list[Json]) -> list[Json]:
    return [m["params"] for m in messages if m.get("method") == "tools/call"]


# -- the retry loop, in process ----------------------------------------------------------------


@pytest.mark.parametrize("max_rounds", [0, 1, 3])
@pytest.mark.anyio
async def test_round_cap_allows_max_rounds_retries_then_raises_too_many_rounds(
    max_rounds: int,
) -> None:
    requester = ScriptedRequester(
        lambda n, _: {**asks(again=elicit()), "requestState": f"secret-token-{n}"}
    )
    handler = default_input_handler(elicitation=accept_ada)

    with pytest.raises(TooManyRounds) as raised:
        await call_tool_with_inputs(requester, "t", {}, handler, max_rounds=max_rounds)

    assert len(requester.calls) == max_rounds + 1
    assert "secret-token" not in str(raised.value)
    assert raised.value.max_rounds == max_rounds


@pytest.mark.anyio
async def test_each_retry_sends_only_that_rounds_answers() -> None:
    script = {1: asks(a=elicit("A?")), 2: asks(b=elicit("B?")), 3: DONE}
    requester = ScriptedRequester(lambda n, _: script[n])

    result = await call_tool_with_inputs(
        requester, "t", {"x": 1}, default_input_handler(elicitation=accept_ada)
    )

    assert result == DONE
    sent = [params.get("inputResponses") for _, params in requester.calls]
    answer = {"action": "accept", "content": {"name": "Ada"}}
    assert sent == [None, {"a": answer}, {"b": answer}]


@pytest.mark.anyio
async def test_retry_repeats_the_same_method_and_arguments() -> None:
    arguments = {"stack": "prod-api", "nested": {"list": [1, 2]}}
    script = {1: asks(a=elicit()), 2: asks(b=elicit()), 3: DONE}
    requester = ScriptedRequester(lambda n, _: script[n])

    await request_with_inputs(
        requester,
        "prompts/get",
        {"name": "p", "arguments": arguments},
        default_input_handler(elicitation=accept_ada),
    )

    assert [method for method, _ in requester.calls] == ["prompts/get"] * 3
    assert all(params["name"] == "p" for _, params in requester.calls)
    assert all(params["arguments"] == arguments for _, params in requester.calls)


@pytest.mark.anyio
async def test_request_state_is_echoed_byte_exact() -> None:
    token = ' \u00e9\u2713\u2028+/==\\"x"\t' + "A" * 10_000 + " "
    script = {1: {**asks(a=elicit()), "requestState": token}, 2: DONE}
    requester = ScriptedRequester(lambda n, _: script[n])

    await call_tool_with_inputs(requester, "t", None, default_input_handler(elicitation=accept_ada))

    echoed = requester.calls[1][1]["requestState"]
    assert isinstance(echoed, str)
    assert echoed.encode("utf-8") == token.encode("utf-8")


@pytest.mark.anyio
async def test_request_state_is_omitted_when_the_server_sent_none() -> None:
    script = {1: asks(a=elicit()), 2: DONE}
    requester = ScriptedRequester(lambda n, _: script[n])

    await call_tool_with_inputs(requester, "t", {}, default_input_handler(elicitation=accept_ada))

    assert "requestState" not in requester.calls[1][1]
    assert "requestState" not in requester.calls[0][1]


@pytest.mark.anyio
async def test_decline_and_cancel_answers_pass_through_as_values() -> None:
    script = {1: asks(first=elicit("first"), second=elicit("second")), 2: DONE}
    requester = ScriptedRequester(lambda n, _: script[n])

    async def refuse(params: Json) -> Json:
        return {"action": "decline"} if params["message"] == "first" else {"action": "cancel"}

    await call_tool_with_inputs(requester, "t", {}, default_input_handler(elicitation=refuse))

    assert requester.calls[1][1]["inputResponses"] == {
        "first": {"action": "decline"},
        "second": {"action": "cancel"},
    }


@pytest.mark.anyio
async def test_handler_error_aborts_the_loop_without_another_call() -> None:
    requester = ScriptedRequester(lambda n, _: asks(a=elicit()))

    async def dialog_closed(params: Json) -> Json:
        raise RuntimeError("the user closed the dialog")

    with pytest.raises(RuntimeError, match="closed the dialog"):
        await call_tool_with_inputs(
            requester, "t", {}, default_input_handler(elicitation=dialog_closed)
        )

    assert len(requester.calls) == 1


@pytest.mark.anyio
async def test_unknown_input_method_aborts_with_an_error_naming_it() -> None:
    requester = ScriptedRequester(lambda n, _: asks(a=elicit(), z={"method": "tasks/weird"}))

    with pytest.raises(RpcError, match="tasks/weird") as raised:
        await call_tool_with_inputs(
            requester, "t", {}, default_input_handler(elicitation=must_not_be_called)
        )

    assert raised.value.code == -32601
    assert len(requester.calls) == 1


@pytest.mark.anyio
async def test_missing_callback_aborts_with_an_error_naming_the_method() -> None:
    sampling = {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}}
    requester = ScriptedRequester(lambda n, _: asks(s=sampling))

    with pytest.raises(RpcError, match="sampling/createMessage"):
        await call_tool_with_inputs(
            requester, "t", {}, default_input_handler(elicitation=accept_ada)
        )

    assert len(requester.calls) == 1


@pytest.mark.anyio
async def test_state_only_result_is_retried_without_asking_the_handler() -> None:
    script = {
        1: {"resultType": "input_required", "requestState": "one"},
        2: {"resultType": "input_required", "requestState": "two"},
        3: DONE,
    }
    requester = ScriptedRequester(lambda n, _: script[n])

    with anyio.fail_after(BOUND):
        result = await call_tool_with_inputs(
            requester, "t", {}, default_input_handler(elicitation=must_not_be_called)
        )

    assert result == DONE
    assert [params.get("requestState") for _, params in requester.calls] == [None, "one", "two"]
    assert all("inputResponses" not in params for _, params in requester.calls)


@pytest.mark.anyio
async def test_default_handler_runs_a_rounds_entries_concurrently() -> None:
    # "a" finishes only after "b" has started: run one after the other, this would hang.
    b_started = anyio.Event()

    async def answer(params: Json) -> Json:
        if params["message"] == "a":
            await b_started.wait()
        else:
            b_started.set()
        return {"action": "accept", "content": {"name": params["message"]}}

    handler = default_input_handler(elicitation=answer)

    with anyio.fail_after(BOUND):
        answers = await handler({"a": elicit("a"), "b": elicit("b")})

    assert answers == {
        "a": {"action": "accept", "content": {"name": "a"}},
        "b": {"action": "accept", "content": {"name": "b"}},
    }


@pytest.mark.anyio
async def test_default_handler_routes_each_method_to_its_callback() -> None:
    handler = default_input_handler(elicitation=accept_ada, sampling=sample_hi, roots=no_roots)

    answers = await handler(
        {
            "e": elicit(),
            "s": {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 1}},
            "r": {"method": "roots/list"},
        }
    )

    assert answers == {"e": await accept_ada({}), "s": await sample_hi({}), "r": {"roots": []}}


@pytest.mark.anyio
async def test_unrecognised_result_type_is_rejected() -> None:
    requester = ScriptedRequester(lambda n, _: {"resultType": "task"})

    with pytest.raises(InvalidServerResponse, match="task"):
        await call_tool_with_inputs(requester, "t", {}, default_input_handler())


@pytest.mark.anyio
async def test_input_required_without_an_input_handler_raises_a_clear_error() -> None:
    requester = ScriptedRequester(lambda n, _: asks(confirm=elicit()))

    with pytest.raises(RpcError, match="no input_handler") as raised:
        await call_tool_with_inputs(requester, "deploy")

    assert "confirm" in str(raised.value)
    assert len(requester.calls) == 1


@pytest.mark.anyio
async def test_result_without_result_type_is_complete_as_on_a_legacy_session() -> None:
    requester = ScriptedRequester(lambda n, _: {"content": []})

    assert await call_tool_with_inputs(requester, "t") == {"content": []}


# -- answers ------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_answers_answer_each_question_by_its_key_through_every_round() -> None:
    client = MemoryClient(make_server(), elicitation=answers(DEPLOY_YES))

    result = await client.call_tool("deploy_stack", {"stack": "prod-api"})

    assert text_of(result) == "Deployed prod-api successfully"


@pytest.mark.anyio
@pytest.mark.parametrize(
    "answer",
    [Declined, Declined(), {"action": "decline"}, {"action": "cancel"}, {"confirmed": False}],
    ids=["Declined", "Declined()", "decline dict", "cancel dict", "content"],
)
async def test_answers_pass_refusals_through_and_wrap_plain_content(answer: object) -> None:
    client = MemoryClient(make_server(), elicitation=answers({**DEPLOY_YES, "confirm": answer}))

    result = await client.call_tool("deploy_stack", {"stack": "prod-api"})

    assert text_of(result) == "Deploy cancelled by user."


@pytest.mark.anyio
async def test_answers_value_shapes_are_the_whole_results_the_server_gets() -> None:
    callback = answers(
        {
            "plain": {"name": "Ada"},
            "wrapped": Accepted({"action": "x"}),
            "full": {"action": "accept", "content": {"name": "Bo"}},
            "model": "one line",
            "roots": {"roots": []},
        }
    )
    handler = default_input_handler(elicitation=callback, sampling=callback, roots=callback)
    requests: dict[str, Json] = {
        "plain": elicit(),
        "wrapped": elicit(),
        "full": elicit(),
        "model": {"method": "sampling/createMessage", "params": {}},
        "roots": {"method": "roots/list"},
    }

    assert await handler(requests) == {
        "plain": {"action": "accept", "content": {"name": "Ada"}},
        "wrapped": {"action": "accept", "content": {"action": "x"}},
        "full": {"action": "accept", "content": {"name": "Bo"}},
        "model": {
            "role": "assistant",
            "content": {"type": "text", "text": "one line"},
            "model": "answers",
            "stopReason": "endTurn",
        },
        "roots": {"roots": []},
    }


@pytest.mark.anyio
async def test_answers_fail_loudly_on_a_key_they_do_not_know_naming_it_and_theirs() -> None:
    client = MemoryClient(make_server(), elicitation=answers({"confirm": {"confirmed": True}}))

    with pytest.raises(UnexpectedInput) as raised:
        await client.call_tool("deploy_stack", {"stack": "prod-api"})

    message = str(raised.value)
    assert "'role-arn'" in message
    assert "it answers 'confirm'" in message
    assert "IAM role ARN" in message  # the question, so the test author sees what was asked


@pytest.mark.anyio
async def test_answers_refuse_a_value_they_cannot_send() -> None:
    client = MemoryClient(make_server(), elicitation=answers({"answer": 42}))

    with pytest.raises(TypeError, match="'answer'"):
        await client.call_tool("ask", {"topic": "tea"})


@pytest.mark.anyio
async def test_answers_in_the_legacy_era_follow_the_mappings_order() -> None:
    client = MemoryClient(make_server(), era="legacy", elicitation=answers(DEPLOY_YES))

    result = await client.call_tool("deploy_stack", {"stack": "prod-api"})

    assert text_of(result) == "Deployed prod-api successfully"
    assert [request["params"]["message"] for request in client.server_requests] == [
        "Deploy stack 'prod-api' to AWS production?",
        "Provide the IAM role ARN to assume:",
    ]
    assert client.initialize_result is not None
    assert client.initialize_result["protocolVersion"] == "2025-11-25"


@pytest.mark.anyio
async def test_answers_in_the_legacy_era_fail_loudly_past_the_last_entry() -> None:
    client = MemoryClient(
        make_server(), era="legacy", elicitation=answers({"confirm": {"confirmed": True}})
    )

    with pytest.raises(UnexpectedInput, match=r"number 2 .*holds only 1 answers \('confirm'\)"):
        await client.call_tool("deploy_stack", {"stack": "prod-api"})


# -- MemoryClient ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_memory_client_declares_exactly_its_callbacks_unless_told() -> None:
    async def unused(params: Json) -> Json:
        raise AssertionError

    server = make_server()
    assert MemoryClient(server).capabilities == {}
    assert MemoryClient(server, elicitation=unused).capabilities == ELICITATION
    assert MemoryClient(server, sampling=unused, roots=unused).capabilities == {
        "sampling": {},
        "roots": {},
    }
    assert MemoryClient(server, capabilities={"roots": {}}).capabilities == {"roots": {}}


@pytest.mark.anyio
async def test_memory_client_without_callbacks_gets_the_missing_capability_error() -> None:
    with pytest.raises(RpcError) as raised:
        await MemoryClient(make_server()).call_tool("ask", {"topic": "tea"})

    assert raised.value.code == -32021


@pytest.mark.anyio
async def test_memory_client_sampling_and_roots_callbacks_answer_their_rounds() -> None:
    client = MemoryClient(
        make_server(), sampling=answers({"model": "short"}), roots=answers({"roots": {"roots": []}})
    )

    assert text_of(await client.call_tool("summarise", {"topic": "MRTR"})) == "model: short"
    assert text_of(await client.call_tool("roots_count")) == "0 roots"


@pytest.mark.anyio
async def test_memory_client_get_prompt_and_read_resource_drive_their_rounds() -> None:
    client = MemoryClient(
        make_server(), elicitation=answers({"answer": {"text": "green"}, "name": {"name": "Ada"}})
    )

    prompt = await client.get_prompt("ask", {"topic": "tea"})
    resource = await client.read_resource("memo://greeting")

    assert prompt["messages"][0]["content"]["text"] == "tea: green"
    assert resource["contents"][0]["text"] == "Hello, Ada!"


@pytest.mark.anyio
async def test_memory_client_stops_at_the_round_cap() -> None:
    client = MemoryClient(
        make_server(), elicitation=answers({f"again-{n}": {"text": "x"} for n in range(9)})
    )

    with pytest.raises(TooManyRounds) as raised:
        await client.call_tool("always_ask", max_rounds=2)

    assert raised.value.max_rounds == 2


@pytest.mark.anyio
async def test_memory_client_call_meta_adds_to_its_own_and_progress_is_collected() -> None:
    client = MemoryClient(make_server())

    result = await client.call_tool("progress_steps", meta={"progressToken": "p-1"})

    assert text_of(result) == "done"
    progress = [n["params"] for n in client.notifications]
    assert [p["progress"] for p in progress] == [1, 2, 3]
    assert {p["progressToken"] for p in progress} == {"p-1"}


@pytest.mark.anyio
async def test_call_tool_shows_the_progress_the_tool_reported_in_process() -> None:
    client = MemoryClient(make_server())

    result = await client.call_tool("progress_steps")

    # basic/utilities/progress: the server drops the repeat and the step back; the test sees
    # what reached the client, for this call only, without asking for a progressToken.
    assert result.progress == ((1.0, 3.0, "step 1.0"), (2.0, 3.0, "step 2.0"), (3.0, None, None))
    assert result.progress[0].message == "step 1.0"
    second = await client.call_tool("progress_steps")
    assert second.progress == result.progress  # its own call's notifications, not the first's


@pytest.mark.anyio
async def test_call_tool_returns_a_typed_result_with_its_rounds() -> None:
    client = MemoryClient(make_server(), elicitation=answers(DEPLOY_YES))

    result = await client.call_tool("deploy_stack", {"stack": "prod-api"})

    assert result.text == "Deployed prod-api successfully"
    assert result.content == ({"type": "text", "text": "Deployed prod-api successfully"},)
    assert result.structured == {}  # a str tool sends no structuredContent
    assert result.is_error is False
    assert result.rounds == 1
    assert result.asked == (("confirm", "role-arn"),)
    assert result.progress == ()
    plain = await MemoryClient(make_server()).call_tool("echo", {"text": "hi"})
    assert (plain.text, plain.rounds, plain.asked) == ("hi", 0, ())


@pytest.mark.anyio
async def test_a_refused_answer_ends_in_too_many_rounds_quoting_the_servers_reason() -> None:
    # "yes" is not a boolean: the server asks again, saying why, and answers() keeps
    # giving the same answer. The error must say what the server said, for which key.
    client = MemoryClient(
        make_server(),
        elicitation=answers({"confirm": {"confirmed": "yes"}, "role-arn": {"arn": ARN}}),
    )

    with pytest.raises(TooManyRounds) as raised:
        await client.call_tool("deploy_stack", {"stack": "prod-api"}, max_rounds=3)

    message = str(raised.value)
    assert "pending input keys: 'confirm'" in message
    assert "The server asked again for 'confirm', saying " in message
    assert "That answer was not valid (confirmed: Input should be a valid boolean)" in message
    assert "confirmed" in raised.value.asked_again["confirm"]
    assert "Deploy stack 'prod-api' to AWS production?" in raised.value.asked_again["confirm"]
    assert "usually a server bug" not in message
    assert raised.value.pending_keys == ("confirm",)


def test_too_many_rounds_without_new_words_still_blames_a_looping_server() -> None:
    error = TooManyRounds("tools/call", 2, ["again-2"])

    assert "usually a server bug" in str(error)
    assert error.asked_again == {}


@pytest.mark.anyio
async def test_the_04_dict_face_still_reads_but_warns_what_to_write_instead() -> None:
    result = await MemoryClient(make_server()).call_tool("echo", {"text": "hi"})

    with pytest.warns(DeprecationWarning, match=r"result\['content'\].*write result\.content"):
        assert result["content"][0]["text"] == "hi"
    with pytest.warns(DeprecationWarning, match=r"write result\.is_error"):
        assert "isError" not in result
    with pytest.warns(DeprecationWarning, match=r"write result\.structured"):
        assert result.get("structuredContent") is None
    with pytest.warns(DeprecationWarning, match="ToolCallResult since runtime 0.5.0"):
        assert result["resultType"] == "complete"


class ScriptedServer:
    """Stands in for a Server: answers every request with ``response`` (result or error)."""

    def __init__(self, response: Json) -> None:
        self.response = response

    async def handle_request(
        self, request: Any, session: Any, peer: Any, cancellation: Any = None
    ) -> Json:
        return {"jsonrpc": "2.0", "id": request.id, **self.response}


def scripted(**response: Any) -> MemoryClient:
    return MemoryClient(cast("Server", ScriptedServer(response)))


@pytest.mark.anyio
async def test_memory_client_gets_what_a_pipe_carries_a_non_json_result_is_an_error() -> None:
    # What the stdio transport answers when it cannot encode a response.
    with pytest.raises(RpcError) as raised:
        await scripted(result={"resultType": "complete", "x": float("nan")}).call_tool("t")

    assert (raised.value.code, raised.value.message) == (-32603, "Internal error")


@pytest.mark.anyio
async def test_memory_client_gets_json_values_not_the_servers_objects() -> None:
    result = await scripted(result={"resultType": "complete", "pair": (1, 2)}).request("x")

    assert result["pair"] == [1, 2]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("response", "problem"),
    [
        ({"result": {"content": []}}, "without resultType"),
        ({"result": {"resultType": "complete"}, "error": {"code": 1}}, "exactly one of"),
        ({"error": {"code": "x", "message": "m"}}, "error.code is not an integer"),
    ],
    ids=["no resultType", "result and error", "bad error"],
)
async def test_memory_client_rejects_a_response_a_client_must_not_accept(
    response: Json, problem: str
) -> None:
    with pytest.raises(InvalidServerResponse, match=problem):
        await scripted(**response).request("tools/list")


@pytest.mark.anyio
async def test_memory_client_legacy_callback_crash_is_raised_from_the_call() -> None:
    async def crash(params: Json) -> Json:
        raise RuntimeError("test bug")

    client = MemoryClient(make_server(), era="legacy", elicitation=crash)

    with pytest.raises(RuntimeError, match="test bug"):
        await client.call_tool("ask", {"topic": "tea"})
    # The server got what a wire client answers, and goes on serving.
    assert text_of(await client.call_tool("echo", {"text": "hi"})) == "hi"


@pytest.mark.anyio
async def test_memory_client_legacy_request_without_a_callback_is_refused_like_a_wire_client() -> (
    None
):
    client = MemoryClient(make_server(), era="legacy", capabilities=ELICITATION)

    result = await client.call_tool("ask", {"topic": "tea"})

    assert result.is_error
    assert "-32600" in text_of(result)


# -- the client's framing -------------------------------------------------------------------------


def test_raw_line_splitter_keeps_every_line_as_written_and_flags_long_ones() -> None:
    splitter = LineSplitter(8, raw=True)

    lines = splitter.feed(b'{"a":1}\r\n\n123456789\nab')
    lines += splitter.feed(b"c\n" + b"x" * 20)
    lines += splitter.feed(b"yy\nlast")

    assert lines == [b'{"a":1}\r', b"", None, b"abc", None]
    assert splitter.finish() == [b"last"]


# -- ClientSession over real pipes, against the scripted fake server -----------------------------


@pytest.mark.anyio
async def test_three_round_tool_completes_over_pipes_sending_only_each_rounds_answer() -> None:
    with anyio.fail_after(BOUND):
        async with ClientSession.spawn(
            fake(), elicitation=accept_ada, sampling=sample_hi, roots=no_roots
        ) as session:
            result = await session.call_tool("three_round", {"x": 1})
            messages = await received(session)
            sent_states = (await session.request("fake/received", {}))["sentStates"]

    assert result.structured == {
        "answers": {"a": await accept_ada({}), "b": await sample_hi({}), "c": {"roots": []}}
    }
    calls = tool_calls(messages)
    assert [sorted(call.get("inputResponses", {})) for call in calls] == [[], ["a"], ["b"], ["c"]]
    assert [call.get("requestState") for call in calls[1:]] == sent_states
    assert all(call["arguments"] == {"x": 1} for call in calls)
    assert session.protocol_violations == []


@pytest.mark.anyio
async def test_session_answers_by_key_with_answers() -> None:
    with anyio.fail_after(BOUND):
        async with ClientSession.spawn(
            fake(), elicitation=answers({"confirm": {"ok": "y"}, "name": Declined})
        ) as session:
            result = await session.call_tool("pair")

    assert result.structured == {
        "inputResponses": {
            "confirm": {"action": "accept", "content": {"ok": "y"}},
            "name": {"action": "decline"},
        }
    }


@pytest.mark.anyio
async def test_every_modern_request_carries_meta_and_ids_increase() -> None:
    with anyio.fail_after(BOUND):
        async with ClientSession.spawn(fake(), elicitation=accept_ada) as session:
            await session.request("tools/list")
            await session.call_tool("pair", {})
            messages = await received(session)

    requests = [m for m in messages if "id" in m and "method" in m]
    assert len(requests) == 3
    for message in requests:
        meta = message["params"]["_meta"]
        assert meta["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
        assert meta["io.modelcontextprotocol/clientCapabilities"] == ELICITATION
        assert meta["io.modelcontextprotocol/clientInfo"]["name"]
    ids = [message["id"] for message in requests]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    assert session.protocol_violations == []


@pytest.mark.anyio
async def test_session_call_tool_shows_its_progress_over_pipes() -> None:
    with anyio.fail_after(BOUND):
        async with ClientSession.spawn(fake()) as session:
            result = await session.call_tool("progress")
            other = await session.call_tool("progress")

    # Written before the response on the same pipe, so read before the call returns.
    assert result.progress == ((1, 2, None), (2, 2, None))
    assert result.text == "progressed"
    assert other.progress == result.progress


@pytest.mark.anyio
async def test_caller_meta_keys_win_and_progress_notifications_are_collected() -> None:
    progress: list[Json] = []
    both_arrived = anyio.Event()

    async def on_notification(message: Json) -> None:
        progress.append(message)
        if len(progress) == 2:
            both_arrived.set()

    with anyio.fail_after(BOUND):
        async with ClientSession.spawn(fake(), notification_handler=on_notification) as session:
            await session.call_tool("progress", meta={"progressToken": "p-1"})
            await both_arrived.wait()
            messages = await received(session)

    meta = tool_calls(messages)[0]["_meta"]
    assert meta["progressToken"] == "p-1"
    assert meta["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
    assert [n["params"]["progress"] for n in progress] == [1, 2]
    assert session.notifications == progress


@pytest.mark.anyio
async def test_state_only_tool_completes_over_pipes_with_tokens_echoed_byte_exact() -> None:
    with anyio.fail_after(BOUND):
        async with ClientSession.spawn(fake()) as session:
            result = await session.call_tool("state_only", {})
            sent_states = (await session.request("fake/received", {}))["sentStates"]

    # The fake server completes only if each token came back exactly as it sent it.
    assert result.content == ({"type": "text", "text": "settled"},)
    assert isinstance(sent_states, list)
    assert len(sent_states) == 2
    assert session.protocol_violations == []


@pytest.mark.anyio
async def test_always_input_required_tool_stops_at_the_round_cap_over_pipes() -> None:
    with anyio.fail_after(BOUND):
        async with ClientSession.spawn(fake(), elicitation=accept_ada) as session:
            with pytest.raises(TooManyRounds) as raised:
                await session.call_tool("always", {}, max_rounds=3)
            messages = await received(session)

    assert len(tool_calls(messages)) == 4
    assert "always-" not in str(raised.value)


@pytest.mark.anyio
async def test_unrecognised_result_type_over_pipes_is_invalid() -> None:
    with anyio.fail_after(BOUND):
        async with ClientSession.spawn(fake()) as session:
            with pytest.raises(InvalidServerResponse, match="weird"):
                await session.call_tool("bad_result_type")


@pytest.mark.anyio
async def test_legacy_session_initializes_and_answers_server_requests_with_its_callbacks() -> None:
    with anyio.fail_after(BOUND):
        async with ClientSession.spawn(
            fake("legacy"), era="legacy", elicitation=accept_ada, sampling=sample_hi
        ) as session:
            result = await session.call_tool("ask", {})
            messages = await received(session)

    responses = result.structured["responses"]
    assert responses["s-ping"] == {"id": "s-ping", "result": {}}
    assert responses["s-elicit"]["result"] == await accept_ada({})
    assert responses["s-sample"]["result"] == await sample_hi({})
    assert responses["s-roots"]["error"]["code"] == -32600  # no roots callback
    assert responses["s-bogus"]["error"]["code"] == -32601
    initialize, initialized = messages[0], messages[1]
    assert initialize["method"] == "initialize"
    assert initialize["params"]["protocolVersion"] == "2025-11-25"
    assert initialize["params"]["capabilities"] == {**ELICITATION, "sampling": {}}
    assert initialized == {"jsonrpc": "2.0", "method": "notifications/initialized"}
    # 2025-11-25 has no per-request _meta of the era's; a progressToken is all a call sends.
    assert all(set(m.get("params", {}).get("_meta", {})) <= {"progressToken"} for m in messages)
    assert session.protocol_version == "2025-11-25"
    assert session.protocol_violations == []


@pytest.mark.anyio
async def test_legacy_callback_failures_become_error_replies_and_the_session_goes_on() -> None:
    async def crash(params: Json) -> Json:
        raise RuntimeError("callback bug")

    async def refuse(params: Json) -> Json:
        raise RpcError(-1, "the user refused", {"why": "no"})

    async def unserialisable(params: Json) -> Json:
        return {"roots": [float("nan")]}

    with anyio.fail_after(BOUND):
        async with ClientSession.spawn(
            fake("legacy"), era="legacy", elicitation=crash, sampling=refuse, roots=unserialisable
        ) as session:
            # The raw request sees the server's answer; call_tool raises the callback's bug.
            result: Json = await session.request("tools/call", {"name": "ask", "arguments": {}})
            with pytest.raises(RuntimeError, match="callback bug"):
                await session.call_tool("ask", {})
            still_serving = await received(session)

    responses = result["structuredContent"]["responses"]
    assert responses["s-elicit"]["error"] == {
        "code": -32603,
        "message": "client handler failed: RuntimeError",
    }
    assert responses["s-sample"]["error"] == {
        "code": -1,
        "message": "the user refused",
        "data": {"why": "no"},
    }
    assert responses["s-roots"]["error"]["code"] == -32603
    assert still_serving
    assert session.protocol_violations == []


@pytest.mark.anyio
async def test_junk_on_stdout_is_recorded_as_a_protocol_violation() -> None:
    with anyio.fail_after(BOUND):
        async with ClientSession.spawn(fake("junk")) as session:
            await session.request("tools/list")

    assert len(session.protocol_violations) == 1
    assert "not JSON" in session.protocol_violations[0]
    assert "this is not JSON-RPC" in session.protocol_violations[0]


@pytest.mark.anyio
async def test_server_request_on_a_modern_session_is_a_violation_and_is_refused() -> None:
    with anyio.fail_after(BOUND):
        async with ClientSession.spawn(fake(), elicitation=must_not_be_called) as session:
            result: Json = await session.request("tools/call", {"name": "ask_anyway"})

    refusal = result["structuredContent"]["responses"]["srv-1"]
    assert refusal["error"]["code"] == -32601
    assert len(session.protocol_violations) == 1
    assert "server-initiated request" in session.protocol_violations[0]


@pytest.mark.anyio
async def test_modern_result_without_result_type_is_a_violation() -> None:
    with anyio.fail_after(BOUND):
        async with ClientSession.spawn(fake()) as session:
            result = await session.request("tools/call", {"name": "no_result_type"})

    assert result == {"content": []}
    assert len(session.protocol_violations) == 1
    assert "resultType" in session.protocol_violations[0]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.anyio
async def test_close_kills_a_server_that_ignores_stdin_eof_and_sigterm_within_its_bound() -> None:
    ready = anyio.Event()

    async def on_notification(message: Json) -> None:
        ready.set()  # the child has installed its SIGTERM handler

    with anyio.fail_after(BOUND):
        async with ClientSession.spawn(
            fake("hang"), notification_handler=on_notification
        ) as session:
            await ready.wait()
            started = anyio.current_time()
            returncode = await session.close(0.2)
            elapsed = anyio.current_time() - started

    assert returncode == -signal.SIGKILL
    assert elapsed < 0.2 + 2 * 1.0 + 1.0  # the bound, terminate and kill graces, slack


@pytest.mark.anyio
async def test_stderr_is_drained_so_a_chatty_server_never_blocks() -> None:
    with anyio.fail_after(BOUND):
        async with ClientSession.spawn(fake("chatty")) as session:
            for _ in range(3):  # 768 KiB of stderr: far more than a pipe buffer holds
                await session.request("tools/list")

    assert session.stderr_text().count("chatty ") == 3
    assert session.protocol_violations == []


@pytest.mark.anyio
async def test_pending_request_fails_with_session_closed_when_the_server_exits() -> None:
    with anyio.fail_after(BOUND):
        async with ClientSession.spawn(fake()) as session:
            with pytest.raises(SessionClosed):
                await session.call_tool("exit")
            with pytest.raises(SessionClosed):
                await session.request("tools/list")

    assert session.returncode == 3
    assert "exiting on purpose" in session.stderr_text()


@pytest.mark.anyio
async def test_error_response_raises_rpc_error_with_code_message_and_data() -> None:
    with anyio.fail_after(BOUND):
        async with ClientSession.spawn(fake()) as session:
            with pytest.raises(RpcError) as raised:
                await session.call_tool("nope")

    assert raised.value.code == -32602
    assert raised.value.message == "Unknown tool: nope"
    assert raised.value.data == {"tool": "nope"}


@pytest.mark.anyio
async def test_request_timeout_sends_notifications_cancelled_for_that_id() -> None:
    with anyio.fail_after(BOUND):
        async with ClientSession.spawn(fake()) as session:
            with pytest.raises(TimeoutError):
                await session.request("tools/call", {"name": "slow"}, timeout=0.2)
            messages = await received(session)

    slow_id = next(m["id"] for m in messages if m.get("method") == "tools/call")
    cancelled = [m for m in messages if m.get("method") == "notifications/cancelled"]
    assert [m["params"]["requestId"] for m in cancelled] == [slow_id]
    assert session.protocol_violations == []


@pytest.mark.anyio
async def test_send_raw_writes_bytes_verbatim() -> None:
    with anyio.fail_after(BOUND):
        async with ClientSession.spawn(fake()) as session:
            await session.send_raw(b"not json at all\n")
            messages = await received(session)

    assert messages[-1] == {"raw": "not json at all\n"}
    # The server's parse error has "id": null: kept aside, not a violation.
    unmatched: list[Json] = session.unmatched_responses
    assert [response["error"]["code"] for response in unmatched] == [-32700]
    assert session.protocol_violations == []


@pytest.mark.anyio
async def test_with_meta_false_sends_params_exactly_as_given() -> None:
    with anyio.fail_after(BOUND):
        async with ClientSession.spawn(fake()) as session:
            with pytest.raises(RpcError) as raised:
                await session.request("tools/list", {}, with_meta=False)
            messages = await received(session)

    assert raised.value.code == -32602
    assert messages[0]["params"] == {}
