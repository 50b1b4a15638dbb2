"""Tools, prompts and resources: the decorators that declare them and the calls that run them."""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import math
import pkgutil
import re
import types
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import (
    TYPE_CHECKING,
    Any,
    Final,
    Literal,
    TypeVar,
    Union,
    get_args,
    get_origin,
    get_type_hints,
    overload,
)

import anyio.to_thread

from ._context import Context
from ._jsonrpc import INTERNAL_ERROR, RpcError
from ._redact import redact_secrets
from ._removed import import_hint
from ._results import InputRequired
from ._wings import has_wing, missing_wing

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = (
    "MAX_CACHE_TTL_SECONDS",
    "MAX_TASK_TTL_SECONDS",
    "NOT_CACHED",
    "CacheScope",
    "CompletionKey",
    "PromptDef",
    "Registry",
    "RegistryChange",
    "ResourceDef",
    "ResourceTemplateDef",
    "TaskSupport",
    "ToolAnnotations",
    "ToolDef",
    "ToolModuleError",
)

F = TypeVar("F", bound=Callable[..., Any])

#: How much of a failing tool module's exception the client is shown (the log has it whole).
_MAX_LOAD_DETAIL = 500
_LOADING_NOTE = "while loading "


class ToolModuleError(RpcError):
    """A tool module failed to import: every request that needs the tools is answered with
    this, naming the module and the reason (redacted, clipped), so the host shows the user what
    to fix instead of a bare "Internal error"; the server log has the traceback."""

    def __init__(self, error: Exception) -> None:
        notes = [note for note in getattr(error, "__notes__", ()) if note.startswith(_LOADING_NOTE)]
        what = notes[-1].removeprefix(_LOADING_NOTE) if notes else "a tool module"
        detail = redact_secrets(str(error))[:_MAX_LOAD_DETAIL]
        super().__init__(
            INTERNAL_ERROR,
            f"The tools could not be loaded: {what} raised "
            f"{type(error).__name__}: {detail} (the server log has the traceback)",
        )


#: What changed: a list ("tools", "prompts", "resources"), or one resource's content ("resource").
RegistryChange = Literal["tools", "prompts", "resources", "resource"]

#: server/utilities/completion: what a completer completes, as `completion/complete` names it:
#: ("ref/prompt", prompt name, argument) or ("ref/resource", URI template, variable).
CompletionKey = tuple[str, str, str]

#: `@registry.tool(task=...)`: whether a tool may ("optional") or must ("required") run as a
#: task of the tasks extension.
TaskSupport = Literal["optional", "required"]
#: The longest a tool may ask the server to keep its tasks (`task_ttl_seconds`): a week.
MAX_TASK_TTL_SECONDS: Final = 7 * 24 * 3600

#: server/utilities/caching `cacheScope`: "public", the same for every caller (any cache may
#: share it); "private", for one authorization context only.
CacheScope = Literal["public", "private"]
#: The longest a resource's content or the lists may be declared fresh (`ttlMs`): a day. A
#: hint past that outlives most deployments, and clients keep serving what a redeploy changed.
MAX_CACHE_TTL_SECONDS: Final = 24 * 3600
#: The hints of a result no client should serve again without asking (server/utilities/caching:
#: `ttlMs` 0 is "immediately stale"; "private" keeps it out of shared caches). Shared by every
#: such result (copied into it), so read-only.
NOT_CACHED: Final[Mapping[str, Any]] = types.MappingProxyType({"ttlMs": 0, "cacheScope": "private"})

# server/tools "Tool Names": SHOULD be 1-128 characters of A-Z, a-z, 0-9, _, - and .
_TOOL_NAME: Final = re.compile(r"[A-Za-z0-9_.\-]{1,128}")


@dataclass(frozen=True)
class ToolAnnotations:
    """Hints for hosts (server/tools "Tool Annotations"); they describe, they do not enforce."""

    title: str | None = None
    read_only: bool | None = None
    destructive: bool | None = None
    idempotent: bool | None = None
    open_world: bool | None = None

    def to_wire(self) -> dict[str, Any]:
        pairs = {
            "title": self.title,
            "readOnlyHint": self.read_only,
            "destructiveHint": self.destructive,
            "idempotentHint": self.idempotent,
            "openWorldHint": self.open_world,
        }
        return {key: value for key, value in pairs.items() if value is not None}


