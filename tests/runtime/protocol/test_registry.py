"""The Registry: declaring tools/prompts/resources, their schemas, and how calls turn into results.

server/tools: `inputSchema` is a JSON Schema object; names are 1-128 of [A-Za-z0-9_.-]; tools come
in a deterministic order; execution errors are `isError` results (never protocol errors); with an
`outputSchema` the structured result MUST conform; structured content SHOULD also be sent as JSON
text. client/elicitation: form schemas are flat objects of primitives.
"""

from __future__ import annotations

import base64
import json
import logging
import sys
import threading
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field, RootModel

from mrtr_runtime import (
    Context,
    InputRequired,
    Registry,
    ToolAnnotations,
    ToolError,
    ToolResult,
    elicit_form,
)
from mrtr_runtime.testing import MemoryClient
from support import ALL_CAPABILITIES, PACKAGE, Json, make_server, text_of

pytestmark = pytest.mark.anyio


class DeployArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    stack: str = Field(description="The stack to deploy")
    replicas: int = 1


class Report(BaseModel):
    status: Literal["ok", "failed"]
    count: int


class Inner(BaseModel):
    value: str


class Nested(BaseModel):
    inner: Inner


class WithList(BaseModel):
    tags: list[str]


class WithDict(BaseModel):
    extra: dict[str, str]


class Form(BaseModel):
    name: str
    age: int = Field(default=30, description="Age in years", ge=0, le=150)
    email: str = Field(title="E-mail address", pattern="^[^@]+@[^@]+$")
    nickname: str | None = None
    newsletter: bool = False
    plan: Literal["free", "pro"] = "free"
    ratio: float | None = Field(default=None, description="Between 0 and 1")


class AllOptional(BaseModel):
    note: str | None = None


class Aliased(BaseModel):
    role_arn: str = Field(alias="role-arn")


async def call(registry: Registry, name: str, arguments: Json | None = None) -> Json:
    client = MemoryClient(make_server(registry=registry), capabilities=ALL_CAPABILITIES)
    params: Json = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    return await client.request("tools/call", params)


async def listed(registry: Registry) -> list[Json]:
    tools: list[Json] = (
        await MemoryClient(make_server(registry=registry), capabilities=ALL_CAPABILITIES).request(
            "tools/list", {}
        )
    )["tools"]
    return tools


# -- schemas -----------------------------------------------------------------------------------


async def test_annotated_parameters_become_a_closed_object_schema() -> None:
    registry = Registry()

    @registry.tool()
    async def deploy(stack: str, region: str = "us-east-1", *, ctx: Context) -> str:
        """Deploy a stack."""
        return f"{stack}@{region}"

    (tool,) = await listed(registry)
    schema = tool["inputSchema"]
    assert schema["type"] == "object"
    assert set(schema["properties"]) == {"stack", "region"}
    assert schema["properties"]["stack"]["type"] == "string"
    assert schema["properties"]["region"]["default"] == "us-east-1"
    assert schema["required"] == ["stack"]
    assert schema["additionalProperties"] is False
    assert tool["description"] == "Deploy a stack."
    assert text_of(await call(registry, "deploy", {"stack": "api"})) == "api@us-east-1"
    unknown = await call(registry, "deploy", {"stack": "api", "zone": "b"})
    assert unknown["isError"] is True
    assert "zone" in text_of(unknown)


async def test_a_tool_without_parameters_has_an_empty_closed_object_schema() -> None:
    registry = Registry()

    @registry.tool()
    async def now() -> str:
        return "now"

    (tool,) = await listed(registry)
    assert tool["inputSchema"]["type"] == "object"
    assert tool["inputSchema"].get("properties", {}) == {}
    assert tool["inputSchema"]["additionalProperties"] is False
    assert "description" not in tool
    assert text_of(await call(registry, "now")) == "now"


async def test_one_pydantic_model_parameter_is_the_whole_arguments_object() -> None:
    registry = Registry()
    seen: list[DeployArgs] = []

    @registry.tool()
    async def deploy(args: DeployArgs, *, ctx: Context) -> str:
        seen.append(args)
        return "ok"

    (tool,) = await listed(registry)
    assert tool["inputSchema"] == DeployArgs.model_json_schema()
    await call(registry, "deploy", {"stack": "web", "replicas": 3})
    assert seen == [DeployArgs(stack="web", replicas=3)]


