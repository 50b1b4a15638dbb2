"""Shared test helpers: a small in-test Registry, a server over it with fixed keys, wire helpers.

Every tool here exists to pin one behaviour the tests check; `deploy_stack` reproduces the
design notes' Q2 worked example exactly. Handlers count their calls in a `Counter` the test
passes in, so a test can prove that a handler did NOT run (for example after a tampered
requestState). The end-to-end suite imports this module inside a real server process.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Mapping
from typing import Any, Literal

import anyio
from pydantic import BaseModel, Field

from {{ cookiecutter.package_name }}.mrtr_runtime import (
    Context,
    ElicitResult,
    InputRequired,
    KeyRing,
    Registry,
    RequestStateCodec,
    RootsResult,
    SamplingResult,
    Server,
    ToolAnnotations,
    ToolError,
    elicit_form,
    elicit_url,
    list_roots,
    parse_signing_key,
    sample,
)

__all__ = (
    "ALL_CAPABILITIES",
    "DEPLOY_INPUT_REQUESTS",
    "KEY_HEX",
    "META_SERVER_INFO",
    "MODERN",
    "OTHER_KEY_HEX",
    "SERVER_NAME",
    "SERVER_VERSION",
    "THIRD_KEY_HEX",
    "Json",
    "accept",
    "build_registry",
    "make_codec",
    "make_server",
    "meta",
    "text_of",
)

Json = dict[str, Any]

MODERN = "2026-07-28"
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"

#: Fixed test keys (never used outside tests): tokens are reproducible and a second server
#: "restarted" with the same key can finish a round the first one started.
KEY_HEX = "51ea71e9075fc4cceb48b309c5d7584350d5e384dc6896ba6574aa8a5eefc334"
OTHER_KEY_HEX = "020af1edd046383cb5d55eeef4d1ace0c5fe5f4005ae4a50c8aaa56817a3ae7d"
THIRD_KEY_HEX = "66229b396922cbe12be58bec5a081c13eef826f58eb2564aa151d7feee5e304f"

ALL_CAPABILITIES: Json = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}

SERVER_NAME = "support-server"
SERVER_VERSION = "9.9.9"


# -- answer models for the forms the tools ask ------------------------------------------------


class Confirm(BaseModel):
    confirmed: bool


class RoleArn(BaseModel):
    arn: str = Field(pattern="^arn:aws:iam::")


class Name(BaseModel):
    name: str


class Colour(BaseModel):
    colour: Literal["red", "green", "blue"]


class Size(BaseModel):
    size: int


class Answer(BaseModel):
    text: str


# -- the registry -------------------------------------------------------------------------------


def build_registry(calls: Counter[str] | None = None) -> Registry:
    """A fresh registry of small tools, one prompt, two resources; `calls` counts handler runs."""
    counts: Counter[str] = Counter() if calls is None else calls
    registry = Registry()
    gates: dict[str, anyio.Event] = {}

    def gate_event(name: str) -> anyio.Event:
        return gates.setdefault(name, anyio.Event())

    @registry.tool(annotations=ToolAnnotations(read_only=True))
    async def echo(text: str) -> str:
        """Say `text` back."""
        counts["echo"] += 1
        return text

    @registry.tool()
    async def deploy_stack(stack: str, *, ctx: Context) -> str | InputRequired:
        """The design notes' Q2 deploy: confirm, then an IAM role ARN, then deploy."""
        counts["deploy_stack"] += 1
        confirm = ctx.input_response_as("confirm", ElicitResult[Confirm])
        role = ctx.input_response_as("role-arn", ElicitResult[RoleArn])
        if confirm is not None and not (
            confirm.accepted and confirm.content and confirm.content.confirmed
        ):
            return "Deploy cancelled by user."
        wanted = {
            "confirm": (
                confirm,
                elicit_form(f"Deploy stack '{stack}' to AWS production?", Confirm),
            ),
            "role-arn": (role, elicit_form("Provide the IAM role ARN to assume:", RoleArn)),
        }
        missing = {key: request for key, (answer, request) in wanted.items() if answer is None}
        if missing or confirm is None or role is None:
            return ctx.request_input(missing)
        if not role.accepted:
            return "Deploy cancelled: no role given."
        return f"Deployed {stack} successfully"

    @registry.tool()
    async def wizard(*, ctx: Context) -> dict[str, object] | InputRequired:
        """Three rounds, one question each: name, then colour, then size."""
        counts["wizard"] += 1
        counts[f"wizard:{len(ctx.input_responses)}"] += 1
        steps = (("name", Name), ("colour", Colour), ("size", Size))
        for key, model in steps:
            if ctx.input_response_as(key, ElicitResult[model]) is None:
                return ctx.request_input({key: elicit_form(f"Your {key}?", model)})
        name = ctx.input_response_as("name", ElicitResult[Name])
        colour = ctx.input_response_as("colour", ElicitResult[Colour])
        size = ctx.input_response_as("size", ElicitResult[Size])
        assert name and name.content and colour and colour.content and size and size.content
        return {
            "name": name.content.name,
            "colour": colour.content.colour,
            "size": size.content.size,
            "seen": sorted(ctx.input_responses),
        }

    async def ask_body(label: str, topic: str, ctx: Context) -> str | InputRequired:
        counts[label] += 1
        answer = ctx.input_response_as("answer", ElicitResult[Answer])
        if answer is None:
            return ctx.request_input({"answer": elicit_form(f"What about {topic}?", Answer)})
        if not answer.accepted or answer.content is None:
            return f"{topic}: no answer ({answer.action})"
        return f"{topic}: {answer.content.text}"

    @registry.tool()
    async def ask(topic: str, *, ctx: Context) -> str | InputRequired:
        """One question about `topic`."""
        return await ask_body("ask", topic, ctx)

    @registry.tool()
    async def ask_other(topic: str, *, ctx: Context) -> str | InputRequired:
        """The same question as `ask`, under another name (for cross-tool replay)."""
        return await ask_body("ask_other", topic, ctx)

    @registry.tool()
    async def summarise(topic: str, *, ctx: Context) -> str | InputRequired:
        """Asks the user for a summary; falls back to the client's model without elicitation."""
        counts["summarise"] += 1
        by_form = elicit_form(f"Summarise {topic}", Answer)
        by_model = sample(f"Summarise {topic} in one line.", max_tokens=50)
        if ctx.can_request(by_form):
            form = ctx.input_response_as("form", ElicitResult[Answer])
            if form is None:
                return ctx.request_input({"form": by_form})
            return f"user: {form.content.text if form.content else form.action}"
        if ctx.can_request(by_model):
            answer = ctx.input_response_as("model", SamplingResult)
            if answer is None:
                return ctx.request_input({"model": by_model})
            return f"model: {answer.text}"
        # Neither: ask anyway, and let the runtime answer -32021 for us.
        return ctx.request_input({"form": by_form})

    @registry.tool()
    async def roots_count(*, ctx: Context) -> str | InputRequired:
        """How many roots the client exposes."""
        counts["roots_count"] += 1
        roots = ctx.input_response_as("roots", RootsResult)
        if roots is None:
            return ctx.request_input({"roots": list_roots()})
        return f"{len(roots.roots)} roots"

    @registry.tool()
    async def sign_in(*, ctx: Context) -> str | InputRequired:
        """Sends the user to a sign-in page (URL-mode elicitation)."""
        counts["sign_in"] += 1
        done = ctx.input_response("login")
        if done is None:
            return ctx.request_input(
                {"login": elicit_url("Sign in to continue", "https://example.com/login")}
            )
        return f"sign-in: {done.get('action')}"

    @registry.tool()
    async def always_ask(*, ctx: Context) -> str | InputRequired:
        """Never satisfied: asks again every round (for round caps)."""
        counts["always_ask"] += 1
        return ctx.request_input(
            {f"again-{len(ctx.input_responses)}": elicit_form("Again?", Answer)}
        )

    @registry.tool()
    async def load_shed(*, ctx: Context) -> str | InputRequired:
        """Asks for nothing once (a state-only round), then finishes."""
        counts["load_shed"] += 1
        if ctx.request_state is None:
            return ctx.request_input({})
        return "served after a state-only round"

    @registry.tool()
    async def progress_steps(*, ctx: Context) -> str:
        """Reports progress 1, 1, 0.5, 2, 3 of 3; the repeats and the step back must be dropped."""
        counts["progress_steps"] += 1
        for value in (1.0, 1.0, 0.5, 2.0):
            await ctx.report_progress(value, 3.0, f"step {value}")
        await ctx.report_progress(3.0)
        return "done"

    @registry.tool()
    async def gate(name: str, *, ctx: Context) -> str:
        """Waits until `release(name)` is called (concurrency and cancellation tests).

        With a progressToken it reports progress 1 once it is waiting, so a test knows the call
        is in flight without sleeping.
        """
        counts["gate"] += 1
        event = gate_event(name)
        await ctx.report_progress(1, message=f"gate {name} waiting")
        await event.wait()
        return f"gate {name} opened"

    @registry.tool()
    async def release(name: str) -> str:
        """Opens `gate(name)`."""
        counts["release"] += 1
        gate_event(name).set()
        return f"released {name}"

    @registry.tool()
    def stuck(seconds: float = 60.0) -> str:
        """A blocking (plain def) tool that hangs in its worker thread (shutdown tests)."""
        counts["stuck"] += 1
        threading.Event().wait(seconds)
        return "unstuck"

    @registry.tool()
    def spawn_child() -> str:
        """Runs a child process that inherits stdin/stdout: it must see neither pipe."""
        counts["spawn_child"] += 1
        script = (
            "import os, sys; n = len(sys.stdin.buffer.read()); "
            "os.write(1, f'CHILD-STDIN-BYTES={n}\\n'.encode())"
        )
        done = subprocess.run([sys.executable, "-c", script], check=False, timeout=30)
        return f"child exited {done.returncode}"

    @registry.tool()
    async def shout(text: str) -> str:
        """A careless tool that prints; on stdio the print must not reach the wire."""
        counts["shout"] += 1
        print(text)  # noqa: T201 - the stray print under test
        sys.stdout.flush()
        return "shouted"

    @registry.tool()
    async def measure() -> dict[str, float]:
        """Returns a float JSON cannot carry (NaN)."""
        counts["measure"] += 1
        return {"value": float("nan")}

    @registry.tool()
    async def refuse(reason: str) -> str:
        """Raises ToolError(reason)."""
        counts["refuse"] += 1
        raise ToolError(reason)

    @registry.prompt(name="ask")
    async def ask_as_prompt(topic: str, *, ctx: Context) -> str | InputRequired:
        """A prompt named like the `ask` tool, with the same arguments (cross-method replay)."""
        return await ask_body("prompt:ask", topic, ctx)

    @registry.resource("memo://greeting", mime_type="text/plain")
    async def greeting(*, ctx: Context) -> str | InputRequired:
        """A greeting that needs the reader's name."""
        counts["greeting"] += 1
        name = ctx.input_response_as("name", ElicitResult[Name])
        if name is None:
            return ctx.request_input({"name": elicit_form("Who is reading?", Name)})
        return f"Hello, {name.content.name if name.content else 'stranger'}!"

    @registry.resource_template("memo://notes/{slug}", mime_type="text/plain")
    async def note(slug: str) -> str:
        """A note by slug."""
        counts["note"] += 1
        return f"note {slug}"

    return registry


