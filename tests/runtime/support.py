"""The runtime suite's shared helpers: the runtime under its own name, a small in-test Registry,
a server over it with fixed keys, wire and subprocess helpers.

The suite runs against a baked project (``MRTR_PACKAGE`` names its import package, e.g.
``mrtr_server``) with that project's own interpreter. Importing this module registers the
project's ``<package>.mrtr_runtime`` and every one of its submodules in ``sys.modules`` as
``mrtr_runtime`` / ``mrtr_runtime.<module>``, the wings' (``mrtr_runtime.http._app``) too: the
same module objects, so ``isinstance`` holds. That is how every test imports the runtime:
``from mrtr_runtime.testing import MemoryClient``.

Every tool here exists to pin one behaviour the tests check; `deploy_stack` reproduces the
two-round deploy example exactly (confirm and an IAM role ARN, asked together). Handlers count
their calls in a `Counter` the test passes in, so a test can prove that a handler did NOT run
(for example after a tampered requestState). The end-to-end suite imports this module inside a
real server process (with ``MRTR_PACKAGE`` and this directory on ``PYTHONPATH``, see
``server_env``).
"""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, Literal


def _alias_runtime() -> tuple[str, ModuleType]:
    package = os.environ.get("MRTR_PACKAGE", "")
    if not package.isidentifier():
        raise RuntimeError(
            "set MRTR_PACKAGE to the baked project's import package (e.g. mrtr_server) and run "
            "this suite with that project's python: MRTR_PACKAGE=mrtr_server "
            ".venv/bin/python -m pytest <template>/tests/runtime"
        )
    runtime = importlib.import_module(f"{package}.mrtr_runtime")
    sys.modules["mrtr_runtime"] = runtime
    # The wings' modules too (``mrtr_runtime.http._app``), so a test that patches one patches
    # the module the server runs.
    for info in pkgutil.walk_packages(runtime.__path__, prefix=f"{runtime.__name__}."):
        try:
            module = importlib.import_module(info.name)
        except ModuleNotFoundError as missing:
            if (missing.name or "").startswith(package):
                raise
            # An optional dependency this process goes without (a test hides httptools, say):
            # that module is not served here, so nothing needs its alias.
            continue
        sys.modules["mrtr_runtime." + info.name.removeprefix(f"{runtime.__name__}.")] = module
    return package, importlib.import_module(package)


#: The baked project's import package, and its directory (an editable install: src layout).
PACKAGE, _package_module = _alias_runtime()
PROJECT = Path(_package_module.__file__ or "").resolve().parents[2]
#: This directory: the suite's helpers, and its folders of tests.
HERE = Path(__file__).resolve().parent
#: What a subprocess needs on PYTHONPATH to import this module and any test module (a server
#: script may import its test's helpers): this directory and its folders of tests.
IMPORT_PATH = (
    HERE,
    *sorted(path for path in HERE.iterdir() if path.is_dir() and (path.name[0] not in "._")),
)

import anyio  # noqa: E402 - after the alias, like everything below
from anyio.abc import Process  # noqa: E402
from anyio.streams.buffered import BufferedByteReceiveStream  # noqa: E402
from pydantic import BaseModel, Field  # noqa: E402