@dataclass(frozen=True)
class _Signature:
    """How to call a handler: its arguments model, how it takes them, where Context goes."""

    model: type[BaseModel]
    whole_model_param: str | None
    context_param: str | None
    is_async: bool
    #: (parameter, model field) pairs; they differ where a parameter's name is taken by BaseModel.
    fields: tuple[tuple[str, str], ...] = ()
    #: The handler's return annotation, resolved (None when it has none).
    returns: Any = None

    def kwargs(self, arguments: BaseModel, context: Context) -> dict[str, Any]:
        if self.whole_model_param is not None:
            kwargs: dict[str, Any] = {self.whole_model_param: arguments}
        else:
            kwargs = {param: getattr(arguments, field) for param, field in self.fields}
        if self.context_param is not None:
            kwargs[self.context_param] = context
        return kwargs

    async def call(
        self, handler: Callable[..., Any], arguments: BaseModel, context: Context
    ) -> Any:
        kwargs = self.kwargs(arguments, context)
        if self.is_async:
            return await handler(**kwargs)
        # A plain `def` handler may block (I/O, CPU); a worker thread keeps the loop serving.
        # abandon_on_cancel: a cancelled or shut-down call must not wait for a thread stuck in I/O.
        return await anyio.to_thread.run_sync(lambda: handler(**kwargs), abandon_on_cancel=True)


def _mentions_context(annotation: Any) -> bool:
    """Whether `annotation` is Context or holds it (`Context | None`, `Annotated[Context, ...]`)."""
    if annotation is Context:
        return True
    return any(_mentions_context(arg) for arg in get_args(annotation))


def _context_param(
    handler: Callable[..., Any],
    parameters: Mapping[str, inspect.Parameter],
    hints: Mapping[str, Any],
) -> str | None:
    """The one parameter that receives the Context, checked where the handler is declared.

    The runtime always passes a Context, by keyword: a parameter that could be given
    positionally, has a default or may be None would otherwise become an argument in the
    tool's input schema, and the mistake would surface only when a client lists the tools.
    """
    where = handler.__qualname__
    found = [name for name in parameters if _mentions_context(hints.get(name))]
    if len(found) > 1:
        raise TypeError(
            f"{where}: {len(found)} parameters take a Context ({', '.join(found)}); "
            "declare one: `*, ctx: Context`"
        )
    if not found:
        return None
    (name,) = found
    param = parameters[name]
    if hints[name] is not Context:
        raise TypeError(
            f"{where}: parameter {name!r} must be annotated `Context` exactly: the runtime always "
            f"passes one, so it is never None and takes no default; declare `*, {name}: Context`"
        )
    if param.kind is not inspect.Parameter.KEYWORD_ONLY or param.default is not param.empty:
        raise TypeError(
            f"{where}: the Context parameter {name!r} must be keyword-only with no default; "
            f"declare it after a `*`: `*, {name}: Context`"
        )
    return name


def _type_hints(handler: Callable[..., Any]) -> dict[str, Any]:
    """The handler's annotations, resolved now, so that a name they miss fails at declaration.

    Under `from __future__ import annotations` every annotation is a string, resolved here
    in the handler's module: a model defined below its tool is not defined yet.
    """
    try:
        return get_type_hints(handler, include_extras=True)
    except NameError as error:
        missing = f"{error.name!r}" if error.name else "a name"
        raise TypeError(
            f"{handler.__qualname__}: its annotations use {missing}, which is not defined "
            f"where the handler is declared; define it above {handler.__qualname__} "
            f"({error})"
        ) from error


def _check_parameter_kinds(
    handler: Callable[..., Any], parameters: Mapping[str, inspect.Parameter]
) -> None:
    # Arguments come as one JSON object and are passed by keyword: `*args` / `**kwargs` would
    # become required fields named "args" / "kwargs", and a positional-only parameter could
    # never be passed, so the tool could never be called.
    for name, param in parameters.items():
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            raise TypeError(
                f"{handler.__qualname__}: *{name} cannot take arguments, which come by name; "
                "declare each one as a parameter"
            )
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            raise TypeError(
                f"{handler.__qualname__}: **{name} cannot take arguments, which are the "
                "declared parameters (the input schema); declare each one, or take a pydantic "
                "model as the only parameter"
            )
        if param.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise TypeError(
                f"{handler.__qualname__}: parameter {name!r} is positional-only, but "
                "arguments are passed by name; remove the `/`"
            )


