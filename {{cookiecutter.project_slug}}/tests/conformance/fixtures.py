"""The fixtures the MCP conformance suite calls, written with the runtime's public tool API only.

Test-only: `serve.py` beside this file imports it before it starts the server, so its tools,
prompts and resources join the project's own for a conformance run (`run.py`) and never ship:
it lives in `tests/`, not in the tools package. It imports nothing but the runtime's public
face (and pydantic, as any tool module does), so it also shows that face can express what the
suite checks, in both eras: every kind of content (text, image, audio, embedded resources, a
mix, an error), progress and log messages to the client, prompts with arguments, images and
embedded resources, text, binary and templated resources, completions, forms with defaults and
enums, a JSON Schema 2020-12 input schema, a parameter HTTP clients mirror in a header
(`x-mcp-header`), and every multi round-trip shape (one elicitation, sampling, roots, state that
must round-trip, several requests at once, several rounds, a tampered state, degrading to the
client's declared capabilities, a prompt that asks for input, a tool that cannot run without a
capability). In the 2025-11-25 era the same tools ask with real `sampling/createMessage` and
`elicitation/create`. Tools that run as tasks (the `io.modelcontextprotocol/tasks` extension):
optional and required, one that asks before its task starts, ones that ask from inside it, one
at a time or two at once, and each way a task ends (a result, a tool error, a protocol error, a
cancellation).

Names, keys, URIs and texts are the ones @modelcontextprotocol/conformance 0.2.0-alpha.12 calls
(its server scenarios: tools, prompts, resources, utils, elicitation defaults and enums, JSON
Schema 2020-12, input-required results, stateless, the custom-header check, and the tasks
extension's); a newer suite may call more, and `run.py` then names what it missed.
"""

from __future__ import annotations

import asyncio
import copy
import io
import itertools
import json
import struct
import wave
import zlib
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from {{ cookiecutter.package_name }}.mrtr_runtime import (
    Accepted,
    Cancelled,
    Context,
    Declined,
    InputRequest,
    InputRequired,
    RootsResult,
    SamplingResult,
    ToolError,
    ToolResult,
    choice_titles,
    content,
    elicit_form,
    list_roots,
    sample,
)
from {{ cookiecutter.package_name }}.tools import registry


class Name(BaseModel):
    name: str


class Color(BaseModel):
    color: str


class Confirm(BaseModel):
    ok: bool


class PromptContext(BaseModel):
    context: str


def _ask_name(message: str = "What is your name?") -> InputRequest:
    return elicit_form(message, Name)


def _ask_capital() -> InputRequest:
    return sample("What is the capital of France?", max_tokens=100)


def _ask_greeting() -> InputRequest:
    return sample("Generate a greeting", max_tokens=50)


def _accepted_name(answer: Accepted[Name] | Declined | Cancelled) -> str | None:
    return answer.content.name if isinstance(answer, Accepted) else None


def _action(answer: Accepted[Any] | Declined | Cancelled) -> str:
    return {Accepted: "accept", Declined: "decline", Cancelled: "cancel"}[type(answer)]


def _roots_text(answer: RootsResult) -> str:
    uris = ", ".join(root.uri for root in answer.roots) or "none"
    return f"{len(answer.roots)} root(s): {uris}"


# -- input-required-result-basic-elicitation, -missing-input-response, -result-type,
#    -ignore-extra-params, -validate-input --------------------------------------------------
# ignore-extra-params sends a correct `user_name` with the FIRST call, before any round asked
# for it, and expects a complete result: this fixture opts in to that key, visibly. An unasked
# answer proves nothing about what the user saw; the runtime ignores every other one.
@registry.tool(accept_unasked=("user_name",))
async def test_input_required_result_elicitation(*, ctx: Context) -> str | InputRequired:
    """Conformance: asks for the user's name (input key `user_name`), then greets them."""
    answer = ctx.form_answer("user_name", Name)
    if answer is None:  # first call, or the client answered other keys: ask (again)
        return ctx.request_input({"user_name": _ask_name()})
    name = _accepted_name(answer)
    return f"Hello, {name}!" if name else f"No name given ({_action(answer)})."


