"""`completion/complete`, both eras.

server/utilities/completion: a `ref/prompt` (by name) or `ref/resource` (a URI or URI template)
and the `argument` being typed; the result holds at most 100 `values`, with `total` and
`hasMore`; an invalid prompt name (a ref that names nothing) is -32602.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrtr_runtime import Registry
from mrtr_runtime.testing import MemoryClient, RpcError
from support import ALL_CAPABILITIES, Json, make_server

pytestmark = pytest.mark.anyio

LANGUAGES = ("python", "pytorch", "pyside", "perl", "go", "rust")
FRAMEWORKS = {"python": ("flask", "fastapi", "django"), "rust": ("axum", "actix")}


def completion_registry() -> Registry:
    registry = Registry()

    @registry.prompt()
    async def code_review(language: str, framework: str = "", style: str = "") -> str:
        return f"Review this {language} {framework} code ({style})."

    @registry.completion(prompt="code_review", argument="language")
    async def complete_language(value: str, arguments: Mapping[str, str]) -> list[str]:
        return [language for language in LANGUAGES if language.startswith(value)]

    @registry.completion(prompt="code_review", argument="framework")
    def complete_framework(value: str, arguments: Mapping[str, str]) -> Iterator[str]:
        # A plain def, and a generator: it runs in a worker thread.
        frameworks = FRAMEWORKS.get(arguments.get("language", ""), ())
        return (name for name in frameworks if name.startswith(value))

    @registry.resource_template("test://template/{id}/data")
    async def item(id: int) -> str:
        return f"item {id}"

    @registry.completion(resource_template="test://template/{id}/data", argument="id")
    async def complete_id(value: str, arguments: Mapping[str, str]) -> Iterator[str]:
        return map(str, range(int(value or "0"), 1_000))

    @registry.resource("memo://fixed")
    async def fixed() -> str:
        return "fixed"

    @registry.prompt()
    async def counted(size: str) -> str:
        return size

    @registry.completion(prompt="counted", argument="size")
    async def complete_size(value: str, arguments: Mapping[str, str]) -> Iterable[str]:
        if value == "endless":
            return (str(number) for number in itertools.count())
        return [f"value-{number}" for number in range(int(value))]

    @registry.prompt()
    async def faulty(mode: str) -> str:
        return mode

    @registry.completion(prompt="faulty", argument="mode")
    async def complete_mode(value: str, arguments: Mapping[str, str]) -> Any:
        if value == "raise":
            raise RuntimeError("the database is down: password=hunter2")
        if value == "numbers":
            return [1, 2]
        return "a string is not a list of values"

    return registry


@pytest.fixture(params=["modern", "legacy"])
async def client(request: pytest.FixtureRequest) -> MemoryClient:
    client = MemoryClient(
        make_server(registry=completion_registry()), capabilities=ALL_CAPABILITIES
    )
    if request.param == "legacy":
        await client.initialize()
    return client


def prompt_ref(name: str, argument: str, value: str, **context: str) -> Json:
    params: Json = {
        "ref": {"type": "ref/prompt", "name": name},
        "argument": {"name": argument, "value": value},
    }
    if context:
        params["context"] = {"arguments": context}
    return params


async def completion(client: MemoryClient, params: Json) -> Json:
    result = await client.request("completion/complete", params)
    if client.era == "legacy":
        assert "resultType" not in result
    else:
        assert result["resultType"] == "complete"
        # CompleteResult is no CacheableResult (schema.ts): nothing tells a client to keep it.
        assert "ttlMs" not in result
    assert set(result) - {"resultType", "_meta"} == {"completion"}
    completion: Json = result["completion"]
    return completion


async def rpc_code(client: MemoryClient, params: Json) -> tuple[int, str]:
    with pytest.raises(RpcError) as raised:
        await client.request("completion/complete", params)
    return raised.value.code, raised.value.message


async def test_a_prompt_argument_is_completed_from_what_was_typed(client: MemoryClient) -> None:
    assert await completion(client, prompt_ref("code_review", "language", "py")) == {
        "values": ["python", "pytorch", "pyside"],
        "total": 3,
        "hasMore": False,
    }


async def test_arguments_already_chosen_reach_the_completer(client: MemoryClient) -> None:
    params = prompt_ref("code_review", "framework", "fla", language="python")
    assert await completion(client, params) == {"values": ["flask"], "total": 1, "hasMore": False}
    params = prompt_ref("code_review", "framework", "", language="rust")
    assert (await completion(client, params))["values"] == ["axum", "actix"]


@pytest.mark.parametrize("uri", ["test://template/{id}/data", "test://template/7/data"])
async def test_a_template_variable_is_completed_by_template_or_by_uri(
    client: MemoryClient, uri: str
) -> None:
    params = {
        "ref": {"type": "ref/resource", "uri": uri},
        "argument": {"name": "id", "value": "995"},
    }
    assert await completion(client, params) == {
        "values": ["995", "996", "997", "998", "999"],
        "total": 5,
        "hasMore": False,
    }


async def test_an_argument_without_a_completer_gets_no_suggestions(client: MemoryClient) -> None:
    assert await completion(client, prompt_ref("code_review", "style", "x")) == {
        "values": [],
        "total": 0,
        "hasMore": False,
    }


@pytest.mark.parametrize(
    ("size", "values", "total", "more"),
    [
        (0, 0, 0, False),
        (99, 99, 99, False),
        (100, 100, 100, False),
        (101, 100, 101, True),
        (1_000, 100, 1_000, True),
    ],
)
async def test_at_most_100_values_are_sent_with_the_total(
    client: MemoryClient, size: int, values: int, total: int, more: bool
) -> None:
    result = await completion(client, prompt_ref("counted", "size", str(size)))
    assert result["values"] == [f"value-{number}" for number in range(values)]
    assert result["total"] == total
    assert result["hasMore"] is more


async def test_an_endless_completer_gives_100_values_and_no_total(client: MemoryClient) -> None:
    result = await completion(client, prompt_ref("counted", "size", "endless"))
    assert result == {"values": [str(number) for number in range(100)], "hasMore": True}


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (prompt_ref("no_such_prompt", "language", "py"), "Unknown prompt"),
        (prompt_ref("code_review", "no_such_argument", "py"), "no argument"),
        (
            {"ref": {"type": "ref/resource", "uri": "test://nothing/here"}, "argument": {}},
            "argument",
        ),
        (
            {
                "ref": {"type": "ref/resource", "uri": "test://nothing/here"},
                "argument": {"name": "id", "value": ""},
            },
            "Unknown resource or template",
        ),
        (
            {
                "ref": {"type": "ref/resource", "uri": "memo://fixed"},
                "argument": {"name": "id", "value": ""},
            },
            "no argument",
        ),
        (
            {"ref": {"type": "ref/tool", "name": "x"}, "argument": {"name": "a", "value": ""}},
            "ref.type",
        ),
        ({"ref": "code_review", "argument": {"name": "a", "value": ""}}, "ref object"),
        (
            {"ref": {"type": "ref/prompt"}, "argument": {"name": "language", "value": ""}},
            "string name",
        ),
        (
            {"ref": {"type": "ref/resource"}, "argument": {"name": "id", "value": ""}},
            "string uri",
        ),
        ({"ref": {"type": "ref/prompt", "name": "code_review"}}, "argument"),
        (
            {
                "ref": {"type": "ref/prompt", "name": "code_review"},
                "argument": {"name": "language", "value": 3},
            },
            "argument",
        ),
        ({**prompt_ref("code_review", "language", "py"), "context": {"arguments": []}}, "context"),
        (
            {**prompt_ref("code_review", "language", "py"), "context": {"arguments": {"a": 1}}},
            "context",
        ),
        ({**prompt_ref("code_review", "language", "py"), "context": "python"}, "context"),
    ],
)
async def test_a_request_that_names_nothing_or_is_malformed_is_invalid_params(
    client: MemoryClient, params: Json, message: str
) -> None:
    code, text = await rpc_code(client, params)
    assert code == -32602
    assert message in text


async def test_an_empty_context_is_no_context(client: MemoryClient) -> None:
    params = {**prompt_ref("code_review", "language", "go"), "context": {}}
    assert (await completion(client, params))["values"] == ["go"]


@pytest.mark.parametrize("value", ["raise", "numbers", "string"])
async def test_a_failing_completer_is_an_internal_error_that_tells_no_secrets(
    client: MemoryClient, value: str
) -> None:
    code, text = await rpc_code(client, prompt_ref("faulty", "mode", value))
    assert code == -32603
    assert "hunter2" not in text
    # The server keeps serving.
    assert (await completion(client, prompt_ref("code_review", "language", "ru")))["values"] == [
        "rust"
    ]


async def test_a_server_without_completers_answers_with_no_suggestions() -> None:
    registry = Registry()

    @registry.prompt()
    async def plain(topic: str) -> str:
        return topic

    client = MemoryClient(make_server(registry=registry), capabilities=ALL_CAPABILITIES)
    assert await completion(client, prompt_ref("plain", "topic", "")) == {
        "values": [],
        "total": 0,
        "hasMore": False,
    }
    code, _ = await rpc_code(client, prompt_ref("other", "topic", ""))
    assert code == -32602


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
REFS = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["ref/prompt", "ref/resource", "ref/tool"]) | JSON_VALUES,
        "name": st.sampled_from(["code_review", "nope"]) | JSON_VALUES,
        "uri": st.sampled_from(["test://template/{id}/data", "memo://fixed"]) | JSON_VALUES,
    },
)
ARGUMENTS = st.fixed_dictionaries(
    {},
    optional={
        "name": st.sampled_from(["language", "framework", "id"]) | JSON_VALUES,
        "value": st.sampled_from(["py", "", "7"]) | JSON_VALUES,
    },
)
PARAMS = st.fixed_dictionaries(
    {},
    optional={
        "ref": REFS | JSON_VALUES,
        "argument": ARGUMENTS | JSON_VALUES,
        "context": st.fixed_dictionaries({}, optional={"arguments": JSON_VALUES}) | JSON_VALUES,
    },
)


@settings(max_examples=200, deadline=None)
@given(PARAMS)
def test_any_params_get_a_completion_or_invalid_params_never_a_crash(params: Json) -> None:
    async def ask() -> None:
        client = MemoryClient(make_server(registry=FUZZ_REGISTRY), capabilities=ALL_CAPABILITIES)
        try:
            result = await client.request("completion/complete", params)
        except RpcError as error:
            assert error.code == -32602, error
            return
        values = result["completion"]["values"]
        assert len(values) <= 100
        assert all(isinstance(value, str) for value in values)

    anyio.run(ask)


async def handler(value: str, arguments: Mapping[str, str]) -> list[str]:
    return [value]


def test_a_completer_names_exactly_one_thing() -> None:
    registry = Registry()
    with pytest.raises(TypeError, match="exactly one"):
        registry.completion(argument="a")
    with pytest.raises(TypeError, match="exactly one"):
        registry.completion(argument="a", prompt="p", resource_template="x://{a}")
    with pytest.raises(TypeError, match="argument"):
        registry.completion(argument="", prompt="p")
    with pytest.raises(ValueError, match="no variable 'b'"):
        registry.completion(argument="b", resource_template="x://{a}")
    registry.completion(argument="a", prompt="p")(handler)
    with pytest.raises(ValueError, match="twice"):
        registry.completion(argument="a", prompt="p")(handler)
    assert list(registry.completions) == [("ref/prompt", "p", "a")]


def fuzz_registry() -> Registry:
    """Completers that never fail, so that any -32603 is the server's own doing."""
    registry = Registry()

    @registry.prompt()
    async def code_review(language: str, framework: str = "") -> str:
        return language

    @registry.completion(prompt="code_review", argument="language")
    async def complete_language(value: str, arguments: Mapping[str, str]) -> list[str]:
        return [language for language in LANGUAGES if language.startswith(value)]

    @registry.resource_template("test://template/{id}/data")
    async def item(id: int) -> str:
        return str(id)

    @registry.completion(resource_template="test://template/{id}/data", argument="id")
    def complete_id(value: str, arguments: Mapping[str, str]) -> list[str]:
        return [value + digit for digit in "0123456789"] * 20

    @registry.resource("memo://fixed")
    async def fixed() -> str:
        return "fixed"

    return registry


FUZZ_REGISTRY = fuzz_registry()