from mrtr_runtime import (  # noqa: E402
    Context,
    InputRequired,
    Registry,
    RootsResult,
    SamplingResult,
    ToolAnnotations,
    ToolError,
    elicit_form,
    elicit_url,
    list_roots,
    sample,
)
from mrtr_runtime._answers import ElicitResult  # noqa: E402
from mrtr_runtime._tokens import KeyRing, RequestStateCodec, parse_signing_key  # noqa: E402
from mrtr_runtime.server import Server  # noqa: E402
from mrtr_runtime.testing import (  # noqa: E402
    ClientSession,
    MemoryClient,
    RpcError,
    ToolCallResult,
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
        """The two-round deploy: confirm, then an IAM role ARN, then deploy."""
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
        counts[f"wizard:{len(handed(ctx))}"] += 1
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
            "seen": sorted(handed(ctx)),
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
        done = ctx.input_response_as("login", ElicitResult[None])
        if done is None:
            return ctx.request_input(
                {"login": elicit_url("Sign in to continue", "https://example.com/login")}
            )
        return f"sign-in: {done.action}"

    @registry.tool()
    async def always_ask(*, ctx: Context) -> str | InputRequired:
        """Never satisfied: asks again every round (for round caps)."""
        counts["always_ask"] += 1
        return ctx.request_input({f"again-{len(handed(ctx))}": elicit_form("Again?", Answer)})

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
        signing=codec if codec is not None else make_codec(),
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


def handed(ctx: Context) -> Mapping[str, Any]:
    """Every answer the runtime handed the handler this round, raw. A private attribute: a tool
    reads answers with `form_answer` / `input_response_as`; these tests check which ones arrive."""
    return ctx._answers


def accept(**content: Any) -> Json:
    """An ElicitResult that accepts with `content` (the whole result, as the spec wants)."""
    return {"action": "accept", "content": content}


def text_of(result: Mapping[str, Any] | ToolCallResult) -> str:
    """The text of a tools/call result's single text block (a wire dict or call_tool's)."""
    content = result.content if isinstance(result, ToolCallResult) else result["content"]
    assert len(content) == 1, content
    assert content[0]["type"] == "text"
    text: str = content[0]["text"]
    return text


# The deploy example's round-1 inputRequests, key for key and field for field.
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


# -- the deploy example, as the tests call it ---------------------------------------------------

DEPLOY: Json = {"name": "deploy_stack", "arguments": {"stack": "prod-api"}}
ARN = "arn:aws:iam::123456789012:role/Deploy"
BOTH_ANSWERS: Json = {"confirm": accept(confirmed=True), "role-arn": accept(arn=ARN)}


def canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


async def rpc_error(client: MemoryClient, method: str, params: Mapping[str, Any]) -> RpcError:
    """The RpcError that ``client.request(method, params)`` raises (it must raise one)."""
    try:
        await client.request(method, params)
    except RpcError as error:
        return error
    raise AssertionError(f"{method} did not fail")


# -- a real server over stdio: `support.build_registry()` in a subprocess ----------------------

BOUND = 30  # seconds for anything that waits on the subprocess(es); generous for loaded CI

SERVER_SCRIPT = """\
import os

from support import make_server

from mrtr_runtime.server import codec_from_environment, serve_stdio

serve_stdio(make_server(codec=codec_from_environment(os.environ, default_key_file=None)))
"""


def server_env(key_hex: str | None = KEY_HEX, **extra: str) -> dict[str, str]:
    """This environment minus any MRTR_* setting, plus the test key and the import path."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("MRTR_")}
    env["MRTR_PACKAGE"] = PACKAGE
    env["PYTHONPATH"] = os.pathsep.join(map(str, IMPORT_PATH))
    if key_hex is not None:
        env["MRTR_SIGNING_KEY"] = key_hex
    env.update(extra)
    return env


#: A raw 2025-11-25 `initialize` (for the tests that speak to the pipes themselves).
LEGACY_INITIALIZE: Json = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}

#: What a modern client without handlers declares when it will answer forms itself.
FORMS: Json = {"elicitation": {}}


def assert_clean_exit(returncode: int | None, stderr: str) -> None:
    assert returncode == 0, stderr
    assert "Traceback" not in stderr, stderr


def unmatched_errors(session: ClientSession) -> list[tuple[object, object]]:
    """(id, code) of each error response the session could not match to a request."""
    found: list[tuple[object, object]] = []
    for response in session.unmatched_responses:
        error: Any = response["error"]
        found.append((response["id"], error["code"]))
    return found


# -- raw pipes (for what ClientSession deliberately hides: ids, signals, end of output) ---------


@asynccontextmanager
async def raw_server(command: list[str], env: Mapping[str, str]) -> AsyncIterator[Process]:
    process = await anyio.open_process(command, env=dict(env))
    try:
        yield process
    finally:
        if process.returncode is None:
            process.kill()
        with anyio.CancelScope(shield=True):
            await process.aclose()


def reader(process: Process) -> BufferedByteReceiveStream:
    assert process.stdout is not None
    return BufferedByteReceiveStream(process.stdout)


async def send(process: Process, message: Json | bytes) -> None:
    assert process.stdin is not None
    data = message if isinstance(message, bytes) else json.dumps(message).encode() + b"\n"
    await process.stdin.send(data)


async def read_message(stdout: BufferedByteReceiveStream) -> Json:
    line = await stdout.receive_until(b"\n", 16 * 1024 * 1024)
    message: Json = json.loads(line)
    return message


async def read_until_end(stdout: BufferedByteReceiveStream) -> list[Json]:
    messages: list[Json] = []
    while True:
        try:
            messages.append(await read_message(stdout))
        except (anyio.EndOfStream, anyio.IncompleteRead):
            return messages


async def read_stderr(process: Process) -> str:
    assert process.stderr is not None
    chunks: list[bytes] = []
    async for chunk in process.stderr:
        chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


def request(request_id: int | str, method: str, params: Json | None = None, **meta: Any) -> Json:
    body = dict(params or {})
    body["_meta"] = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
        **meta,
    }
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": body}


async def next_round(
    client: MemoryClient,
    method: str,
    params: Mapping[str, Any],
    previous: Mapping[str, Any],
    answers: Mapping[str, Any],
) -> Json:
    """The retry after ``previous`` (an input_required result): ``params`` plus ``answers`` as
    ``inputResponses`` and ``previous``'s ``requestState``."""
    retry = {**params, "inputResponses": answers, "requestState": previous["requestState"]}
    return await client.request(method, retry)
