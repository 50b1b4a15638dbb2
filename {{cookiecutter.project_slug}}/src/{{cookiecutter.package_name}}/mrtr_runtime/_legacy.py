"""The 2025-11-25 bridge: the same MRTR handlers, served to clients that predate MRTR.

A legacy client breaks on `input_required` (it is not a 2025-11-25 result), so on a session
opened with `initialize` the runtime resolves a handler's input requests itself, with real
server-to-client requests (2025-11-25 client/elicitation, client/sampling, client/roots),
then calls the handler again with the answers -- the loop a modern client would run.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, Protocol

from ._capabilities import ClientCapabilities
from ._context import InvalidInputResponse
from ._dispatch import (
    Call,
    MakeContext,
    RoundInput,
    answer_shape_error,
    merge_missing,
    unasked_answers,
)
from ._jsonrpc import INVALID_PARAMS, RpcError, clip
from ._redact import redact_secrets
from ._results import InputRequired
from ._wire import ELICIT

__all__ = ("MAX_LEGACY_ROUNDS", "Unanswerable", "run_legacy")

#: The same bound the client-side loop uses by default: a handler that keeps asking after 16
#: rounds is looping, and the host's user should not answer forever.
MAX_LEGACY_ROUNDS: Final = 16


class AskClient(Protocol):
    async def __call__(self, method: str, params: dict[str, Any]) -> dict[str, Any]: ...


#: How a method reports a failure it cannot turn into a result (tools give isError results).
Unanswerable = Callable[[str], dict[str, Any]]


def _capability_names(missing: Mapping[str, Any]) -> str:
    parts = []
    for name, detail in sorted(missing.items()):
        modes = sorted(detail) if isinstance(detail, Mapping) and detail else []
        parts.append(f"{name} ({', '.join(modes)})" if modes else name)
    return ", ".join(parts)


async def run_legacy(
    call: Call,
    received: RoundInput,
    *,
    capabilities: ClientCapabilities,
    make_context: MakeContext,
    ask: AskClient | Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]],
    unanswerable: Unanswerable,
    max_rounds: int = MAX_LEGACY_ROUNDS,
) -> dict[str, Any]:
    # Answers the client sent with the call were asked by nobody: the same rule as MRTR.
    answers = unasked_answers(call, received.responses)
    state: object = None  # the handler's own value, kept here between the bridge's rounds
    for round_number in range(max_rounds + 1):
        try:
            outcome = await call.run(make_context(answers, None, state))
        except InvalidInputResponse as error:
            # A tool can raise it with any text: it leaves like a ToolError's, redacted.
            raise RpcError(INVALID_PARAMS, redact_secrets(str(error))) from None
        if not isinstance(outcome, InputRequired):
            return call.finish(outcome)
        if round_number == max_rounds:
            break  # an answer now could never be used
        state = outcome.state
        missing = merge_missing(capabilities, outcome)
        if missing:
            return unanswerable(
                f"This host does not support {_capability_names(missing)}, which "
                f"{call.target!r} needs to ask for input. Use a client that declares it."
            )
        for key in outcome.requests:
            answers.pop(key, None)  # asked again: the earlier answer no longer stands
        # In the handler's order, so the question it put first (a confirmation) comes first.
        for key, request in outcome.requests.items():
            request_params = dict(request.params)
            if request.method == ELICIT and request_params.get("mode") == "url":
                # 2025-11-25 URL-mode elicitation carries an elicitationId; 2026-07-28 dropped it.
                request_params["elicitationId"] = uuid.uuid4().hex
            try:
                answer = await ask(request.method, request_params)
            except RpcError as error:
                return unanswerable(
                    f"The client could not answer {request.method} ({error.code}): "
                    f"{clip(error.message)}"
                )
            problem = answer_shape_error(request.method, answer)
            if problem:
                return unanswerable(
                    f"The client's answer to {request.method} is invalid: {problem}"
                )
            answers[key] = answer
            if request.method == ELICIT and answer.get("action") != "accept":
                # A decline or cancel may make the rest moot ("Deploy?" -> no): the handler
                # decides with what it has before the user is asked anything more.
                break
    return unanswerable(
        f"{call.target!r} asked for input more than {max_rounds} times without finishing"
    )