def _inspect(handler: Callable[..., Any], model_name: str) -> _Signature:
    # pydantic is imported with the first tool, not with the runtime: a server answers its
    # first request before it loads its tools (see Registry.defer_package).
    from pydantic import BaseModel, ConfigDict, Field, create_model

    if not callable(handler):
        raise TypeError(f"a handler must be a function, not {type(handler).__name__}")
    hints = _type_hints(handler)
    parameters = inspect.signature(handler).parameters
    _check_parameter_kinds(handler, parameters)
    context_param = _context_param(handler, parameters, hints)
    fields = {name: param for name, param in parameters.items() if name != context_param}
    is_async = inspect.iscoroutinefunction(handler)
    returns = hints.get("return")
    if len(fields) == 1:
        ((name, _),) = fields.items()
        annotation = hints.get(name)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            return _Signature(annotation, name, context_param, is_async, returns=returns)
    definitions: dict[str, Any] = {}
    pairs: list[tuple[str, str]] = []
    for index, (name, param) in enumerate(fields.items()):
        if name not in hints:
            raise TypeError(f"{handler.__qualname__}: parameter {name!r} needs a type annotation")
        default = ... if param.default is inspect.Parameter.empty else param.default
        if hasattr(BaseModel, name):
            # `schema`, `json`, `copy`... would shadow BaseModel's own attributes; the wire
            # name stays the parameter's through the alias.
            field_name = f"argument_{index}"
            definitions[field_name] = (hints[name], Field(default, alias=name))
        else:
            field_name = name
            definitions[field_name] = (hints[name], default)
        pairs.append((name, field_name))
    # defer_build: the validator is made on the first call, not while the server starts.
    config = ConfigDict(extra="forbid", defer_build=True)
    model = create_model(model_name, __config__=config, **definitions)
    return _Signature(model, None, context_param, is_async, tuple(pairs), returns)


def _output_model(returns: Any) -> type[BaseModel] | None:
    """The model a tool's return annotation names, which becomes its outputSchema.

    `-> Report` and `-> Report | InputRequired` name `Report`; anything else (str, ToolResult,
    a dict, None allowed, two models) names none, and `output_model=` says it instead.
    server/tools: with an outputSchema, servers MUST provide structured results that conform.
    """
    from pydantic import BaseModel

    members = [
        member
        for member in (get_args(returns) if _is_union(returns) else (returns,))
        if member is not InputRequired
    ]
    if len(members) != 1:
        return None
    (member,) = members
    if isinstance(member, type) and issubclass(member, BaseModel):
        return member
    return None


def _output_schema_model(
    handler: Callable[..., Any], returns: Any, explicit: type[BaseModel] | None
) -> type[BaseModel] | None:
    """The tool's output model: its return annotation's, or `output_model=` where that says more.

    `output_model=` is for what the annotation cannot say (a ToolResult, a union of models). One
    that contradicts a model the annotation names would publish a schema the tool's own results
    break, every call: refused where it is written.
    """
    annotated = _output_model(returns)
    if explicit is None or annotated is None or _holds(explicit, annotated):
        return explicit if explicit is not None else annotated
    raise TypeError(
        f"{handler.__qualname__}: returns {annotated.__name__} but declares "
        f"output_model={explicit.__name__}; drop output_model= (the annotation is the output "
        f"schema) or return {explicit.__name__}"
    )


def _holds(model: type[BaseModel], member: type[BaseModel]) -> bool:
    """Whether every `member` is an instance of `model`: the same model, a base of it, or a
    RootModel of a union one of whose members holds it."""
    if issubclass(member, model):
        return True
    if not getattr(model, "__pydantic_root_model__", False):
        return False
    root = model.model_fields["root"]
    options = get_args(root.annotation) if _is_union(root.annotation) else (root.annotation,)
    return any(isinstance(option, type) and issubclass(member, option) for option in options)


def _is_union(annotation: Any) -> bool:
    return get_origin(annotation) in (Union, types.UnionType)


