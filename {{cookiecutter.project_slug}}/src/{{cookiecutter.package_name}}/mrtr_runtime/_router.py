"""The server's protocol core: a request in, a response out, no I/O of its own.

It decides each request's era -- 2026-07-28 when the request carries modern `params._meta`,
2025-11-25 once this process has been `initialize`d (basic/versioning "Backward
Compatibility": a dual-era server MAY serve both on one stdio process) -- then applies that
era's rules and calls the registry. The transport owns the pipes and hands us a `Peer` for
the few things that must travel the other way.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import sys
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NamedTuple, Protocol, cast

from ._audit import AuditTrail
from ._capabilities import ClientCapabilities
from ._config import Settings
from ._context import Cancellation, LoggingLevel, Peer, RequestScope
from ._dispatch import (
    Call,
    RoundFlights,
    RoundInput,
    TaskStarter,
    read_input_responses,
    run_round,
    tasks_required_error,
)
from ._jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    UNSUPPORTED_PROTOCOL_VERSION,
    JSONObject,
    MalformedRequest,
    Notification,
    Request,
    RequestId,
    RpcError,
    clip,
    error_response,
    success_response,
)
from ._legacy import run_legacy
from ._records import Records, StoreOpener
from ._registry import NOT_CACHED, Registry
from ._subscriptions import LIST_KINDS, MAX_RESOURCE_SUBSCRIPTIONS, Listener, Subscriptions
from ._telemetry import Telemetry
from ._tokens import Binding, RequestStateCodec
from ._wings import has_wing, load_wing, missing_wing
from ._wire import (
    LEGACY_VERSIONS,
    LOG_LEVELS,
    META_CLIENT_CAPABILITIES,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    META_SERVER_INFO,
    META_SUBSCRIPTION_ID,
    MODERN_VERSIONS,
    SKILL_METHODS,
    SKILLS_EXTENSION,
    TASK_METHODS,
    TASKS_EXTENSION,
)

if TYPE_CHECKING:
    from ._methods import ResourceCall
    from ._once import RoundLedger
    from ._review_pages import ReviewPages
    from ._task_store import TaskStore

__all__ = (
    "Peer",
    "Reply",
    "Server",
    "Session",
)


_MODERN_METHODS: Final = frozenset(
    {
        "server/discover",
        "tools/list",
        "tools/call",
        "prompts/list",
        "prompts/get",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "completion/complete",
        "subscriptions/listen",
        *TASK_METHODS,
        *SKILL_METHODS,
    }
)
_LEGACY_METHODS: Final = (
    _MODERN_METHODS - {"server/discover", "subscriptions/listen"} - TASK_METHODS - SKILL_METHODS
) | {
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
}
#: Served apart from the tools/prompts/resources calls: one set lookup on the hot path.
_SUBSCRIPTION_METHODS: Final = frozenset(
    {"subscriptions/listen", "resources/subscribe", "resources/unsubscribe"}
)
#: basic/patterns/subscriptions "Notification Filter": the list flags, by the kind they follow.
_LIST_FLAGS: Final = {
    "toolsListChanged": "tools",
    "promptsListChanged": "prompts",
    "resourcesListChanged": "resources",
}
#: The methods whose handlers may ask for input (basic/patterns/mrtr): served as a Call.
_CALL_METHODS: Final = frozenset({"tools/call", "prompts/get", "resources/read"})
#: server/utilities/caching "Cacheable Results": these (and resources/read, its own hints)
#: MUST carry `ttlMs` and `cacheScope`: the registry's `list_cache`, 0 unless it is sealed.
_CACHEABLE: Final = frozenset(
    {
        "server/discover",
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        # The skills extension: its list and get results are CacheableResults, like lists.
        "skills/list",
        "skills/get",
    }
)

_logger = logging.getLogger("mrtr_runtime")


@dataclass
class SkillFileResource(Protocol):
    """One skill file as the resource it is served as."""

    @property
    def uri(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str | None: ...
    @property
    def mime_type(self) -> str: ...
    @property
    def cache_ttl_seconds(self) -> int: ...
    @property
    def read(self) -> Callable[[], Awaitable[str | bytes]]: ...


class SkillCatalog(Protocol):
    """What the server needs of the skills wing (`_skills.SkillShelf`), spelled here: a project
    generated without the wing has no module to import, and its `mypy --strict` follows every
    import, TYPE_CHECKING's too."""

    @property
    def directory(self) -> Path: ...
    def resources(self) -> Sequence[SkillFileResource]: ...
    def list_result(self, params: Mapping[str, Any]) -> JSONObject: ...
    def get_result(self, params: Mapping[str, Any]) -> JSONObject: ...
    def directory_result(self, params: Mapping[str, Any]) -> JSONObject: ...