# -- servers and codecs -------------------------------------------------------------------------


def make_codec(
    key_hex: str = KEY_HEX,
    *,
    previous: tuple[str, ...] = (),
    ttl_seconds: int = 600,
    clock: Any = None,
    audience: str = SERVER_NAME,
) -> RequestStateCodec:
    """A codec bound, like the app's, to the name of the server it signs for (``make_server``)."""
    ring = KeyRing(
        parse_signing_key(key_hex), tuple(parse_signing_key(other) for other in previous)
    )
    if clock is None:
        return RequestStateCodec(ring, audience=audience, ttl_seconds=ttl_seconds)
    return RequestStateCodec(ring, audience=audience, ttl_seconds=ttl_seconds, clock=clock)


def make_server(
    *,
    codec: RequestStateCodec | None = None,
    calls: Counter[str] | None = None,
    registry: Registry | None = None,
    instructions: str | None = None,
) -> Server:
    """A server over `build_registry(calls)` (or `registry`), signing with KEY_HEX by default."""
    return Server(
        name=SERVER_NAME,
        version=SERVER_VERSION,
        registry=registry if registry is not None else build_registry(calls),
        state=codec if codec is not None else make_codec(),
        instructions=instructions,
    )


# -- wire helpers -------------------------------------------------------------------------------