async def test_the_context_parameter_is_found_by_its_annotation_whatever_its_name() -> None:
    registry = Registry()
    contexts: list[object] = []

    @registry.tool()
    async def first(text: str, *, c: Context) -> str:
        contexts.append(c)
        return text

    @registry.tool()
    def second(text: str, *, the_context: Context) -> str:
        contexts.append(the_context)
        return text

    schemas = [tool["inputSchema"] for tool in await listed(registry)]
    assert all(set(schema["properties"]) == {"text"} for schema in schemas)
    await call(registry, "first", {"text": "a"})
    await call(registry, "second", {"text": "b"})
    assert all(isinstance(context, Context) for context in contexts)
    assert len(contexts) == 2


async def test_parameters_named_like_model_attributes_are_declared_without_warnings() -> None:
    registry = Registry()

    @registry.tool()
    async def query(schema: str, json: str = "{}", copy: bool = False) -> str:
        return f"{schema}/{json}/{copy}"

    result = await call(registry, "query", {"schema": "public", "copy": True})
    assert text_of(result) == "public/{}/True"


def test_a_parameter_without_an_annotation_is_refused_at_declaration() -> None:
    registry = Registry()

    def untyped(stack, region: str) -> str:  # type: ignore[no-untyped-def]
        return ""

    with pytest.raises(TypeError, match="stack"):
        registry.tool()(untyped)


async def test_field_descriptions_reach_the_schema_and_prompt_arguments() -> None:
    registry = Registry()

    @registry.tool()
    async def find(query: Annotated[str, Field(description="What to look for")]) -> str:
        return query

    @registry.prompt()
    async def brief(
        topic: Annotated[str, Field(description="The topic")], style: str = "short"
    ) -> str:
        return f"{topic}/{style}"

    (tool,) = await listed(registry)
    assert tool["inputSchema"]["properties"]["query"]["description"] == "What to look for"
    prompts = (
        await MemoryClient(make_server(registry=registry), capabilities=ALL_CAPABILITIES).request(
            "prompts/list", {}
        )
    )["prompts"]
    assert prompts[0]["arguments"] == [
        {"name": "topic", "required": True, "description": "The topic"},
        {"name": "style", "required": False},
    ]


async def test_title_description_and_annotations_are_published() -> None:
    registry = Registry()

    @registry.tool(
        "stack.status",
        title="Stack status",
        description="Explicit wins over the docstring.",
        annotations=ToolAnnotations(
            title="Status", read_only=True, destructive=False, idempotent=True, open_world=False
        ),
    )
    async def status() -> str:
        """Docstring."""
        return ""

    (tool,) = await listed(registry)
    assert tool["name"] == "stack.status"
    assert tool["title"] == "Stack status"
    assert tool["description"] == "Explicit wins over the docstring."
    assert tool["annotations"] == {
        "title": "Status",
        "readOnlyHint": True,
        "destructiveHint": False,
        "idempotentHint": True,
        "openWorldHint": False,
    }


# -- names and order ---------------------------------------------------------------------------


async def test_tools_are_listed_in_declaration_order_every_time() -> None:
    registry = Registry()
    for name in ("zeta", "alpha", "mid.dle", "b-2"):

        async def handler() -> str:
            return ""

        registry.tool(name)(handler)
    first = [tool["name"] for tool in await listed(registry)]
    second = [tool["name"] for tool in await listed(registry)]
    assert first == second == ["zeta", "alpha", "mid.dle", "b-2"]


