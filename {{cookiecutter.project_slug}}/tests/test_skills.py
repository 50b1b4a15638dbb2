"""This project's skills, as a host sees them: declared, listed with digests, read back whole.

Each folder of the package's ``skills/`` with a ``SKILL.md`` is served as the skills extension
defines (docs/skills.md). These tests hold every skill here to it: the entry
a host builds its registry from matches the files it later reads, byte for byte.
"""

from __future__ import annotations

import base64
import hashlib
import importlib
import secrets
from typing import Any

import pytest

from {{ cookiecutter.package_name }}.app import build_server
from {{ cookiecutter.package_name }}.mrtr_runtime.testing import (
    MemoryClient,
    RpcError,
)

pytestmark = pytest.mark.anyio


def yaml_load(text: str) -> Any:
    """PyYAML's safe_load (PyYAML ships no type information: loaded by name, as the runtime
    loads it)."""
    return importlib.import_module("yaml").safe_load(text)


SKILLS = "io.modelcontextprotocol/skills"


@pytest.fixture
def client() -> MemoryClient:
    server = build_server({"MRTR_SIGNING_KEY": secrets.token_hex(32), "MRTR_TASK_STORE": "memory:"})
    return MemoryClient(server)


async def read_bytes(client: MemoryClient, uri: str) -> bytes:
    (content,) = (await client.request("resources/read", {"uri": uri}))["contents"]
    if "text" in content:
        return str(content["text"]).encode()
    return base64.b64decode(content["blob"])


async def test_the_server_declares_its_skills(client: MemoryClient) -> None:
    discover = await client.request("server/discover", {})
    assert discover["capabilities"]["extensions"][SKILLS] == {"directoryRead": True}
    assert "resources" in discover["capabilities"]


async def test_every_listed_file_is_served_as_its_entry_says(client: MemoryClient) -> None:
    listed: list[dict[str, Any]] = (await client.request("skills/list", {}))["skills"]
    assert "skill://multi-round-tool/SKILL.md" in {skill["uri"] for skill in listed}
    for skill in listed:
        assert skill["uri"].rsplit("/", 2)[-2] == skill["frontmatter"]["name"]
        assert skill["uri"] in {resource["uri"] for resource in skill["resources"]}
        for resource in skill["resources"]:
            content = await read_bytes(client, resource["uri"])
            assert len(content) == resource["size"], resource["uri"]
            assert resource["digest"] == "sha256:" + hashlib.sha256(content).hexdigest()
        # The frontmatter is the file's own, as a YAML parser reads it.
        text = (await read_bytes(client, skill["uri"])).decode()
        assert yaml_load(text.split("---")[1]) == skill["frontmatter"]
        got = await client.request("skills/get", {"uri": skill["uri"]})
        assert got["skill"] == skill


async def test_an_unknown_skill_is_invalid_params(client: MemoryClient) -> None:
    with pytest.raises(RpcError) as raised:
        await client.request("skills/get", {"uri": "skill://no-such-skill/SKILL.md"})
    assert raised.value.code == -32602
