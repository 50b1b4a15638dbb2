"""`completion/complete`: suggestions for a prompt argument or a resource-template variable.

server/utilities/completion (2025-11-25 and 2026-07-28 alike): the request names a `ref`
(`{type: "ref/prompt", name}` or `{type: "ref/resource", uri}`), the `argument` being typed
(`{name, value}`) and, optionally, `context.arguments` already chosen; the result is
`{completion: {values (at most 100), total, hasMore}}`. Completers are declared with
`Registry.completion`. The method is always served (the capability is declared before the
tools load, so it cannot depend on them): with no completer, every real argument simply has
no suggestions.
"""

from __future__ import annotations

import inspect
import itertools
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

import anyio.to_thread

from ._jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, JSONObject, RpcError, clip
from ._registry import CompletionKey, Registry

__all__ = ("MAX_COMPLETION_VALUES", "MAX_COUNTED_VALUES", "complete")

#: server/utilities/completion: "Maximum 100 items per response".
MAX_COMPLETION_VALUES: Final = 100
#: Suggestions counted for `total`; past this many the total is left out (it is optional) and
#: `hasMore` alone says there are more, so an endless generator cannot hold the request.
MAX_COUNTED_VALUES: Final = 10_000

_logger = logging.getLogger("mrtr_runtime")


async def complete(registry: Registry, params: Mapping[str, Any]) -> JSONObject:
    """The CompleteResult for `params`; raises `RpcError` for anything the client got wrong."""
    key = _key(registry, params)
    value = params["argument"]["value"]
    chosen = _context_arguments(params)
    completer = registry.completions.get(key)
    if completer is None:
        # A real argument nobody wrote suggestions for: nothing to suggest, not an error.
        return _result([], 0, more=False)
    counted = await _run(completer, value, chosen, key)
    if not all(isinstance(item, str) for item in counted):
        _logger.error("the completer of %r %r returned values that are not str", *key[1:])
        raise RpcError(INTERNAL_ERROR, f"Completing {clip(key[2])!r} failed")
    if len(counted) > MAX_COUNTED_VALUES:
        return _result(counted[:MAX_COMPLETION_VALUES], None, more=True)
    return _result(
        counted[:MAX_COMPLETION_VALUES], len(counted), more=len(counted) > MAX_COMPLETION_VALUES
    )


def _result(values: list[str], total: int | None, *, more: bool) -> JSONObject:
    completion: JSONObject = {"values": values}
    if total is not None:
        completion["total"] = total
    completion["hasMore"] = more
    return {"completion": completion}


def _key(registry: Registry, params: Mapping[str, Any]) -> CompletionKey:
    ref = params.get("ref")
    argument = params.get("argument")
    if not isinstance(argument, dict) or not all(
        isinstance(argument.get(field), str) for field in ("name", "value")
    ):
        raise RpcError(INVALID_PARAMS, "completion/complete needs argument {name, value} strings")
    name = argument["name"]
    if not isinstance(ref, dict):
        raise RpcError(INVALID_PARAMS, "completion/complete needs a ref object")
    kind = ref.get("type")
    if kind == "ref/prompt":
        prompt_name = ref.get("name")
        if not isinstance(prompt_name, str):
            raise RpcError(INVALID_PARAMS, "A ref/prompt needs a string name")
        prompt = registry.prompts.get(prompt_name)
        if prompt is None:
            # server/utilities/completion "Error Handling": invalid prompt name -> -32602.
            raise RpcError(INVALID_PARAMS, f"Unknown prompt: {clip(prompt_name)}")
        known = [entry["name"] for entry in prompt.wire.get("arguments", ())]
        target = prompt_name
    elif kind == "ref/resource":
        uri = ref.get("uri")
        if not isinstance(uri, str):
            raise RpcError(INVALID_PARAMS, "A ref/resource needs a string uri")
        target, known = _template_of(registry, uri)
    else:
        raise RpcError(INVALID_PARAMS, 'ref.type must be "ref/prompt" or "ref/resource"')
    if name not in known:
        raise RpcError(
            INVALID_PARAMS, f"{clip(target)!r} has no argument {clip(name)!r} to complete"
        )
    return (kind, target, name)


def _template_of(registry: Registry, uri: str) -> tuple[str, list[str]]:
    """The resource template `uri` names (its own template, or a URI it matches), with its
    variables; a fixed resource has none. -32602 when it names nothing this server has."""
    for template in registry.resource_templates:
        if template.resource.uri == uri or template.match(uri) is not None:
            return template.resource.uri, list(template.pattern.groupindex)
    if uri in registry.resources:
        return uri, []
    raise RpcError(INVALID_PARAMS, f"Unknown resource or template: {clip(uri)}")


def _context_arguments(params: Mapping[str, Any]) -> dict[str, str]:
    context = params.get("context")
    arguments = context.get("arguments") if isinstance(context, dict) else context
    if arguments is None:
        return {}
    if not isinstance(arguments, dict) or not all(
        isinstance(item, str) for item in itertools.chain(arguments, arguments.values())
    ):
        raise RpcError(INVALID_PARAMS, "context.arguments must map argument names to strings")
    return arguments


async def _run(
    completer: Callable[..., Any], value: str, chosen: Mapping[str, str], key: CompletionKey
) -> list[Any]:
    """The completer's first `MAX_COUNTED_VALUES + 1` suggestions."""
    try:
        if inspect.iscoroutinefunction(completer):
            return _counted(await completer(value, chosen))
        # A plain `def` (and its generator) may block: a worker thread keeps the loop serving;
        # abandon_on_cancel: a completer stuck in I/O must not hold a cancelled request.
        return await anyio.to_thread.run_sync(
            lambda: _counted(completer(value, chosen)), abandon_on_cancel=True
        )
    except Exception as error:
        _logger.exception("the completer of %r %r raised", key[1], key[2])
        raise RpcError(INTERNAL_ERROR, f"Completing {clip(key[2])!r} failed") from error


def _counted(values: object) -> list[Any]:
    if isinstance(values, str) or not isinstance(values, Iterable):
        raise TypeError(f"a completer returns an iterable of str, not {type(values).__name__}")
    return list(itertools.islice(values, MAX_COUNTED_VALUES + 1))