def test_load_package_imports_public_modules_sorted_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "ordered_tools_pkg"
    package.mkdir()
    runtime = Registry.__module__.rpartition(".")[0]  # the vendored runtime package
    (package / "__init__.py").write_text(f"from {runtime} import Registry\nregistry = Registry()\n")
    for module in ("b_second", "a_first", "_hidden"):
        (package / f"{module}.py").write_text(
            "from . import registry\n\n\n"
            f"@registry.tool()\nasync def {module.strip('_')}() -> str:\n    return ''\n"
        )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        import ordered_tools_pkg  # type: ignore[import-not-found]

        ordered_tools_pkg.registry.load_package("ordered_tools_pkg")
        assert list(ordered_tools_pkg.registry.tools) == ["a_first", "b_second"]
    finally:
        for name in [name for name in sys.modules if name.startswith("ordered_tools_pkg")]:
            del sys.modules[name]


def test_a_tool_declared_twice_is_refused() -> None:
    registry = Registry()

    async def handler() -> str:
        return ""

    registry.tool("same")(handler)
    with pytest.raises(ValueError, match="twice"):
        registry.tool("same")(handler)


def test_prompts_and_resources_declared_twice_are_refused() -> None:
    registry = Registry()

    async def handler() -> str:
        return ""

    registry.prompt("p")(handler)
    with pytest.raises(ValueError, match="twice"):
        registry.prompt("p")(handler)
    registry.resource("memo://x")(handler)
    with pytest.raises(ValueError, match="twice"):
        registry.resource("memo://x")(handler)


@pytest.mark.parametrize(
    "name",
    ["has space", "slash/name", "x" * 129, "caf\u00e9", "tab\t", "colon:name", "quote'"],
)
def test_an_invalid_tool_name_is_refused(name: str) -> None:
    registry = Registry()

    async def handler() -> str:
        return ""

    with pytest.raises(ValueError, match="tool name"):
        registry.tool(name)(handler)


def test_an_empty_tool_name_is_refused_not_replaced_by_the_function_name() -> None:
    registry = Registry()

    async def handler() -> str:
        return ""

    with pytest.raises(ValueError, match="tool name"):
        registry.tool("")(handler)


@pytest.mark.parametrize("name", ["a", "x" * 128, "snake_case", "dot.ted", "kebab-case", "MiXeD09"])
def test_a_valid_tool_name_is_accepted(name: str) -> None:
    registry = Registry()

    async def handler() -> str:
        return ""

    registry.tool(name)(handler)
    assert list(registry.tools) == [name]


# -- running handlers --------------------------------------------------------------------------


async def test_a_plain_def_handler_runs_in_a_worker_thread() -> None:
    registry = Registry()

    @registry.tool()
    def blocking() -> str:
        return str(threading.get_ident())

    @registry.tool()
    async def nonblocking() -> str:
        return str(threading.get_ident())

    loop_thread = str(threading.get_ident())
    assert text_of(await call(registry, "nonblocking")) == loop_thread
    assert text_of(await call(registry, "blocking")) != loop_thread


async def test_a_tool_error_becomes_an_is_error_result_with_its_message() -> None:
    registry = Registry()

    @registry.tool()
    async def strict(stack: str) -> str:
        raise ToolError(f"Stack {stack!r} does not exist; list stacks first.")

    result = await call(registry, "strict", {"stack": "nope"})
    assert result["isError"] is True
    assert text_of(result) == "Stack 'nope' does not exist; list stacks first."


