"""The methods that run handlers: tools/call, prompts/get, resources/read.

Each request becomes a `Call` for MRTR dispatch (`_dispatch`, or `_legacy` on a 2025-11-25
session): the parsed arguments, the handler run, and how its return value becomes the method's
result. Imported with the tools, after the first answer: it is where pydantic validation meets
the wire, and hosts wait on start-up (see `Registry.defer_package`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ValidationError

from ._content import blob_contents, text_block, text_contents
from ._context import Context, InvalidInputResponse, RequestCancelled, describe_validation_error
from ._dispatch import Call
from ._jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, JSONObject, RpcError, clip, json_size
from ._redact import redact_secrets
from ._registry import PromptDef, Registry, ResourceDef, ToolDef, structured_text
from ._results import ToolError, ToolResult, structured_json

__all__ = ("PromptCall", "ResourceCall", "ToolCall", "call_of")

_logger = logging.getLogger("mrtr_runtime")


def call_of(registry: Registry, method: str, params: Mapping[str, Any]) -> Call:
    """The Call `params` asks for: tools/call, prompts/get or resources/read."""
    if method == "tools/call":
        return ToolCall.parse(registry, params)
    if method == "prompts/get":
        return PromptCall.parse(registry, params)
    return ResourceCall.parse(registry, params)


def _name_and_arguments(method: str, params: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    name = params.get("name")
    if not isinstance(name, str):
        raise RpcError(INVALID_PARAMS, f"{method} needs a string 'name'")
    arguments = params.get("arguments")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise RpcError(INVALID_PARAMS, f"{method} 'arguments' must be an object")
    return name, arguments


# -- tools --------------------------------------------------------------------------


class ToolCall(Call):
    """tools/call: arguments validated once, any failure of the tool an isError result."""

    __slots__ = ("invalid", "parsed", "tool")
    method: ClassVar[str] = "tools/call"

    def __init__(
        self, tool: ToolDef, arguments: Mapping[str, Any], parsed: BaseModel | None, invalid: str
    ) -> None:
        super().__init__(tool.name, arguments, tool.accept_unasked)
        self.tool = tool
        self.parsed = parsed
        self.invalid = invalid

    @property
    def task(self) -> str | None:
        return self.tool.task

    @property
    def task_ttl_seconds(self) -> float | None:
        return self.tool.task_ttl_seconds

    @classmethod
    def parse(cls, registry: Registry, params: Mapping[str, Any]) -> ToolCall:
        name, arguments = _name_and_arguments(cls.method, params)
        tool = registry.tools.get(name)
        if tool is None:
            raise RpcError(INVALID_PARAMS, f"Unknown tool: {clip(name)}")
        try:
            return cls(tool, arguments, tool.parse_arguments(arguments), "")
        except ValidationError as error:
            return cls(tool, arguments, None, describe_validation_error(error))

    async def run(self, context: Context) -> Any:
        name = self.target
        if self.parsed is None:
            # server/tools: input validation errors are tool results the model can act on.
            return ToolResult.error(f"Invalid arguments for tool {name!r}: {self.invalid}")
        try:
            return await self.tool.call(self.parsed, context)
        except InvalidInputResponse:
            raise
        except ToolError as error:
            # A tool may build its message from a library's exception, which can quote secrets.
            return ToolResult.error(redact_secrets(str(error)))
        except RequestCancelled:
            # The transport sends nothing for a cancelled request; this result goes nowhere.
            _logger.info("tool %r stopped: the client cancelled the call", name)
            return ToolResult.error(f"Tool {name!r} was cancelled.")
        except Exception as error:
            if context.in_task and isinstance(error, RpcError):
                # tasks "Task Execution Errors": only a JSON-RPC error ends the task `failed`
                # (with that error); any other failure of the tool is a tool-level outcome, the
                # same isError result the call gives inline, and the task ends `completed`.
                raise
            # The message may hold secrets from a library; the log gets the whole story.
            _logger.exception("tool %r raised", name)
            return ToolResult.error(
                f"Tool {name!r} failed with {type(error).__name__}; see the server log."
            )

    def finish(self, outcome: Any) -> JSONObject:
        return _tool_result(self.tool, outcome)

    def refuse(self, message: str) -> JSONObject:
        # server/tools: a failure the model can read and act on, not a protocol error.
        return ToolResult.error(message).to_wire()


# -- prompts ------------------------------------------------------------------------


class PromptCall(Call):
    """prompts/get: arguments that do not fit are -32602, a failing prompt -32603."""

    __slots__ = ("parsed", "prompt")
    method: ClassVar[str] = "prompts/get"

    def __init__(self, prompt: PromptDef, arguments: Mapping[str, Any], parsed: BaseModel) -> None:
        super().__init__(prompt.name, arguments, prompt.accept_unasked)
        self.prompt = prompt
        self.parsed = parsed

    @classmethod
    def parse(cls, registry: Registry, params: Mapping[str, Any]) -> PromptCall:
        name, arguments = _name_and_arguments(cls.method, params)
        prompt = registry.prompts.get(name)
        if prompt is None:
            raise RpcError(INVALID_PARAMS, f"Unknown prompt: {clip(name)}")
        try:
            parsed = prompt.signature.model.model_validate(arguments)
        except ValidationError as error:
            raise RpcError(
                INVALID_PARAMS,
                f"Invalid arguments for prompt {name!r}: {describe_validation_error(error)}",
            ) from None
        return cls(prompt, arguments, parsed)

    async def run(self, context: Context) -> Any:
        try:
            return await self.prompt.call(self.parsed, context)
        except InvalidInputResponse:
            raise
        except Exception as error:
            _logger.exception("prompt %r raised", self.target)
            raise RpcError(INTERNAL_ERROR, f"Prompt {self.target!r} failed") from error

    def finish(self, outcome: Any) -> JSONObject:
        return _prompt_result(self.prompt, outcome)


# -- resources ----------------------------------------------------------------------


class ResourceCall(Call):
    """resources/read of a resource or a template's URI; its variables are the arguments."""

    __slots__ = ("resource", "variables")
    method: ClassVar[str] = "resources/read"

    def __init__(self, uri: str, resource: ResourceDef, variables: Mapping[str, str]) -> None:
        super().__init__(uri, {})
        self.resource = resource
        self.variables = variables

    @classmethod
    def parse(cls, registry: Registry, params: Mapping[str, Any]) -> ResourceCall:
        uri = params.get("uri")
        if not isinstance(uri, str):
            raise RpcError(INVALID_PARAMS, "resources/read needs a string 'uri'")
        found = registry.find_resource(uri)
        if found is None:
            # server/resources: resource not found is -32602 in 2026-07-28 (no longer -32002).
            raise RpcError(INVALID_PARAMS, f"Resource not found: {clip(uri)}", {"uri": clip(uri)})
        return cls(uri, *found)

    async def run(self, context: Context) -> Any:
        uri = self.target
        try:
            return await self.resource.call(self.variables, context)
        except InvalidInputResponse:
            raise
        except ValidationError as error:
            raise RpcError(
                INVALID_PARAMS,
                f"Invalid resource URI {clip(uri)}: {describe_validation_error(error)}",
            ) from None
        except Exception as error:
            _logger.exception("resource %r raised", uri)
            raise RpcError(INTERNAL_ERROR, f"Reading {clip(uri)} failed") from error

    def finish(self, outcome: Any) -> JSONObject:
        return _resource_result(self.resource, self.target, outcome)


