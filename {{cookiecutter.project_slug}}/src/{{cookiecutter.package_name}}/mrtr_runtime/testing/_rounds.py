"""The client side's shared core: the callbacks, the MRTR retry loop, `answers`, `RoundsClient`.

Both clients (`ClientSession` over a spawned server's pipes, `MemoryClient` in process) take
the same three callbacks -- ``elicitation=``, ``sampling=``, ``roots=``, each
``async (params: dict) -> dict`` returning the full result (an ElicitResult, a
CreateMessageResult, a ListRootsResult; 2026-07-28 schema.ts). In the 2026-07-28 era they
answer a round's ``inputRequests``; in the 2025-11-25 era (after ``initialize``) the server's
real requests. `RoundsClient` gives both clients ``call_tool`` / ``get_prompt`` /
``read_resource``, which run the client's MRTR loop: call; while ``input_required``,
answer the input requests and retry the same call with this round's ``inputResponses`` and the
echoed ``requestState``; at most ``max_rounds`` retries.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from itertools import count
from typing import Any, Protocol, cast

import anyio

from .._context import RequestCancelled
from .._errors import MrtrError
from .._jsonrpc import (
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    UNSUPPORTED_PROTOCOL_VERSION,
    RpcError,
    clip,
)
from .._wire import ELICIT, LIST_ROOTS, SAMPLE, TASKS_EXTENSION
from ._result import Progress, ToolCallResult

__all__ = (
    "DEFAULT_MAX_ROUNDS",
    "Asking",
    "Callback",
    "Callbacks",
    "InputHandler",
    "InvalidServerResponse",
    "Requester",
    "Rounds",
    "RoundsClient",
    "TooManyRounds",
    "UnexpectedInput",
    "answers",
    "asking",
    "call_tool_with_inputs",
    "declared_capabilities",
    "default_input_handler",
    "derive_capabilities",
    "follow_task",
    "request_with_inputs",
    "retry_version",
    "run_rounds",
    "with_tasks",
)

logger = logging.getLogger(__name__)

DEFAULT_MAX_ROUNDS = 16  # a server still asking after 16 retries is looping, not asking
# Python SDK mcp/client/_input_required.py: a state-only result is retried after a short
# backoff, 50 ms doubling to a 250 ms cap.
_STATE_ONLY_BACKOFF_START = 0.05
_STATE_ONLY_BACKOFF_CAP = 0.25

#: A callback gets a request's params and returns the full result object.
Callback = Callable[[dict[str, Any]], Awaitable[Mapping[str, Any]]]
#: inputRequests ({key: {"method", "params"}}) -> inputResponses ({key: result}).
InputHandler = Callable[[Mapping[str, Mapping[str, Any]]], Awaitable[Mapping[str, Any]]]


class TooManyRounds(MrtrError):
    """The server still asked for input after ``max_rounds`` retries.

    ``asked_again`` maps each pending key the server asked again with other words than at
    first to its newest message: how this runtime (and any server that re-asks with a
    reason) says why it refused the answer, e.g. ``"That answer was not valid (...)"``.
    """

    def __init__(
        self,
        method: str,
        max_rounds: int,
        pending_keys: Sequence[str],
        asked_again: Mapping[str, str] | None = None,
    ) -> None:
        # Never the requestState token or any answer: the method, cap, keys and the server's
        # own words, which it showed the user.
        keys = ", ".join(repr(key) for key in pending_keys) or "none (state only)"
        again = dict(asked_again or {})
        if again:
            said = "; ".join(f"for {key!r}, saying {_quote(again[key])}" for key in sorted(again))
            why = (
                f" The server asked again {said}. A server asks again when it refuses an "
                "answer: check the answer given for that key."
            )
        else:
            why = " A server that keeps asking and never settles is usually a server bug."
        super().__init__(
            f"{method}: the server still required input after {max_rounds} retries "
            f"({max_rounds + 1} calls); pending input keys: {keys}.{why}"
        )
        self.method = method
        self.max_rounds = max_rounds
        self.pending_keys = tuple(pending_keys)
        self.asked_again = again


_REASON_CHARS = 500  # the server's newest words for a key, as TooManyRounds quotes them


def _quote(text: str) -> str:
    if len(text) > _REASON_CHARS:
        text = f"{text[:_REASON_CHARS]}...({len(text)} characters)"
    return repr(text)


class InvalidServerResponse(MrtrError):
    """The server answered with something this client must treat as invalid."""


class UnexpectedInput(MrtrError, LookupError):
    """`answers` was asked a question its mapping does not answer."""


class Requester(Protocol):
    """Anything that can send a request and return its ``result``; raises RpcError."""

    async def request(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]: ...


def with_tasks(capabilities: Mapping[str, Any]) -> dict[str, Any]:
    """`capabilities` declaring the tasks extension too (`extensions`)."""
    extensions = dict(capabilities.get("extensions") or {})
    extensions[TASKS_EXTENSION] = {}
    return {**capabilities, "extensions": extensions}


def declared_capabilities(
    callbacks: Callbacks, capabilities: Mapping[str, Any] | None, tasks: bool
) -> dict[str, Any]:
    """What a client declares: ``capabilities`` as given, else exactly its callbacks'; with the
    tasks extension too when ``tasks``."""
    declared = dict(callbacks.capabilities() if capabilities is None else capabilities)
    return with_tasks(declared) if tasks else declared


def derive_capabilities(*, elicitation: bool, sampling: bool, roots: bool) -> dict[str, Any]:
    """Declare a capability only for the callbacks given (as the Python SDK client does)."""
    capabilities: dict[str, Any] = {}
    if elicitation:
        capabilities["elicitation"] = {"form": {}, "url": {}}
    if sampling:
        capabilities["sampling"] = {}
    if roots:
        capabilities["roots"] = {}
    return capabilities


# -- which version to retry with -----------------------------------------------------------------

_MAX_LISTED_VERSIONS = 16  # a hostile server's `supported` list is quoted this far, no further


def retry_version(
    error: RpcError, offered: Sequence[str], tried: str, *, retried: bool = False
) -> str:
    """The version to send again after `error`, an UnsupportedProtocolVersionError (-32022).

    2026-07-28 basic/versioning "Protocol Version Negotiation": the client SHOULD select a
    mutually supported version from ``data.supported`` and retry, or surface an error when
    none exists. The newest of `offered` (this client's versions, newest first) that the server
    lists; RpcError -32022 naming both lists when there is none, when the only one in common
    is `tried` itself, or when `error` answered the retry already (`retried`): the server
    refused what it says it supports, and a client that tried again would loop.
    """
    data = error.data if isinstance(error.data, Mapping) else {}
    raw = cast("Mapping[str, Any]", data).get("supported")
    supported = [v for v in raw if isinstance(v, str)] if isinstance(raw, list) else []
    common = [version for version in offered if version in supported]
    if common and common[0] != tried and not retried:
        return common[0]
    listed = ", ".join(repr(clip(v)) for v in supported[:_MAX_LISTED_VERSIONS]) or "none"
    if len(supported) > _MAX_LISTED_VERSIONS:
        listed += f" and {len(supported) - _MAX_LISTED_VERSIONS} more"
    ours = ", ".join(repr(v) for v in offered)
    if tried in common:
        why = f"it refused {tried!r} although it lists it"
    elif retried:
        why = f"it refused {tried!r} too, the version it listed before"
    else:
        why = "no version in common"
    raise RpcError(
        UNSUPPORTED_PROTOCOL_VERSION,
        f"Unsupported protocol version: the server supports {listed}; this client speaks "
        f"{ours}: {why} (the server said: {clip(error.message)})",
        error.data,
    )


# -- which question a callback is answering ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Asking:
    """The question a running callback answers: its method and, in an MRTR round, its key."""

    method: str
    key: str | None  # None: a legacy (2025-11-25) server request, which carries no key


_ASKING: ContextVar[Asking | None] = ContextVar("mrtr_client_asking", default=None)


def asking() -> Asking | None:
    """Inside a callback the clients run: what it is answering (None when called directly)."""
    return _ASKING.get()


async def _run_callback(
    callback: Callback, method: str, key: str | None, params: dict[str, Any]
) -> dict[str, Any]:
    token = _ASKING.set(Asking(method, key))
    try:
        return dict(await callback(params))
    finally:
        _ASKING.reset(token)


@dataclass(frozen=True)
class Callbacks:
    """A client's three callbacks, routed by method."""

    elicitation: Callback | None = None
    sampling: Callback | None = None
    roots: Callback | None = None

    def by_method(self) -> dict[str, Callback | None]:
        return {ELICIT: self.elicitation, SAMPLE: self.sampling, LIST_ROOTS: self.roots}

    def capabilities(self) -> dict[str, Any]:
        return derive_capabilities(
            elicitation=self.elicitation is not None,
            sampling=self.sampling is not None,
            roots=self.roots is not None,
        )

    def input_handler(self) -> InputHandler:
        return default_input_handler(
            elicitation=self.elicitation, sampling=self.sampling, roots=self.roots
        )

    async def answer(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Legacy era: the result for a server's request. RpcError -32601 for a method this
        client does not know, -32600 for one it has no callback for (what the Python SDK
        answers, e.g. "Elicitation not supported"); a callback's own exception propagates.
        ``ping`` is answered here (2025-11-25 basic/utilities/ping: an empty result)."""
        if method == "ping":
            return {}
        callbacks = self.by_method()
        if method not in callbacks:
            raise RpcError(METHOD_NOT_FOUND, f"Method not found: {clip(method)}")
        callback = callbacks[method]
        if callback is None:
            raise RpcError(INVALID_REQUEST, f"{method} not supported")
        return await _run_callback(callback, method, None, params)


def default_input_handler(
    *,
    elicitation: Callback | None = None,
    sampling: Callback | None = None,
    roots: Callback | None = None,
) -> InputHandler:
    """Route each input request to the callback for its method; run them concurrently.

    The callbacks are the ones a host already has for real server->client requests
    (basic/patterns/mrtr: an inputRequests value is one of those requests, minus its id).
    An unknown method or a missing callback raises RpcError naming the method before any
    callback runs; a callback's exception aborts the round (and the loop).
    """
    callbacks = Callbacks(elicitation, sampling, roots).by_method()

    async def handle(requests: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
        work: list[tuple[str, str, Callback, dict[str, Any]]] = []
        for key in sorted(requests):
            entry = requests[key]
            method = entry.get("method")
            if not isinstance(method, str) or method not in callbacks:
                raise RpcError(
                    METHOD_NOT_FOUND, f"input request {key!r}: unsupported method {method!r}"
                )
            callback = callbacks[method]
            if callback is None:
                raise RpcError(INVALID_REQUEST, f"input request {key!r}: no handler for {method!r}")
            params = entry.get("params")
            work.append((key, method, callback, dict(cast("Mapping[str, Any]", params or {}))))

        results: dict[str, Any] = {}
        failures: list[Exception] = []

        async def run(
            key: str,
            method: str,
            callback: Callback,
            params: dict[str, Any],
            scope: anyio.CancelScope,
        ) -> None:
            try:
                results[key] = await _run_callback(callback, method, key, params)
            except Exception as exc:
                failures.append(exc)
                scope.cancel()

        # Like the Python SDK's driver: every entry of a round runs concurrently.
        async with anyio.create_task_group() as task_group:
            for key, method, callback, params in work:
                task_group.start_soon(run, key, method, callback, params, task_group.cancel_scope)
        if failures:
            raise failures[0]
        return {key: results[key] for key, _, _, _ in work}

    return handle


# -- answers: a callback from a plain mapping -----------------------------------------------------


class _Answers:
    def __init__(self, mapping: Mapping[str, object]) -> None:
        self._mapping = dict(mapping)
        self._next = 0  # legacy era: the next entry, in the mapping's order

    def __repr__(self) -> str:
        return f"answers({sorted(self._mapping)!r})"

    async def __call__(self, params: dict[str, Any]) -> dict[str, Any]:
        now = asking()
        method = now.method if now is not None else ELICIT
        key = now.key if now is not None else None
        known = ", ".join(repr(k) for k in self._mapping) or "none"
        if key is None:
            keys = list(self._mapping)
            if self._next >= len(keys):
                raise UnexpectedInput(
                    f"answers(): the server asked a question number {self._next + 1} "
                    f"({method}: {_what(params)}) but the mapping holds only {len(keys)} "
                    f"answers ({known}); legacy requests are answered in the mapping's order"
                )
            key = keys[self._next]
            self._next += 1
        elif key not in self._mapping:
            raise UnexpectedInput(
                f"answers(): the server asked for input {key!r} ({method}: {_what(params)}), "
                f"which the mapping does not answer; it answers {known}"
            )
        return _as_result(method, key, self._mapping[key])


def answers(mapping: Mapping[str, object]) -> Callback:
    """A callback that answers each question from ``mapping``, by its input key.

    ``elicitation=answers({"confirm": {"confirmed": True}, "role-arn": Declined()})``. Values:

    - for an elicitation, a plain dict is the accepted form's content
      (``{"action": "accept", "content": value}``); ``Declined`` / ``Cancelled`` (the class or
      an instance) and ``Accepted(content)`` from ``mrtr_runtime`` are the user's answer; a
      dict whose ``"action"`` is ``"accept"``, ``"decline"`` or ``"cancel"`` is the whole
      ElicitResult, sent as given (so a form with a field named ``action`` needs ``Accepted``);
    - for sampling, a string is the model's text reply; a dict the whole CreateMessageResult;
    - for roots, a dict is the whole ListRootsResult.

    A question whose key the mapping lacks raises `UnexpectedInput` naming the key and the
    keys it knows, and the call fails with it: a test never answers the wrong question.

    The 2025-11-25 era has no keys: the server's requests are answered in the mapping's order
    (the first request with the first entry, and so on; the legacy bridge asks in the order the
    tool lists its questions, and a decline ends the asking), and a request past the last
    entry raises `UnexpectedInput`. Make a new ``answers(...)`` for each legacy conversation.
    """
    return _Answers(mapping)


def _what(params: Mapping[str, Any]) -> str:
    message = params.get("message")
    return repr(clip(message)) if isinstance(message, str) else "no message"


def _as_result(method: str, key: str, value: object) -> dict[str, Any]:
    from .._answers import Accepted, Cancelled, Declined

    if method == ELICIT:
        if value is Declined or isinstance(value, Declined):
            return {"action": "decline"}
        if value is Cancelled or isinstance(value, Cancelled):
            return {"action": "cancel"}
        if isinstance(value, Accepted):
            return {"action": "accept", "content": value.content}
        if isinstance(value, Mapping):
            result = dict(cast("Mapping[str, Any]", value))
            if result.get("action") in ("accept", "decline", "cancel"):
                return result
            return {"action": "accept", "content": result}
    elif method == SAMPLE:
        if isinstance(value, str):
            text = {"type": "text", "text": value}
            return {
                "role": "assistant",
                "content": text,
                "model": "answers",
                "stopReason": "endTurn",
            }
        if isinstance(value, Mapping):
            return dict(cast("Mapping[str, Any]", value))
    elif isinstance(value, Mapping):
        return dict(cast("Mapping[str, Any]", value))
    raise TypeError(
        f"answers(): the answer for {key!r} ({method}) cannot be {type(value).__name__}"
    )


# -- the MRTR loop -------------------------------------------------------------------------------


def _as_mapping(value: object, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidServerResponse(f"{what} is not an object")
    return cast("Mapping[str, Any]", value)


def _input_requests(result: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    raw = result.get("inputRequests")
    if raw is None:
        return {}
    requests: dict[str, Mapping[str, Any]] = {}
    for key, entry in _as_mapping(raw, "inputRequests").items():
        request = _as_mapping(entry, f"inputRequests[{key!r}]")
        if not isinstance(request.get("method"), str):
            raise InvalidServerResponse(f"inputRequests[{key!r}] has no method")
        if request.get("params") is not None:
            _as_mapping(request["params"], f"inputRequests[{key!r}].params")
        requests[key] = request
    return requests


@dataclass(frozen=True, slots=True)
class Rounds:
    """How a call ended: its final result and the input keys each retry answered, sorted."""

    result: dict[str, Any]
    asked: tuple[tuple[str, ...], ...]
    #: The task the call became (resultType "task"), followed to its end; None otherwise.
    task_id: str | None = None


def _message(request: Mapping[str, Any]) -> str | None:
    params = request.get("params")
    message = params.get("message") if isinstance(params, Mapping) else None
    return message if isinstance(message, str) else None


async def request_with_inputs(
    requester: Requester,
    method: str,
    params: Mapping[str, Any],
    input_handler: InputHandler | None,
    *,
    max_rounds: int = DEFAULT_MAX_ROUNDS,
) -> dict[str, Any]:
    """Call ``method``; while the result is ``input_required``, answer and retry.

    2026-07-28 basic/patterns/mrtr: the retry is the same method with the same params, plus
    this round's ``inputResponses`` and the ``requestState`` echoed unchanged (omitted when the
    server sent none). At most ``max_rounds`` retries (``max_rounds + 1`` calls), then
    TooManyRounds. A state-only result is retried after a short backoff without asking.
    ``inputResponses``/``requestState`` given in ``params`` seed the first call only.
    """
    rounds = await run_rounds(requester, method, params, input_handler, max_rounds=max_rounds)
    return rounds.result


async def run_rounds(
    requester: Requester,
    method: str,
    params: Mapping[str, Any],
    input_handler: InputHandler | None,
    *,
    max_rounds: int = DEFAULT_MAX_ROUNDS,
    max_poll_seconds: float | None = None,
) -> Rounds:
    """`request_with_inputs`, also telling which keys each round asked. ``max_poll_seconds``:
    see `follow_task`."""
    if max_rounds < 0:
        raise ValueError("max_rounds must be >= 0")
    base = {k: v for k, v in params.items() if k not in ("inputResponses", "requestState")}
    result = await requester.request(method, params)
    asked: list[tuple[str, ...]] = []
    first_words: dict[str, str | None] = {}  # each key's message when it was first asked
    backoff = _STATE_ONLY_BACKOFF_START
    while True:
        result_type = result.get("resultType")
        # Legacy (2025-11-25) results carry no resultType; they are always complete.
        if result_type is None or result_type == "complete":
            return Rounds(result, tuple(asked))
        if result_type == "task":
            task_id = result.get("taskId")
            final = await follow_task(
                requester,
                result,
                input_handler,
                max_rounds=max_rounds,
                asked=asked,
                max_poll_seconds=max_poll_seconds,
            )
            return Rounds(final, tuple(asked), task_id if isinstance(task_id, str) else None)
        if result_type != "input_required":
            # basic/index: "A resultType of any value unrecognized by the client MUST be
            # considered invalid."
            raise InvalidServerResponse(f"{method}: unrecognised resultType {result_type!r}")
        requests = _input_requests(result)
        state = result.get("requestState")
        if state is not None and not isinstance(state, str):
            raise InvalidServerResponse(f"{method}: requestState is not a string")
        words = {key: _message(request) for key, request in requests.items()}
        if len(asked) >= max_rounds:
            # A key asked again in other words: the server's reason (this runtime re-asks a
            # refused answer with "That answer was not valid (...)" before its question).
            again = {
                key: said
                for key, said in words.items()
                if said is not None and key in first_words and first_words[key] != said
            }
            raise TooManyRounds(method, max_rounds, sorted(requests), again)
        for key, said in words.items():
            first_words.setdefault(key, said)
        retry = dict(base)
        if requests:
            if input_handler is None:
                listed = ", ".join(
                    f"{key!r} ({requests[key]['method']})" for key in sorted(requests)
                )
                raise RpcError(
                    INVALID_REQUEST,
                    f"{method}: the server asked for input ({listed}) but no input_handler "
                    "was given",
                )
            logger.debug(
                "%s round %d: answering %s", method, len(asked) + 1, ", ".join(sorted(requests))
            )
            retry["inputResponses"] = dict(await input_handler(requests))  # this round's only
            backoff = _STATE_ONLY_BACKOFF_START
        else:
            logger.debug(
                "%s round %d: state only, retrying in %.2fs", method, len(asked) + 1, backoff
            )
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, _STATE_ONLY_BACKOFF_CAP)
        if state is not None:
            retry["requestState"] = state  # opaque: echoed exactly as received
        asked.append(tuple(sorted(requests)))
        result = await requester.request(method, retry)


def _handler_key(wire_key: str) -> str:
    """The key a task's question has in the handler, as this runtime issues task keys
    (`<key>.<n>`, unique over the task's life): what `answers()` mappings are keyed by."""
    stem, dot, number = wire_key.rpartition(".")
    return stem if dot and stem and number.isdigit() else wire_key


async def follow_task(
    requester: Requester,
    created: Mapping[str, Any],
    input_handler: InputHandler | None,
    *,
    max_rounds: int = DEFAULT_MAX_ROUNDS,
    asked: list[tuple[str, ...]] | None = None,
    max_poll_seconds: float | None = None,
) -> dict[str, Any]:
    """Follow the task of a CreateTaskResult to its end; the final result of the call.

    tasks "Task Polling": `tasks/get` every `pollIntervalMs` (as the server says, each time;
    at most every ``max_poll_seconds`` when given: an in-process client asks its own server,
    where a poll costs nothing and a test should not sleep out a remote client's interval);
    an `input_required` task's new questions are answered with `input_handler` (each request
    once: keys already answered are not asked again) through `tasks/update`. A `failed` task
    raises its error as RpcError; a `cancelled` one RequestCancelled. At most `max_rounds`
    updates. Each update's questions (the handler's keys, sorted) are added to `asked`, so a
    call's `asked` holds the questions asked inside its task as well as those of its rounds.
    """
    task_id = created.get("taskId")
    if not isinstance(task_id, str):
        raise InvalidServerResponse("CreateTaskResult without a string taskId")
    answered: set[str] = set()
    updates = 0
    task: Mapping[str, Any] = created
    while True:
        status = task.get("status")
        if status == "completed":
            return dict(_as_mapping(task.get("result"), "the completed task's result"))
        if status == "failed":
            error = _as_mapping(task.get("error"), "the failed task's error")
            code, message = error.get("code"), error.get("message")
            if not isinstance(code, int) or not isinstance(message, str):
                raise InvalidServerResponse("a failed task's error has no code and message")
            raise RpcError(code, message, error.get("data"))
        if status == "cancelled":
            raise RequestCancelled(f"task {task_id} was cancelled")
        if status == "input_required" and task is not created:
            pending = {k: v for k, v in _input_requests(task).items() if k not in answered}
            if pending:
                if input_handler is None:
                    raise RpcError(
                        INVALID_REQUEST, f"task {task_id} asked for input but no input_handler"
                    )
                if updates >= max_rounds:
                    raise TooManyRounds("tasks/update", max_rounds, sorted(pending), {})
                wire_of = {_handler_key(key): key for key in pending}
                replies = await input_handler({_handler_key(k): v for k, v in pending.items()})
                responses = {wire_of[key]: value for key, value in replies.items()}
                await requester.request(
                    "tasks/update", {"taskId": task_id, "inputResponses": responses}
                )
                answered.update(pending)
                updates += 1
                if asked is not None:
                    asked.append(tuple(sorted(wire_of)))
        elif status not in ("working", "input_required"):
            raise InvalidServerResponse(f"task {task_id}: unknown status {status!r}")
        interval = task.get("pollIntervalMs")
        seconds = interval / 1000 if isinstance(interval, int) and interval >= 0 else 1.0
        if max_poll_seconds is not None:
            seconds = min(seconds, max_poll_seconds)
        await anyio.sleep(seconds)
        task = await requester.request("tasks/get", {"taskId": task_id})


async def call_tool_with_inputs(
    requester: Requester,
    name: str,
    arguments: Mapping[str, Any] | None = None,
    input_handler: InputHandler | None = None,
    *,
    max_rounds: int = DEFAULT_MAX_ROUNDS,
) -> dict[str, Any]:
    """``tools/call`` through ``request_with_inputs``: every round, until a complete result."""
    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    return await request_with_inputs(
        requester, "tools/call", params, input_handler, max_rounds=max_rounds
    )


# -- what both clients offer ---------------------------------------------------------------------


class RoundsClient:
    """``call_tool`` / ``get_prompt`` / ``read_resource`` over a client's ``request``.

    Each drives every MRTR round with the client's callbacks and returns the final result.
    A callback that crashed while answering a legacy server request (the client answered the
    server with an error) is raised from the call that was running, so a test sees it.
    """

    callbacks: Callbacks
    notifications: list[dict[str, Any]]
    #: How often, at most, a call that became a task polls it (None: as the server says).
    max_poll_seconds: float | None = None
    _callback_failures: list[Exception]
    _progress_tokens = count(1)  # shared by every client: a token is never reused in a process

    async def request(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    @property
    def input_handler(self) -> InputHandler:
        """A ``default_input_handler`` over this client's own callbacks."""
        return self.callbacks.input_handler()

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        max_rounds: int = DEFAULT_MAX_ROUNDS,
        meta: Mapping[str, Any] | None = None,
    ) -> ToolCallResult:
        """``tools/call`` through every round; the final result, typed (``isError`` results
        are returned, not raised; a JSON-RPC error raises RpcError).

        Every request of the call carries a ``progressToken`` (``meta`` may name its own), so
        the result's ``progress`` holds what the tool reported (basic/utilities/progress: the
        token is unique among active requests; the rounds of one call run one at a time).
        ``meta`` adds to ``params._meta``.
        """
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = dict(arguments)
        wanted = dict(meta or {})
        token = wanted.setdefault("progressToken", f"call-{next(self._progress_tokens)}")
        seen = len(self.notifications)
        rounds = await self._drive("tools/call", params, max_rounds, wanted)
        progress = [
            _progress(note["params"])
            for note in self.notifications[seen:]
            if note.get("method") == "notifications/progress"
            and isinstance(note.get("params"), Mapping)
            and note["params"].get("progressToken") == token
        ]
        return ToolCallResult.from_wire(
            rounds.result, progress=progress, asked=rounds.asked, task_id=rounds.task_id
        )

    async def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        max_rounds: int = DEFAULT_MAX_ROUNDS,
        meta: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """``prompts/get`` through every round; the final GetPromptResult."""
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = dict(arguments)
        return (await self._drive("prompts/get", params, max_rounds, meta)).result

    async def read_resource(
        self,
        uri: str,
        *,
        max_rounds: int = DEFAULT_MAX_ROUNDS,
        meta: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """``resources/read`` through every round; the final ReadResourceResult."""
        return (await self._drive("resources/read", {"uri": uri}, max_rounds, meta)).result

    def _call_meta(self, meta: Mapping[str, Any]) -> dict[str, Any]:
        """The ``_meta`` a call sends for the caller's ``meta`` (clients may add theirs)."""
        return dict(meta)

    def _record_callback_failure(self, failure: Exception) -> None:
        self._callback_failures.append(failure)

    async def _drive(
        self,
        method: str,
        params: dict[str, Any],
        max_rounds: int,
        meta: Mapping[str, Any] | None,
    ) -> Rounds:
        if meta is not None:
            params["_meta"] = self._call_meta(meta)
        seen = len(self._callback_failures)
        try:
            rounds = await run_rounds(
                self,
                method,
                params,
                self.input_handler,
                max_rounds=max_rounds,
                max_poll_seconds=self.max_poll_seconds,
            )
        except Exception as error:
            self._raise_new_failure(seen, error)
            raise
        self._raise_new_failure(seen, None)
        return rounds

    def _raise_new_failure(self, seen: int, cause: Exception | None) -> None:
        if len(self._callback_failures) > seen:
            raise self._callback_failures[seen] from cause


def _progress(params: Mapping[str, Any]) -> Progress:
    """A progress notification's numbers and message (the server's encoder made it JSON)."""
    total = params.get("total")
    message = params.get("message")
    return Progress(
        params.get("progress", 0),
        total if isinstance(total, int | float) else None,
        message if isinstance(message, str) else None,
    )
