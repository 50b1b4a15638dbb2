"""release_conventions, in process: the sample resource, resource template and completer.

What a reader copies: a fixed resource and a template listed with their titles, a template
variable typed by its parameter (a wrong value is -32602), a completer that narrows as the user
types, and cache hints that say what is true of the content. What the pages say is checked
against what plan_release does with the same changes, so the guide cannot drift from the tool.
"""

from __future__ import annotations

import re
from typing import Any, get_args

import pytest

from {{ cookiecutter.package_name }}.app import build_server
from {{ cookiecutter.package_name }}.mrtr_runtime.testing import (
    MemoryClient,
    RpcError,
)
from {{ cookiecutter.package_name }}.tools.release_conventions import (
    COMMIT_TYPES,
    CommitType,
)

Json = dict[str, Any]

KEY_HEX = "5d7f9b1d3f5a7c9e0b2d4f6a8c0e1f3a5c7e9b0d2f4a6c8e0a1c3e5f7b9d1f3a"
GUIDE = "release://conventions"
TEMPLATE = "release://conventions/{commit_type}"
#: server/utilities/caching: content fixed by the code, the same for every caller.
PUBLIC_FOR_AN_HOUR = (3_600_000, "public")

pytestmark = pytest.mark.anyio


@pytest.fixture
def client() -> MemoryClient:
    # A host with no forms and no sampling: plan_release then drafts its plan from the
    # arguments alone, in one call, which is what the consistency test compares against.
    return MemoryClient(build_server({"MRTR_SIGNING_KEY": KEY_HEX}), capabilities={})


def complete(value: str) -> Json:
    return {
        "ref": {"type": "ref/resource", "uri": TEMPLATE},
        "argument": {"name": "commit_type", "value": value},
    }


async def read(client: MemoryClient, uri: str) -> Json:
    return await client.request("resources/read", {"uri": uri})


async def test_the_guide_and_the_template_are_listed_with_their_titles(
    client: MemoryClient,
) -> None:
    resources = (await client.request("resources/list", {}))["resources"]
    templates = (await client.request("resources/templates/list", {}))["resourceTemplates"]
    (guide,) = [entry for entry in resources if entry["uri"] == GUIDE]
    assert guide["title"] == "How plan_release reads changes"
    (template,) = [entry for entry in templates if entry["uriTemplate"] == TEMPLATE]
    assert template["mimeType"] == "text/markdown"
    assert template["title"] == "One commit type, as plan_release reads it"


async def test_the_guide_has_a_section_for_every_commit_type(client: MemoryClient) -> None:
    result = await read(client, GUIDE)
    (contents,) = result["contents"]
    assert contents["mimeType"] == "text/markdown"
    assert re.findall(r"^## (\w+)$", contents["text"], re.MULTILINE) == list(COMMIT_TYPES)
    assert set(COMMIT_TYPES) == set(get_args(CommitType))  # one list of types, two views


async def test_one_commit_type_is_read_through_the_template(client: MemoryClient) -> None:
    result = await read(client, "release://conventions/feat")
    (contents,) = result["contents"]
    # The contents carry the URI that was read, not the template.
    assert contents["uri"] == "release://conventions/feat"
    assert "under **Features**" in contents["text"]
    assert "minor release (1.4.2 to 1.5.0)" in contents["text"]
    assert "major release (1.4.2 to 2.0.0" in contents["text"]


async def test_an_unknown_commit_type_is_invalid_params(client: MemoryClient) -> None:
    with pytest.raises(RpcError) as refused:
        await read(client, "release://conventions/feature")
    assert refused.value.code == -32602
    assert "commit_type" in refused.value.message


@pytest.mark.parametrize("uri", [GUIDE, "release://conventions/fix"])
async def test_both_may_be_cached_by_anyone_for_an_hour(client: MemoryClient, uri: str) -> None:
    # They change only with this code and are the same for every caller, so the hints may
    # say so; a resource whose content can change keeps the defaults (0, "private").
    result = await read(client, uri)
    assert (result["ttlMs"], result["cacheScope"]) == PUBLIC_FOR_AN_HOUR


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        ("", list(COMMIT_TYPES)),
        ("f", ["feat", "fix"]),
        ("FI", ["fix"]),
        ("re", ["refactor", "revert"]),
        ("feature", []),
    ],
)
async def test_the_commit_type_completes_as_the_user_types(
    client: MemoryClient, typed: str, expected: list[str]
) -> None:
    completion = (await client.request("completion/complete", complete(typed)))["completion"]
    assert completion == {"values": expected, "total": len(expected), "hasMore": False}


@pytest.mark.parametrize("kind", list(COMMIT_TYPES))
async def test_each_page_says_what_plan_release_does_with_that_type(
    client: MemoryClient, kind: str
) -> None:
    text = (await read(client, f"release://conventions/{kind}"))["contents"][0]["text"]
    section, version = re.search(
        r"under \*\*([^*]+)\*\* and, .* release \(1\.4\.2 to ([0-9.]+)\)", text
    ).groups()  # type: ignore[union-attr]
    arguments = {"project": "demo", "previous_version": "1.4.2", "changes": [f"{kind}: x"]}
    plan = (await client.call_tool("plan_release", arguments)).structured
    assert plan["version"] == version
    assert f"### {section}\n- x" in plan["notes_markdown"]
