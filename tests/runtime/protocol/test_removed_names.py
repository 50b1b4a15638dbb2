"""Names the tool face lost in 0.5.0 fail where they are used, saying what to write instead.

A 0.4.0 tool that imports `text_block` must stop the tools' loading with the replacement (not a
bare "cannot import name", nor -32603 on the first `tools/list` with nothing to act on), and
`ToolResult.text(...)` or `ctx.input_response(...)` must say what replaced them rather than
"failed with AttributeError". None of them may type-check: mypy still reports each one.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_startup import request, run_server

import mrtr_runtime
from mrtr_runtime import Context, Registry, ToolResult
from mrtr_runtime._capabilities import ClientCapabilities
from mrtr_runtime.testing import MemoryClient
from support import ALL_CAPABILITIES, PACKAGE, PROJECT, make_server, text_of

#: Each removed name, and what its message must name instead (CHANGELOG.md, 0.5.0).
REPLACED = {
    "text_block": "use content.text (from ..mrtr_runtime import content)",
    "image_block": "use content.image",
    "audio_block": "use content.audio",
    "resource_link": "use content.resource_link",
    "embedded_text": "use content.embedded_text",
    "embedded_blob": "use content.embedded_blob",
    "text_contents": "use content.text_contents",
    "blob_contents": "use content.blob_contents",
    "prompt_message": "use content.prompt_message",
    "ContentBlock": "use content.ContentBlock",
    "ElicitResult": "ctx.form_answer(key, Form)",
    "Root": "ctx.input_response_as(key, RootsResult)",
    "InvalidInputResponse": "-32602",
    "LoggingLevel": "ctx.send_log takes the level as a string",
}


@pytest.mark.parametrize(("name", "instead"), sorted(REPLACED.items()))
def test_a_removed_face_name_says_what_replaced_it(name: str, instead: str) -> None:
    with pytest.raises(AttributeError) as raised:
        getattr(mrtr_runtime, name)
    assert instead in str(raised.value)
    assert name in str(raised.value)


def test_an_unknown_face_name_is_a_plain_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        mrtr_runtime.no_such_name  # type: ignore[attr-defined]  # noqa: B018


def tools_package(root: Path, name: str, source: str) -> str:
    package = root / name
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "old_tool.py").write_text(source)
    return name


def test_loading_a_tool_that_imports_a_removed_name_says_what_replaced_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    source = f"from {PACKAGE}.mrtr_runtime import ToolResult, text_block\n"
    package = tools_package(tmp_path, "old_tools", source)

    with pytest.raises(ImportError) as raised:
        Registry().load_package(package)

    message = str(raised.value)
    assert "old_tools.old_tool" in message
    assert "cannot import name 'text_block'" in message
    assert "text_block moved: use content.text (from ..mrtr_runtime import content)" in message
    assert isinstance(raised.value.__cause__, ImportError)
    for module in ("old_tools", "old_tools.old_tool"):
        sys.modules.pop(module, None)


def test_any_other_import_error_of_a_tool_is_left_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    source = f"from {PACKAGE}.mrtr_runtime import no_such_name\n"
    package = tools_package(tmp_path, "typo_tools", source)

    with pytest.raises(ImportError) as raised:
        Registry().load_package(package)

    assert raised.value.__cause__ is None
    assert str(raised.value).startswith("cannot import name 'no_such_name'")
    for module in ("typo_tools", "typo_tools.old_tool"):
        sys.modules.pop(module, None)


def test_a_server_whose_tool_imports_a_removed_name_logs_the_replacement(
    tmp_path: Path,
) -> None:
    responses, stderr, status = run_server(
        tmp_path,
        f"from {PACKAGE}.mrtr_runtime import image_block\n",
        request(1, "server/discover"),
    )

    assert [response["id"] for response in responses] == [1]
    assert status == 1
    assert "the tools could not be loaded" in stderr
    assert "image_block moved: use content.image (from ..mrtr_runtime import content)" in stderr


@pytest.mark.parametrize(
    ("name", "instead"),
    [
        ("text", "ToolResult.text(t) is ToolResult.of(t)"),
        ("summarized", "ToolResult.summarized(s, model) is ToolResult.of(s, structured=model)"),
    ],
)
def test_a_removed_tool_result_constructor_says_what_replaced_it(name: str, instead: str) -> None:
    with pytest.raises(AttributeError) as raised:
        getattr(ToolResult, name)
    assert str(raised.value) == f"ToolResult.{name} was removed in 0.5.0: {instead}"
    # The dataclass is untouched: its fields and constructors are what they were.
    assert ToolResult.of("hi").to_wire() == {"content": [{"type": "text", "text": "hi"}]}


READERS = ("input_response", "input_responses", "has_input_responses")


@pytest.mark.parametrize("name", READERS)
def test_a_removed_context_reader_says_what_replaced_it(name: str) -> None:
    ctx = Context(
        answers={"k": {"action": "accept", "content": {}}},
        request_state=None,
        client_capabilities=ClientCapabilities({}),
        protocol_version="2026-07-28",
        era="modern",
    )
    expected = (
        f"Context.{name} was removed in 0.5.0: read an answer with "
        "ctx.form_answer(key, Form) or ctx.input_response_as(key, Model)"
    )
    for owner in (ctx, Context):
        with pytest.raises(AttributeError) as raised:
            getattr(owner, name)
        assert str(raised.value) == expected


@pytest.mark.anyio
async def test_a_tool_calling_a_removed_reader_logs_the_replacement(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = Registry()

    @registry.tool
    async def old(*, ctx: Context) -> str:
        return str(ctx.input_response("confirm"))  # type: ignore[attr-defined]

    client = MemoryClient(make_server(registry=registry), capabilities=ALL_CAPABILITIES)
    with caplog.at_level(logging.ERROR):
        result = await client.request("tools/call", {"name": "old"})

    assert result["isError"] is True
    assert "AttributeError" in text_of(result)
    assert "Context.input_response was removed in 0.5.0: read an answer with" in caplog.text


MYPY_PROJECT = """\
from PACKAGE.mrtr_runtime import Context, ToolResult, text_block


def old(ctx: Context) -> ToolResult:
    if ctx.has_input_responses():
        return ToolResult.summarized("s", ctx.input_responses)
    return ToolResult.text(str(ctx.input_response("k")))
"""


def test_mypy_still_reports_every_removed_name(tmp_path: Path) -> None:
    source = tmp_path / "old_tool.py"
    source.write_text(MYPY_PROJECT.replace("PACKAGE", PACKAGE))
    # As a project's own mypy run sees it: the package's source on the path, no config.
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-incremental",
            "--config-file=",
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=tmp_path,
        env={**os.environ, "MYPYPATH": str(PROJECT / "src")},
    )
    errors = completed.stdout
    assert completed.returncode == 1, errors
    assert 'Module "' in errors and 'has no attribute "text_block"' in errors
    for name in READERS:
        assert f'"Context" has no attribute "{name}"' in errors
    for name in ("text", "summarized"):
        assert f'"type[ToolResult]" has no attribute "{name}"' in errors