async def test_an_unexpected_exception_is_an_is_error_result_that_hides_the_message(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = Registry()

    @registry.tool()
    async def leaky() -> str:
        raise RuntimeError("password=hunter2")

    with caplog.at_level(logging.ERROR):
        result = await call(registry, "leaky")
    assert result["isError"] is True
    message = text_of(result)
    assert "hunter2" not in message
    assert "RuntimeError" in message
    assert "leaky" in message
    # The log has the whole story, traceback included.
    (record,) = [record for record in caplog.records if record.exc_info]
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None
    assert isinstance(record.exc_info[1], RuntimeError)


async def test_the_server_keeps_serving_after_a_tool_raises() -> None:
    registry = Registry()

    @registry.tool()
    def boom() -> str:
        raise ZeroDivisionError

    @registry.tool()
    def fine() -> str:
        return "fine"

    client = MemoryClient(make_server(registry=registry), capabilities=ALL_CAPABILITIES)
    assert (await client.request("tools/call", {"name": "boom"}))["isError"] is True
    assert text_of(await client.request("tools/call", {"name": "fine"})) == "fine"


@pytest.mark.parametrize(
    "value",
    [{"when": object()}, {1, 2}, {"bytes": b"\x00"}, [lambda: None]],
    ids=["object", "set", "bytes", "function"],
)
async def test_a_return_value_that_is_not_json_is_an_is_error_result(value: object) -> None:
    registry = Registry()

    @registry.tool()
    async def odd() -> object:
        return value

    result = await call(registry, "odd")
    assert result["isError"] is True
    assert "not JSON" in text_of(result)


@pytest.mark.parametrize("number", [float("nan"), float("inf"), float("-inf")])
async def test_a_return_value_holding_nan_or_infinity_is_an_is_error_result(number: float) -> None:
    registry = Registry()

    @registry.tool()
    async def measure() -> dict[str, float]:
        return {"value": number}

    result = await call(registry, "measure")
    assert result["isError"] is True
    assert "not JSON" in text_of(result)


async def test_a_tool_result_holding_nan_is_an_is_error_result() -> None:
    registry = Registry()

    @registry.tool()
    async def measure() -> ToolResult:
        return ToolResult.of("about NaN", structured={"value": float("nan")})

    result = await call(registry, "measure")
    assert result["isError"] is True


async def test_a_dict_return_is_structured_content_and_its_json_text() -> None:
    registry = Registry()

    @registry.tool()
    async def stats() -> dict[str, object]:
        return {"b": [1, 2], "a": "caf\u00e9"}

    result = await call(registry, "stats")
    assert result["structuredContent"] == {"b": [1, 2], "a": "caf\u00e9"}
    assert json.loads(text_of(result)) == result["structuredContent"]
    assert "isError" not in result


async def test_a_model_return_is_dumped_with_its_aliases() -> None:
    registry = Registry()

    @registry.tool()
    async def whoami() -> Aliased:
        return Aliased.model_validate({"role-arn": "arn:aws:iam::1:role/x"})

    result = await call(registry, "whoami")
    assert result["structuredContent"] == {"role-arn": "arn:aws:iam::1:role/x"}


async def test_output_model_publishes_an_output_schema_and_checks_results() -> None:
    registry = Registry()

    @registry.tool(output_model=Report)
    async def good() -> Report:
        return Report(status="ok", count=2)

    @registry.tool(output_model=Report)
    async def bad() -> dict[str, object]:
        return {"status": "unknown", "count": "many"}

    @registry.tool(output_model=Report)
    async def refuses() -> str:
        raise ToolError("no report today")

    tools = {tool["name"]: tool for tool in await listed(registry)}
    assert tools["good"]["outputSchema"] == Report.model_json_schema()
    assert (await call(registry, "good"))["structuredContent"] == {"status": "ok", "count": 2}
    broken = await call(registry, "bad")
    assert broken["isError"] is True
    assert "outputSchema" in text_of(broken)
    assert "structuredContent" not in broken
    # An isError result is not held to the output schema.
    assert text_of(await call(registry, "refuses")) == "no report today"


async def test_a_model_return_annotation_is_the_output_schema_and_results_are_checked() -> None:
    registry = Registry()

    @registry.tool
    async def annotated() -> Report:
        return Report(status="ok", count=2)

    @registry.tool()
    async def asks_first(*, ctx: Context) -> Report | InputRequired:
        return {"status": "unknown", "count": "many"}  # type: ignore[return-value]

    @registry.tool()
    async def summarised() -> ToolResult:
        return ToolResult.of("one report", structured={"status": "ok", "count": 1})

    @registry.tool()
    async def maybe() -> Report | None:
        return None

    tools = {tool["name"]: tool for tool in await listed(registry)}
    assert tools["annotated"]["outputSchema"] == Report.model_json_schema()
    assert tools["asks_first"]["outputSchema"] == Report.model_json_schema()
    # The annotation cannot say it: no outputSchema unless output_model= says so.
    assert "outputSchema" not in tools["summarised"]
    assert "outputSchema" not in tools["maybe"]
    good = await call(registry, "annotated")
    assert good["structuredContent"] == {"status": "ok", "count": 2}
    assert json.loads(text_of(good)) == {"count": 2, "status": "ok"}
    broken = await call(registry, "asks_first")
    assert broken["isError"] is True
    assert "outputSchema" in text_of(broken)
    assert "structuredContent" not in broken


class Other(BaseModel):
    note: str


class DetailedReport(Report):
    detail: str = ""


class AnyReport(RootModel[Report | Other]):
    pass


async def test_output_model_says_what_the_annotation_cannot() -> None:
    registry = Registry()

    @registry.tool(output_model=Report)
    async def either() -> Report | Other:
        return Report(status="failed", count=0)

    @registry.tool(output_model=Report)
    async def same() -> Report:
        return Report(status="ok", count=1)

    @registry.tool(output_model=Report)
    async def narrower() -> DetailedReport | InputRequired:
        return DetailedReport(status="ok", count=1, detail="all green")

    @registry.tool(output_model=AnyReport)
    async def in_a_union() -> Other:
        return Other(note="none today")

    tools = {tool["name"]: tool for tool in await listed(registry)}
    assert tools["either"]["outputSchema"] == Report.model_json_schema()
    assert tools["narrower"]["outputSchema"] == Report.model_json_schema()
    assert tools["in_a_union"]["outputSchema"] == AnyReport.model_json_schema()
    for name in ("either", "same", "narrower", "in_a_union"):
        assert "isError" not in await call(registry, name), name


async def returns_report() -> Report:
    return Report(status="ok", count=1)


async def may_ask_then_report(*, ctx: Context) -> Report | InputRequired:
    return Report(status="ok", count=1)


@pytest.mark.parametrize("handler", [returns_report, may_ask_then_report])
def test_an_output_model_the_annotation_contradicts_is_a_type_error_at_declaration(
    handler: Any,
) -> None:
    # Before 0.5.0 output_model= won: the tool published Other's schema and every result it
    # returned (a Report) broke it, so each call ended in an isError result.
    registry = Registry()
    with pytest.raises(TypeError) as info:
        registry.tool(output_model=Other)(handler)
    assert str(info.value) == (
        f"{handler.__qualname__}: returns Report but declares output_model=Other; drop "
        "output_model= (the annotation is the output schema) or return Other"
    )
    assert registry.tools == {}


# -- declarations fail where they are written ---------------------------------------------------


async def test_a_bare_decorator_registers_like_the_called_one() -> None:
    registry = Registry()

    @registry.tool
    async def bare(word: str) -> str:
        """Echo a word."""
        return word

    @registry.tool()
    async def called(word: str) -> str:
        """Echo a word."""
        return word

    @registry.prompt
    def bare_prompt(topic: str) -> str:
        """Talk about a topic."""
        return f"Tell me about {topic}."

    @registry.prompt()
    def called_prompt(topic: str) -> str:
        """Talk about a topic."""
        return f"Tell me about {topic}."

    # The decorated function is the handler itself, not a decorator left in its place.
    assert registry.tools["bare"].handler is bare
    assert registry.prompts["bare_prompt"].handler is bare_prompt
    tools = {tool["name"]: tool for tool in await listed(registry)}
    assert set(tools) == {"bare", "called"}
    assert tools["bare"]["description"] == tools["called"]["description"] == "Echo a word."
    schemas = [tools[name]["inputSchema"] for name in ("bare", "called")]
    assert (
        schemas[0]["properties"]
        == schemas[1]["properties"]
        == {"word": {"title": "Word", "type": "string"}}
    )
    assert text_of(await call(registry, "bare", {"word": "hi"})) == "hi"
    client = MemoryClient(make_server(registry=registry), capabilities=ALL_CAPABILITIES)
    prompts = (await client.request("prompts/list", {}))["prompts"]
    assert [prompt["name"] for prompt in prompts] == ["bare_prompt", "called_prompt"]
    assert prompts[0]["arguments"] == prompts[1]["arguments"]


def test_a_resource_without_its_uri_is_refused_where_it_is_declared() -> None:
    registry = Registry()

    def note() -> str:
        return "x"

    with pytest.raises(TypeError, match=r"@registry.resource needs the URI"):
        registry.resource(note)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"@registry.resource_template needs the URI"):
        registry.resource_template(note)  # type: ignore[arg-type]
    assert registry.resources == {}