@dataclass(frozen=True)
class ToolDef:
    name: str
    handler: Callable[..., Any]
    signature: _Signature
    output_model: type[BaseModel] | None
    #: The tools/list entry without its schemas, which are made on first use (below).
    summary: Mapping[str, Any]
    #: Input keys whose answers are taken even though no round asked for them (see `tool`).
    accept_unasked: frozenset[str] = frozenset()
    #: Whether the tool may run as a task (tasks extension): None, "optional" or "required".
    task: TaskSupport | None = None
    #: How long its tasks are kept (their `ttlMs`); None: the engine's default.
    task_ttl_seconds: float | None = None
    #: OAuth scopes a bearer must hold to call it over HTTP with authorization (see `tool`).
    scopes: tuple[str, ...] = ()

    @functools.cached_property
    def wire(self) -> Mapping[str, Any]:
        # Schemas are built when a client first lists tools, not at import: hosts wait on
        # start-up, and building every model's schema is most of a server's start-up work.
        wire = dict(self.summary)
        wire["inputSchema"] = self.signature.model.model_json_schema()
        if self.output_model is not None:
            wire["outputSchema"] = self.output_model.model_json_schema()
        if "annotations" in wire:
            wire["annotations"] = wire.pop("annotations")  # keep the documented key order
        return wire

    def parse_arguments(self, arguments: Mapping[str, Any]) -> BaseModel:
        """Validate arguments; raises pydantic's ValidationError for the caller to report."""
        return self.signature.model.model_validate(arguments)

    async def call(self, arguments: BaseModel, context: Context) -> Any:
        return await self.signature.call(self.handler, arguments, context)


@dataclass(frozen=True)
class PromptDef:
    name: str
    handler: Callable[..., Any]
    signature: _Signature
    description: str | None
    summary: Mapping[str, Any]
    accept_unasked: frozenset[str] = frozenset()

    @functools.cached_property
    def wire(self) -> Mapping[str, Any]:
        schema = self.signature.model.model_json_schema()
        required = set(schema.get("required", ()))
        arguments = []
        for field_name, field_schema in schema.get("properties", {}).items():
            argument: dict[str, Any] = {"name": field_name, "required": field_name in required}
            if "description" in field_schema:
                argument["description"] = field_schema["description"]
            arguments.append(argument)
        wire = dict(self.summary)
        if arguments:
            wire["arguments"] = arguments
        return wire

    async def call(self, arguments: BaseModel, context: Context) -> Any:
        return await self.signature.call(self.handler, arguments, context)


@dataclass(frozen=True)
class ResourceDef:
    uri: str
    handler: Callable[..., Any]
    signature: _Signature
    mime_type: str | None
    wire: Mapping[str, Any]
    #: The `ttlMs` and `cacheScope` of a first-round read's result (`Registry.resource`).
    cache: Mapping[str, Any]

    async def call(self, variables: Mapping[str, str], context: Context) -> Any:
        arguments = self.signature.model.model_validate(variables)
        return await self.signature.call(self.handler, arguments, context)


@dataclass(frozen=True)
class ResourceTemplateDef:
    pattern: re.Pattern[str]
    resource: ResourceDef

    def match(self, uri: str) -> dict[str, str] | None:
        found = self.pattern.fullmatch(uri)
        return found.groupdict() if found else None