# -- input-required-result-basic-sampling ---------------------------------------------------
@registry.tool()
async def test_input_required_result_sampling(*, ctx: Context) -> str | InputRequired:
    """Conformance: asks the client's model a question (key `capital_question`)."""
    answer = ctx.input_response_as("capital_question", SamplingResult)
    if answer is None:
        return ctx.request_input({"capital_question": _ask_capital()})
    return f"The model answered: {answer.text}"


# -- input-required-result-basic-list-roots -------------------------------------------------
@registry.tool()
async def test_input_required_result_list_roots(*, ctx: Context) -> str | InputRequired:
    """Conformance: asks for the client's roots (key `client_roots`) and lists them."""
    answer = ctx.input_response_as("client_roots", RootsResult)
    if answer is None:
        return ctx.request_input({"client_roots": list_roots()})
    return f"Found {_roots_text(answer)}"


# -- input-required-result-request-state ----------------------------------------------------
@registry.tool()
async def test_input_required_result_request_state(*, ctx: Context) -> str | InputRequired:
    """Conformance: asks to confirm (key `confirm`); completes only with the echoed state."""
    answer = ctx.form_answer("confirm", Confirm)
    # An answer without requestState was never asked for by this server: ask for it properly.
    if answer is None or ctx.request_state is None:
        return ctx.request_input({"confirm": elicit_form("Please confirm", Confirm)})
    confirmed = isinstance(answer, Accepted) and answer.content.ok
    # The runtime verified the signature and binding before this handler ran.
    return f"state-ok: requestState verified; confirmed={confirmed}"


# -- input-required-result-multiple-input-requests ------------------------------------------
@registry.tool()
async def test_input_required_result_multiple_inputs(*, ctx: Context) -> str | InputRequired:
    """Conformance: asks for a name, a model-written greeting and the roots in one round."""
    name = ctx.form_answer("user_name", Name)
    greeting = ctx.input_response_as("greeting", SamplingResult)
    roots = ctx.input_response_as("client_roots", RootsResult)
    if name is None or greeting is None or roots is None:
        # Ask for everything still missing; answers already given travel in requestState.
        wanted = {
            "user_name": (name, _ask_name()),
            "greeting": (greeting, _ask_greeting()),
            "client_roots": (roots, list_roots()),
        }
        return ctx.request_input(
            {key: req for key, (answer, req) in wanted.items() if answer is None}
        )
    return f"{greeting.text} {_accepted_name(name) or 'stranger'} ({_roots_text(roots)})"


# -- input-required-result-multi-round ------------------------------------------------------
@registry.tool()
async def test_input_required_result_multi_round(*, ctx: Context) -> str | InputRequired:
    """Conformance: three rounds: name (`step1`), then favourite colour (`step2`), then done."""
    step1 = ctx.form_answer("step1", Name)
    if step1 is None:
        return ctx.request_input({"step1": _ask_name("Step 1: What is your name?")})
    step2 = ctx.form_answer("step2", Color)
    if step2 is None:
        return ctx.request_input(
            {"step2": elicit_form("Step 2: What is your favorite color?", Color)}
        )
    color = step2.content.color if isinstance(step2, Accepted) else "no colour"
    return f"{_accepted_name(step1) or 'Someone'} likes {color}"


# -- input-required-result-tampered-state ---------------------------------------------------
@registry.tool()
async def test_input_required_result_tampered_state(*, ctx: Context) -> str | InputRequired:
    """Conformance: its requestState is HMAC-signed; a tampered one never reaches this code."""
    answer = ctx.form_answer("confirm", Confirm)
    if answer is None or ctx.request_state is None:
        return ctx.request_input({"confirm": elicit_form("Please confirm", Confirm)})
    return "Confirmed with an intact requestState."