async def optional_context(ctx: Context | None = None) -> str:
    return "x"


async def defaulted_context(*, ctx: Context = None) -> str:  # type: ignore[assignment]
    return "x"


async def positional_context(word: str, ctx: Context) -> str:
    return word


async def two_contexts(*, ctx: Context, other: Context) -> str:
    return "x"


async def annotated_optional(*, ctx: Annotated[Context | None, "the call"]) -> str:
    return "x"


@pytest.mark.parametrize(
    ("handler", "says"),
    [
        (optional_context, "must be annotated `Context` exactly"),
        (annotated_optional, "must be annotated `Context` exactly"),
        (defaulted_context, "keyword-only with no default"),
        (positional_context, "keyword-only with no default"),
        (two_contexts, "2 parameters take a Context (ctx, other)"),
    ],
    ids=["optional", "annotated-optional", "defaulted", "positional", "two"],
)
@pytest.mark.parametrize("kind", ["tool", "prompt", "resource"])
def test_a_misdeclared_context_is_a_type_error_at_declaration(
    handler: Any, says: str, kind: str
) -> None:
    registry = Registry()
    decorate = {
        "tool": registry.tool(),
        "prompt": registry.prompt(),
        "resource": registry.resource("memo://x"),
    }[kind]
    with pytest.raises(TypeError) as info:
        decorate(handler)
    message = str(info.value)
    assert message.startswith(f"{handler.__qualname__}: ")  # names the function...
    assert says in message
    assert "`*, " in message  # ...and the fix
    assert not registry.tools and not registry.prompts and not registry.resources