def _plain_text(result: ToolResult) -> bool:
    return result.structured is None and all(
        block.get("type") == "text" and isinstance(block.get("text"), str) and len(block) == 2
        for block in result.content
    )


def _json_safe(value: Any) -> bool:
    try:
        json_size(value)
    except ValueError:
        return False
    return True


def _tool_result(tool: ToolDef, outcome: Any) -> JSONObject:
    if isinstance(outcome, ToolResult):
        return _handmade_result(tool, outcome)
    if isinstance(outcome, str):
        return {"content": [{"type": "text", "text": outcome}]}
    if outcome is None:
        return {"content": []}
    if isinstance(outcome, BaseModel):
        # A model was validated when it was built: an instance of the declared output model
        # needs no second look, only its JSON form (model -> JSON data -> text, once each).
        structured: Any = structured_json(outcome)
        conforms = type(outcome) is tool.output_model
    else:
        structured, conforms = outcome, False
    try:
        text = structured_text(structured)
    except (TypeError, ValueError, RecursionError):
        _logger.error("tool %r returned a %s, not JSON", tool.name, type(outcome).__name__)
        return _not_json(tool)
    if not conforms and not _fits_output_schema(tool, structured):
        return _broke_output_schema(tool)
    return {"content": [{"type": "text", "text": text}], "structuredContent": structured}