# -- input-required-result-capability-check -------------------------------------------------
@registry.tool()
async def test_input_required_result_capabilities(*, ctx: Context) -> str | InputRequired:
    """Conformance: asks only for what the client declared (elicitation, sampling, roots)."""
    candidates = {
        "user_name": _ask_name(),
        "capital_question": _ask_capital(),
        "client_roots": list_roots(),
    }
    askable = {key: request for key, request in candidates.items() if ctx.can_request(request)}
    if not askable:
        return "The client declared none of elicitation, sampling or roots; nothing to ask."
    name = ctx.form_answer("user_name", Name)
    capital = ctx.input_response_as("capital_question", SamplingResult)
    roots = ctx.input_response_as("client_roots", RootsResult)
    answers = {"user_name": name, "capital_question": capital, "client_roots": roots}
    missing = {key: request for key, request in askable.items() if answers[key] is None}
    if missing:
        return ctx.request_input(missing)
    got: list[str] = []
    if "user_name" in askable:
        got.append(f"name={_accepted_name(name) if name else None}")
    if "capital_question" in askable:
        got.append(f"model={capital.text if capital else None}")
    if "client_roots" in askable:
        got.append(f"roots={_roots_text(roots) if roots else None}")
    return "Asked only for declared capabilities: " + "; ".join(got)


# -- input-required-result-non-tool-request -------------------------------------------------
@registry.prompt()
async def test_input_required_result_prompt(
    *, ctx: Context
) -> list[dict[str, Any]] | InputRequired:
    """Conformance: a prompt that asks what context to use (key `user_context`) first."""
    answer = ctx.form_answer("user_context", PromptContext)
    if answer is None:
        return ctx.request_input(
            {"user_context": elicit_form("What context should the prompt use?", PromptContext)}
        )
    context = answer.content.context if isinstance(answer, Accepted) else "none"
    return [{"role": "user", "content": {"type": "text", "text": f"Context: {context}"}}]


# -- server-stateless ------------------------------------------------------------------------
@registry.tool()
async def test_missing_capability(*, ctx: Context) -> str | InputRequired:
    """Conformance: cannot run without sampling; a client that did not declare it gets -32021."""
    answer = ctx.input_response_as("completion", SamplingResult)
    if answer is None:
        # No can_request() fallback on purpose: the runtime refuses with
        # MissingRequiredClientCapabilityError and data.requiredCapabilities = {"sampling": {}}.
        return ctx.request_input({"completion": sample("Say hello", max_tokens=20)})
    return answer.text


@registry.tool()
async def test_streaming_elicitation(*, ctx: Context) -> str | InputRequired:
    """Conformance: elicits; the answer must be an InputRequiredResult, never a server request.

    2026-07-28 basic/transports/stdio: "The server MUST NOT write JSON-RPC requests to stdout";
    the HTTP adapter counts any it sees as a failure.
    """
    answer = ctx.form_answer("user_name", Name)
    if answer is None:
        return ctx.request_input({"user_name": _ask_name()})
    return f"Hello, {_accepted_name(answer) or 'stranger'}!"


@registry.tool()
async def test_logging_tool(*, ctx: Context) -> str:
    """Conformance: logs to the client, which gets nothing unless it asked for a level."""
    await ctx.send_log("info", "test_logging_tool ran")
    return "Logged (to a client that asked for log messages)."


_trigger_count = itertools.count(1)


@registry.tool()
async def test_trigger_tool_change() -> str:
    """Conformance: adds a tool at runtime, so listeners get notifications/tools/list_changed."""
    name = f"test_added_tool_{next(_trigger_count)}"

    async def added() -> str:
        return "A tool added at runtime."

    added.__doc__ = "Conformance: added by test_trigger_tool_change."
    registry.tool(name=name)(added)
    return f"Added tool {name}."


@registry.tool()
async def test_trigger_prompt_change() -> str:
    """Conformance: adds a prompt at runtime (notifications/prompts/list_changed)."""
    name = f"test_added_prompt_{next(_trigger_count)}"

    async def added() -> str:
        return "A prompt added at runtime."

    added.__doc__ = "Conformance: added by test_trigger_prompt_change."
    registry.prompt(name=name)(added)
    return f"Added prompt {name}."