async def star_args(*args: str) -> str:
    return "x"


async def star_kwargs(word: str, **kwargs: str) -> str:
    return word


async def positional_only(word: str, /) -> str:
    return word


@pytest.mark.parametrize(
    ("handler", "says"),
    [
        (star_args, "*args cannot take arguments, which come by name"),
        (star_kwargs, "**kwargs cannot take arguments, which are the declared parameters"),
        (positional_only, "parameter 'word' is positional-only"),
    ],
    ids=["args", "kwargs", "positional-only"],
)
@pytest.mark.parametrize("kind", ["tool", "prompt", "resource"])
def test_parameters_that_cannot_be_passed_by_name_are_a_type_error_at_declaration(
    handler: Any, says: str, kind: str
) -> None:
    # Before, `*args` became a required schema field named "args": a tool no call could reach.
    registry = Registry()
    decorate = {
        "tool": registry.tool(),
        "prompt": registry.prompt(),
        "resource": registry.resource("memo://x"),
    }[kind]
    with pytest.raises(TypeError) as info:
        decorate(handler)
    assert str(info.value).startswith(f"{handler.__qualname__}: {says}")
    assert not registry.tools and not registry.prompts and not registry.resources


LATE_MODEL = """\
from __future__ import annotations

from pydantic import BaseModel

from PACKAGE.mrtr_runtime import Registry

registry = Registry()


@registry.DECORATOR
async def status(SIGNATURE:
    return "ok"


class Status(BaseModel):
    ok: bool
"""


@pytest.mark.parametrize(
    ("decorator", "signature"),
    [
        ("tool", ") -> Status"),
        ("tool", "query: Status) -> str"),
        ("prompt", "query: Status) -> str"),
    ],
    ids=["tool-return", "tool-parameter", "prompt-parameter"],
)
def test_an_annotation_naming_a_model_defined_later_names_the_handler_and_the_model(
    decorator: str, signature: str
) -> None:
    # Under `from __future__ import annotations` the tool's annotations are strings resolved
    # at decoration, before the class below it exists: before, a bare NameError from
    # get_type_hints, without the tool's name, once the server had answered its first request.
    source = (
        LATE_MODEL.replace("PACKAGE", PACKAGE)
        .replace("DECORATOR", decorator)
        .replace("SIGNATURE", signature)
    )
    with pytest.raises(TypeError) as info:
        exec(compile(source, "late_model.py", "exec"), {"__name__": "late_model"})  # noqa: S102
    message = str(info.value)
    assert message.startswith("status: its annotations use 'Status', which is not defined")
    assert "define it above status" in message
    assert isinstance(info.value.__cause__, NameError)


