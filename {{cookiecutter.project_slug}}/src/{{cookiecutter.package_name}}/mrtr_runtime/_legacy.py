"""The 2025-11-25 bridge: the same MRTR handlers, served to clients that predate MRTR.

A legacy client breaks on `input_required` (it is not a 2025-11-25 result), so on a session
opened with `initialize` the runtime resolves a handler's input requests itself, with real
server-to-client requests (2025-11-25 client/elicitation, client/sampling, client/roots),
then calls the handler again with the answers -- the loop a modern client would run.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from ._audit import decision_of, plan_digest
from ._context import RequestScope
from ._dispatch import (
    Ask,
    BadAnswer,
    Call,
    Finish,
    MissingCapability,
    RoundInput,
    check_answer,
    round_step,
)
from ._errors import MrtrError
from ._jsonrpc import INVALID_REQUEST, JSONObject, Response, RpcError, clip
from ._wire import ELICIT

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ._inputs import InputRequest

__all__ = ("MAX_LEGACY_ROUNDS", "client_result", "run_legacy")

#: The same bound the client-side loop uses by default: a handler that keeps asking after 16
#: rounds is looping, and the host's user should not answer forever.
MAX_LEGACY_ROUNDS: Final = 16


def client_result(response: Response) -> JSONObject:
    """The result of the client's response to one of the bridge's requests; its error (or a
    response with neither) raised as an RpcError, which the bridge turns into the refusal.
    The same on every transport that carries such requests."""
    if response.error is not None or response.result is None:
        error = response.error or {}
        code = error.get("code")
        raise RpcError(
            code if isinstance(code, int) else INVALID_REQUEST,
            str(error.get("message", "no result")),
        )
    return response.result


def _capability_names(missing: Mapping[str, Any]) -> str:
    parts = []
    for name, detail in sorted(missing.items()):
        modes = sorted(detail) if isinstance(detail, Mapping) and detail else []
        parts.append(f"{name} ({', '.join(modes)})" if modes else name)
    return ", ".join(parts)


async def run_legacy(
    call: Call,
    received: RoundInput,
    scope: RequestScope,
    *,
    max_rounds: int = MAX_LEGACY_ROUNDS,
) -> JSONObject:
    """Serve `call` to a 2025-11-25 session, asking the client (`scope.peer`) for any input
    the handler needs; what cannot be asked or answered is the call's `refuse`."""
    # Answers the client sent with the call were asked by nobody: the same rule as MRTR.
    answers = call.unasked_answers(received.responses)
    parsed: dict[str, BaseModel] = {}
    state: object = None  # the handler's own value, kept here between the bridge's rounds
    # The audit trail's id of this call: its lines, asked and decided, share it.
    trail_call = uuid.uuid4().hex[:16] if scope.audit is not None else None
    for round_number in range(max_rounds + 1):
        step = round_step(
            await call.run(scope.context(answers, None, state, parsed)),
            scope.capabilities,
            answers,
        )
        match step:
            case Finish(value):
                result = call.finish(value)
                if scope.audit is not None and round_number:
                    scope.audit.finished(
                        era=scope.version,
                        principal=scope.principal,
                        tool=call.target,
                        round=trail_call,
                        result=result,
                    )
                return result
            case MissingCapability(missing) if round_number < max_rounds:
                return call.refuse(
                    f"This host does not support {_capability_names(missing)}, which "
                    f"{call.target!r} needs to ask for input. Use a client that declares it."
                )
            case Ask(outcome, kept) if round_number < max_rounds:
                pass
            case _:
                break  # past the bound: an answer now could never be used
        # The 2025-11-25 bridge asks with real requests, in this process, round after round.
        state = outcome.state
        answers = kept
        parsed = {key: model for key, model in parsed.items() if key in kept}
        if scope.audit is not None:
            scope.audit.asked(
                era=scope.version,
                principal=scope.principal,
                tool=call.target,
                round=trail_call,
                questions={
                    key: (request.method, request.params)
                    for key, request in outcome.requests.items()
                },
            )
        try:
            decisions, plans = await _ask_in_turn(scope, outcome.requests, answers, parsed)
        except _Refusal as refusal:
            return call.refuse(str(refusal))
        if scope.audit is not None:
            # Asked and answered in this request: one line with the decisions and what each
            # was a decision on (the trail's `plan`).
            scope.audit.decided(
                era=scope.version,
                principal=scope.principal,
                tool=call.target,
                round=trail_call,
                decisions=decisions,
                plans={key: plans[key] for key in decisions},
            )
    return call.refuse(
        f"{call.target!r} asked for input more than {max_rounds} times without finishing"
    )


class _Refusal(MrtrError):
    """Why the client's side of an exchange ended the call: its text is the call's refusal."""


async def _ask_in_turn(
    scope: RequestScope,
    requests: Mapping[str, InputRequest],
    answers: dict[str, Any],
    parsed: dict[str, BaseModel],
) -> tuple[dict[str, str], dict[str, str]]:
    """Ask the client each of `requests` with a real request, in the handler's order, so the
    question it put first (a confirmation) comes first; each answer goes into `answers` (its
    model into `parsed`). Returns the decisions and, with an audit trail, the plan digest each
    was a decision on. A declined or cancelled form ends the asking: the rest may be moot."""
    decisions: dict[str, str] = {}
    plans: dict[str, str] = {}
    for key, request in requests.items():
        request_params = dict(request.params)
        if request.method == ELICIT and request_params.get("mode") == "url":
            # 2025-11-25 URL-mode elicitation carries an elicitationId; 2026-07-28 dropped it.
            request_params["elicitationId"] = uuid.uuid4().hex
        if scope.audit is not None:
            plans[key] = plan_digest(request.method, request.params)
        try:
            answer = await scope.peer.request(request.method, request_params)
        except RpcError as error:
            raise _Refusal(
                f"The client could not answer {request.method} ({error.code}): "
                f"{clip(error.message)}"
            ) from None
        try:
            model = check_answer(request.method, answer)
        except BadAnswer as problem:
            raise _Refusal(
                f"The client's answer to {request.method} is invalid: {problem}"
            ) from None
        answers[key] = answer
        if model is not None:
            parsed[key] = model
        decisions[key] = decision_of(request.method, answer)
        if request.method == ELICIT and answer.get("action") != "accept":
            # A decline or cancel may make the rest moot ("Deploy?" -> no): the handler
            # decides with what it has before the user is asked anything more.
            break
    return decisions, plans