class TaskEngine(TaskStarter, Protocol):
    """What the server needs of the tasks wing (`_tasks.TaskEngine`), spelled here for the same
    reason as `SkillCatalog`: a project generated without the wing has no module to import."""

    async def store(self) -> TaskStore: ...
    def owner(self, principal: str | None) -> str: ...
    async def replayed(self, task_id: str, inline: bool) -> JSONObject: ...
    async def get(self, task_id: object, principal: str | None) -> JSONObject: ...
    async def update(
        self, task_id: object, responses: Mapping[str, Any], principal: str | None
    ) -> None: ...
    async def cancel(self, task_id: object, principal: str | None) -> None: ...
    async def visible(self, task_ids: Iterable[object], principal: str | None) -> list[str]: ...
    def follow(
        self, task_ids: list[str], send: Callable[[JSONObject], Awaitable[None]]
    ) -> AbstractAsyncContextManager[None]: ...
    async def run(self) -> None: ...
    def stop(self) -> set[asyncio.Task[None]]: ...
    async def release(self) -> None: ...
    def abandon(self) -> None: ...


class Session:
    """The little a stdio process remembers: whether, and how, a legacy client initialized it."""

    legacy_version: str | None = None
    legacy_capabilities: ClientCapabilities = field(default_factory=ClientCapabilities)
    #: 2025-11-25 `logging/setLevel`; None until the client sets one (then no log messages).
    log_level: LoggingLevel | None = None
    #: 2025-11-25: where this session's list changes and resource updates go, once initialized.
    listener: Listener | None = None


#: `_methods.call_of`: the Call a tools/call, prompts/get or resources/read asks for.
CallOf = Callable[[Registry, str, Mapping[str, Any]], Call]


class Reply(NamedTuple):
    """`Server.reply`: the response message, and whether the request itself was malformed
    (rather than what it asked for): HTTP sends the first with 400 (basic/index), stdio has
    no statuses."""

    message: JSONObject
    malformed: bool


