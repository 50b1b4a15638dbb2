"""Caching hints that cannot lie (2026-07-28 server/utilities/caching).

"Cacheable Results": server/discover, the four lists and resources/read MUST carry `ttlMs` and
`cacheScope`; "Cache Key": a result of a retry carrying inputResponses or requestState MUST NOT
be cached; "Time-to-Live": `ttlMs` 0 is immediately stale, and servers MUST send `ttlMs >= 0`;
"Choosing a Cache Scope": "private" for what may depend on the caller. What the runtime sends:

- resources/read: what the resource (or template) declared, by default 0 and "private";
- lists and server/discover: 0 and "public", unless the registry declares a list TTL, which
  seals it (declaring more after start-up is refused, so the promise holds);
- legacy (2025-11-25) results: no hints at all (the fields do not exist in that era).

Every hint a declaration can give is checked where it is written: a wrong one is a mistake in
code, not a hint to send to every client.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from mrtr_runtime import Context, InputRequired, Registry, elicit_form
from mrtr_runtime._answers import ElicitResult
from mrtr_runtime._registry import MAX_CACHE_TTL_SECONDS
from mrtr_runtime.testing import MemoryClient
from support import ALL_CAPABILITIES, Name, accept, make_server, next_round

pytestmark = pytest.mark.anyio

LISTS = ("tools/list", "prompts/list", "resources/list", "resources/templates/list")
CACHEABLE_LISTS = ("server/discover", *LISTS)
NOT_CACHED = (0, "private")


def hints(result: dict[str, Any]) -> tuple[object, object]:
    return result["ttlMs"], result["cacheScope"]


def client_of(registry: Registry) -> MemoryClient:
    return MemoryClient(make_server(registry=registry), capabilities=ALL_CAPABILITIES)


def changing_registry(**declared: Any) -> tuple[Registry, list[str]]:
    """A registry with one resource and one template whose content is whatever `values` holds
    now; `declared` are the hints both declare."""
    registry = Registry()
    values = ["first"]

    @registry.resource("memo://now", mime_type="text/plain", **declared)
    def now() -> str:
        return values[-1]

    @registry.resource_template("memo://by/{slug}", mime_type="text/plain", **declared)
    def by(slug: str) -> str:
        return f"{slug}: {values[-1]}"

    return registry, values


# -- resources/read -----------------------------------------------------------------------------


@pytest.mark.parametrize("uri", ["memo://now", "memo://by/x"])
async def test_a_resource_read_is_not_cacheable_unless_the_resource_says_so(uri: str) -> None:
    # The old default (300000, "public") let both official SDK clients serve a changed resource
    # from their caches for five minutes; now the default promises nothing.
    registry, values = changing_registry()
    client = client_of(registry)
    first = await client.request("resources/read", {"uri": uri})
    assert hints(first) == NOT_CACHED
    values.append("second")
    second = await client.request("resources/read", {"uri": uri})
    assert hints(second) == NOT_CACHED
    assert first["contents"][0]["text"] != second["contents"][0]["text"]


@pytest.mark.parametrize("uri", ["memo://now", "memo://by/x"])
@pytest.mark.parametrize(
    ("declared", "expected"),
    [
        ({"cache_ttl_seconds": 60, "cache_scope": "public"}, (60_000, "public")),
        ({"cache_ttl_seconds": 60}, (60_000, "private")),  # a TTL alone shares nothing
        ({"cache_ttl_seconds": 0.25, "cache_scope": "private"}, (250, "private")),
        ({"cache_scope": "public"}, (0, "public")),
        ({"cache_ttl_seconds": MAX_CACHE_TTL_SECONDS}, (86_400_000, "private")),  # at the bound
    ],
)
async def test_a_resource_read_carries_the_hints_its_resource_declared(
    uri: str, declared: dict[str, Any], expected: tuple[int, str]
) -> None:
    registry, _ = changing_registry(**declared)
    result = await client_of(registry).request("resources/read", {"uri": uri})
    assert hints(result) == expected
    assert isinstance(result["ttlMs"], int)  # caching: "an integer value in milliseconds"


async def test_a_retried_read_is_never_cacheable_whatever_its_resource_declared() -> None:
    # caching "Cache Key": results of retries carrying inputResponses or requestState MUST NOT
    # be cached, as they depend on inputs that are not part of the cache key.
    registry = Registry()

    @registry.resource("memo://hello", cache_ttl_seconds=3600, cache_scope="public")
    async def hello(*, ctx: Context) -> str | InputRequired:
        name = ctx.input_response_as("name", ElicitResult[Name])
        if name is None or name.content is None:
            return ctx.request_input({"name": elicit_form("Who is reading?", Name)})
        return f"Hello, {name.content.name}!"

    client = client_of(registry)
    first = await client.request("resources/read", {"uri": "memo://hello"})
    # "Interim results with resultType: input_required ... carry no caching hints."
    assert first["resultType"] == "input_required"
    assert "ttlMs" not in first
    assert "cacheScope" not in first
    final = await next_round(
        client, "resources/read", {"uri": "memo://hello"}, first, {"name": accept(name="Ada")}
    )
    assert final["contents"][0]["text"] == "Hello, Ada!"
    assert hints(final) == NOT_CACHED


async def test_a_legacy_read_carries_no_hints_even_when_its_resource_declared_some() -> None:
    # 2025-11-25 has no ttlMs/cacheScope: a result of that era carries only its own fields.
    registry, _ = changing_registry(cache_ttl_seconds=60, cache_scope="public")
    client = MemoryClient(make_server(registry=registry), capabilities={}, era="legacy")
    await client.initialize()
    result = await client.request("resources/read", {"uri": "memo://now"})
    assert "ttlMs" not in result
    assert "cacheScope" not in result


# -- lists and server/discover --------------------------------------------------------------------


@pytest.mark.parametrize("method", CACHEABLE_LISTS)
async def test_lists_of_an_unsealed_registry_are_immediately_stale(method: str) -> None:
    # A registry that may still grow promises nothing: a client without a listen stream would
    # otherwise miss a tool declared at runtime for the whole TTL. Lists are the same for
    # every caller, so "public" (caching "Choosing a Cache Scope").
    registry, _ = changing_registry()
    result = await client_of(registry).request(method, {})
    assert hints(result) == (0, "public")


async def test_a_tool_declared_at_runtime_is_in_the_next_tools_list() -> None:
    registry = Registry()

    @registry.tool()
    async def first() -> str:
        return "one"

    client = client_of(registry)
    before = await client.request("tools/list", {})
    assert [tool["name"] for tool in before["tools"]] == ["first"]
    assert before["ttlMs"] == 0  # so a client asks again, and sees the change

    @registry.tool()
    async def second() -> str:
        return "two"

    after = await client.request("tools/list", {})
    assert [tool["name"] for tool in after["tools"]] == ["first", "second"]


@pytest.mark.parametrize("method", CACHEABLE_LISTS)
async def test_a_sealed_registry_lists_carry_its_declared_ttl(method: str) -> None:
    registry = Registry(list_cache_ttl_seconds=300)

    @registry.tool()
    async def only() -> str:
        return "one"

    result = await client_of(registry).request(method, {})
    assert hints(result) == (300_000, "public")


async def test_a_sealed_registry_refuses_declarations_after_start_up() -> None:
    # The promise behind a positive list TTL: no list changes within it. So once the tools are
    # loaded (the first request that needs them), declaring more is an error where it is
    # written, and the lists stay what clients were told to keep.
    registry = Registry(list_cache_ttl_seconds=300)

    @registry.tool()  # before start-up: part of the lists
    async def first() -> str:
        return "one"

    client = client_of(registry)
    before = await client.request("tools/list", {})
    assert registry.sealed

    async def late() -> str:
        return "late"

    def variable(slug: str) -> str:
        return slug

    refusals = [
        (registry.tool(), "tool 'late'"),
        (registry.prompt(), "prompt 'late'"),
        (registry.resource("memo://late"), "resource 'memo://late'"),
        (registry.resource_template("memo://late/{slug}"), "resource template 'memo://late/{"),
    ]
    for decorator, what in refusals:
        with pytest.raises(RuntimeError, match="declared after start-up") as refused:
            decorator(variable if "{" in what else late)
        assert str(refused.value).startswith(what)
        assert "list_cache_ttl_seconds" in str(refused.value)
    with pytest.raises(RuntimeError, match="declared after start-up"):
        registry.load_package("json")
    after = await client.request("tools/list", {})
    assert after["tools"] == before["tools"]
    assert (await client.request("prompts/list", {}))["prompts"] == []
    assert (await client.request("resources/list", {}))["resources"] == []
    assert (await client.request("resources/templates/list", {}))["resourceTemplates"] == []


async def test_a_sealed_registry_still_takes_completers_and_resource_updates() -> None:
    # Neither changes a list: a completer answers completion/complete, and an update is about
    # one resource's content (notifications/resources/updated), not the list of resources.
    sealed = Registry(list_cache_ttl_seconds=60)

    @sealed.resource_template("memo://by/{slug}")
    def by(slug: str) -> str:
        return slug

    client = client_of(sealed)
    await client.request("resources/templates/list", {})
    assert sealed.sealed

    @sealed.completion(resource_template="memo://by/{slug}", argument="slug")
    def slugs(value: str, arguments: object) -> list[str]:
        return [slug for slug in ("alpha", "beta") if slug.startswith(value)]

    completed = await client.request(
        "completion/complete",
        {
            "ref": {"type": "ref/resource", "uri": "memo://by/{slug}"},
            "argument": {"name": "slug", "value": "a"},
        },
    )
    assert completed["completion"]["values"] == ["alpha"]
    sealed.resource_updated("memo://by/alpha")  # no error: a content change, not a list's


async def test_an_unsealed_registry_never_seals() -> None:
    registry, _ = changing_registry()
    await client_of(registry).request("tools/list", {})
    assert not registry.sealed


# -- declarations are checked where they are written --------------------------------------------


@pytest.mark.parametrize(
    ("ttl", "error"),
    [
        (-1, ValueError),
        (-0.001, ValueError),
        (MAX_CACHE_TTL_SECONDS + 1, ValueError),  # just past the bound
        (MAX_CACHE_TTL_SECONDS * 10, ValueError),  # and 10x past it
        (math.nan, ValueError),
        (math.inf, ValueError),
        (True, TypeError),  # a bool is an int to Python, never a number of seconds here
        ("60", TypeError),
        (None, TypeError),
    ],
)
def test_a_bad_cache_ttl_is_refused_where_it_is_declared(
    ttl: object, error: type[Exception]
) -> None:
    registry = Registry()
    with pytest.raises(error, match="cache_ttl_seconds must be"):
        registry.resource("memo://x", cache_ttl_seconds=ttl)  # type: ignore[arg-type]
    with pytest.raises(error, match="cache_ttl_seconds must be"):
        registry.resource_template("memo://x/{y}", cache_ttl_seconds=ttl)  # type: ignore[arg-type]
    with pytest.raises(error, match="list_cache_ttl_seconds must be"):
        Registry(list_cache_ttl_seconds=ttl)  # type: ignore[arg-type]
    assert registry.resources == {}
    assert registry.resource_templates == []


@pytest.mark.parametrize("scope", ["shared", "PUBLIC", "", None])
def test_a_bad_cache_scope_is_refused_where_it_is_declared(scope: object) -> None:
    registry = Registry()
    with pytest.raises(ValueError, match='cache_scope must be "public" or "private"'):
        registry.resource("memo://x", cache_scope=scope)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match='cache_scope must be "public" or "private"'):
        registry.resource_template("memo://x/{y}", cache_scope=scope)  # type: ignore[arg-type]