# -- http-custom-header-server-validation ------------------------------------------------------
# basic/transports/streamable-http "Custom Headers from Tool Parameters": a string parameter
# marked `x-mcp-header` is mirrored by the client in an `Mcp-Param-Region` header, which the
# server checks against the body. Over stdio there are no headers and it is a plain parameter.
@registry.tool()
async def test_custom_header(
    region: Annotated[
        str,
        Field(
            description="Where to run; sent as Mcp-Param-Region",
            json_schema_extra={"x-mcp-header": "Region"},
        ),
    ],
) -> str:
    """Conformance: echoes a parameter that HTTP clients mirror in the Mcp-Param-Region header."""
    return f"Region: {region}"


# -- content: tools-call-simple-text, -image, -audio, -embedded-resource, -mixed-content,
#    -error ----------------------------------------------------------------------------------
def _png_pixel(red: int, green: int, blue: int) -> bytes:
    """A 1x1 RGB PNG (PNG spec: signature, IHDR, one filtered scanline in IDAT, IEND)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)  # 1x1, 8-bit RGB
    pixels = zlib.compress(bytes((0, red, green, blue)))  # filter type 0, then the pixel
    signature = b"\x89PNG\r\n\x1a\n"
    return signature + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


def _wav_silence(milliseconds: int = 10, rate: int = 8000) -> bytes:
    """A short mono 8-bit PCM WAV file of silence."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as audio:
        audio.setnchannels(1)
        audio.setsampwidth(1)
        audio.setframerate(rate)
        audio.writeframes(b"\x80" * (rate * milliseconds // 1000))
    return buffer.getvalue()


RED_PIXEL_PNG = _png_pixel(255, 0, 0)
SILENCE_WAV = _wav_silence()


@registry.tool()
async def test_simple_text() -> str:
    """Conformance: returns one text block."""
    return "This is a simple text response for testing."


@registry.tool()
async def test_image_content() -> ToolResult:
    """Conformance: returns a 1x1 red PNG as image content."""
    return ToolResult.of(content.image(RED_PIXEL_PNG, "image/png"))


@registry.tool()
async def test_audio_content() -> ToolResult:
    """Conformance: returns a short WAV as audio content."""
    return ToolResult.of(content.audio(SILENCE_WAV, "audio/wav"))


@registry.tool()
async def test_embedded_resource() -> ToolResult:
    """Conformance: returns a text resource embedded in the result."""
    return ToolResult.of(
        content.embedded_text(
            "test://embedded-resource",
            "This is an embedded resource content.",
            mime_type="text/plain",
        )
    )


@registry.tool()
async def test_multiple_content_types() -> ToolResult:
    """Conformance: returns text, an image and an embedded JSON resource, in that order."""
    return ToolResult.of(
        "Multiple content types test:",
        content.image(RED_PIXEL_PNG, "image/png"),
        content.embedded_text(
            "test://mixed-content-resource",
            json.dumps({"test": "data", "value": 123}),
            mime_type="application/json",
        ),
    )


@registry.tool()
async def test_error_handling() -> str:
    """Conformance: always fails, as a tool error (isError) and not a protocol error."""
    raise ToolError("This tool intentionally returns an error for testing")


# -- progress and logging: tools-call-with-progress, tools-call-with-logging ------------------
STEP_SECONDS = 0.05  # the scenarios ask for ~50 ms between notifications


@registry.tool()
async def test_tool_with_progress(*, ctx: Context) -> str:
    """Conformance: reports 0, 50 and 100 of 100 (when the caller sent a progressToken)."""
    for step, progress in enumerate((0, 50, 100)):
        if step:
            await asyncio.sleep(STEP_SECONDS)
        await ctx.report_progress(progress, 100)
    return "Progress reported: 0, 50, 100 of 100."


@registry.tool()
async def test_tool_with_logging(*, ctx: Context) -> str:
    """Conformance: sends three info log messages while it runs."""
    messages = ("Tool execution started", "Tool processing data", "Tool execution completed")
    for step, message in enumerate(messages):
        if step:
            await asyncio.sleep(STEP_SECONDS)
        await ctx.send_log("info", message)
    return "Tool with logging executed: 3 log messages sent."


# -- 2025-11-25 SSE polling: server-sse-polling ------------------------------------------------
#: The server under the suite closes a 2025-11-25 stream's connection after
#: MRTR_HTTP_SSE_POLL_SECONDS (run.py sets 1 for the suite), so a call that
#: outlasts it has its POST connection closed mid-call, with `retry`, and its result goes to the GET
#: that resumes the stream with Last-Event-ID. Outlasting it by half leaves half of it to the
#: resuming GET, which is itself held that long, to take the result.
RECONNECTION_SECONDS = 1.5


@registry.tool()
async def test_reconnection() -> str:
    """Conformance: outlasts the server's SSE poll bound, so that its stream is closed mid-call
    and its result is delivered on the resumed stream (SEP-1699)."""
    await asyncio.sleep(RECONNECTION_SECONDS)
    return "Reconnection test completed successfully"


# -- 2025-11-25 server-to-client requests: tools-call-sampling, tools-call-elicitation --------
# The same request_input as in 2026-07-28: the legacy era asks with a real request.
@registry.tool()
async def test_sampling(prompt: str, *, ctx: Context) -> str | InputRequired:
    """Conformance: asks the client's model to answer `prompt` (key `llm`)."""
    answer = ctx.input_response_as("llm", SamplingResult)
    if answer is None:
        return ctx.request_input({"llm": sample(prompt, max_tokens=100)})
    return f"LLM response: {answer.text}"


class UserInfo(BaseModel):
    username: str = Field(description="User's response")
    email: str = Field(description="User's email address")


@registry.tool()
async def test_elicitation(message: str, *, ctx: Context) -> str | InputRequired:
    """Conformance: asks the user for a username and an email (key `user_info`)."""
    answer = ctx.form_answer("user_info", UserInfo)
    if answer is None:
        return ctx.request_input({"user_info": elicit_form(message, UserInfo)})
    content = answer.content.model_dump() if isinstance(answer, Accepted) else None
    return f"User response: action={_action(answer)}, content={json.dumps(content)}"


class Sep1034Defaults(BaseModel):
    name: str = "John Doe"
    age: int = 30
    score: float = 95.5
    status: Literal["active", "inactive", "pending"] = "active"
    verified: bool = True


@registry.tool()
async def test_elicitation_sep1034_defaults(*, ctx: Context) -> str | InputRequired:
    """Conformance: a form whose every field (string, integer, number, enum, boolean) has a
    default (SEP-1034)."""
    answer = ctx.form_answer("defaults", Sep1034Defaults)
    if answer is None:
        form = elicit_form("Please review and update the form fields", Sep1034Defaults)
        return ctx.request_input({"defaults": form})
    content = answer.content.model_dump() if isinstance(answer, Accepted) else None
    return f"Elicitation completed: action={_action(answer)}, content={json.dumps(content)}"


class Sep1330Enums(BaseModel):
    untitledSingle: Literal["option1", "option2", "option3"]  # the suite's keys
    titledSingle: Annotated[
        Literal["value1", "value2", "value3"],
        choice_titles(
            {"value1": "First Option", "value2": "Second Option", "value3": "Third Option"}
        ),
    ]
    legacyEnum: Annotated[
        Literal["opt1", "opt2", "opt3"],
        choice_titles(
            {"opt1": "Option One", "opt2": "Option Two", "opt3": "Option Three"},
            enum_names=True,
        ),
    ]
    untitledMulti: list[Literal["option1", "option2", "option3"]]
    titledMulti: Annotated[
        list[Literal["value1", "value2", "value3"]],
        choice_titles(
            {"value1": "First Choice", "value2": "Second Choice", "value3": "Third Choice"}
        ),
    ]


@registry.tool()
async def test_elicitation_sep1330_enums(*, ctx: Context) -> str | InputRequired:
    """Conformance: a form with every enum shape of SEP-1330: untitled and titled single
    select, the deprecated enumNames, untitled and titled multi-select."""
    answer = ctx.form_answer("choices", Sep1330Enums)
    if answer is None:
        return ctx.request_input({"choices": elicit_form("Please choose", Sep1330Enums)})
    content = answer.content.model_dump() if isinstance(answer, Accepted) else None
    return f"Elicitation completed: action={_action(answer)}, content={json.dumps(content)}"


# -- json-schema-2020-12 ----------------------------------------------------------------------
SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


class ContactArguments(BaseModel):
    """The fields validate what a client sends; the schema it sees is SCHEMA_2020_12."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    address: dict[str, str] | None = None
    contactMethod: Literal["phone", "email"] | None = None  # the suite's key
    phone: str | None = None
    email: str | None = None

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        # pydantic writes neither $anchor nor if/then/else, and rejects a $ref it did not make.
        return copy.deepcopy(SCHEMA_2020_12)


@registry.tool()
async def json_schema_2020_12_tool(arguments: ContactArguments) -> str:
    """Tool with JSON Schema 2020-12 features"""
    return f"Contact: {arguments.model_dump_json(exclude_none=True)}"


# -- prompts: prompts-list, prompts-get-simple, -with-args, -embedded-resource, -with-image ----
@registry.prompt()
async def test_simple_prompt() -> str:
    """Conformance: a prompt with no arguments."""
    return "This is a simple prompt for testing."


@registry.prompt()
async def test_prompt_with_arguments(
    arg1: Annotated[str, Field(description="First test argument")],
    arg2: Annotated[str, Field(description="Second test argument")],
) -> str:
    """Conformance: a prompt with two required arguments (arg1 completes: completion-complete)."""
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@registry.prompt()
async def test_prompt_with_embedded_resource(
    resourceUri: Annotated[str, Field(description="URI of the resource to embed")],
) -> list[dict[str, Any]]:
    """Conformance: a prompt that embeds the resource it is given."""
    resource = content.embedded_text(
        resourceUri, "Embedded resource content for testing.", mime_type="text/plain"
    )
    return [
        content.prompt_message("user", resource),
        content.prompt_message("user", "Please process the embedded resource above."),
    ]


@registry.prompt()
async def test_prompt_with_image() -> list[dict[str, Any]]:
    """Conformance: a prompt that shows an image."""
    return [
        content.prompt_message("user", content.image(RED_PIXEL_PNG, "image/png")),
        content.prompt_message("user", "Please analyze the image above."),
    ]


# -- completion-complete ----------------------------------------------------------------------
CITY_WORDS = ("paris", "park", "party", "pasta", "london", "lisbon")


@registry.completion(prompt="test_prompt_with_arguments", argument="arg1")
def complete_arg1(value: str, arguments: Mapping[str, str]) -> Iterable[str]:
    """The words that start with what was typed so far."""
    return [word for word in CITY_WORDS if word.startswith(value.lower())]


@registry.completion(resource_template="test://template/{id}/data", argument="id")
def complete_template_id(value: str, arguments: Mapping[str, str]) -> Iterable[str]:
    """The ids that start with the digits typed so far."""
    return [str(number) for number in range(100, 130) if str(number).startswith(value)]


# -- resources: resources-list, -read-text, -read-binary, -templates-read, -subscribe,
#    -unsubscribe, sep-2164-resource-not-found (an unknown URI: nothing to declare) ------------
@registry.resource("test://static-text", name="static-text", mime_type="text/plain")
async def static_text() -> str:
    """Conformance: a static text resource."""
    return "This is the content of the static text resource."


@registry.resource("test://static-binary", name="static-binary", mime_type="image/png")
async def static_binary() -> bytes:
    """Conformance: a static binary resource (a 1x1 PNG)."""
    return RED_PIXEL_PNG


@registry.resource_template(
    "test://template/{id}/data", name="template-data", mime_type="application/json"
)
async def template_data(id: str) -> str:
    """Conformance: a resource template; the id comes back in the data."""
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


@registry.resource("test://watched-resource", name="watched-resource", mime_type="text/plain")
async def watched_resource() -> str:
    """Conformance: a resource clients subscribe to."""
    return "Watched resource content"


# -- tasks (io.modelcontextprotocol/tasks): tasks-lifecycle, -capability-negotiation,
#    -wire-fields, -request-state-removal, -mrtr-input, -request-headers,
#    -dispatch-and-envelope, -required-task-error, -mrtr-composition -------------------------
# A task tool calls ctx.start_task() where its long work begins. A client that declared the
# extension gets a CreateTaskResult there and the handler runs again, from the top, as the
# task (ctx.in_task); any other client gets the work inline (task="optional") or -32021 before
# the handler runs (task="required").
TICK_SECONDS = 0.05  # how often a working fixture looks for a cancellation


async def _work(ctx: Context, seconds: float) -> None:
    """Sleep `seconds` in short steps; a cancelled task (or call) stops at the next one."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while (left := deadline - loop.time()) > 0:
        ctx.check_cancelled()
        await asyncio.sleep(min(TICK_SECONDS, left))
    ctx.check_cancelled()


@registry.tool()
async def greet(name: str) -> str:
    """Conformance: says hello; never a task (a legacy `task` parameter changes nothing)."""
    return f"Hello, {name}!"


@registry.tool(task="optional")
async def slow_compute(
    seconds: Annotated[float, Field(ge=0, le=3600, description="How long the work takes")],
    label: Annotated[str, Field(description="Named in the result")],
    *,
    ctx: Context,
) -> str:
    """Conformance: works for `seconds`, as a task when the client follows tasks."""
    ctx.start_task(f"Computing {label!r} for {seconds:g} s")
    await _work(ctx, seconds)
    return f"Computed {label!r} in {seconds:g} s."


@registry.tool(task="required")
async def failing_job(*, ctx: Context) -> str:
    """Conformance: a task only; after about a second it reports a tool error (isError)."""
    ctx.start_task("Running a job that is bound to fail")
    await _work(ctx, 1.0)
    raise ToolError("failing_job failed, as it always does")


@registry.tool(task="optional")
async def protocol_error_job(*, ctx: Context) -> str:
    """Conformance: breaks with a JSON-RPC (protocol) error, which ends its task `failed`
    (tasks "Task Execution Errors"; any other failure of a tool is an isError result, and
    its task ends `completed`). `RpcError` comes from the `testing` face: a tool ordinarily
    has no protocol error of its own to raise."""
    from {{ cookiecutter.package_name }}.mrtr_runtime.testing import RpcError

    ctx.start_task("Running a job that breaks")
    await _work(ctx, 0.2)
    raise RpcError(-32603, "protocol_error_job broke on purpose")


class DeleteConfirmation(BaseModel):
    confirm: bool


@registry.tool(task="optional")
async def confirm_delete(filename: str, *, ctx: Context) -> str | InputRequired:
    """Conformance: starts its task at once, then asks the user to confirm (key `confirm`)."""
    ctx.start_task(f"Deleting {filename}")
    answer = ctx.form_answer("confirm", DeleteConfirmation)
    if answer is None:
        ask = elicit_form(f"Delete {filename}?", DeleteConfirmation)
        return ctx.request_input({"confirm": ask})
    if isinstance(answer, Accepted) and answer.content.confirm:
        return f"Deleted {filename} (a fixture: no file was touched)."
    return f"Kept {filename} ({_action(answer)})."


class Approval(BaseModel):
    name: str
    confirm: bool


@registry.tool(task="optional")
async def multi_input(*, ctx: Context) -> str | InputRequired:
    """Conformance: asks two reviewers at once (keys `first`, `second`); done when both answer."""
    ctx.start_task("Collecting two approvals")
    answers = {key: ctx.form_answer(key, Approval) for key in ("first", "second")}
    missing = {
        key: elicit_form(f"Approve as the {key} reviewer?", Approval)
        for key, answer in answers.items()
        if answer is None
    }
    if missing:
        return ctx.request_input(missing)
    approved = [
        answer.content.name
        for answer in answers.values()
        if isinstance(answer, Accepted) and answer.content.confirm
    ]
    return f"Approved by {len(approved)} of 2: {', '.join(approved) or 'nobody'}."


@registry.tool(task="required")
async def test_tool_with_task(*, ctx: Context) -> str | InputRequired:
    """Conformance: asks the user's name (key `user_name`) first, then greets them as a task."""
    answer = ctx.form_answer("user_name", Name)
    if answer is None:  # an ordinary stateless round: no task yet
        return ctx.request_input({"user_name": _ask_name()})
    name = _accepted_name(answer) or "stranger"
    ctx.start_task(f"Greeting {name}")
    await _work(ctx, 0.2)
    return f"Hello, {name}! (from a task)"