async def test_strings_none_and_tool_results_map_to_content() -> None:
    registry = Registry()

    @registry.tool()
    async def text() -> str:
        return "plain"

    @registry.tool()
    async def nothing() -> None:
        return None

    @registry.tool()
    async def custom() -> ToolResult:
        return ToolResult(
            content=[{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
            structured={"n": 2},
            is_error=True,
        )

    assert (await call(registry, "text"))["content"] == [{"type": "text", "text": "plain"}]
    assert (await call(registry, "nothing"))["content"] == []
    result = await call(registry, "custom")
    assert result["content"] == [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    assert (result["structuredContent"], result["isError"]) == ({"n": 2}, True)


async def test_prompts_may_return_message_lists_and_resources_bytes() -> None:
    registry = Registry()

    @registry.prompt()
    async def chat() -> list[dict[str, Any]]:
        return [
            {"role": "user", "content": {"type": "text", "text": "hi"}},
            {"role": "assistant", "content": {"type": "text", "text": "hello"}},
        ]

    @registry.resource("memo://blob", mime_type="application/octet-stream")
    async def blob() -> bytes:
        return b"\x00\x01\xff"

    client = MemoryClient(make_server(registry=registry), capabilities=ALL_CAPABILITIES)
    prompt = await client.request("prompts/get", {"name": "chat"})
    assert [message["role"] for message in prompt["messages"]] == ["user", "assistant"]
    resource = await client.request("resources/read", {"uri": "memo://blob"})
    assert resource["contents"] == [
        {
            "uri": "memo://blob",
            "mimeType": "application/octet-stream",
            "blob": base64.b64encode(b"\x00\x01\xff").decode(),
        }
    ]


# -- elicitation form schemas ------------------------------------------------------------------


@pytest.mark.parametrize("model", [Nested, WithList, WithDict])
def test_elicit_form_refuses_fields_that_are_not_flat_primitives(model: type[BaseModel]) -> None:
    with pytest.raises(TypeError, match="flat"):
        elicit_form("?", model)


def test_elicit_form_keeps_what_the_author_wrote_and_drops_pydantic_inventions() -> None:
    request = elicit_form("Sign up", Form)
    assert request.method == "elicitation/create"
    assert request.required_capabilities == {"elicitation": {"form": {}}}
    schema = request.params["requestedSchema"]
    assert schema["type"] == "object"
    assert "title" not in schema
    properties = schema["properties"]
    assert properties["name"] == {"type": "string"}
    assert properties["age"] == {
        "type": "integer",
        "default": 30,
        "description": "Age in years",
        "minimum": 0,
        "maximum": 150,
    }
    assert properties["email"] == {
        "type": "string",
        "title": "E-mail address",
        "pattern": "^[^@]+@[^@]+$",
    }
    assert properties["nickname"] == {"type": "string"}
    assert properties["newsletter"] == {"type": "boolean", "default": False}
    assert properties["plan"] == {"type": "string", "enum": ["free", "pro"], "default": "free"}
    assert properties["ratio"] == {"type": "number", "description": "Between 0 and 1"}
    assert schema["required"] == ["name", "email"]


def test_elicit_form_of_a_model_with_only_optional_fields_lists_nothing_required() -> None:
    schema = elicit_form("?", AllOptional).params["requestedSchema"]
    assert "required" not in schema
    assert schema["properties"] == {"note": {"type": "string"}}


def test_elicit_form_names_an_aliased_field_by_its_alias() -> None:
    schema = elicit_form("?", Aliased).params["requestedSchema"]
    assert schema["properties"] == {"role-arn": {"type": "string"}}
    assert schema["required"] == ["role-arn"]
