"""MRTR dispatch for one round: verify -> merge -> call the handler -> reshape or finish.

2026-07-28 basic/patterns/mrtr, "Server Requirements": the server keeps nothing between
rounds. Everything answered so far travels in the signed `requestState`, so any round can be
served by any process holding the key, including one started after the previous round.

What a server does remember is what became of each round that closed a verified token
(`RoundLedger`, kept in the task store): a confirmation is carried out at most once, and every
later sending of its token gets the same answer. A process also knows what it is running right
now (`RoundFlights`): sendings of one token arriving together share one run.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Final, Protocol

import anyio

from ._audit import decision_of, round_id
from ._capabilities import ClientCapabilities
from ._context import (
    AnswerMisfit,
    Context,
    Fence,
    RequestScope,
    StartTask,
    TaskStart,
    elicit_shape_error,
    validate_answer,
)
from ._errors import MrtrError
from ._jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    JSONObject,
    RpcError,
    canonical_json,
    clip,
)
from ._results import InputRequired
from ._tokens import (
    Binding,
    InvalidRequestState,
    RequestStateCodec,
    RoundState,
    digest_arguments,
    digest_principal,
    round_key,
)
from ._wire import ELICIT, MODERN_VERSIONS, TASKS_EXTENSION

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = (
    "MAX_INPUT_RESPONSE_BYTES",
    "MAX_INPUT_RESPONSE_KEYS",
    "Ask",
    "BadAnswer",
    "Call",
    "Finish",
    "MissingCapability",
    "RoundClaim",
    "RoundFlights",
    "RoundInput",
    "RoundLedger",
    "RoundStep",
    "TaskOpening",
    "TaskStarter",
    "check_answer",
    "merge_missing",
    "missing_capability_error",
    "read_input_responses",
    "round_step",
    "run_round",
    "tasks_required_error",
)

#: Bounds on what one retry may carry. mrtr "Security Considerations": requestState and the
#: answers are attacker-controlled, and every accepted answer is re-signed into the next
#: token, so an unbounded map would let one client grow every later message without limit.
MAX_INPUT_RESPONSE_KEYS: Final = 64
MAX_INPUT_RESPONSE_BYTES: Final = 32 * 1024


@dataclass(frozen=True, slots=True)
class RoundInput:
    """The MRTR half of a request's params (basic/patterns/mrtr), parsed once by the router.

    `responses` is `inputResponses` checked for shape and size ({} when absent);
    `request_state` is the `requestState` exactly as sent, checked only by the codec, and
    `has_state` says whether the key was there at all (a `null` is still a token to refuse).
    `retried`: either key was sent (server/utilities/caching: such results MUST NOT be cached).
    `canonical` is `responses` as canonical JSON, made once to measure them ("" when absent).
    """

    responses: Mapping[str, Any]
    canonical: str
    request_state: object
    has_state: bool
    retried: bool

    @classmethod
    def parse(cls, params: Mapping[str, Any]) -> RoundInput:
        has_state = "requestState" in params
        responses, canonical = read_input_responses(params)
        return cls(
            responses,
            canonical,
            params.get("requestState"),
            has_state,
            has_state or "inputResponses" in params,
        )


class Call:
    """One call of a method that may ask for input: tools/call, prompts/get or resources/read.

    `_methods` makes one per request (ToolCall, PromptCall, ResourceCall); dispatch runs its
    handler once per round (`run`), turns the final return value into the method's result
    (`finish`), and, on the 2025-11-25 bridge, says how the method reports input it could
    not get (`refuse`).
    """

    __slots__ = ("accept_unasked", "arguments", "target")

    method: ClassVar[str]

    def __init__(
        self,
        target: str,
        arguments: Mapping[str, Any],
        accept_unasked: frozenset[str] = frozenset(),
    ) -> None:
        #: The tool or prompt name, or the resource URI: what a requestState is bound to.
        self.target = target
        self.arguments = arguments
        #: Input keys the handler takes answers for even when no round asked (its own opt-in).
        self.accept_unasked = accept_unasked

    async def run(self, context: Context) -> Any:
        """Run the handler once with `context`; whatever it returned."""
        raise NotImplementedError

    def finish(self, outcome: Any) -> JSONObject:
        """The method's result for the handler's final return value."""
        raise NotImplementedError

    def refuse(self, message: str) -> JSONObject:
        """A failure to get the input the handler asked for, as this method reports it: an
        error response (tools give an isError result instead, which the model can read)."""
        raise RpcError(INVALID_REQUEST, message)

    @property
    def task(self) -> str | None:
        """Whether the handler may run as a task: None, "optional" or "required" (tools only)."""
        return None

    @property
    def task_ttl_seconds(self) -> float | None:
        return None

    def binding(self, principal: str | None = None) -> Binding:
        try:
            digest = digest_arguments(self.arguments)
        except (ValueError, RecursionError):
            raise RpcError(INVALID_PARAMS, "Invalid arguments: too deeply nested") from None
        return Binding(self.method, self.target, digest, digest_principal(principal))

    def unasked_answers(self, offered: Mapping[str, Any]) -> dict[str, Any]:
        """The answers taken with no verified round behind them: only the opted-in keys.

        mrtr "Error Handling": the server SHOULD ignore information it did not ask for. An
        answer to a question the server never asked proves nothing about what the user saw, so
        it must never stand in for a confirmation (or let a client without the capability skip
        the question); only keys the handler named in `accept_unasked` are exempt.
        """
        if not self.accept_unasked:
            return {}
        return {key: answer for key, answer in offered.items() if key in self.accept_unasked}


@dataclass(slots=True)
class _Flight:
    #: Made by the first identical round that comes to wait (an anyio.Event costs 3.7 us, and
    #: most confirming rounds run alone); set when the run ends.
    done: anyio.Event | None = None
    result: dict[str, Any] | None = None
    error: RpcError | None = None


class RoundFlights:
    """The confirming rounds this process is running, by their token (single-flight).

    A round that closes the same verified requestState as one already running gets that run's
    outcome instead of a second run or a second look at the ledger, whatever else it carries:
    a client (or a proxy) that sends its confirmation twice must not deploy twice. An entry
    lives only while its run does, so the table never holds more than the requests in flight,
    which the transports bound. Across processes and replicas the ledger's claim does the same.
    """

    def __init__(self) -> None:
        self._running: dict[str, _Flight] = {}

    def __len__(self) -> int:
        return len(self._running)

    async def run(self, key: str, work: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        flight = self._running.get(key)
        if flight is not None:
            # One event loop runs every round, so nothing can finish the flight between the
            # lookup above and the wait below.
            if flight.done is None:
                flight.done = anyio.Event()
            await flight.done.wait()
            if flight.result is not None:
                return dict(flight.result)  # the transports add to a result's top level
            if flight.error is not None:
                raise RpcError(flight.error.code, flight.error.message, flight.error.data)
            # The first run was cancelled (or failed): it may have acted partway, and a thread
            # handler may even still be running, so starting over here could be the double
            # action this table exists to stop. The client is told to send it again.
            raise RpcError(
                INTERNAL_ERROR,
                "Not run: an identical request running at the same time did not finish; "
                "send it again",
            )
        flight = self._running[key] = _Flight()
        try:
            result = await work()
            flight.result = dict(result)
            return result
        except RpcError as error:
            flight.error = error
            raise
        finally:
            del self._running[key]
            if flight.done is not None:
                flight.done.set()


@dataclass(frozen=True, slots=True)
class TaskOpening:
    """A round whose handler called `ctx.start_task()` where that makes a task: everything the
    task engine needs to create the task, or to find the one this very round already made.

    `once_key` is the round's identity (`round_key` of the verified requestState it closed):
    the confirmation it carries is consumed at most once, by the task made with that key.
    `inline`: the client did not declare the extension; it gets the result in the response,
    which `rerun` computes by running the handler again (where `start_task` returns at once).
    `claim`: the round's claim on its single-use record, told the task it becomes.
    """

    call: Call
    scope: RequestScope
    answers: Mapping[str, Any]
    state: Any
    once_key: str | None
    message: str | None
    inline: bool
    rerun: Callable[[], Awaitable[JSONObject]]
    claim: RoundClaim | None = None


class RoundClaim(Fence, Protocol):
    """A confirming round's claim on its record (`_once.RoundHold`): the Fence of the round's
    point of no return, and the task the round became, if it became one (the task engine
    says so), which is then what the record keeps. `started`: the handler passed
    `ctx.start_task()` inline (no task engine), so a question it asks after that is a new
    round of the work, not this round asked again."""

    task_id: str | None
    started: bool


class RoundLedger(Protocol):
    """Single use (`_once.RoundLedger`), as dispatch sees it: runs a confirming round under a
    claim on its record (`run` gets the claim), or answers it from the record of an earlier
    sending."""

    async def once(
        self,
        key: str,
        run: Callable[[RoundClaim], Awaitable[JSONObject]],
        *,
        principal: str | None,
        follows_tasks: bool,
        on_replay: Callable[[], None] | None = None,
    ) -> JSONObject: ...


class TaskStarter(Protocol):
    """The task engine, as dispatch sees it: makes (or finds) the task of an opening, and
    answers the request (a CreateTaskResult, or the inline result)."""

    async def __call__(self, opening: TaskOpening) -> JSONObject: ...


def read_input_responses(params: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """`params.inputResponses` checked for shape and size, with its canonical JSON; ({}, "")
    when the client sent none.

    mrtr "Error Handling": servers SHOULD validate that inputResponses is a valid
    InputResponses object and answer protocol errors with a JSON-RPC error.
    """
    if "inputResponses" not in params:
        return {}, ""
    responses = params["inputResponses"]
    if not isinstance(responses, dict):
        raise RpcError(INVALID_PARAMS, "Invalid inputResponses: must be an object")
    if len(responses) > MAX_INPUT_RESPONSE_KEYS:
        raise RpcError(
            INVALID_PARAMS, f"Invalid inputResponses: more than {MAX_INPUT_RESPONSE_KEYS} answers"
        )
    for key, answer in responses.items():
        if not isinstance(answer, dict):
            raise RpcError(
                INVALID_PARAMS,
                f"Invalid inputResponses[{clip(key)!r}]: each answer must be an object",
            )
    try:
        canonical = canonical_json(responses)
    except ValueError:
        raise RpcError(INVALID_PARAMS, "Invalid inputResponses: not finite JSON") from None
    if len(canonical) > MAX_INPUT_RESPONSE_BYTES:
        raise RpcError(
            INVALID_PARAMS,
            f"Invalid inputResponses: larger than {MAX_INPUT_RESPONSE_BYTES} bytes",
        )
    return responses, canonical


@dataclass(frozen=True)
class Finish:
    """The handler is done: `value` is what it returned (the call's `finish` shapes it)."""

    value: object


@dataclass(frozen=True)
class MissingCapability:
    """The handler asked for what the client cannot give: `missing` names the capabilities
    (the -32021 `requiredCapabilities`, or the era's refusal)."""

    missing: dict[str, Any]


@dataclass(frozen=True)
class Ask:
    """The handler asks: `outcome.requests` (none for a round that only carries `state` on),
    and the answers that still stand, `kept`."""

    outcome: InputRequired
    kept: dict[str, Any]


RoundStep = Finish | MissingCapability | Ask


def round_step(
    outcome: object, capabilities: ClientCapabilities, answers: Mapping[str, Any]
) -> RoundStep:
    """What follows a handler's run, in every era: the one rule of a round.

    A value other than `InputRequired` finishes the call. Questions the client lacks a
    capability for are not asked: the era refuses the call instead, naming the capabilities
    (2026-07-28 basic/index: -32021 MissingRequiredClientCapabilityError, see
    `missing_capability_error`). Otherwise the questions are asked, and an answer to a question
    asked again no longer stands: it is dropped until the client answers anew. Each era keeps
    only its way of asking (a token, a reverse request, a task record)."""
    if not isinstance(outcome, InputRequired):
        return Finish(outcome)
    missing = merge_missing(capabilities, outcome)
    if missing:
        return MissingCapability(missing)
    kept = {key: answer for key, answer in answers.items() if key not in outcome.requests}
    return Ask(outcome, kept)


def merge_missing(capabilities: ClientCapabilities, outcome: InputRequired) -> dict[str, Any]:
    """Every capability the client lacks for `outcome`'s requests, merged into one object."""
    missing: dict[str, Any] = {}
    for request in outcome.requests.values():
        for name, detail in capabilities.missing(request.required_capabilities).items():
            if isinstance(detail, dict) and isinstance(missing.get(name), dict):
                missing[name] = {**missing[name], **detail}
            else:
                missing[name] = detail
    return missing


def tasks_required_error(*, legacy: bool = False) -> RpcError:
    """The -32021 of a request only a task can serve, from a client without the extension
    (`legacy`: a 2025-11-25 session, which cannot declare it at all)."""
    # tasks "Capability Negotiation": the server MUST return -32021 "indicating the required
    # extension in the error response".
    message = None
    if legacy:
        # The extension exists only from protocol 2026-07-28: saying "declare it" to a
        # 2025-11-25 client would ask for what its protocol cannot carry.
        message = (
            f"This tool runs only as a task: it needs a client speaking protocol "
            f"{MODERN_VERSIONS[0]} that declares the {TASKS_EXTENSION} extension "
            "(this session speaks 2025-11-25)"
        )
    return missing_capability_error({"extensions": {TASKS_EXTENSION: {}}}, message=message)


def missing_capability_error(missing: Mapping[str, Any], *, message: str | None = None) -> RpcError:
    names = ", ".join(sorted(missing))
    # basic/index: "the server MUST return a MissingRequiredClientCapabilityError (-32021)
    # whose data.requiredCapabilities lists the missing capabilities".
    return RpcError(
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        message or f"This request needs client capabilities the client did not declare: {names}",
        {"requiredCapabilities": dict(missing)},
    )


async def run_round(
    call: Call,
    received: RoundInput,
    scope: RequestScope,
    *,
    codec: RequestStateCodec,
    flights: RoundFlights | None = None,
    tasks: TaskStarter | None = None,
    ledger: RoundLedger | None = None,
) -> JSONObject:
    """Serve one 2026-07-28 round of `call`; raises RpcError for a JSON-RPC error.

    An answer counts only if a verified requestState records that this server asked for its
    key (with the method it was asked with), or if the handler opted in to it; everything
    else the client sends is ignored, never shown to the handler and never signed. Tokens
    are minted for `scope.principal` (who the transport says is asking) and refused from
    anyone else. With `ledger`, a round that closes a verified token is carried out at most
    once (`_once`): every later sending of the token is answered from its record. With
    `flights`, sendings of one token running at once in this process share one run (and one
    look at the ledger). With `tasks`, a handler of a task tool that calls
    `ctx.start_task()` becomes a task there.
    """
    offered = received.responses
    extension = scope.capabilities.extension(TASKS_EXTENSION)
    if call.task == "required" and not extension:
        raise tasks_required_error()
    first, confirming = _task_starts(call, tasks is not None, extension)
    if not received.has_state:
        answers = call.unasked_answers(offered)
        context = scope.context(answers, task_start=first)
        return await _finish_round(call, scope, context, answers, None, codec, tasks)
    binding = call.binding(scope.principal)
    verified = _verified_state(codec, received.request_state, binding)
    if verified is None:
        # Authentic and bound to this very call, only stale: its answers are too old to act
        # on, so the questions start over with a fresh token instead of failing.
        context = scope.context({}, task_start=first)
        return await _finish_round(call, scope, context, {}, binding, codec, tasks)
    token, state = verified
    closing = _ClosingRound(call, scope, token, state, offered, binding, codec, tasks, confirming)

    def work() -> Awaitable[JSONObject]:
        if ledger is None:
            return closing.run(None)
        # Single use: the round's record answers every later sending of this token, before
        # any handler code runs (see _once); the trail says so when it does.
        audit = scope.audit
        replayed = (
            None
            if audit is None
            else functools.partial(
                audit.replayed, principal=scope.principal, tool=call.target, round=closing.trail
            )
        )
        return ledger.once(
            closing.key,
            closing.run,
            principal=scope.principal,
            follows_tasks=extension,
            on_replay=replayed,
        )

    if flights is None:
        return await work()
    return await flights.run(closing.key, work)


def _verified_state(
    codec: RequestStateCodec, presented: object, binding: Binding
) -> tuple[str, RoundState] | None:
    """The token `presented` and what it carries, verified; None when it is authentic and
    bound to this call but expired. Any other failure is the call's -32602."""
    # mrtr: "servers MUST treat requestState as an attacker-controlled input" and "MUST
    # reject state that fails verification" -- before the handler sees anything.
    try:
        state = codec.verify(presented, binding)
    except InvalidRequestState as error:
        if error.reason != "expired":
            raise RpcError(INVALID_PARAMS, f"Invalid requestState: {error.reason}") from None
        return None
    if not isinstance(presented, str):  # verify accepts only a str: never reached
        raise RpcError(INVALID_PARAMS, "Invalid requestState: malformed")
    return presented, state


class _ClosingRound:
    """A round that closes a verified token: what `run_round` hands the ledger to carry out at
    most once, and the audit trail's record of what it acted on and how it ended."""

    def __init__(
        self,
        call: Call,
        scope: RequestScope,
        token: str,
        state: RoundState,
        offered: Mapping[str, Any],
        binding: Binding,
        codec: RequestStateCodec,
        tasks: TaskStarter | None,
        task_start: TaskStart,
    ) -> None:
        self.call, self.scope, self.token, self.state = call, scope, token, state
        self.offered = offered
        self.binding, self.codec, self.tasks, self.task_start = binding, codec, tasks, task_start
        #: The round's identity for single use and for flights.
        self.key = round_key(token)
        #: The round's name in the audit trail (none without one).
        self.trail = round_id(token) if scope.audit is not None else ""

    async def run(self, claim: RoundClaim | None) -> JSONObject:
        # Under the round's claim: a sending answered from the record never gets here, so
        # nothing it carries (answers, extra keys, extra fields) is read at all.
        call, scope, state = self.call, self.scope, self.state
        answers, parsed = _asked_answers(state.answers, state.asked, self.offered)
        self._decided(answers)

        async def rerun() -> JSONObject:
            # The inline run of a task: the same round, in which start_task returns at once.
            again = scope.context(answers, self.token, state.state, parsed, fence=claim)
            return await _finish_round(call, scope, again, answers, self.binding, self.codec, None)

        context = scope.context(
            answers, self.token, state.state, parsed, task_start=self.task_start, fence=claim
        )
        try:
            result = await _finish_round(
                call,
                scope,
                context,
                answers,
                self.binding,
                self.codec,
                self.tasks,
                self.key,
                rerun,
                claim,
            )
        except BaseException:
            # Acted on decisions and ended without a result: the trail says so.
            self._finished({"isError": True})
            raise
        if claim is not None and context.started_task:
            claim.started = True
        self._finished(result)
        return result

    def _decided(self, answers: Mapping[str, Any]) -> None:
        """The trail's record of what this round acts on: the decisions on what the round it
        closes asked."""
        audit = self.scope.audit
        if audit is None:
            return
        asked = self.state.asked
        audit.decided(
            era=self.scope.version,
            principal=self.scope.principal,
            tool=self.call.target,
            round=self.trail,
            decisions={
                key: decision_of(method, answers[key])
                for key, method in asked.items()
                if key in answers
            },
        )

    def _finished(self, result: JSONObject) -> None:
        audit = self.scope.audit
        if audit is not None:
            audit.finished(
                era=self.scope.version,
                principal=self.scope.principal,
                tool=self.call.target,
                round=self.trail,
                result=result,
            )


def _task_starts(call: Call, engine: bool, extension: bool) -> tuple[TaskStart, TaskStart]:
    """What `ctx.start_task()` does in a first round and in a confirming one (one that closes
    a verified token). A first round starts a task only for a client that follows one; a
    confirming round of a task tool always records its run as a task (inline or not), so that
    a replay of the confirmation finds that run instead of acting again."""
    first: TaskStart = "refuse" if call.task is None else "return"
    if not engine or call.task is None:
        return first, first
    return ("raise" if extension else first), "raise"


def _asked_answers(
    signed: Mapping[str, Any], asked: Mapping[str, str], offered: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, BaseModel]]:
    """The answers that stand in a confirming round: those the token carries, and of the
    ones offered, only answers to what the round asked (each checked once against the method
    it was asked with; sampling and roots parsed into the model the handler reads). Anything
    else the client sent is ignored, never shown to the handler and never signed."""
    answers = dict(signed)
    parsed: dict[str, BaseModel] = {}
    for key, answer in offered.items():
        method = asked.get(key)
        if method is None:
            continue  # not asked in the round this token closes: ignored
        try:
            model = check_answer(method, answer)
        except BadAnswer as error:
            raise RpcError(
                INVALID_PARAMS, f"Invalid inputResponses[{clip(key)!r}]: {error}"
            ) from None
        if model is not None:
            parsed[key] = model
        answers[key] = answer
    return answers, parsed


