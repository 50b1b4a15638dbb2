"""Results of every kind: content blocks, prompt messages and resource contents on the wire.

schema.ts (2025-11-25 and 2026-07-28 share these shapes): ContentBlock is TextContent |
ImageContent | AudioContent | ResourceLink | EmbeddedResource; image and audio `data` and blob
contents are base64; an EmbeddedResource holds TextResourceContents or BlobResourceContents;
PromptMessage is `{role, content: ContentBlock}`; `resources/read` returns `contents`, each
with the URI read. Every shape is checked in both eras.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any, Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel
from test_startup import request, run_server

from mrtr_runtime import Registry, ToolResult, content
from mrtr_runtime.testing import MemoryClient, RpcError
from support import ALL_CAPABILITIES, PACKAGE, Json, make_server

pytestmark = pytest.mark.anyio

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt "


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


# -- start-up ----------------------------------------------------------------------------------


def test_the_content_builders_load_with_the_tools_not_before_the_first_answer(
    tmp_path: Path,
) -> None:
    tools_source = (
        "import sys\n"
        "before = [name for name in sys.modules if name.endswith('_content')]\n"
        f"from {PACKAGE}.mrtr_runtime import content\n"
        "print('content before tools:', before, content.__name__, content.image.__module__,\n"
        "      file=sys.stderr)\n"
    )
    responses, stderr, status = run_server(tmp_path, tools_source, request(1, "server/discover"))
    assert status == 0, stderr
    assert [response["id"] for response in responses] == [1]
    assert (
        f"content before tools: [] {PACKAGE}.mrtr_runtime.content {PACKAGE}.mrtr_runtime._content"
        in stderr
    )


def test_the_content_sub_face_is_reachable_as_an_attribute_of_the_tool_face() -> None:
    import mrtr_runtime

    assert mrtr_runtime.content is content
    assert content.text("hi") == {"type": "text", "text": "hi"}
    assert set(content.__all__) == {
        "ContentBlock",
        "audio",
        "blob_contents",
        "embedded_blob",
        "embedded_text",
        "image",
        "prompt_message",
        "resource_link",
        "text",
        "text_contents",
    }


# -- the builders ----------------------------------------------------------------------------


def test_each_block_has_the_schema_shape() -> None:
    assert content.text("hi") == {"type": "text", "text": "hi"}
    assert content.image(PNG, "image/png") == {
        "type": "image",
        "data": b64(PNG),
        "mimeType": "image/png",
    }
    assert content.audio(WAV, "audio/wav") == {
        "type": "audio",
        "data": b64(WAV),
        "mimeType": "audio/wav",
    }
    assert content.resource_link("file:///a.txt", name="a.txt") == {
        "type": "resource_link",
        "uri": "file:///a.txt",
        "name": "a.txt",
    }
    assert content.resource_link(
        "file:///a.txt",
        name="a.txt",
        title="A",
        description="The a file",
        mime_type="text/plain",
        size=12,
    ) == {
        "type": "resource_link",
        "uri": "file:///a.txt",
        "name": "a.txt",
        "title": "A",
        "description": "The a file",
        "mimeType": "text/plain",
        "size": 12,
    }
    assert content.embedded_text("memo://n", "note", mime_type="text/plain") == {
        "type": "resource",
        "resource": {"uri": "memo://n", "mimeType": "text/plain", "text": "note"},
    }
    assert content.embedded_blob("memo://b", b"\x00\xff") == {
        "type": "resource",
        "resource": {"uri": "memo://b", "blob": b64(b"\x00\xff")},
    }
    assert content.text_contents("memo://n", "x") == {"uri": "memo://n", "text": "x"}
    assert content.blob_contents("memo://b", b"\x01", mime_type="application/octet-stream") == {
        "uri": "memo://b",
        "mimeType": "application/octet-stream",
        "blob": "AQ==",
    }


def test_annotations_travel_on_every_block_that_takes_them() -> None:
    annotations = {"audience": ("user",), "priority": 0.5, "lastModified": "2026-01-01T00:00:00Z"}
    wire = {"audience": ["user"], "priority": 0.5, "lastModified": "2026-01-01T00:00:00Z"}
    assert content.text("t", annotations=annotations)["annotations"] == wire
    assert content.image(PNG, "image/png", annotations=annotations)["annotations"] == wire
    assert content.audio(WAV, "audio/wav", annotations=annotations)["annotations"] == wire
    assert content.resource_link("u://x", name="x", annotations=annotations)["annotations"] == wire
    assert content.embedded_text("u://x", "t", annotations=annotations)["annotations"] == wire
    assert content.embedded_blob("u://x", b"", annotations=annotations)["annotations"] == wire
    assert "annotations" not in content.text("t", annotations={})


@pytest.mark.parametrize(
    ("annotations", "message"),
    [
        ({"audience": "user"}, "audience"),
        ({"audience": ["user", "robot"]}, "audience"),
        ({"audience": 3}, "audience"),
        ({"lastModified": 20260101}, "lastModified"),
        ({"priority": 1.5}, "priority"),
        ({"priority": -0.1}, "priority"),
        ({"priority": True}, "priority"),
        ({"priority": "high"}, "priority"),
        ({"importance": 1}, "unknown annotation keys"),
    ],
)
def test_annotations_outside_the_schema_are_refused(annotations: Json, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        content.text("t", annotations=annotations)


def test_binary_blocks_take_bytes_never_text_that_may_be_base64_already() -> None:
    with pytest.raises(TypeError, match="raw bytes"):
        content.image(b64(PNG), "image/png")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="raw bytes"):
        content.embedded_blob("u://x", "AQ==")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="MIME type"):
        content.audio(WAV, "wav")
    with pytest.raises(TypeError):
        content.text(b"bytes")  # type: ignore[arg-type]


def test_links_and_messages_refuse_what_the_schema_cannot_carry() -> None:
    with pytest.raises(ValueError, match="name"):
        content.resource_link("u://x", name="")
    with pytest.raises(ValueError, match="URI"):
        content.resource_link("", name="x")
    for size in (-1, True, 1.5):
        with pytest.raises(ValueError, match="byte count"):
            content.resource_link("u://x", name="x", size=size)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="role"):
        content.prompt_message("system", "hi")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="content"):
        content.prompt_message("user", {"text": "no type"})
    with pytest.raises(TypeError, match="content blocks"):
        ToolResult.of({"text": "no type"})


@given(st.binary(max_size=4096), st.sampled_from(["image", "audio", "embedded_blob"]))
def test_any_bytes_come_back_whole_from_base64(data: bytes, builder: str) -> None:
    if builder == "image":
        encoded = content.image(data, "image/png")["data"]
    elif builder == "audio":
        encoded = content.audio(data, "audio/ogg")["data"]
    else:
        encoded = content.embedded_blob("u://x", data)["resource"]["blob"]
    assert base64.b64decode(encoded, validate=True) == data


def test_tool_result_of_keeps_the_blocks_in_order_and_turns_strings_into_text() -> None:
    link = content.resource_link("file:///r.txt", name="r.txt")
    result = ToolResult.of("first", content.image(PNG, "image/png"), link)
    assert result.to_wire() == {
        "content": [
            {"type": "text", "text": "first"},
            {"type": "image", "data": b64(PNG), "mimeType": "image/png"},
            link,
        ]
    }
    assert ToolResult.of("bad", is_error=True).to_wire()["isError"] is True
    assert ToolResult.of().to_wire() == {"content": []}


# -- on the wire, both eras --------------------------------------------------------------------


class Reading(BaseModel):
    celsius: float
    station: str


def content_registry() -> Registry:
    registry = Registry()

    @registry.tool()
    async def picture() -> ToolResult:
        """An image and a link to where it came from."""
        return ToolResult.of(
            content.image(PNG, "image/png"),
            content.resource_link("file:///camera/1.png", name="1.png", mime_type="image/png"),
        )

    @registry.tool()
    async def sound() -> ToolResult:
        return ToolResult.of(content.audio(WAV, "audio/wav"))

    @registry.tool()
    async def mixed() -> ToolResult:
        return ToolResult.of(
            "Here is everything:",
            content.image(PNG, "image/png"),
            content.audio(WAV, "audio/wav"),
            content.embedded_text("memo://note", "a note", mime_type="text/plain"),
            content.embedded_blob("memo://raw", b"\x00\x01", mime_type="application/octet-stream"),
        )

    @registry.tool(output_model=Reading)
    async def weather() -> ToolResult:
        reading = Reading(celsius=21.5, station="north")
        return ToolResult.of(
            content.image(PNG, "image/png"), reading.model_dump_json(), structured=reading
        )

    @registry.tool(output_model=Reading)
    async def broken_weather() -> ToolResult:
        return ToolResult.of(content.image(PNG, "image/png"), structured={"celsius": "warm"})

    @registry.tool()
    async def not_json() -> ToolResult:
        return ToolResult.of({"type": "text", "text": object()})

    @registry.prompt()
    async def describe_image() -> dict[str, Any]:
        """One message with an image."""
        return content.prompt_message("user", content.image(PNG, "image/png"))

    @registry.prompt()
    async def review(resource_uri: str) -> list[dict[str, Any]]:
        return [
            content.prompt_message("user", content.embedded_text(resource_uri, "def f(): ...")),
            content.prompt_message("assistant", "I read it."),
            content.prompt_message("user", content.resource_link(resource_uri, name="source")),
        ]

    @registry.prompt()
    async def no_messages() -> list[str]:
        return ["a plain string is not a message"]

    @registry.prompt()
    async def wrong_role() -> dict[str, Any]:
        return {"role": "system", "content": content.text("hi")}

    @registry.prompt()
    async def not_json_prompt() -> dict[str, Any]:
        return content.prompt_message("user", {"type": "text", "text": object()})

    @registry.resource("memo://logo", mime_type="image/png")
    async def logo() -> bytes:
        return PNG

    @registry.resource("memo://bundle")
    async def bundle() -> list[dict[str, Any]]:
        return [
            content.text_contents("memo://bundle/readme", "read me", mime_type="text/markdown"),
            content.blob_contents(
                "memo://bundle/data", b"\x02", mime_type="application/octet-stream"
            ),
            content.embedded_text("memo://bundle/embedded", "unwrapped"),
        ]

    @registry.resource("memo://malformed")
    async def malformed() -> list[dict[str, Any]]:
        return [{"uri": "memo://malformed", "text": "t", "blob": "AA=="}]

    @registry.resource("memo://not-json")
    async def not_json_contents() -> list[dict[str, Any]]:
        return [{"uri": "memo://not-json", "text": "t", "mimeType": object()}]

    @registry.resource("memo://empty")
    async def empty() -> list[dict[str, Any]]:
        return []

    @registry.resource_template("test://template/{id}/data", mime_type="application/json")
    async def item(id: int) -> str:
        return f'{{"id": {id}, "double": {id * 2}}}'

    @registry.resource_template("test://scope/{kind}/{name}")
    async def scoped(kind: Literal["user", "team"], name: str) -> str:
        return f"{kind}:{name}"

    return registry


@pytest.fixture(params=["modern", "legacy"])
async def client(request: pytest.FixtureRequest) -> MemoryClient:
    client = MemoryClient(make_server(registry=content_registry()), capabilities=ALL_CAPABILITIES)
    if request.param == "legacy":
        await client.initialize()
    return client


def era_keys(client: MemoryClient, result: Json) -> Json:
    """`result` without the keys only one era adds (resultType, _meta, ttlMs, cacheScope)."""
    if client.era == "legacy":
        assert "resultType" not in result
    else:
        assert result["resultType"] == "complete"
    return {
        key: value
        for key, value in result.items()
        if key not in {"resultType", "_meta", "ttlMs", "cacheScope"}
    }


async def test_a_tool_returns_an_image_and_a_resource_link(client: MemoryClient) -> None:
    result = await client.request("tools/call", {"name": "picture"})
    assert era_keys(client, result) == {
        "content": [
            {"type": "image", "data": b64(PNG), "mimeType": "image/png"},
            {
                "type": "resource_link",
                "uri": "file:///camera/1.png",
                "name": "1.png",
                "mimeType": "image/png",
            },
        ]
    }


async def test_a_tool_returns_audio(client: MemoryClient) -> None:
    result = await client.request("tools/call", {"name": "sound"})
    assert era_keys(client, result)["content"] == [
        {"type": "audio", "data": b64(WAV), "mimeType": "audio/wav"}
    ]


async def test_a_tool_mixes_every_kind_of_block(client: MemoryClient) -> None:
    result = await client.request("tools/call", {"name": "mixed"})
    assert [block["type"] for block in era_keys(client, result)["content"]] == [
        "text",
        "image",
        "audio",
        "resource",
        "resource",
    ]
    assert result["content"][3]["resource"] == {
        "uri": "memo://note",
        "mimeType": "text/plain",
        "text": "a note",
    }
    assert result["content"][4]["resource"] == {
        "uri": "memo://raw",
        "mimeType": "application/octet-stream",
        "blob": b64(b"\x00\x01"),
    }


async def test_structured_content_with_an_output_schema_still_holds(client: MemoryClient) -> None:
    result = await client.request("tools/call", {"name": "weather"})
    assert result["structuredContent"] == {"celsius": 21.5, "station": "north"}
    assert result["content"][0]["type"] == "image"
    assert result["content"][1] == {
        "type": "text",
        "text": Reading(celsius=21.5, station="north").model_dump_json(),
    }
    assert "isError" not in result
    # server/tools: with an outputSchema, structured results MUST conform.
    broken = await client.request("tools/call", {"name": "broken_weather"})
    assert broken["isError"] is True
    assert "outputSchema" in broken["content"][0]["text"]


async def test_a_block_that_is_not_json_becomes_an_error_result(client: MemoryClient) -> None:
    result = await client.request("tools/call", {"name": "not_json"})
    assert result["isError"] is True
    assert "not JSON" in result["content"][0]["text"]


async def test_a_prompt_returns_one_message_with_an_image(client: MemoryClient) -> None:
    result = await client.request("prompts/get", {"name": "describe_image"})
    assert era_keys(client, result) == {
        "description": "One message with an image.",
        "messages": [
            {
                "role": "user",
                "content": {"type": "image", "data": b64(PNG), "mimeType": "image/png"},
            }
        ],
    }


async def test_a_prompt_returns_embedded_resources_and_links(client: MemoryClient) -> None:
    result = await client.request(
        "prompts/get", {"name": "review", "arguments": {"resource_uri": "file:///f.py"}}
    )
    assert era_keys(client, result)["messages"] == [
        {
            "role": "user",
            "content": {
                "type": "resource",
                "resource": {"uri": "file:///f.py", "text": "def f(): ..."},
            },
        },
        {"role": "assistant", "content": {"type": "text", "text": "I read it."}},
        {
            "role": "user",
            "content": {"type": "resource_link", "uri": "file:///f.py", "name": "source"},
        },
    ]


@pytest.mark.parametrize("name", ["no_messages", "wrong_role", "not_json_prompt"])
async def test_a_prompt_returning_no_messages_is_an_internal_error(
    client: MemoryClient, name: str
) -> None:
    with pytest.raises(RpcError) as raised:
        await client.request("prompts/get", {"name": name})
    assert raised.value.code == -32603
    assert "returned no messages" in raised.value.message


async def test_a_binary_resource_reads_as_base64(client: MemoryClient) -> None:
    result = await client.request("resources/read", {"uri": "memo://logo"})
    assert era_keys(client, result) == {
        "contents": [{"uri": "memo://logo", "mimeType": "image/png", "blob": b64(PNG)}]
    }


async def test_a_resource_returns_several_contents(client: MemoryClient) -> None:
    result = await client.request("resources/read", {"uri": "memo://bundle"})
    assert era_keys(client, result)["contents"] == [
        {"uri": "memo://bundle/readme", "mimeType": "text/markdown", "text": "read me"},
        {"uri": "memo://bundle/data", "mimeType": "application/octet-stream", "blob": "Ag=="},
        {"uri": "memo://bundle/embedded", "text": "unwrapped"},
    ]


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("memo://malformed", "malformed contents"),
        ("memo://not-json", "malformed contents"),
        ("memo://empty", "neither text, bytes nor contents"),
    ],
)
async def test_contents_outside_the_schema_are_an_internal_error(
    client: MemoryClient, uri: str, message: str
) -> None:
    with pytest.raises(RpcError) as raised:
        await client.request("resources/read", {"uri": uri})
    assert raised.value.code == -32603
    assert message in raised.value.message


async def test_a_template_read_echoes_the_uri_and_types_its_parameters(
    client: MemoryClient,
) -> None:
    result = await client.request("resources/read", {"uri": "test://template/123/data"})
    assert era_keys(client, result) == {
        "contents": [
            {
                "uri": "test://template/123/data",
                "mimeType": "application/json",
                "text": '{"id": 123, "double": 246}',
            }
        ]
    }
    scoped = await client.request("resources/read", {"uri": "test://scope/team/core"})
    assert scoped["contents"] == [{"uri": "test://scope/team/core", "text": "team:core"}]


@pytest.mark.parametrize("uri", ["test://template/abc/data", "test://scope/robot/core"])
async def test_a_template_parameter_of_the_wrong_type_is_invalid_params(
    client: MemoryClient, uri: str
) -> None:
    with pytest.raises(RpcError) as raised:
        await client.request("resources/read", {"uri": uri})
    assert raised.value.code == -32602
    assert uri in raised.value.message


# -- structured content: what does not apply is left out, not null --------------------------------


class Part(BaseModel):
    name: str
    serial: str | None = None


class Shipment(BaseModel):
    order: str
    carrier: str | None = None  # optional: left out when None
    tracking: str | None  # required, even if it may be null: kept
    parts: list[Part] = []
    by_bin: dict[str, Part] = {}
    main: Part | None = None


SHIPMENT = Shipment(
    order="A-1",
    tracking=None,
    parts=[Part(name="bolt"), Part(name="nut", serial="n-7")],
    by_bin={"b1": Part(name="washer")},
    main=Part(name="frame"),
)
#: A host may hand its model `structuredContent` rather than the text (Claude Code does): a
#: field that does not apply is absent, as its output schema allows, not `null`.
SHIPPED: Json = {
    "order": "A-1",
    "tracking": None,
    "parts": [{"name": "bolt"}, {"name": "nut", "serial": "n-7"}],
    "by_bin": {"b1": {"name": "washer"}},
    "main": {"name": "frame"},
}


def test_a_models_optional_nones_are_left_out_of_structured_content_at_every_depth() -> None:
    assert ToolResult.of("shipped", structured=SHIPMENT).structured == SHIPPED
    # Nothing else changes: a model without Nones dumps as pydantic dumps it.
    complete = Shipment(order="B", carrier="ups", tracking="1Z", main=Part(name="f", serial="s"))
    assert ToolResult.of(structured=complete).structured == complete.model_dump(mode="json")


@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
async def test_a_tool_returning_a_model_or_a_result_sends_no_optional_nulls(era: str) -> None:
    registry = Registry()

    @registry.tool(output_model=Shipment)
    async def ship() -> Shipment:
        return SHIPMENT

    @registry.tool(output_model=Shipment)
    async def ship_with_text() -> ToolResult:
        return ToolResult.of("Shipped A-1.", structured=SHIPMENT)

    client = MemoryClient(make_server(registry=registry), capabilities=ALL_CAPABILITIES)
    if era == "2025-11-25":
        await client.initialize()
    listed = await client.request("tools/list", {})
    (schema,) = [tool["outputSchema"] for tool in listed["tools"] if tool["name"] == "ship"]
    assert "carrier" not in schema["required"] and "tracking" in schema["required"]
    for name in ("ship", "ship_with_text"):
        result = await client.request("tools/call", {"name": name})
        assert result["structuredContent"] == SHIPPED, name
        assert "isError" not in result