def _template_pattern(uri_template: str) -> re.Pattern[str]:
    # RFC 6570 level 1 only: `{name}` matches one path segment, the rest is literal.
    parts = re.split(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", uri_template)
    regex = "".join(
        re.escape(part) if index % 2 == 0 else f"(?P<{part}>[^/?#]+)"
        for index, part in enumerate(parts)
    )
    return re.compile(regex)


def _input_keys(keys: Collection[str]) -> frozenset[str]:
    if isinstance(keys, str):
        # accept_unasked="confirm" would otherwise mean the keys "c", "o", "n"...
        raise TypeError("accept_unasked takes a collection of input keys, not one string")
    if not all(isinstance(key, str) and key for key in keys):
        raise TypeError("accept_unasked keys must be non-empty strings")
    return frozenset(keys)


#: RFC 6749 section 3.3: a scope token is printable ASCII but space, double quote and backslash.
_SCOPE_TOKEN: Final = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")


def _check_task_options(task: TaskSupport | None, task_ttl_seconds: float | None) -> None:
    if task not in (None, "optional", "required"):
        raise ValueError(f'task must be None, "optional" or "required", not {task!r}')
    if task == "required" and not has_wing("tasks"):
        # A tool no client could ever call; "optional" runs inline without the wing.
        raise ValueError(f'task="required" needs the tasks extension: {missing_wing("tasks")}')
    if task_ttl_seconds is None:
        return
    if task is None:
        raise TypeError('task_ttl_seconds needs task="optional" or task="required"')
    if not 0 < task_ttl_seconds <= MAX_TASK_TTL_SECONDS:
        raise ValueError(
            f"task_ttl_seconds must be above 0 and at most {MAX_TASK_TTL_SECONDS} (7 days)"
        )


def _scope_tokens(scopes: Collection[str]) -> tuple[str, ...]:
    if isinstance(scopes, str):
        # scopes="deploy" would otherwise mean the scopes "d", "e", "p"...
        raise TypeError('scopes takes a collection of scope names: scopes=("deploy",)')
    for scope in scopes:
        if not isinstance(scope, str) or not _SCOPE_TOKEN.fullmatch(scope):
            raise ValueError(f"scope {scope!r} is not an OAuth scope token (RFC 6749 section 3.3)")
    return tuple(dict.fromkeys(scopes))


def _needs_uri(decorator: str, uri: object) -> None:
    # `@registry.resource` with no URI would get the handler as its URI and declare nothing.
    if not isinstance(uri, str) or not uri:
        raise TypeError(f'@registry.{decorator} needs the URI first: @registry.{decorator}("...")')


def cache_hint(ttl_seconds: float, scope: str, *, what: str) -> dict[str, Any]:
    """The `ttlMs` and `cacheScope` pair a declaration stands for, checked where it is written.

    server/utilities/caching: `ttlMs` is an integer number of milliseconds, MUST be >= 0, and
    `cacheScope` is "public" or "private"; a wrong value is a mistake in code, refused now,
    not a hint sent to every client. `what` names the keyword in the error.
    """
    if isinstance(ttl_seconds, bool) or not isinstance(ttl_seconds, int | float):
        raise TypeError(f"{what}_ttl_seconds must be a number of seconds, not {ttl_seconds!r}")
    if not (math.isfinite(ttl_seconds) and 0 <= ttl_seconds <= MAX_CACHE_TTL_SECONDS):
        raise ValueError(
            f"{what}_ttl_seconds must be from 0 to {MAX_CACHE_TTL_SECONDS} (a day), "
            f"not {ttl_seconds!r}"
        )
    if scope not in ("public", "private"):
        raise ValueError(f'{what}_scope must be "public" or "private", not {scope!r}')
    return {"ttlMs": round(ttl_seconds * 1000), "cacheScope": scope}


def _description(explicit: str | None, handler: Callable[..., Any]) -> str | None:
    return explicit if explicit is not None else inspect.getdoc(handler)


class Registry:
    """The project's tools, prompts and resources, in the order they were declared.

    Order is deterministic (server/tools: servers SHOULD return tools in a deterministic
    order) because `load_package` imports modules sorted by name.

    `list_cache_ttl_seconds` is how long clients may keep the lists (tools, prompts, resources,
    resource templates) and `server/discover` before asking again (server/utilities/caching
    `ttlMs`). A positive one is a promise that no list changes within it, so it SEALS the
    registry: once the server has loaded its tools (`ensure_loaded`), declaring a tool, prompt,
    resource or template raises RuntimeError instead of changing a list that clients were told
    to keep. The default, 0, promises nothing: lists may change at any time (announced with
    list_changed), and every list result says it is immediately stale, because a client that
    does not follow the announcements (no `subscriptions/listen` stream) would otherwise miss a
    tool declared at runtime for the whole TTL. Lists are the same for every caller (nothing here
    filters them by principal), so their scope is "public".
    """

    def __init__(self, *, list_cache_ttl_seconds: float = 0) -> None:
        #: The caching hints of every list result and server/discover: computed once.
        self.list_cache: Final[Mapping[str, Any]] = cache_hint(
            list_cache_ttl_seconds, "public", what="list_cache"
        )
        #: Whether declaring more is refused (a promised list TTL, and the tools loaded).
        self.sealed = False
        self.tools: dict[str, ToolDef] = {}
        self.prompts: dict[str, PromptDef] = {}
        self.resources: dict[str, ResourceDef] = {}
        self.resource_templates: list[ResourceTemplateDef] = []
        #: Completers of prompt arguments and template variables (see `completion`).
        self.completions: dict[CompletionKey, Callable[..., Any]] = {}
        #: What `ensure_loaded` loads: tool packages by name, and other loaders (the skills).
        self._deferred: list[str | tuple[str, Callable[[Registry], None]]] = []
        self._change_listeners: list[Callable[[RegistryChange, str | None], None]] = []
        #: While a package loads, declarations are the start-up lists, not changes to them.
        self._loading = 0

    @overload
    def tool(self, name: F, /) -> F: ...

    @overload
    def tool(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        annotations: ToolAnnotations | None = None,
        output_model: type[BaseModel] | None = None,
        accept_unasked: Collection[str] = (),
        task: TaskSupport | None = None,
        task_ttl_seconds: float | None = None,
        scopes: Collection[str] = (),
    ) -> Callable[[F], F]: ...

    def tool(
        self,
        name: str | Callable[..., Any] | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        annotations: ToolAnnotations | None = None,
        output_model: type[BaseModel] | None = None,
        accept_unasked: Collection[str] = (),
        task: TaskSupport | None = None,
        task_ttl_seconds: float | None = None,
        scopes: Collection[str] = (),
    ) -> Any:
        """Declare a tool; the handler's parameters become its input schema.

        `@registry.tool` and `@registry.tool()` are the same. A return annotation that names a
        pydantic model (`-> Report`, or `-> Report | InputRequired`) is the tool's output
        schema; `output_model=` says it where the annotation cannot (a ToolResult with a
        summary, a union of models). Both, naming unrelated models, is a TypeError.

        `accept_unasked` names input keys whose answers the tool takes even when no round of
        this call asked for them (a client may send them with its first call). Every other
        answer counts only if a verified requestState records that this server asked for it:
        that is what makes an answer proof that the user saw the question. An unasked answer
        proves nothing, so never name a key that gates a destructive or costly action.

        `task="optional"` lets the tool run as a task (tasks extension) where its handler calls
        `ctx.start_task()`: a client that declared the extension gets the task and follows it,
        any other client gets the result inline. `task="required"`: a client without the
        extension is refused (-32021) before the handler runs (without the tasks wing, every
        call runs inline and "required" is refused). `task_ttl_seconds` is how long the server
        keeps each task after it is created (default a day, at most 7 days).
        A task whose server stopped mid-run is resumed by running the handler again from the
        top (arguments and answers as recorded); one past `ctx.point_of_no_return()` is run
        again only with `annotations=ToolAnnotations(idempotent=True)`, and otherwise ends
        with an isError result saying its action may have been carried out.

        `scopes` are the OAuth scopes a caller's access token must hold to call the tool when
        the server runs over HTTP as an OAuth resource server (`MRTR_OAUTH_ISSUER`): without
        them the call is refused with 403 `insufficient_scope` naming them, before the handler
        runs (basic/authorization "Scope Challenge Handling"). They are listed in the server's
        Protected Resource Metadata. Without authorization (stdio, a shared token): unchecked.
        """
        if callable(name):
            return self.tool()(name)
        required_scopes = _scope_tokens(scopes)
        unasked = _input_keys(accept_unasked)
        _check_task_options(task, task_ttl_seconds)

        def register(handler: F) -> F:
            tool_name = handler.__name__ if name is None else name
            self._check_open(f"tool {tool_name!r}")
            if not _TOOL_NAME.fullmatch(tool_name):
                raise ValueError(f"tool name {tool_name!r} must be 1-128 of A-Z a-z 0-9 _ - .")
            if tool_name in self.tools:
                raise ValueError(f"tool {tool_name!r} is declared twice")
            signature = _inspect(handler, f"{tool_name}_arguments")
            wire: dict[str, Any] = {"name": tool_name}
            if title is not None:
                wire["title"] = title
            if text := _description(description, handler):
                wire["description"] = text
            if annotations is not None:
                wire["annotations"] = annotations.to_wire()
            output = _output_schema_model(handler, signature.returns, output_model)
            self.tools[tool_name] = ToolDef(
                tool_name,
                handler,
                signature,
                output,
                wire,
                unasked,
                task,
                task_ttl_seconds,
                required_scopes,
            )
            self._changed("tools")
            return handler

        return register

    @overload
    def prompt(self, name: F, /) -> F: ...

    @overload
    def prompt(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        accept_unasked: Collection[str] = (),
    ) -> Callable[[F], F]: ...

    def prompt(
        self,
        name: str | Callable[..., Any] | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        accept_unasked: Collection[str] = (),
    ) -> Any:
        """Declare a prompt (`@registry.prompt` and `@registry.prompt()` are the same);
        `accept_unasked` as for `tool`."""
        if callable(name):
            return self.prompt()(name)
        unasked = _input_keys(accept_unasked)

        def register(handler: F) -> F:
            prompt_name = handler.__name__ if name is None else name
            self._check_open(f"prompt {prompt_name!r}")
            if prompt_name in self.prompts:
                raise ValueError(f"prompt {prompt_name!r} is declared twice")
            signature = _inspect(handler, f"{prompt_name}_arguments")
            text = _description(description, handler)
            wire: dict[str, Any] = {"name": prompt_name}
            if title is not None:
                wire["title"] = title
            if text:
                wire["description"] = text
            self.prompts[prompt_name] = PromptDef(
                prompt_name, handler, signature, text, wire, unasked
            )
            self._changed("prompts")
            return handler

        return register

    def _resource_def(
        self,
        uri: str,
        handler: Callable[..., Any],
        *,
        name: str | None,
        title: str | None,
        description: str | None,
        mime_type: str | None,
        uri_key: str,
        cache: Mapping[str, Any],
    ) -> ResourceDef:
        wire: dict[str, Any] = {uri_key: uri, "name": name or handler.__name__}
        if title is not None:
            wire["title"] = title
        text = _description(description, handler)
        if text:
            wire["description"] = text
        if mime_type is not None:
            wire["mimeType"] = mime_type
        signature = _inspect(handler, f"{wire['name']}_variables")
        return ResourceDef(uri, handler, signature, mime_type, wire, cache)

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        cache_ttl_seconds: float = 0,
        cache_scope: CacheScope = "private",
    ) -> Callable[[F], F]:
        """Declare the resource at `uri`; the handler returns its content.

        `cache_ttl_seconds` and `cache_scope` are the caching hints of its `resources/read`
        results (server/utilities/caching): how long a client may serve a read again without
        asking, and whether a cache shared between users may keep it. The default, 0 and
        "private", promises nothing: every read is fetched anew. Declare a TTL only for content
        that does not change within it, and "public" only for content that is the same for
        every caller (never for what depends on who asks). A read that carried answers (a
        retry with inputResponses or requestState) is never cacheable, whatever is declared.
        """
        _needs_uri("resource", uri)
        cache = cache_hint(cache_ttl_seconds, cache_scope, what="cache")

        def register(handler: F) -> F:
            self._check_open(f"resource {uri!r}")
            if uri in self.resources:
                raise ValueError(f"resource {uri!r} is declared twice")
            self.resources[uri] = self._resource_def(
                uri,
                handler,
                name=name,
                title=title,
                description=description,
                mime_type=mime_type,
                uri_key="uri",
                cache=cache,
            )
            self._changed("resources")
            return handler

        return register

    def resource_template(
        self,
        uri_template: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        cache_ttl_seconds: float = 0,
        cache_scope: CacheScope = "private",
    ) -> Callable[[F], F]:
        """Declare the resources whose URIs match `uri_template` (RFC 6570 level 1: each
        `{name}` is one path segment, a parameter of the handler). `cache_ttl_seconds` and
        `cache_scope` as for `resource`, for every URI the template matches."""
        _needs_uri("resource_template", uri_template)
        cache = cache_hint(cache_ttl_seconds, cache_scope, what="cache")

        def register(handler: F) -> F:
            self._check_open(f"resource template {uri_template!r}")
            resource = self._resource_def(
                uri_template,
                handler,
                name=name,
                title=title,
                description=description,
                mime_type=mime_type,
                uri_key="uriTemplate",
                cache=cache,
            )
            self.resource_templates.append(
                ResourceTemplateDef(_template_pattern(uri_template), resource)
            )
            self._changed("resources")
            return handler

        return register

    def completion(
        self,
        *,
        argument: str,
        prompt: str | None = None,
        resource_template: str | None = None,
    ) -> Callable[[F], F]:
        """Declare the completer of one prompt argument or one resource-template variable.

        The handler, `def f(value: str, arguments: Mapping[str, str]) -> Iterable[str]` (or
        `async def`), gets what the user typed so far and the arguments already chosen, and
        returns the suggestions, best first; the server sends at most 100 of them with the total
        (server/utilities/completion). A plain `def` runs in a worker thread.
        """
        if (prompt is None) == (resource_template is None):
            raise TypeError("completion takes exactly one of prompt=... or resource_template=...")
        if not isinstance(argument, str) or not argument:
            raise TypeError("completion needs the argument's name")
        if prompt is not None:
            key: CompletionKey = ("ref/prompt", prompt, argument)
        else:
            variables = _template_pattern(str(resource_template)).groupindex
            if argument not in variables:
                raise ValueError(
                    f"{resource_template!r} has no variable {argument!r} to complete "
                    f"(it has {sorted(variables)})"
                )
            key = ("ref/resource", str(resource_template), argument)

        def register(handler: F) -> F:
            if key in self.completions:
                raise ValueError(f"the completer of {key[1]!r} {argument!r} is declared twice")
            self.completions[key] = handler
            return handler

        return register

    def find_resource(self, uri: str) -> tuple[ResourceDef, dict[str, str]] | None:
        if uri in self.resources:
            return self.resources[uri], {}
        for template in self.resource_templates:
            variables = template.match(uri)
            if variables is not None:
                return template.resource, variables
        return None

    def defer_package(self, package: str) -> None:
        """`load_package` later, on the first `ensure_loaded`.

        The server answers `server/discover` and `initialize` without its tools, and loads
        them right after: importing tool modules (their pydantic models) is most of a
        server's start-up, and hosts wait for that first answer.
        """
        self._deferred.append(package)

    def ensure_loaded(self) -> None:
        """Load every deferred package; raises `ToolModuleError` (an RpcError naming the module
        and the reason, chained to what the module raised) when a tool module fails.

        With a positive `list_cache_ttl_seconds`, the registry is sealed once this returns.
        """
        while self._deferred:
            deferred = self._deferred[0]
            try:
                if isinstance(deferred, str):
                    self.load_package(deferred)
                else:
                    self._run_loader(*deferred)
            except Exception as error:
                raise ToolModuleError(error) from error
            del self._deferred[0]
        if self.list_cache["ttlMs"] and not self.sealed:
            self.sealed = True

    def defer_loader(self, what: str, load: Callable[[Registry], None]) -> None:
        """Run `load(self)` with the deferred packages (after the first answer): declarations
        that come from files rather than modules, like the project's skills. `what` names
        them in the error a failure gives ("the skills in <directory>")."""
        self._deferred.append((what, load))

    def _run_loader(self, what: str, load: Callable[[Registry], None]) -> None:
        self._check_open(what)
        self._loading += 1
        try:
            load(self)
        except Exception as error:
            error.add_note(f"{_LOADING_NOTE}{what}")
            raise
        finally:
            self._loading -= 1

    def load_package(self, package: str) -> None:
        """Import every public module of `package` so their decorators run, sorted by name."""
        self._check_open(f"package {package!r}")
        self._loading += 1
        try:
            try:
                module = importlib.import_module(package)
            except Exception as error:
                error.add_note(f"{_LOADING_NOTE}the tool module {package}")
                raise
            names = sorted(
                info.name
                for info in pkgutil.iter_modules(module.__path__)
                if not info.name.startswith("_")
            )
            for name in names:
                try:
                    importlib.import_module(f"{package}.{name}")
                except Exception as error:
                    error.add_note(f"{_LOADING_NOTE}the tool module {package}.{name}")
                    if not isinstance(error, ImportError):
                        raise
                    # `from ..mrtr_runtime import text_block` loses the face's own sentence
                    # (Python says only "cannot import name"): say what replaced the name.
                    hint = import_hint(error, __package__ or "")
                    if hint is None:
                        raise
                    hinted = ImportError(
                        f"{package}.{name}: {error}; {hint}", name=error.name, path=error.path
                    )
                    hinted.add_note(f"{_LOADING_NOTE}the tool module {package}.{name}")
                    raise hinted from error
        finally:
            self._loading -= 1

    # -- change notices: how the server learns what changed after start-up -----------------

    def on_change(self, listener: Callable[[RegistryChange, str | None], None]) -> None:
        """Call `listener(change, uri)` for every later change (the server subscribes itself).

        It is called in the thread that made the change, so it must only hand the news on.
        """
        self._change_listeners.append(listener)

    def resource_updated(self, uri: str) -> None:
        """Say that the content of the resource at `uri` changed.

        Clients that subscribed to `uri` are sent `notifications/resources/updated` (2025-11-25
        `resources/subscribe`, 2026-07-28 a `subscriptions/listen` stream naming it); nobody
        else hears of it. Safe to call from a tool, a background task or another thread.
        """
        self._changed("resource", uri)

    def _check_open(self, what: str) -> None:
        if self.sealed:
            seconds = self.list_cache["ttlMs"] / 1000
            raise RuntimeError(
                f"{what} is declared after start-up, but the registry promised clients that its "
                f"lists hold for {seconds:g} s (Registry(list_cache_ttl_seconds=...)): declare "
                "it in a module of the tools package, or drop list_cache_ttl_seconds so that "
                "the lists may change"
            )

    def _changed(self, change: RegistryChange, uri: str | None = None) -> None:
        # server/tools, server/prompts, server/resources: the lists a client fetched changed.
        if self._loading:
            return
        for listener in self._change_listeners:
            listener(change, uri)


def structured_text(value: Any) -> str:
    """server/tools: structured content SHOULD also be returned as serialised JSON text."""
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True, allow_nan=False)
