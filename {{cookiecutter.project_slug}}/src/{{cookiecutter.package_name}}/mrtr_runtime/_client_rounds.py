"""The client side of MRTR: resolve a round's input requests, retry until complete.

The loop of the design notes' Q4 (call; while ``input_required``: resolve the input requests,
retry the same call with this round's ``inputResponses`` and the echoed ``requestState``),
capped at ``max_rounds`` retries. It works over anything with an async ``request`` -- a
``ClientSession`` on a spawned server or an in-process ``MemoryClient``.

``default_input_handler`` routes each input request to the elicitation / sampling / roots
callback, the same callbacks a legacy session uses for real server->client requests.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Protocol, cast

import anyio

from ._jsonrpc import INVALID_REQUEST, METHOD_NOT_FOUND, RpcError

__all__ = (
    "DEFAULT_MAX_ROUNDS",
    "ElicitationHandler",
    "InputHandler",
    "InvalidServerResponse",
    "RequestHandler",
    "Requester",
    "RootsHandler",
    "SamplingHandler",
    "TooManyRounds",
    "call_tool_with_inputs",
    "default_input_handler",
    "request_with_inputs",
)

logger = logging.getLogger(__name__)

DEFAULT_MAX_ROUNDS = 16  # design notes Q4: "Default maxRounds is 16"
# Python SDK mcp/client/_input_required.py: a state-only result is retried after a short
# backoff, 50 ms doubling to a 250 ms cap.
_STATE_ONLY_BACKOFF_START = 0.05
_STATE_ONLY_BACKOFF_CAP = 0.25

# The handlers get a request's params and return the full result object: an ElicitResult
# ({"action", "content"?}), a CreateMessageResult, a ListRootsResult (2026-07-28 schema.ts).
RequestHandler = Callable[[dict[str, object]], Awaitable[Mapping[str, object]]]
ElicitationHandler = RequestHandler
SamplingHandler = RequestHandler
RootsHandler = RequestHandler
# inputRequests ({key: {"method", "params"}}) -> inputResponses ({key: result}).
InputHandler = Callable[[Mapping[str, Mapping[str, object]]], Awaitable[Mapping[str, object]]]


class TooManyRounds(Exception):
    """The server still asked for input after ``max_rounds`` retries."""

    def __init__(self, method: str, max_rounds: int, pending_keys: Sequence[str]) -> None:
        # Never the requestState token or any answer: only the method, cap and keys.
        keys = ", ".join(repr(key) for key in pending_keys) or "none (state only)"
        super().__init__(
            f"{method}: the server still required input after {max_rounds} retries "
            f"({max_rounds + 1} calls); pending input keys: {keys}. "
            "A server that keeps asking and never settles is usually a server bug."
        )
        self.method = method
        self.max_rounds = max_rounds
        self.pending_keys = tuple(pending_keys)


class InvalidServerResponse(Exception):
    """The server answered with something this client must treat as invalid."""


class Requester(Protocol):
    """Anything that can send a request and return its ``result``; raises RpcError."""

    async def request(self, method: str, params: Mapping[str, object]) -> dict[str, object]: ...


def default_input_handler(
    *,
    elicitation: ElicitationHandler | None = None,
    sampling: SamplingHandler | None = None,
    roots: RootsHandler | None = None,
) -> InputHandler:
    """Route each input request to the callback for its method; run them concurrently.

    Design notes Q4: the callbacks are the ones a host already has for real server->client
    requests. An unknown method or a missing callback raises RpcError naming the method
    before any callback runs; a callback's exception aborts the round (and the loop).
    """
    callbacks: dict[str, RequestHandler | None] = {
        "elicitation/create": elicitation,
        "sampling/createMessage": sampling,
        "roots/list": roots,
    }

    async def handle(requests: Mapping[str, Mapping[str, object]]) -> dict[str, object]:
        work: list[tuple[str, RequestHandler, dict[str, object]]] = []
        for key in sorted(requests):
            entry = requests[key]
            method = entry.get("method")
            if method not in callbacks:
                raise RpcError(
                    METHOD_NOT_FOUND, f"input request {key!r}: unsupported method {method!r}"
                )
            callback = callbacks[method]
            if callback is None:
                raise RpcError(INVALID_REQUEST, f"input request {key!r}: no handler for {method!r}")
            params = entry.get("params")
            work.append((key, callback, dict(cast("Mapping[str, object]", params or {}))))

        answers: dict[str, object] = {}
        failures: list[Exception] = []

        async def run(
            key: str, callback: RequestHandler, params: dict[str, object], scope: anyio.CancelScope
        ) -> None:
            try:
                answers[key] = await callback(params)
            except Exception as exc:
                failures.append(exc)
                scope.cancel()

        # Like the Python SDK's driver: every entry of a round runs concurrently.
        async with anyio.create_task_group() as task_group:
            for key, callback, params in work:
                task_group.start_soon(run, key, callback, params, task_group.cancel_scope)
        if failures:
            raise failures[0]
        return {key: answers[key] for key, _, _ in work}

    return handle


def _as_mapping(value: object, what: str) -> Mapping[str, object]:
    if not isinstance(value, Mapping):
        raise InvalidServerResponse(f"{what} is not an object")
    return cast("Mapping[str, object]", value)


def _input_requests(result: Mapping[str, object]) -> dict[str, Mapping[str, object]]:
    raw = result.get("inputRequests")
    if raw is None:
        return {}
    requests: dict[str, Mapping[str, object]] = {}
    for key, entry in _as_mapping(raw, "inputRequests").items():
        request = _as_mapping(entry, f"inputRequests[{key!r}]")
        if not isinstance(request.get("method"), str):
            raise InvalidServerResponse(f"inputRequests[{key!r}] has no method")
        if request.get("params") is not None:
            _as_mapping(request["params"], f"inputRequests[{key!r}].params")
        requests[key] = request
    return requests


async def request_with_inputs(
    requester: Requester,
    method: str,
    params: Mapping[str, object],
    input_handler: InputHandler | None,
    *,
    max_rounds: int = DEFAULT_MAX_ROUNDS,
) -> dict[str, object]:
    """Call ``method``; while the result is ``input_required``, answer and retry.

    2026-07-28 basic/patterns/mrtr: the retry is the same method with the same params, plus
    this round's ``inputResponses`` and the ``requestState`` echoed unchanged (omitted when the
    server sent none). At most ``max_rounds`` retries (``max_rounds + 1`` calls), then
    TooManyRounds. A state-only result is retried after a short backoff without asking.
    ``inputResponses``/``requestState`` given in ``params`` seed the first call only.
    """
    if max_rounds < 0:
        raise ValueError("max_rounds must be >= 0")
    base = {k: v for k, v in params.items() if k not in ("inputResponses", "requestState")}
    result = await requester.request(method, params)
    rounds = 0
    backoff = _STATE_ONLY_BACKOFF_START
    while True:
        result_type = result.get("resultType")
        # Legacy (2025-11-25) results carry no resultType; they are always complete.
        if result_type is None or result_type == "complete":
            return result
        if result_type != "input_required":
            # basic/index: "A resultType of any value unrecognized by the client MUST be
            # considered invalid."
            raise InvalidServerResponse(f"{method}: unrecognised resultType {result_type!r}")
        requests = _input_requests(result)
        state = result.get("requestState")
        if state is not None and not isinstance(state, str):
            raise InvalidServerResponse(f"{method}: requestState is not a string")
        if rounds >= max_rounds:
            raise TooManyRounds(method, max_rounds, sorted(requests))
        retry = dict(base)
        if requests:
            if input_handler is None:
                asked = ", ".join(
                    f"{key!r} ({requests[key]['method']})" for key in sorted(requests)
                )
                raise RpcError(
                    INVALID_REQUEST,
                    f"{method}: the server asked for input ({asked}) but no input_handler "
                    "was given",
                )
            logger.debug(
                "%s round %d: answering %s", method, rounds + 1, ", ".join(sorted(requests))
            )
            answers = await input_handler(requests)
            retry["inputResponses"] = dict(answers)  # this round's answers only
            backoff = _STATE_ONLY_BACKOFF_START
        else:
            logger.debug("%s round %d: state only, retrying in %.2fs", method, rounds + 1, backoff)
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, _STATE_ONLY_BACKOFF_CAP)
        if state is not None:
            retry["requestState"] = state  # opaque: echoed exactly as received
        rounds += 1
        result = await requester.request(method, retry)


async def call_tool_with_inputs(
    requester: Requester,
    name: str,
    arguments: Mapping[str, object] | None = None,
    input_handler: InputHandler | None = None,
    *,
    max_rounds: int = DEFAULT_MAX_ROUNDS,
) -> dict[str, object]:
    """``tools/call`` through ``request_with_inputs`` (design notes Q4 CallToolWithInputs)."""
    params: dict[str, object] = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    return await request_with_inputs(
        requester, "tools/call", params, input_handler, max_rounds=max_rounds
    )