def _handmade_result(tool: ToolDef, result: ToolResult) -> JSONObject:
    # A result a tool built by hand may hold anything; the ones built above are JSON by
    # construction, and the hot path should not encode every result twice to check.
    if not result.is_error and not _fits_output_schema(tool, result.structured):
        return _broke_output_schema(tool)
    wire = result.to_wire()
    if not _plain_text(result) and not _json_safe(wire):
        _logger.error("tool %r returned a result that is not JSON", tool.name)
        return _not_json(tool)
    return wire


def _fits_output_schema(tool: ToolDef, structured: Any) -> bool:
    # server/tools: with an outputSchema, servers MUST provide conforming structured results.
    if tool.output_model is None:
        return True
    try:
        tool.output_model.model_validate(structured)
    except ValidationError as error:
        _logger.error(
            "tool %r broke its outputSchema: %s", tool.name, describe_validation_error(error)
        )
        return False
    return True


def _broke_output_schema(tool: ToolDef) -> JSONObject:
    return ToolResult.error(
        f"Tool {tool.name!r} returned output that breaks its outputSchema"
    ).to_wire()


def _not_json(tool: ToolDef) -> JSONObject:
    return ToolResult.error(f"Tool {tool.name!r} returned a value that is not JSON").to_wire()


def _is_message(value: Any) -> bool:
    # schema.ts PromptMessage: {role: "user" | "assistant", content: ContentBlock}.
    return (
        isinstance(value, dict)
        and value.get("role") in ("user", "assistant")
        and isinstance(value.get("content"), dict)
        and isinstance(value["content"].get("type"), str)
    )


def _prompt_result(prompt: PromptDef, outcome: Any) -> JSONObject:
    if isinstance(outcome, str):
        messages: list[Any] = [{"role": "user", "content": text_block(outcome)}]
    elif _is_message(outcome):
        messages = [outcome]
    elif isinstance(outcome, list) and all(map(_is_message, outcome)):
        messages = outcome
    else:
        _logger.error("prompt %r returned %s, not messages", prompt.name, type(outcome).__name__)
        raise RpcError(INTERNAL_ERROR, f"Prompt {prompt.name!r} returned no messages")
    result: JSONObject = {"messages": messages}
    if prompt.description:
        result["description"] = prompt.description
    if not _json_safe(result):
        _logger.error("prompt %r returned messages that are not JSON", prompt.name)
        raise RpcError(INTERNAL_ERROR, f"Prompt {prompt.name!r} returned no messages")
    return result


def _contents_of(item: Any) -> Any:
    # An embedded resource block (embedded_text/embedded_blob) carries the same contents.
    if isinstance(item, dict) and item.get("type") == "resource":
        return item.get("resource")
    return item


def _is_contents(value: Any) -> bool:
    # schema.ts TextResourceContents | BlobResourceContents: a uri and exactly one of text/blob.
    return (
        isinstance(value, dict)
        and isinstance(value.get("uri"), str)
        and isinstance(value.get("text"), str) != isinstance(value.get("blob"), str)
    )


def _resource_result(resource: ResourceDef, uri: str, outcome: Any) -> JSONObject:
    # server/resources: the contents of the URI that was read, so a template's answer echoes
    # the concrete URI, never the template.
    if isinstance(outcome, str):
        contents: list[Any] = [text_contents(uri, outcome, mime_type=resource.mime_type)]
    elif isinstance(outcome, bytes):
        contents = [blob_contents(uri, outcome, mime_type=resource.mime_type)]
    elif isinstance(outcome, list) and outcome:
        contents = [_contents_of(item) for item in outcome]
        if not all(map(_is_contents, contents)) or not _json_safe(contents):
            _logger.error("resource %r returned contents of the wrong shape", uri)
            raise RpcError(INTERNAL_ERROR, f"Reading {clip(uri)} returned malformed contents")
    else:
        _logger.error("resource %r returned %s", uri, type(outcome).__name__)
        raise RpcError(
            INTERNAL_ERROR, f"Reading {clip(uri)} returned neither text, bytes nor contents"
        )
    return {"contents": contents}
