"""The Context a handler receives: its answers so far, the client's capabilities, progress."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol, TypeVar

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError

    from ._answers import Accepted, Cancelled, Declined
    from ._review_pages import ReviewPages

from ._audit import AuditTrail
from ._capabilities import ClientCapabilities
from ._errors import MrtrError
from ._inputs import InputRequest, elicit_url
from ._jsonrpc import INVALID_PARAMS, RpcError, clip, json_size
from ._redact import redact_secrets
from ._removed import READ_ANSWERS, Removed
from ._results import InputRequired
from ._wire import ELICIT, INPUT_METHODS, LOG_LEVELS

__all__ = (
    "MAX_LISTED_PROBLEMS",
    "MAX_LOG_MESSAGES",
    "MAX_STATE_BYTES",
    "MAYBE_CARRIED_OUT",
    "SHUTDOWN_GRACE_SECONDS",
    "AnswerMisfit",
    "Cancellation",
    "Context",
    "InvalidInputResponse",
    "LoggingLevel",
    "Notifier",
    "Peer",
    "RequestCancelled",
    "RequestScope",
    "StartTask",
    "TaskLink",
    "TaskStart",
    "describe_problems",
    "describe_validation_error",
    "elicit_shape_error",
    "validate_answer",
)

ModelT = TypeVar("ModelT", bound="BaseModel")
FormT = TypeVar("FormT", bound="BaseModel")
Notifier = Callable[[str, dict[str, Any]], Awaitable[None]]
Era = Literal["modern", "legacy"]
#: server/utilities/logging "Log Levels", least severe first (the order of `LOG_LEVELS`).
LoggingLevel = Literal[
    "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"
]

_logger = logging.getLogger("mrtr_runtime.tools")


class StartTask(BaseException):
    """Raised by `Context.start_task` where the call becomes a task: the runtime answers the
    request with the task and runs the handler again, as a task, from the top.

    A BaseException, like asyncio's CancelledError: a tool's `except Exception` around its
    work must not swallow it (the call would then run inline while the client waits).
    """

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message)
        self.message = message


class Fence(Protocol):
    """A run's claim on what it runs (a task's lease, a confirming round's record): what a
    handler's point of no return is written under."""

    def commit(self) -> Awaitable[None] | None:
        """Record the point of no return under the claim. Raises `RequestCancelled` when the
        claim is no longer this run's (then the action must not happen). From a worker thread
        it returns once the mark is written; on the event loop, the write to await."""
        ...


class TaskLink(Fence, Protocol):
    """What a handler running as a task reaches of its task (the engine's worker for it)."""

    #: Which start of the task this run is: 1, or more once a server stopped under it.
    attempt: int

    async def status(self, message: str) -> None:
        """Set the task's `statusMessage` (written to the store at a bounded rate)."""
        ...


def write_mark(
    loop: asyncio.AbstractEventLoop,
    mark: Callable[[], Coroutine[Any, Any, None]],
    timeout: float,
) -> Awaitable[None] | None:
    """Write a point of no return from wherever the handler runs: the one way every Fence
    writes its mark. On `loop` itself the write is scheduled and returned, for
    `pass_point_of_no_return` to await (and observed if nobody does); from a worker thread it
    is waited for, and its failure raised in that thread, before the action."""
    try:
        on_loop = asyncio.get_running_loop() is loop
    except RuntimeError:
        on_loop = False
    if on_loop:
        write = loop.create_task(mark())
        write.add_done_callback(_observed)  # a handler need not await it
        return write
    asyncio.run_coroutine_threadsafe(mark(), loop).result(timeout=timeout)
    return None


def _observed(write: asyncio.Task[None]) -> None:
    if not write.cancelled():
        write.exception()  # seen (the claim is marked lost): no "never retrieved" warning


#: What `Context.start_task` does in this round: "raise" StartTask (the request becomes a
#: task), "return" at once (the handler runs on: as a task already, or inline), or "refuse"
#: (the tool was not declared with `task=`: a mistake in the tool, said where it is made).
TaskStart = Literal["raise", "return", "refuse"]