class Server:
    """A dual-era MCP server over a `Registry`; the transport calls `handle_request`."""

    def __init__(
        self,
        *,
        name: str,
        version: str,
        registry: Registry,
        signing: RequestStateCodec,
        title: str | None = None,
        instructions: str | None = None,
        settings: Settings | None = None,
        task_store: StoreOpener | None = None,
        task_store_exists: Callable[[], bool] | None = None,
        skills: SkillCatalog | None = None,
    ) -> None:
        """`skills`: the project's skills (the skills extension), read and served as resources
        with the tools, after the first answer; declared in `server/discover` from the start.
        `task_store` opens the store of round records and tasks (`Records`) on first use,
        never at start-up; None: in memory, gone with the process. `task_store_exists` says,
        without opening anything, whether there is a store to resume tasks from."""
        self.registry = registry
        #: Signs and verifies every requestState token (`server.codec_from_environment`).
        self.signing = signing
        #: What the environment configured (every MRTR_* variable), for the transports; None:
        #: the transport reads it (`Settings.from_environment`) when it starts. The core itself
        #: reads no environment.
        self.settings = settings
        #: OpenTelemetry, where `opentelemetry-api` is installed (the `otel` extra); else None.
        self.telemetry = Telemetry.from_installed(version)
        #: The consent audit trail, where the settings name one (`_audit`).
        self.audit = AuditTrail.open_target(settings.audit_log) if settings is not None else None
        #: Review pages (`Context.review_page`): the stdio transport serves them on loopback
        #: and sets this while it runs; None: this server links to none.
        self.review_pages: ReviewPages | None = None
        self.skills = skills
        #: With the tasks wing (`include_tasks`); without it a task tool's call runs inline.
        self.serves_tasks = has_wing("tasks")
        if skills is not None:
            registry.defer_loader(
                # Named from the skills folder down: a client reads this if the load fails.
                f"the skills in {skills.directory.name}/",
                functools.partial(_serve_skill_files, skills),
            )
        self.instructions = instructions
        self.info: dict[str, Any] = {"name": name, "version": version}
        if title is not None:
            self.info["title"] = title
        #: Shared by every result: encoded, never mutated.
        self._result_meta: Final = {META_SERVER_INFO: self.info}
        # One object for server/discover and initialize, so both eras read the same promises.
        # server/utilities/logging: servers that emit log messages MUST declare `logging`.
        # listChanged: a tool module (or a tool) may declare more after start-up, and every
        # list change is announced (Registry.on_change); subscribe: `resources/subscribe`
        # (2025-11-25) and a listen's `resourceSubscriptions` (2026-07-28), both honoured.
        # completions: declared before the tools (and any completer) load, so always served.
        self.capabilities: dict[str, Any] = {
            "completions": {},
            "logging": {},
            "prompts": {"listChanged": True},
            "resources": {"listChanged": True, "subscribe": True},
            "tools": {"listChanged": True},
        }
        #: server/discover (2026-07-28) also names the extensions served; initialize does not.
        self._discover_capabilities: dict[str, Any] = {
            **self.capabilities,
            "extensions": {
                **({TASKS_EXTENSION: {}} if self.serves_tasks else {}),
                # SEP-2640: declared only by a server that serves skills; skills/list,
                # skills/get and (directoryRead) resources/directory/read are then served, and
                # `resources` (declared above, as the extension requires) carries the files.
                **({SKILLS_EXTENSION: {"directoryRead": True}} if skills is not None else {}),
            },
        }
        self._subscriptions = Subscriptions()
        registry.on_change(self._subscriptions.announce)
        self._flights = RoundFlights()
        self._call_of: CallOf | None = None
        self.records = Records(self.info["name"], task_store, task_store_exists)
        self._tasks: TaskEngine | None = None
        self._ledger: RoundLedger | None = None

    @property
    def tasks(self) -> TaskEngine:
        """The tasks extension: tasks made, followed and run (see `_tasks`). Made on first
        use (the first tools/call, task method, or the transport's background loop, which
        starts after the first answer), so a server's start-up never imports it."""
        engine = self._tasks
        if engine is None:
            engine = self._tasks = load_wing("tasks").TaskEngine(
                server_name=self.info["name"],
                registry=self.registry,
                call_of=lambda: self._call_of or self._load_methods(),
                records=self.records,
                token_ttl_seconds=self.signing.ttl_seconds,
                audit=self.audit,
                telemetry=self.telemetry,
            )
        return engine

    @property
    def ledger(self) -> RoundLedger:
        """Single use (see `_once`): the record of every round that closed a verified
        requestState, kept in the task store beside the tasks. Made on first use."""
        ledger = self._ledger
        if ledger is None:
            from ._once import RoundLedger

            records = self.records
            ledger = self._ledger = RoundLedger(
                open_store=records.store,
                answer_task=self._replayed_task,
                owner_of=records.owner,
                worker_id=records.worker_id,
                ttl_seconds=self.signing.ttl_seconds,
            )
        return ledger

    # -- entry points -------------------------------------------------------------------

    async def handle_request(
        self,
        request: Request,
        session: Session,
        peer: Peer,
        cancellation: Cancellation | None = None,
        principal: str | None = None,
    ) -> JSONObject:
        """The response message for `request`. Never raises for anything a client sends.

        `cancellation` is the transport's flag for this request: handlers see it as
        `ctx.cancelled`, and progress stops once it is set. `principal` is who an
        authenticating transport says sent it: requestState tokens are bound to it.
        """
        message, _ = await self.reply(request, session, peer, cancellation, principal)
        return message

    async def reply(
        self,
        request: Request,
        session: Session,
        peer: Peer,
        cancellation: Cancellation | None = None,
        principal: str | None = None,
    ) -> Reply:
        """`handle_request`, telling also whether the request itself was malformed."""
        telemetry = self.telemetry
        if telemetry is None or not telemetry.active():
            return await self._reply(request, session, peer, cancellation, principal)
        # One span per request, whatever the transport and the era (`_telemetry`).
        with telemetry.request(request, principal) as observed:
            answered = await self._reply(request, session, peer, cancellation, principal)
            observed.result(answered.message)
            return answered

    async def _reply(
        self,
        request: Request,
        session: Session,
        peer: Peer,
        cancellation: Cancellation | None,
        principal: str | None,
    ) -> Reply:
        try:
            result = await self._serve(request, session, peer, cancellation, principal)
        except RpcError as error:
            response = error_response(request.id, error.code, error.message, error.data)
            return Reply(response, isinstance(error, MalformedRequest))
        except Exception as error:
            if _store_failure(error):
                # The store failed after it opened (a full disk, Redis gone or frozen, a
                # corrupt page): the client and the log are told which store and what failed.
                _logger.error("the task store failed serving %s: %s", request.method, error)
                message = f"The task store failed: {error}"
                return Reply(error_response(request.id, INTERNAL_ERROR, message), False)
            _logger.exception("internal error serving %s", request.method)
            return Reply(error_response(request.id, INTERNAL_ERROR, "Internal error"), False)
        return Reply(success_response(request.id, result), False)

    def signing_works(self) -> bool:
        """Whether the signing key signs a requestState and verifies it (readiness): a probe
        token, bound to nothing a client could call."""
        probe = Binding("tools/call", "readiness-probe", "")
        try:
            self.signing.verify(self.signing.mint(probe, {}, {}), probe)
        except Exception:
            _logger.exception("the signing key cannot sign and verify a requestState")
            return False
        return True

    def end_subscriptions(self) -> int:
        """End every open `subscriptions/listen` (the server is stopping); how many there were.

        Each listen then tells its client (`notifications/cancelled`) and answers its request.
        """
        return self._subscriptions.end_listens()

    def stop_tasks(self) -> set[asyncio.Task[None]]:
        """The server is stopping: its running tasks stop and keep their records (`working`)
        for a server holding the same store to resume; those past their point of no return
        are returned, to be given the shutdown grace, then `abandon_tasks`."""
        return set() if self._tasks is None else self._tasks.stop()

    def abandon_tasks(self) -> None:
        if self._tasks is not None:
            self._tasks.abandon()

    async def release_tasks(self, grace: float) -> None:
        """After `stop_tasks`: give up the leases of the tasks it left `working` (before their
        point of no return), so a restart or another replica takes them over at once; at most
        `grace` seconds (a store that does not answer leaves the leases to lapse)."""
        if self._tasks is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._tasks.release(), grace)

    async def _replayed_task(self, task_id: str, inline: bool) -> JSONObject:
        """A replay of a confirming round that became a task: that task (`_once`). Only the
        tasks wing makes one; a project that dropped the wing since says so, running nothing."""
        if not self.serves_tasks:
            missing = missing_wing("tasks")
            raise RpcError(INTERNAL_ERROR, f"This confirmation became task {task_id}: {missing}")
        return await self.tasks.replayed(task_id, inline)

    def background(self) -> Coroutine[Any, Any, None]:
        """What a transport runs beside its requests for the server's life: the task engine's
        loop (resume tasks nobody runs, forget the expired), or without the tasks wing the
        sweep that forgets expired round records."""
        return self.tasks.run() if self.serves_tasks else self.records.run()

    def warm_up(self) -> None:
        """Load what `server/discover` did not need; raises if a tool module is broken."""
        self._load_methods()

    def _load_methods(self) -> CallOf:
        # Imported with the tools, after the first answer: it pulls in pydantic, and the first
        # answer (server/discover, initialize) must not wait for that (Registry.defer_package).
        # Kept once imported: the import statement cost 4.5 us per call, of 80 us measured in
        # process for a whole echo call (parse, reply, encode) on the same busy machine.
        self.registry.ensure_loaded()
        from ._methods import call_of

        self._call_of = call_of
        return call_of

    def handle_notification(self, notification: Notification) -> RequestId | None:
        """The id of a request to cancel, if `notification` asks for that; otherwise None.

        basic/patterns/cancellation: invalid or unknown cancellations SHOULD be ignored.
        """
        if notification.method != "notifications/cancelled":
            return None
        request_id = notification.params.get("requestId")
        if isinstance(request_id, str) or (
            isinstance(request_id, int) and not isinstance(request_id, bool)
        ):
            return request_id
        return None

    # -- era and version rules ----------------------------------------------------------

    async def _serve(
        self,
        request: Request,
        session: Session,
        peer: Peer,
        cancellation: Cancellation | None,
        principal: str | None,
    ) -> JSONObject:
        method, params = request.method, request.params
        meta = params.get("_meta")
        if method == "initialize" and not (
            isinstance(meta, dict) and META_PROTOCOL_VERSION in meta
        ):
            # With modern _meta the request is served by 2026-07-28 rules, which have no
            # initialize (basic/versioning): it falls through to -32601 below.
            return self._initialize(params, session, peer)
        if method not in _MODERN_METHODS and method not in _LEGACY_METHODS:
            raise RpcError(METHOD_NOT_FOUND, f"Method not found: {clip(method)}")
        scope = self._scope(params, session, peer, cancellation, principal)
        allowed = _MODERN_METHODS if scope.era == "modern" else _LEGACY_METHODS
        if method not in allowed:
            raise RpcError(METHOD_NOT_FOUND, f"Method not found in {scope.version}: {clip(method)}")
        if method in _SUBSCRIPTION_METHODS:
            result = await self._subscription(request.id, method, params, scope, session)
        elif method in _CALL_METHODS:
            result = await self._call(method, params, scope)
        elif method in TASK_METHODS:
            result = await self._task_method(method, params, scope)
        else:
            result = await self._dispatch(method, params, scope, session)
            if scope.era == "modern" and method in _CACHEABLE:
                # server/utilities/caching: a list is never a retry (it takes no MRTR params);
                # its TTL is positive only when the registry is sealed (Registry docstring).
                result.update(self.registry.list_cache)
        if scope.era == "legacy":
            return result
        # basic/index: the result MUST include resultType; servers SHOULD put serverInfo in _meta.
        result.setdefault("resultType", "complete")
        meta = result.get("_meta")
        result["_meta"] = {**meta, **self._result_meta} if meta else self._result_meta
        return result

    def _scope(
        self,
        params: Mapping[str, Any],
        session: Session,
        peer: Peer,
        cancellation: Cancellation | None,
        principal: str | None,
    ) -> RequestScope:
        meta = params.get("_meta")
        meta = meta if isinstance(meta, dict) else None
        progress_token = meta.get("progressToken") if meta is not None else None
        if not isinstance(progress_token, str | int) or isinstance(progress_token, bool):
            progress_token = None
        modern = meta is not None and META_PROTOCOL_VERSION in meta
        if not modern and session.legacy_version is not None:
            return RequestScope(
                "legacy",
                session.legacy_version,
                session.legacy_capabilities,
                progress_token,
                session.log_level,
                peer,
                cancellation,
                principal,
                self.audit,
                self.review_pages,
            )
        # basic/index: "A request missing any required field is malformed; the server MUST
        # reject it with JSON-RPC error code -32602".
        if meta is None or META_PROTOCOL_VERSION not in meta:
            raise MalformedRequest(
                INVALID_PARAMS,
                f"Missing params._meta[{META_PROTOCOL_VERSION!r}]: 2026-07-28 requests carry "
                "their protocol version and client capabilities (2025-11-25 clients send "
                "initialize first)",
            )
        requested = meta[META_PROTOCOL_VERSION]
        if not isinstance(requested, str):
            raise MalformedRequest(INVALID_PARAMS, f"{META_PROTOCOL_VERSION} must be a string")
        capabilities = meta.get(META_CLIENT_CAPABILITIES)
        if not isinstance(capabilities, dict):
            raise MalformedRequest(
                INVALID_PARAMS, f"Missing or invalid params._meta[{META_CLIENT_CAPABILITIES!r}]"
            )
        if requested not in MODERN_VERSIONS:
            # basic/versioning: UnsupportedProtocolVersionError.
            raise RpcError(
                UNSUPPORTED_PROTOCOL_VERSION,
                f"Unsupported protocol version: {clip(requested)}",
                {"supported": list(MODERN_VERSIONS), "requested": clip(requested)},
            )
        log_level = meta.get(META_LOG_LEVEL)
        if log_level is not None:
            try:
                log_level = _log_level(log_level, f"params._meta[{META_LOG_LEVEL!r}]")
            except RpcError as error:
                raise MalformedRequest(error.code, error.message) from None
        return RequestScope(
            "modern",
            requested,
            ClientCapabilities(capabilities),
            progress_token,
            log_level,
            peer,
            cancellation,
            principal,
            self.audit,
            self.review_pages,
        )

    def _initialize(self, params: Mapping[str, Any], session: Session, peer: Peer) -> JSONObject:
        requested = params.get("protocolVersion")
        capabilities = params.get("capabilities", {})
        if not isinstance(requested, str) or not isinstance(capabilities, dict):
            raise RpcError(
                INVALID_PARAMS,
                "initialize needs a string protocolVersion and a capabilities object",
            )
        version = requested if requested in LEGACY_VERSIONS else LEGACY_VERSIONS[0]
        session.legacy_version = version
        session.legacy_capabilities = ClientCapabilities(capabilities)
        self._watch(session, peer)
        result: JSONObject = {
            "protocolVersion": version,
            "capabilities": self.capabilities,
            "serverInfo": self.info,
        }
        if self.instructions:
            result["instructions"] = self.instructions
        return result

    # -- methods ------------------------------------------------------------------------

    async def _dispatch(
        self, method: str, params: Mapping[str, Any], scope: RequestScope, session: Session
    ) -> JSONObject:
        if method == "server/discover":
            discover: JSONObject = {
                "supportedVersions": list(MODERN_VERSIONS),
                "capabilities": self._discover_capabilities,
            }
            if self.instructions:
                discover["instructions"] = self.instructions
            return discover
        if method == "ping":
            return {}
        if method == "logging/setLevel":
            # 2025-11-25 server/utilities/logging: the level holds for the session.
            session.log_level = _log_level(params.get("level"), "level")
            return {}
        self.registry.ensure_loaded()
        if method in SKILL_METHODS:
            if self.skills is None:
                raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method} (no skills here)")
            if method == "skills/list":
                return self.skills.list_result(params)
            if method == "skills/get":
                return self.skills.get_result(params)
            return self.skills.directory_result(params)
        if method == "completion/complete":
            # Imported with the tools, like _methods: the first answer does not wait for it.
            from ._completions import complete

            return await complete(self.registry, params)
        return self._list(method, params)

    async def _call(
        self, method: str, params: Mapping[str, Any], scope: RequestScope
    ) -> JSONObject:
        """tools/call, prompts/get, resources/read: the methods whose handlers may ask."""
        self.registry.ensure_loaded()
        call = (self._call_of or self._load_methods())(self.registry, method, params)
        received = RoundInput.parse(params)
        if scope.era == "legacy":
            if call.task == "required":
                raise tasks_required_error(legacy=True)
            return await run_legacy(call, received, scope)
        # Only a task tool's call can become a task: the others never reach the engine.
        tasks = self.tasks if call.task is not None and self.serves_tasks else None
        result = await run_round(
            call,
            received,
            scope,
            codec=self.signing,
            flights=self._flights,
            tasks=tasks,
            ledger=self.ledger if received.has_state else None,
        )
        if method == "resources/read" and "contents" in result:
            # server/utilities/caching: results of retries carrying inputResponses or
            # requestState MUST NOT be cached; a first read carries what the resource declared
            # (by default 0 and "private": content may change, or depend on who reads it).
            resource = cast("ResourceCall", call).resource
            result.update(NOT_CACHED if received.retried else resource.cache)
        return result

    async def _task_method(
        self, method: str, params: Mapping[str, Any], scope: RequestScope
    ) -> JSONObject:
        """tasks/get, tasks/update, tasks/cancel (tasks extension, 2026-07-28 only)."""
        if not self.serves_tasks:
            missing = missing_wing("tasks")
            raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method} ({missing})")
        # tasks "Protocol Errors": -32021 for a request that did not declare the extension.
        if not scope.capabilities.extension(TASKS_EXTENSION):
            raise tasks_required_error()
        task_id = params.get("taskId")
        principal = scope.principal
        if method == "tasks/get":
            return await self.tasks.get(task_id, principal)
        if method == "tasks/update":
            if not isinstance(params.get("inputResponses"), dict):
                raise RpcError(INVALID_PARAMS, "tasks/update needs an inputResponses object")
            # The bounds of an MRTR retry hold for the answers of a task too.
            responses, _ = read_input_responses(params)
            await self.tasks.update(task_id, responses, principal)
            return {}
        await self.tasks.cancel(task_id, principal)
        return {}

    # -- subscriptions --------------------------------------------------------------------

    async def _subscription(
        self,
        request_id: RequestId,
        method: str,
        params: Mapping[str, Any],
        scope: RequestScope,
        session: Session,
    ) -> JSONObject:
        self.registry.ensure_loaded()
        peer = scope.peer
        if method == "subscriptions/listen":
            return await self._listen(request_id, params, scope)
        uri = params.get("uri")
        if not isinstance(uri, str):
            raise RpcError(INVALID_PARAMS, f"{method} needs a string uri")
        listener = session.listener or self._watch(session, peer)
        if method == "resources/unsubscribe":
            listener.uris.discard(uri)
            return {}
        if self.registry.find_resource(uri) is None:
            # The code resources/read gives the same URI (server/resources "Error Handling").
            raise RpcError(INVALID_PARAMS, f"Resource not found: {clip(uri)}", {"uri": clip(uri)})
        if uri not in listener.uris and len(listener.uris) >= MAX_RESOURCE_SUBSCRIPTIONS:
            raise RpcError(
                INVALID_PARAMS,
                f"At most {MAX_RESOURCE_SUBSCRIPTIONS} resource subscriptions per session; "
                "unsubscribe from one first",
            )
        listener.uris.add(uri)
        return {}

    def _watch(self, session: Session, peer: Peer) -> Listener:
        # server/tools, server/prompts, server/resources "List Changed Notification": an
        # initialized 2025-11-25 session hears of every list change, and of the resources it
        # subscribed to. A second initialize starts over.
        if session.listener is not None:
            session.listener.close()
        session.listener = Listener(peer.notify, lists=LIST_KINDS)
        self._subscriptions.add_session(session.listener)
        return session.listener

    async def _listen(
        self, request_id: RequestId, params: Mapping[str, Any], scope: RequestScope
    ) -> JSONObject:
        """basic/patterns/subscriptions: acknowledge, then notices until the stream ends."""
        peer = scope.peer
        wanted = params.get("notifications")
        if not isinstance(wanted, dict):
            raise RpcError(INVALID_PARAMS, "subscriptions/listen needs a notifications object")
        agreed: dict[str, Any] = {flag: True for flag in _LIST_FLAGS if wanted.get(flag) is True}
        uris: list[str] = []
        if "resourceSubscriptions" in wanted:
            uris = agreed["resourceSubscriptions"] = self._listened_uris(wanted)
        task_ids: list[str] = []
        if "taskIds" in wanted:
            task_ids = await self._listened_tasks(wanted, scope)
            agreed["taskIds"] = list(task_ids)
        subscription_meta = {META_SUBSCRIPTION_ID: request_id}
        listener = Listener(
            peer.notify,
            lists=(_LIST_FLAGS[flag] for flag in agreed if flag in _LIST_FLAGS),
            uris=uris,
            meta=subscription_meta,
            cancellation=scope.cancellation,
            started=False,
        )
        try:
            self._subscriptions.open_listen(listener, scope.principal)
        except OverflowError as error:
            raise RpcError(INTERNAL_ERROR, f"{error}; cancel one first") from None
        try:
            # The acknowledgment MUST be the first message carrying the subscription's id.
            await peer.notify(
                "notifications/subscriptions/acknowledged",
                {"_meta": subscription_meta, "notifications": agreed},
            )
            listener.start()
            if "taskIds" in wanted and not task_ids and not uris and not listener.lists:
                # It asked only for tasks, and none is agreed: nothing will ever be sent on
                # it, so it ends now (answered) instead of holding one of the open listens.
                await peer.notify(
                    "notifications/cancelled",
                    {"requestId": request_id, "reason": "none of the taskIds is a task to follow"},
                )
            elif task_ids:
                cancellation = scope.cancellation

                async def send(task: JSONObject) -> None:
                    if cancellation is None or not cancellation.cancelled:
                        params = {**task, "_meta": subscription_meta}
                        await peer.notify("notifications/tasks", params)

                async with self.tasks.follow(task_ids, send):
                    await listener.ended.wait()
            else:
                await listener.ended.wait()
            # basic/patterns/cancellation: a server MUST send notifications/cancelled for a
            # listen it tears down (the only cancellation a server sends); subscriptions
            # "Graceful Closure": it SHOULD also answer the request.
            await peer.notify(
                "notifications/cancelled",
                {"requestId": request_id, "reason": "the server is shutting down"},
            )
        finally:
            self._subscriptions.close_listen(listener)
        return {"_meta": subscription_meta}

    def _listened_uris(self, wanted: Mapping[str, Any]) -> list[str]:
        """A listen's `resourceSubscriptions`, checked; the subset honoured (the URIs of
        resources that exist), which the acknowledgment carries."""
        asked = wanted["resourceSubscriptions"]
        if not isinstance(asked, list) or not all(isinstance(uri, str) for uri in asked):
            raise RpcError(INVALID_PARAMS, "resourceSubscriptions must be a list of URIs")
        if len(asked) > MAX_RESOURCE_SUBSCRIPTIONS:
            raise RpcError(
                INVALID_PARAMS,
                f"At most {MAX_RESOURCE_SUBSCRIPTIONS} resourceSubscriptions per stream",
            )
        return [uri for uri in dict.fromkeys(asked) if self.registry.find_resource(uri)]

    async def _listened_tasks(self, wanted: Mapping[str, Any], scope: RequestScope) -> list[str]:
        """A listen's `taskIds`, checked; the ids agreed (the caller's own tasks that exist),
        which the acknowledgment lists."""
        if not self.serves_tasks:
            missing = missing_wing("tasks")
            raise RpcError(INVALID_PARAMS, f"This server follows no tasks: {missing}")
        max_followed: int = load_wing("tasks").MAX_FOLLOWED_TASKS
        # tasks "Task Status Notifications": without the extension, -32021.
        if not scope.capabilities.extension(TASKS_EXTENSION):
            raise tasks_required_error()
        asked_ids = wanted["taskIds"]
        if not isinstance(asked_ids, list) or not all(isinstance(i, str) for i in asked_ids):
            raise RpcError(INVALID_PARAMS, "taskIds must be a list of task ids")
        if len(asked_ids) > max_followed:
            raise RpcError(INVALID_PARAMS, f"At most {max_followed} taskIds per stream")
        visible: list[str] = await self.tasks.visible(asked_ids, scope.principal)
        return visible

    def _list(self, method: str, params: Mapping[str, Any]) -> JSONObject:
        # utilities/pagination: everything fits on one page, so any cursor is one we never issued.
        if params.get("cursor") is not None:
            raise RpcError(INVALID_PARAMS, "Invalid cursor")
        registry = self.registry
        if method == "tools/list":
            return {"tools": [dict(tool.wire) for tool in registry.tools.values()]}
        if method == "prompts/list":
            return {"prompts": [dict(prompt.wire) for prompt in registry.prompts.values()]}
        if method == "resources/list":
            return {"resources": [dict(resource.wire) for resource in registry.resources.values()]}
        return {"resourceTemplates": [dict(t.resource.wire) for t in registry.resource_templates]}