def meta(
    capabilities: Mapping[str, Any] | None = None,
    *,
    version: object = MODERN,
    **extra: Any,
) -> Json:
    """A modern per-request `_meta` (2026-07-28 basic/index), plus any extra keys."""
    built: Json = {
        META_VERSION: version,
        META_CAPABILITIES: dict(ALL_CAPABILITIES if capabilities is None else capabilities),
    }
    built.update(extra)
    return built


def accept(**content: Any) -> Json:
    """An ElicitResult that accepts with `content` (the whole result, as the spec wants)."""
    return {"action": "accept", "content": content}


def text_of(result: Mapping[str, Any]) -> str:
    """The text of a tools/call result's single text block."""
    content = result["content"]
    assert len(content) == 1, content
    assert content[0]["type"] == "text"
    text: str = content[0]["text"]
    return text


# The design notes' Q2 round-1 inputRequests, key for key and field for field.
DEPLOY_INPUT_REQUESTS: Json = {
    "confirm": {
        "method": "elicitation/create",
        "params": {
            "message": "Deploy stack 'prod-api' to AWS production?",
            "requestedSchema": {
                "type": "object",
                "properties": {"confirmed": {"type": "boolean"}},
                "required": ["confirmed"],
            },
        },
    },
    "role-arn": {
        "method": "elicitation/create",
        "params": {
            "message": "Provide the IAM role ARN to assume:",
            "requestedSchema": {
                "type": "object",
                "properties": {"arn": {"type": "string", "pattern": "^arn:aws:iam::"}},
                "required": ["arn"],
            },
        },
    },
}