class RequestCancelled(MrtrError):
    """Raised by `Context.check_cancelled()` once the client has cancelled the request."""


#: How long a stopping server (stdio or HTTP) gives requests it will not cut short: every request
#: in flight over HTTP, and on stdio those past their point of no return (and all of them once
#: stdin has closed). Both transports import it from here, the lowest module they share.
SHUTDOWN_GRACE_SECONDS: Final = 5.0
#: What a stopping server tells the client of a request it gave up on past its point of no
#: return: the truth is "maybe", and the tool itself (idempotent, or able to report its state)
#: is how the client finds out.
MAYBE_CARRIED_OUT: Final = (
    "it may have been carried out; call the tool again with the same arguments to see its state"
)

#: One lock for every request's cancel-or-commit decision: it is taken only by those two rare
#: steps, so a lock per request would cost an allocation on every call for nothing.
_decision: Final = threading.Lock()


class Cancellation:
    """Whether the client cancelled one request; set by the transport, read from any thread.

    basic/utilities/cancellation: the receiver SHOULD stop processing a cancelled request. The
    event loop cancels an async handler's task; work running in a worker thread cannot be
    interrupted, so it polls this flag (`Context.cancelled`) between its steps. A plain bool
    attribute: one store on the loop, atomic reads from threads, nothing to allocate per call.

    `committed` is the handler's point of no return (`Context.point_of_no_return`): from there
    its side effect may have happened, so a stopping server must not report it as not done.
    A stopping server cancels with `cancel_unless_committed`, which cannot interleave with
    `commit`: the request is either cancelled before its mark, or marked and left to finish.
    A client that cancels (or leaves) goes through `cancel_running`, the same rule.
    """

    __slots__ = ("cancelled", "committed")

    def __init__(self) -> None:
        self.cancelled = False
        self.committed = False

    def cancel(self) -> None:
        self.cancelled = True

    def commit(self) -> bool:
        """Mark the point of no return; False (and no mark) if the request is already cancelled."""
        with _decision:
            if self.cancelled:
                return False
            self.committed = True
            return True

    def cancel_unless_committed(self) -> bool:
        """Cancel, unless the handler has passed its point of no return; whether it cancelled."""
        with _decision:
            if self.committed:
                return False
            self.cancelled = True
            return True

    def cancel_running(self, task: asyncio.Task[Any] | None) -> None:
        """The client cancelled the request, or went away: the flag (nothing more is sent for
        it), and the handler's `task` cancelled unless the handler passed its point of no
        return. Past it the work finishes, its answer dropped: work that may have taken effect
        is never abandoned halfway (the promise of `Context.point_of_no_return`)."""
        with _decision:
            committed = self.committed
            self.cancelled = True
        if task is not None and not committed:
            task.cancel()


class InvalidInputResponse(RpcError):
    """An answer that does not fit what the handler asked for; the client gets -32602.

    An RpcError like every other error that reaches the wire: dispatch lets it through as is.
    A tool may raise it with any text, so the text is redacted here, as a ToolError's is.
    """

    def __init__(self, key: str, detail: str) -> None:
        message = f"Invalid inputResponses[{key!r}]: {detail}"
        super().__init__(INVALID_PARAMS, redact_secrets(message))
        self.key = key

    def __str__(self) -> str:
        return self.message


#: server/utilities/logging: servers SHOULD rate limit log messages. One request sends at most
#: this many; the rest are dropped (and counted once on stderr), so a tool logging in a loop
#: cannot flood the client.
MAX_LOG_MESSAGES: Final = 1000

#: How much handler state may travel between rounds: it rides in every retry, and host logs
#: keep requestState. Enough for ids, a digest of what a question showed, a step name.
MAX_STATE_BYTES: Final = 4096


def _check_state(state: object) -> None:
    try:
        size = json_size(state)
    except ValueError as error:
        raise ValueError(f"request_input state must be plain JSON: {error}") from None
    if size > MAX_STATE_BYTES:
        raise ValueError(
            f"request_input state is {size} bytes of JSON; at most {MAX_STATE_BYTES} travel "
            "between rounds (keep ids or a digest there, not the data itself)"
        )