def _store_failure(error: Exception) -> bool:
    """Whether `error` is the task store's own (`TaskStoreUnavailable`). Read from the loaded
    module, never imported for it: start-up loads nothing of the tasks (test_startup)."""
    store = sys.modules.get(f"{__package__}._task_store")
    return store is not None and isinstance(error, store.TaskStoreUnavailable)


def _log_level(value: object, where: str) -> LoggingLevel:
    # server/utilities/logging "Error Handling": an unknown level is -32602 Invalid params.
    for level in LOG_LEVELS:
        if value == level:
            return level
    shown = clip(value) if isinstance(value, str) else type(value).__name__
    raise RpcError(
        INVALID_PARAMS, f"Invalid log level in {where}: {shown}; one of {', '.join(LOG_LEVELS)}"
    )


def _serve_skill_files(skills: SkillCatalog, registry: Registry) -> None:
    """Every skill file as a resource of `registry`, loaded with the tools."""
    for file in skills.resources():
        if file.uri in registry.resources:
            continue  # another server over the same registry (tests) served it
        registry.resource(
            file.uri,
            name=file.name,
            description=file.description,
            mime_type=file.mime_type,
            cache_ttl_seconds=file.cache_ttl_seconds,
            cache_scope="public",  # a skill's files are the same for every caller
        )(file.read)