async def _finish_round(
    call: Call,
    scope: RequestScope,
    context: Context,
    answers: dict[str, Any],
    binding: Binding | None,
    codec: RequestStateCodec,
    tasks: TaskStarter | None = None,
    once_key: str | None = None,
    rerun: Callable[[], Awaitable[JSONObject]] | None = None,
    claim: RoundClaim | None = None,
) -> JSONObject:
    """Run the handler, then finish the call or mint the next round's token.

    `binding` is the verified round's; a first round's is computed only when a token is
    minted, so a call that asks nothing never digests its arguments. An InvalidInputResponse
    the handler raises is an RpcError, and leaves as one. A handler that starts a task
    (`StartTask`) is handed to `tasks` with what the task needs.
    """
    try:
        outcome = await call.run(context)
    except StartTask as start:
        if tasks is None:  # the Context said "raise" only when there is an engine
            raise
        if rerun is None:

            async def rerun() -> JSONObject:
                again = scope.context(answers, context.request_state, context.state)
                return await _finish_round(call, scope, again, answers, binding, codec, None)

        opening = TaskOpening(
            call,
            scope,
            answers,
            context.state,
            once_key,
            start.message,
            not scope.capabilities.extension(TASKS_EXTENSION),
            rerun,
            claim,
        )
        return await tasks(opening)
    step = round_step(outcome, scope.capabilities, answers)
    if isinstance(step, Finish):
        return call.finish(step.value)
    if isinstance(step, MissingCapability):
        raise missing_capability_error(step.missing)
    outcome, kept = step.outcome, step.kept
    # MRTR asks with a token: it records only this round's questions, so the next retry may
    # answer those and nothing else.
    asked = {key: request.method for key, request in outcome.requests.items()}
    try:
        minted = codec.mint(binding or call.binding(scope.principal), kept, asked, outcome.state)
    except InvalidRequestState as error:
        # Every round passed its own cap, but together the answers outgrow a token.
        raise RpcError(INVALID_PARAMS, f"Invalid inputResponses: {error.reason}") from None
    except (TypeError, ValueError, RecursionError):
        raise RpcError(INVALID_PARAMS, "Invalid inputResponses: not JSON") from None
    result: JSONObject = {"resultType": "input_required", "requestState": minted}
    if scope.audit is not None and outcome.requests:
        scope.audit.asked(
            era=scope.version,
            principal=scope.principal,
            tool=call.target,
            round=round_id(minted),
            questions={
                key: (request.method, request.params) for key, request in outcome.requests.items()
            },
        )
    if outcome.requests:
        result["inputRequests"] = {
            key: request.to_wire() for key, request in outcome.requests.items()
        }
    return result


class BadAnswer(MrtrError, ValueError):
    """An answer that is not a result of the method it answers; the text says why."""


def check_answer(method: str, answer: object) -> BaseModel | None:
    """`answer` checked as a result of `method`, once, before any handler sees it; raises
    BadAnswer. Returns the answer validated into the model a handler reads it with
    (`SamplingResult`, `RootsResult`), which the handler's Context hands out without
    validating again; None for an elicitation, whose envelope is checked by hand and whose
    content only the handler's form can judge.

    mrtr "Error Handling": servers SHOULD validate that the information inside
    `inputResponses` can be correctly parsed.
    """
    if method == ELICIT:
        problem = elicit_shape_error(answer)
        if problem is not None:
            raise BadAnswer(problem)
        return None
    # Sampling and roots answers are rare; their models come with the tools (and pydantic).
    from ._answers import answer_model

    model = answer_model(method)
    if model is None:
        return None
    try:
        return validate_answer(model, answer)
    except AnswerMisfit as misfit:
        raise BadAnswer(str(misfit)) from None