#: Problems listed in one validation message; the rest are counted. What is validated is the
#: client's, so neither the number of its mistakes nor its key names may set the size of what
#: the server sends back.
MAX_LISTED_PROBLEMS: Final = 10


def describe_problems(problems: Sequence[Mapping[str, Any]], *, skip: int = 0) -> str:
    """The one description of what a validation refused (pydantic's `errors()`), for
    arguments and answers alike: one `where: what` per problem (at most MAX_LISTED_PROBLEMS),
    the way a person (or a model) can act on it. `skip` drops that many leading parts of each
    location (a form's fields inside an answer's `content`)."""
    lines = []
    for problem in problems[:MAX_LISTED_PROBLEMS]:
        where = ".".join(clip(str(part)) for part in problem["loc"][skip:]) or "value"
        lines.append(f"{where}: {problem['msg']}")
    if len(problems) > MAX_LISTED_PROBLEMS:
        lines.append(f"and {len(problems) - MAX_LISTED_PROBLEMS} more problems")
    return "; ".join(lines)


def describe_validation_error(error: ValidationError) -> str:
    """`describe_problems` of a pydantic ValidationError."""
    return describe_problems(error.errors())


class AnswerMisfit(MrtrError, ValueError):
    """An answer `validate_answer` refused; `problems` as pydantic lists them."""

    def __init__(self, problems: Sequence[Mapping[str, Any]]) -> None:
        super().__init__(describe_problems(problems))
        self.problems = problems


def validate_answer(model: type[ModelT], raw: object) -> ModelT:
    """`raw` (an answer as JSON carries it) validated into `model`, strictly, as JSON Schema
    reads it: `"yes"` or `1` is not a boolean, `"3"` is not a number (client/elicitation:
    servers SHOULD validate received data against the requested schema). The one validation
    of an answer, wherever it happens; raises AnswerMisfit."""
    # The one place answers meet pydantic, imported here: the first answer a server sends
    # must not wait for it (it loads with the tools, before any handler runs).
    from pydantic import ValidationError

    try:
        # Strict validation of the parsed value accepts a subset of what strict JSON
        # validation accepts (it refuses an enum's value given as a string), so the common
        # case skips re-encoding the answer; only a refusal is judged again, as JSON.
        return model.model_validate(raw, strict=True)
    except ValidationError:
        pass
    try:
        return model.model_validate_json(json.dumps(raw, allow_nan=False), strict=True)
    except ValidationError as error:
        raise AnswerMisfit(error.errors()) from None


def elicit_shape_error(answer: object) -> str | None:
    """Why `answer` is not an ElicitResult (client/elicitation), or None when it is one.

    Checked by hand: dispatch runs it on every answer before the handler sees any, and
    `form_answer` reads the same fields, so the form model validates only the content.
    """
    if not isinstance(answer, dict):
        return "answer: must be an object"
    if answer.get("action") not in ("accept", "decline", "cancel"):
        return "action: must be 'accept', 'decline' or 'cancel'"
    if answer.get("content") is not None and not isinstance(answer["content"], dict):
        return "content: must be an object"
    return None


class Context:
    """Everything a handler may know about the call beyond its arguments.

    A handler is called once per round with the same arguments and a growing set of
    answers; it decides each time whether it has what it needs, and acts only then.
    """

    __slots__ = (
        "_answers",
        "_cancellation",
        "_fence",
        "_last_progress",
        "_log_floor",
        "_logs_sent",
        "_notify",
        "_parsed",
        "_rejected",
        "_review_pages",
        "_task",
        "_task_start",
        "client_capabilities",
        "era",
        "log",
        "progress_token",
        "protocol_version",
        "request_state",
        "started_task",
        "state",
    )

    if not TYPE_CHECKING:  # gone in 0.5.0; hidden from mypy, which reports the old names
        input_response = Removed(READ_ANSWERS)
        input_responses = Removed(READ_ANSWERS)
        has_input_responses = Removed(READ_ANSWERS)

    def __init__(
        self,
        *,
        answers: Mapping[str, Any],
        request_state: str | None,
        client_capabilities: ClientCapabilities,
        protocol_version: str,
        era: Era,
        progress_token: str | int | None = None,
        notify: Notifier | None = None,
        cancellation: Cancellation | None = None,
        state: object = None,
        log_level: LoggingLevel | None = None,
        parsed: Mapping[str, BaseModel] | None = None,
        task_start: TaskStart = "return",
        task: TaskLink | None = None,
        fence: Fence | None = None,
        review_pages: ReviewPages | None = None,
    ) -> None:
        self._answers = answers
        self._review_pages = review_pages
        self._fence = fence
        self._task_start: TaskStart = "return" if task is not None else task_start
        self._task = task
        #: `start_task()` returned in this run: everything was asked and answered before it.
        self.started_task = False
        #: Answers dispatch already validated into their model (sampling, roots), by key.
        self._parsed: Mapping[str, BaseModel] = parsed or {}
        # Always one, so that a point of no return marked without a transport is still kept.
        self._cancellation = cancellation if cancellation is not None else Cancellation()
        #: Answers whose form content did not fit, by key: why, to say so when asking again.
        self._rejected: dict[str, str] = {}
        self._notify = notify
        self._last_progress: float | None = None
        #: The least severe level the client asked for; None: it asked for no log messages.
        self._log_floor = None if log_level is None else LOG_LEVELS.index(log_level)
        self._logs_sent = 0
        self.request_state = request_state
        self.client_capabilities = client_capabilities
        self.protocol_version = protocol_version
        self.era: Era = era
        self.progress_token = progress_token
        #: The JSON value this handler passed to `request_input(..., state=...)` last round,
        #: back from the signed requestState (None in the first round, or if it set none).
        self.state = state
        self.log = _logger

    def input_response_as(self, key: str, model: type[ModelT]) -> ModelT | None:
        """The answer under `key` validated into `model`, or None when there is none to use.

        The one typed reader of answers besides `form_answer` (which reads a form's): for
        `SamplingResult` and `RootsResult`, or any model of an answer's whole shape.

        Validation is strict, as JSON Schema reads the form the user was sent: `"yes"` or `1`
        is not a boolean, `"3"` is not a number (client/elicitation: servers SHOULD validate
        received data against the requested schema). When the form's `content` does not fit,
        this returns None, as if the question had not been answered, and the next
        `request_input` that asks `key` again tells the user why. Any other misfit (no valid
        `action`, an answer of the wrong shape) raises `InvalidInputResponse`: the client gets
        JSON-RPC -32602 and the handler never acts on it.
        """
        parsed = self._parsed.get(key)
        if parsed is not None and type(parsed) is model:
            # Validated into this very model by dispatch when the answer arrived.
            return parsed
        raw = self._answers.get(key)
        if raw is None:
            return None
        try:
            return validate_answer(model, raw)
        except AnswerMisfit as misfit:
            if all(problem["loc"][:1] == ("content",) for problem in misfit.problems):
                self._rejected[key] = describe_problems(misfit.problems, skip=1)
                return None
            raise InvalidInputResponse(key, str(misfit)) from None

    def form_answer(
        self, key: str, form: type[FormT]
    ) -> Accepted[FormT] | Declined | Cancelled | None:
        """The user's answer to the form asked under `key`, as a type a `match` narrows.

        `Accepted(content)` carries the filled-in `form`; `Declined()` and `Cancelled()` are
        ordinary answers to handle (client/elicitation: servers "MUST handle cases where the
        user declines or cancels"); None means there is no answer to use yet: ask (again).
        Content that does not fit the form reads as None, as with `input_response_as`.
        """
        raw = self._answers.get(key)
        if raw is None:
            return None
        from ._answers import Accepted, Cancelled, Declined  # with the tools, like pydantic

        # The envelope by hand (dispatch checked it too, before the handler ran; a Context
        # made by hand gets the same rule), then one strict validation of the content alone.
        problem = elicit_shape_error(raw)
        if problem is not None:
            raise InvalidInputResponse(key, problem)
        if raw["action"] == "decline":
            return Declined()
        if raw["action"] == "cancel":
            return Cancelled()
        content = raw.get("content")
        if content is None:
            self._rejected[key] = "the form came back accepted but empty"
            return None
        try:
            return Accepted(validate_answer(form, content))
        except AnswerMisfit as misfit:
            self._rejected[key] = str(misfit)
            return None

    def can_request(self, request: InputRequest) -> bool:
        """Whether the client declared what `request` needs, so a handler can pick another way."""
        return self.client_capabilities.supports(request.required_capabilities)

    def review_page(self, text: str, *, title: str, message: str) -> InputRequest | None:
        """A URL-mode question that links to a page holding `text`, to ask beside a form whose
        message cannot carry it (hosts show a question's first lines only): a long plan, the
        full release notes. None where there can be none: this server serves no pages (only the
        stdio transport does, on loopback: `_review_pages`), or the client cannot open URLs
        (client/elicitation `url` mode). The page is read-only and lives an hour; the answer is
        only whether the user opened it, so read the yes from the form, never from this.
        Raises ValueError for a text over 256 KiB.
        """
        pages = self._review_pages
        if pages is None:
            return None
        probe = elicit_url(message, "http://127.0.0.1/")
        if not self.can_request(probe):
            return None
        return elicit_url(message, pages.publish(text, title=title))

    def request_input(
        self, requests: Mapping[str, InputRequest], *, state: object = None
    ) -> InputRequired:
        """Return this from the handler to ask for input; keys are the handler's own names.

        `state` is any small JSON value the handler wants back next round (as `ctx.state`):
        it is signed into the requestState with the answers, so the client can read it but
        not change it. At most MAX_STATE_BYTES of compact JSON; more raises ValueError.
        """
        for key, request in requests.items():
            if not isinstance(key, str) or not key:
                raise ValueError("input request keys must be non-empty strings")
            if not isinstance(request, InputRequest) or request.method not in INPUT_METHODS:
                # mrtr: each value "MUST be one of ElicitRequest, CreateMessageRequest, or
                # ListRootsRequest".
                raise TypeError(f"input request {key!r} must be built with elicit_form/sample/...")
        asked = dict(requests)
        rejected: dict[str, str] = {}
        for key, why in self._rejected.items():
            again = asked.get(key)
            if again is not None and again.method == ELICIT and "message" in again.params:
                message = f"That answer was not valid ({why}). {again.params['message']}"
                asked[key] = replace(again, params={**again.params, "message": message})
                rejected[key] = why
        if state is not None:
            _check_state(state)
        return InputRequired(asked, state, rejected)

    @property
    def resumed(self) -> bool:
        """Whether this run continues a task whose earlier run stopped (its server stopped or
        died mid-run, and this one took it over): what it finds already done may be that
        earlier run's own work, and a result should say so rather than "nothing to do"."""
        return self._task is not None and self._task.attempt > 1

    @property
    def in_task(self) -> bool:
        """Whether the handler runs as a task (tasks extension): the request that started it
        was answered with the task, and this run's result becomes the task's."""
        return self._task is not None

    def start_task(self, message: str | None = None) -> None:
        """Say "everything is asked and answered; the long work begins here".

        For a tool declared with `task="optional"` or `"required"`: when the client declared
        the tasks extension on this request, this raises `StartTask` (leave it alone: never
        catch it) and the request is answered with a task; the handler then runs again from
        the top as that task, where this returns at once (`ctx.in_task` is True). For a client
        without the extension it returns at once and the call runs inline, as any call does.
        `message` is the task's first `statusMessage`. Call it after the last question of a
        confirmation: questions asked before it are rounds of the request, questions asked
        after it are the task's own (`tasks/update`).

        A task outlives the process that runs it: when the server stops (or dies) mid-task, a
        server holding the same task store resumes it by running the handler again from the
        top with the same arguments and answers, so everything after this call must be safe
        to run twice up to `point_of_no_return()`; past that mark it is run again only if the
        tool is declared idempotent (`ToolAnnotations(idempotent=True)`).
        """
        if self._task_start == "raise":
            raise StartTask(None if message is None else redact_secrets(message))
        if self._task_start == "refuse":
            raise TypeError(
                'ctx.start_task() needs the tool declared with @registry.tool(task="optional") '
                'or task="required"'
            )
        self.started_task = True

    @property
    def cancelled(self) -> bool:
        """Whether the client has cancelled this request. Safe to read from a worker thread."""
        return self._cancellation.cancelled

    def check_cancelled(self) -> None:
        """Raise `RequestCancelled` if the client cancelled this request; call it between steps.

        For work in a worker thread (`anyio.to_thread.run_sync`, a plain `def` tool), which
        the event loop cannot interrupt: check before every step that changes something. Past
        `point_of_no_return()` it never raises: work that may have taken effect is finished,
        not abandoned halfway.
        """
        cancellation = self._cancellation
        if cancellation.cancelled and not cancellation.committed:
            raise RequestCancelled("the client cancelled this request")

    def point_of_no_return(self) -> None:
        """Say "from here the side effect may have happened"; call it right before the first
        call that changes something outside the server (the write, the deploy, the payment).

        From then on a cancellation no longer aborts the work (`check_cancelled` stops raising)
        and a server that is stopping gives the request SHUTDOWN_GRACE_SECONDS to finish and
        send its real result; if it cannot, the client is told the action may have been
        carried out, never that it was not. Raises `RequestCancelled` if the request was
        cancelled before the mark: then nothing has happened, and nothing must. Safe to call
        from any thread, and more than once.

        In a task (`ctx.in_task`) and in a round that closes a confirmation, the run holds a
        claim (a lease) on what it runs, and the mark is fenced by it: if the claim lapsed
        (the process was paused or cut off past its lease, and another run may hold it now)
        this raises `RequestCancelled` and the action must not happen. From a worker thread
        the mark is written to the store before this returns (raising if it could not be);
        on the event loop the write is scheduled, so an `async def` handler says
        `await ctx.pass_point_of_no_return()` instead, which returns once it is written. A
        task whose server stopped is resumed by running its handler again from the top; one
        that had passed this mark is run again only if its tool is declared idempotent
        (`ToolAnnotations(idempotent=True)`), and otherwise ends with an isError result saying
        its action may have been carried out.
        """
        self._mark()

    async def pass_point_of_no_return(self) -> None:
        """`point_of_no_return()` for an `async def` handler: returns once the mark is durably
        written under the run's claim (raising `RequestCancelled` if the claim was lost
        meanwhile), so the action that follows never races a takeover of its run."""
        write = self._mark()
        if write is not None:
            await write

    def _mark(self) -> Awaitable[None] | None:
        cancellation = self._cancellation
        first = not cancellation.committed
        fence = self._task or self._fence
        if first and fence is not None and cancellation.cancelled:
            raise RequestCancelled("the request was cancelled before its point of no return")
        # The claim first: a run that lost it must stop with nothing marked (the run that
        # holds it now decides), and one that holds it marks before the action.
        write = fence.commit() if first and fence is not None else None
        if not cancellation.commit():
            raise RequestCancelled("the request was cancelled before its point of no return")
        return write

    @property
    def past_point_of_no_return(self) -> bool:
        """Whether `point_of_no_return()` was called. Safe to read from a worker thread."""
        return self._cancellation.committed

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Send `notifications/progress` if the caller asked for it (a `progressToken`).

        basic/utilities/progress: the value "MUST increase with each notification", so a
        value that does not is dropped rather than sent. In a task (`ctx.in_task`) nothing is
        sent (the tasks extension carries no progress): `message` becomes the task's
        `statusMessage`, which `tasks/get` and `notifications/tasks` show.
        """
        if self._task is not None:
            if message is not None and not self.cancelled:
                await self._task.status(redact_secrets(message))
            return
        if self.progress_token is None or self._notify is None or self.cancelled:
            # basic/utilities/cancellation: nothing more is sent for a cancelled request.
            return
        if self._last_progress is not None and progress <= self._last_progress:
            _logger.debug("progress %s dropped: not above %s", progress, self._last_progress)
            return
        self._last_progress = progress
        params: dict[str, Any] = {"progressToken": self.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = redact_secrets(message)
        await self._notify("notifications/progress", params)

    async def send_log(
        self, level: LoggingLevel, data: object, *, logger: str | None = None
    ) -> None:
        """Send the client a log message (`notifications/message`) if it asked for `level`.

        server/utilities/logging: a 2026-07-28 request asks with `_meta.logLevel` and gets
        nothing without it; a 2025-11-25 client sets its level with `logging/setLevel`, and
        gets nothing before it does. `data` is any JSON value (a string, or an object of
        details); `logger` names the part of the tool it comes from. Nothing is sent once the
        request is cancelled, nor past MAX_LOG_MESSAGES for one request. The messages go to
        the client, never to stdout as text: for the server's own log use `ctx.log` (stderr).
        """
        if level not in LOG_LEVELS:
            raise ValueError(f"log level must be one of {', '.join(LOG_LEVELS)}, not {level!r}")
        floor = self._log_floor
        if floor is None or self._notify is None or self.cancelled:
            return
        if LOG_LEVELS.index(level) < floor:
            return
        if self._logs_sent >= MAX_LOG_MESSAGES:
            if self._logs_sent == MAX_LOG_MESSAGES:
                _logger.warning(
                    "log messages to the client stopped at %d for this request", MAX_LOG_MESSAGES
                )
                self._logs_sent += 1
            return
        try:
            # The wire carries JSON only: a value that is not is the tool's mistake, named here
            # rather than failing the whole call where the message is written.
            text = json.dumps(data, allow_nan=False)
        except (TypeError, ValueError, RecursionError) as error:
            raise ValueError(f"send_log data must be plain JSON: {error}") from None
        self._logs_sent += 1
        params: dict[str, Any] = {"level": level}
        if logger is not None:
            params["logger"] = logger
        params["data"] = _redacted_json(data, text)
        await self._notify("notifications/message", params)


def _redacted_json(data: object, text: str) -> object:
    """`data` (whose JSON is `text`) with secret material redacted, as the server's own log
    lines are: server/utilities/logging says log messages MUST NOT contain credentials or
    secrets, and a tool's log data often quotes a library's error or a response. Redacted as
    JSON text, so a secret is found by the name beside it (`"SessionToken": "..."`)."""
    redacted = redact_secrets(text)
    if redacted == text:
        return data
    try:
        return json.loads(redacted)
    except ValueError:  # a redaction that spanned JSON syntax: the whole value as one string
        return redacted


class Peer(Protocol):
    """What the transport lets the core send back to the client."""

    async def notify(self, method: str, params: dict[str, Any]) -> None: ...

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Legacy era only: a server-to-client request; raises `RpcError`."""
        ...


@dataclass(slots=True)
class RequestScope:
    """One request as the router admitted it: its era, version and capabilities, its progress
    token and log level, the transport's cancellation flag and principal, and the peer that
    reaches the client. Every round of the request gets its Context from here."""

    era: Era
    version: str
    capabilities: ClientCapabilities
    progress_token: str | int | None
    log_level: LoggingLevel | None
    peer: Peer
    cancellation: Cancellation | None = None
    #: Who the transport says is asking (an authenticated HTTP client); None on stdio.
    principal: str | None = None
    #: The consent audit trail (`MRTR_AUDIT_LOG`), or None.
    audit: AuditTrail | None = None
    #: Where `Context.review_page` publishes (the stdio transport's), or None.
    review_pages: ReviewPages | None = None

    def context(
        self,
        answers: Mapping[str, Any],
        request_state: str | None = None,
        state: object = None,
        parsed: Mapping[str, BaseModel] | None = None,
        task_start: TaskStart = "return",
        task: TaskLink | None = None,
        fence: Fence | None = None,
    ) -> Context:
        """The Context of one round: the answers so far, the token it came with, the state;
        what `start_task` does in it, and the task it runs as (if it does)."""
        return Context(
            answers=answers,
            request_state=request_state,
            client_capabilities=self.capabilities,
            protocol_version=self.version,
            era=self.era,
            progress_token=self.progress_token,
            notify=self.peer.notify,
            cancellation=self.cancellation,
            state=state,
            log_level=self.log_level,
            parsed=parsed,
            task_start=task_start,
            task=task,
            fence=fence,
            review_pages=self.review_pages,
        )
