"""Skills served as the skills extension defines them (`io.modelcontextprotocol/skills`, SEP-2640).

What must hold: a server with skills declares the extension (with `directoryRead`) and `resources`;
`skills/list` and `skills/get` give entries whose frontmatter is the file's own and whose
resources list every file once, with the digest and size of the bytes `resources/read` returns;
an unknown skill or a non-directory is -32602; a skill that breaks a rule (the name, the folder,
the frontmatter, a link, a credential, the 512-file and 16 MiB limits) is refused with its file
and the reason, before anything of it is served; hidden files, byte code and backups are not part
of a skill; the limits are counted before a byte is read.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import types
from pathlib import Path
from typing import Any

import pytest
import yaml

from mrtr_runtime import Registry
from mrtr_runtime import _project as project_module
from mrtr_runtime._project import Project
from mrtr_runtime._skills import MAX_BYTES_PER_SKILL, MAX_FILES_PER_SKILL, SkillShelf
from mrtr_runtime.server import Server
from mrtr_runtime.testing import MemoryClient, RpcError
from support import Json, make_codec

pytestmark = pytest.mark.anyio

SKILLS = "io.modelcontextprotocol/skills"
SKILL_MD = """---
name: pdf-tools
description: Fill and merge PDF forms. Use when a PDF form must be filled.
license: Apache-2.0
metadata:
  version: "2.1"
  owner: docs team
---

# PDF tools

See `references/FORMS.md`.
"""
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe"


def write_skill(root: Path, name: str = "pdf-tools", skill_md: str = SKILL_MD) -> Path:
    folder = root / name
    (folder / "references" / "deep").mkdir(parents=True)
    (folder / "SKILL.md").write_text(skill_md, encoding="utf-8")
    (folder / "references" / "FORMS.md").write_text("# Forms\r\nCRLF kept\r\n", encoding="utf-8")
    (folder / "references" / "deep" / "notes.txt").write_text("deep\n", encoding="utf-8")
    (folder / "logo.png").write_bytes(PNG)
    return folder


def serve(
    directory: Path, registry: Registry | None = None, keys: tuple[bytes, ...] = ()
) -> MemoryClient:
    shelf = SkillShelf.found_in(directory, lambda: keys)
    server = Server(
        name="skills",
        version="1",
        registry=registry if registry is not None else Registry(),
        signing=make_codec(),
        skills=shelf,
    )
    return MemoryClient(server)


async def read_bytes(client: MemoryClient, uri: str) -> bytes:
    (content,) = (await client.request("resources/read", {"uri": uri}))["contents"]
    assert content["uri"] == uri
    if "text" in content:
        return str(content["text"]).encode()
    return base64.b64decode(content["blob"])


# -- serving -------------------------------------------------------------------------------------


async def test_a_skill_is_declared_listed_and_served_byte_for_byte(tmp_path: Path) -> None:
    write_skill(tmp_path)
    client = serve(tmp_path)

    discover = await client.request("server/discover", {})
    assert discover["capabilities"]["extensions"][SKILLS] == {"directoryRead": True}
    assert "resources" in discover["capabilities"]
    listed = await client.request("skills/list", {})
    assert (listed["resultType"], listed["ttlMs"], listed["cacheScope"]) == (
        "complete",
        0,
        "public",
    )
    (entry,) = listed["skills"]
    assert entry["uri"] == "skill://pdf-tools/SKILL.md"
    # The frontmatter as a YAML parser reads it: every field, nested ones too.
    assert entry["frontmatter"] == yaml.safe_load(SKILL_MD.split("---")[1])
    assert [resource["uri"] for resource in entry["resources"]] == [
        "skill://pdf-tools/SKILL.md",  # its own entry first
        "skill://pdf-tools/logo.png",
        "skill://pdf-tools/references/FORMS.md",
        "skill://pdf-tools/references/deep/notes.txt",
    ]
    for resource in entry["resources"]:
        content = await read_bytes(client, resource["uri"])
        assert resource["size"] == len(content)
        assert resource["digest"] == f"sha256:{hashlib.sha256(content).hexdigest()}"
    assert await read_bytes(client, "skill://pdf-tools/logo.png") == PNG  # a blob, not text
    assert b"\r\n" in await read_bytes(client, "skill://pdf-tools/references/FORMS.md")

    got = await client.request("skills/get", {"uri": entry["uri"]})
    assert got["skill"] == entry and "nextCursor" not in got
    assert (got["ttlMs"], got["cacheScope"]) == (0, "public")
    resources = (await client.request("resources/list", {}))["resources"]
    (skill_md,) = [item for item in resources if item["uri"] == entry["uri"]]
    assert skill_md == {
        "uri": entry["uri"],
        "name": "pdf-tools",
        "description": entry["frontmatter"]["description"],
        "mimeType": "text/markdown",
    }


async def test_directories_list_their_direct_children(tmp_path: Path) -> None:
    write_skill(tmp_path)
    client = serve(tmp_path)

    root = await client.request("resources/directory/read", {"uri": "skill://pdf-tools"})
    assert [(item["name"], item["mimeType"]) for item in root["resources"]] == [
        ("SKILL.md", "text/markdown"),
        ("logo.png", "image/png"),
        ("references", "inode/directory"),
    ]
    deep = await client.request(
        "resources/directory/read", {"uri": "skill://pdf-tools/references/deep"}
    )
    assert [item["uri"] for item in deep["resources"]] == [
        "skill://pdf-tools/references/deep/notes.txt"
    ]
    for uri in ("skill://pdf-tools/SKILL.md", "skill://pdf-tools/nope", "skill://other"):
        with pytest.raises(RpcError) as raised:
            await client.request("resources/directory/read", {"uri": uri})
        assert raised.value.code == -32602 and "not a directory resource" in raised.value.message


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("skills/get", {"uri": "skill://mcp-conformance-nonexistent-skill/SKILL.md"}),
        ("skills/get", {"uri": "skill://pdf-tools/references/FORMS.md"}),  # a file, no skill
        ("skills/get", {}),
        ("skills/list", {"cursor": "never-issued"}),
        ("resources/directory/read", {}),
    ],
)
async def test_what_names_no_skill_is_invalid_params(
    tmp_path: Path, method: str, params: Json
) -> None:
    write_skill(tmp_path)
    with pytest.raises(RpcError) as raised:
        await serve(tmp_path).request(method, params)
    assert raised.value.code == -32602


async def test_a_server_without_skills_declares_none_and_knows_no_skill_method(
    tmp_path: Path,
) -> None:
    client = serve(tmp_path)  # an empty folder: no SKILL.md, no shelf
    discover = await client.request("server/discover", {})
    assert SKILLS not in discover["capabilities"]["extensions"]
    with pytest.raises(RpcError) as raised:
        await client.request("skills/list", {})
    assert raised.value.code == -32601


async def test_a_2025_11_25_client_reads_the_files_but_has_no_skill_methods(
    tmp_path: Path,
) -> None:
    # The extension is defined against 2026-07-28; the files are ordinary resources to others.
    write_skill(tmp_path)
    client = serve(tmp_path)
    await client.initialize()
    assert await read_bytes(client, "skill://pdf-tools/logo.png") == PNG
    with pytest.raises(RpcError) as raised:
        await client.request("skills/list", {})
    assert raised.value.code == -32601


async def test_two_servers_over_one_registry_both_serve_the_skills(tmp_path: Path) -> None:
    write_skill(tmp_path)
    registry = Registry()
    first, second = serve(tmp_path, registry), serve(tmp_path, registry)
    for client in (first, second):
        assert len((await client.request("skills/list", {}))["skills"]) == 1


async def test_nested_skills_and_prefixes_are_listed_flat(tmp_path: Path) -> None:
    write_skill(tmp_path / "acme" / "billing", "refunds", SKILL_MD.replace("pdf-tools", "refunds"))
    nested = tmp_path / "acme" / "billing" / "refunds" / "references" / "nested-one"
    nested.mkdir()
    (nested / "SKILL.md").write_text(SKILL_MD.replace("pdf-tools", "nested-one"), encoding="utf-8")
    client = serve(tmp_path)

    listed = {skill["uri"]: skill for skill in (await client.request("skills/list", {}))["skills"]}
    outer = "skill://acme/billing/refunds/SKILL.md"
    inner = "skill://acme/billing/refunds/references/nested-one/SKILL.md"
    assert set(listed) == {outer, inner}
    # A folder with a SKILL.md of its own is that skill's, not a file of the one around it.
    assert inner not in {resource["uri"] for resource in listed[outer]["resources"]}
    prefix = await client.request("resources/directory/read", {"uri": "skill://acme/billing"})
    assert [item["uri"] for item in prefix["resources"]] == ["skill://acme/billing/refunds"]


async def test_hidden_files_byte_code_and_backups_are_no_part_of_a_skill(tmp_path: Path) -> None:
    folder = write_skill(tmp_path)
    (folder / ".env").write_text("SECRET=1\n", encoding="utf-8")
    (folder / "__pycache__").mkdir()
    (folder / "__pycache__" / "x.pyc").write_bytes(b"\x00")
    (folder / "SKILL.md~").write_text("old\n", encoding="utf-8")
    (tmp_path / ".drafts" / "wip").mkdir(parents=True)
    (tmp_path / ".drafts" / "wip" / "SKILL.md").write_text("not even YAML", encoding="utf-8")
    client = serve(tmp_path)

    (entry,) = (await client.request("skills/list", {}))["skills"]
    assert len(entry["resources"]) == 4
    with pytest.raises(RpcError):
        await client.request("resources/read", {"uri": "skill://pdf-tools/.env"})


# -- refused skills ------------------------------------------------------------------------------


def frontmatter(**fields: Any) -> str:
    lines = "".join(f"{key}: {json.dumps(value)}\n" for key, value in fields.items())
    return f"---\n{lines}---\n# body\n"


@pytest.mark.parametrize(
    ("folder", "skill_md", "reason"),
    [
        ("Pdf", frontmatter(name="Pdf", description="d"), "breaks the Agent Skills naming rules"),
        ("a--b", frontmatter(name="a--b", description="d"), "naming rules"),
        ("-a", frontmatter(name="-a", description="d"), "naming rules"),
        ("x" * 65, frontmatter(name="x" * 65, description="d"), "naming rules"),
        ("other", frontmatter(name="pdf", description="d"), "the skill's directory is 'other'"),
        ("pdf", "# no frontmatter\n", "must begin with YAML frontmatter"),
        ("pdf", "---\n- a list\n---\n", "must be a mapping of fields"),
        ("pdf", frontmatter(name="pdf"), "needs a non-empty string 'description'"),
        ("pdf", frontmatter(name="pdf", description=" "), "non-empty string 'description'"),
        ("pdf", "---\nname: pdf\ndescription: d\nsince: 2026-01-01\n---\n", "JSON cannot carry"),
        ("pdf", "---\nname: pdf\ndescription: [unclosed\n---\n", "is not YAML"),
    ],
)
async def test_a_skill_that_breaks_a_rule_is_refused_with_its_file_and_reason(
    tmp_path: Path, folder: str, skill_md: str, reason: str
) -> None:
    (tmp_path / folder).mkdir()
    (tmp_path / folder / "SKILL.md").write_text(skill_md, encoding="utf-8")
    client = serve(tmp_path)
    with pytest.raises(RpcError) as raised:
        await client.request("skills/list", {})
    assert raised.value.code == -32603
    message = raised.value.message
    assert message.startswith("The tools could not be loaded: the skills in ")
    assert f"{folder}/SKILL.md" in message and reason in message, message
    with pytest.raises(RpcError):  # nothing of it, nor the tools, half-served
        await client.request("tools/list", {})


@pytest.mark.parametrize(
    ("name", "reason"),
    [("credentials.json", "credential"), ("service.pem", "credential")],
)
async def test_a_file_named_like_a_credential_stops_the_load(
    tmp_path: Path, name: str, reason: str
) -> None:
    (write_skill(tmp_path) / name).write_text("x", encoding="utf-8")
    with pytest.raises(RpcError) as raised:
        await serve(tmp_path).request("skills/list", {})
    assert name in raised.value.message and reason in raised.value.message.lower()


async def test_a_symbolic_link_stops_the_load(tmp_path: Path) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-secret.txt"
    outside.write_text("secret", encoding="utf-8")
    (write_skill(tmp_path / "skills") / "notes.txt").symlink_to(outside)
    with pytest.raises(RpcError) as raised:
        await serve(tmp_path / "skills").request("skills/list", {})
    assert "symbolic link" in raised.value.message


@pytest.mark.parametrize("files", [MAX_FILES_PER_SKILL, MAX_FILES_PER_SKILL * 10])
async def test_more_files_than_a_skill_may_hold_are_refused(tmp_path: Path, files: int) -> None:
    folder = write_skill(tmp_path)  # 4 files
    extra = folder / "extra"
    extra.mkdir()
    for number in range(files - 4 + 1):
        (extra / f"{number}.md").write_text("x", encoding="utf-8")
    with pytest.raises(RpcError) as raised:
        await serve(tmp_path).request("skills/list", {})
    assert f"{files + 1} files" in raised.value.message
    assert f"at most {MAX_FILES_PER_SKILL} files" in raised.value.message


async def test_exactly_the_file_limit_is_served(tmp_path: Path) -> None:
    extra = write_skill(tmp_path) / "extra"
    extra.mkdir()
    for number in range(MAX_FILES_PER_SKILL - 4):
        (extra / f"{number}.md").write_text("x", encoding="utf-8")
    (entry,) = (await serve(tmp_path).request("skills/list", {}))["skills"]
    assert len(entry["resources"]) == MAX_FILES_PER_SKILL


@pytest.mark.parametrize("size", [MAX_BYTES_PER_SKILL + 1, MAX_BYTES_PER_SKILL * 10])
async def test_a_skill_over_16_mib_is_refused_before_it_is_read(
    tmp_path: Path, size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = write_skill(tmp_path)
    with (folder / "big.bin").open("wb") as big:
        big.truncate(size)  # sparse: the size is on record, nothing is written
    read = Path.read_bytes

    def no_big_reads(path: Path) -> bytes:
        assert path.name != "big.bin", "the limit must be counted before reading"
        return read(path)

    monkeypatch.setattr(Path, "read_bytes", no_big_reads)
    with pytest.raises(RpcError) as raised:
        await serve(tmp_path).request("skills/list", {})
    assert f"at most {MAX_FILES_PER_SKILL} files and {MAX_BYTES_PER_SKILL} bytes" in (
        raised.value.message
    )


def test_a_folder_without_any_skill_has_no_shelf(tmp_path: Path) -> None:
    assert SkillShelf.found_in(tmp_path / "missing") is None
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "README.md").write_text("x", encoding="utf-8")
    assert SkillShelf.found_in(tmp_path) is None


# -- the project's skills/ folder ------------------------------------------------------------


def project_with_skills(tmp_path: Path) -> Project:
    tools = tmp_path / "pkg" / "tools"
    tools.mkdir(parents=True)
    (tools / "__init__.py").write_text("", encoding="utf-8")
    write_skill(tmp_path / "pkg" / "skills")
    module = types.ModuleType("pkg.tools")
    module.__file__ = str(tools / "__init__.py")
    module.registry = Registry()  # type: ignore[attr-defined]
    return Project(name="demo", title="Demo", version="1", tools=module)


def test_a_project_serves_the_skills_folder_beside_its_tools(tmp_path: Path) -> None:
    shelf = project_with_skills(tmp_path).skills({})
    assert shelf is not None
    assert shelf.directory == (tmp_path / "pkg" / "skills").resolve()
    assert shelf.resources()[0].uri == "skill://pdf-tools/SKILL.md"


def test_a_skills_folder_without_the_wing_is_said_and_the_tools_still_serve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(project_module, "has_wing", lambda name: name != "skills")
    with caplog.at_level(logging.WARNING, logger="mrtr_runtime"):
        assert project_with_skills(tmp_path).skills({}) is None
    (record,) = caplog.records
    assert "is not served" in record.getMessage()
    assert "include_skills" in record.getMessage()


# -- what a wheel may not ship is not served either --------------------------------------------

KEY = bytes(range(32))


@pytest.mark.parametrize(
    "copy", [KEY.hex(), KEY.hex().upper(), base64.b64encode(KEY).decode(), f"key = {KEY!r}"]
)
async def test_a_file_holding_the_servers_signing_key_stops_the_load(
    tmp_path: Path, copy: str
) -> None:
    folder = write_skill(tmp_path / "skills")
    (folder / "references" / "notes.md").write_text(f"# Notes\n{copy}\n", encoding="utf-8")
    with pytest.raises(RpcError) as raised:
        await serve(tmp_path / "skills", keys=(KEY,)).request("skills/list", {})
    message = raised.value.message
    assert "skills/pdf-tools/references/notes.md: holds a signing key" in message
    # The message names the file from the skills folder down: no path of the server's own.
    assert str(tmp_path) not in message


async def test_an_aws_key_pair_in_a_skill_stops_the_load(tmp_path: Path) -> None:
    folder = write_skill(tmp_path / "skills")
    (folder / "references" / "setup.md").write_text(
        "aws_access_key_id = AKIAIOSFODNN7EXAMPLE\n"
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n",
        encoding="utf-8",
    )
    with pytest.raises(RpcError) as raised:
        await serve(tmp_path / "skills").request("skills/list", {})
    assert "skills/pdf-tools/references/setup.md" in raised.value.message


@pytest.mark.parametrize("linked", ["skill", "skills folder"])
async def test_a_linked_skill_or_skills_folder_stops_the_load(tmp_path: Path, linked: str) -> None:
    outside = tmp_path / "outside"
    write_skill(outside)
    if linked == "skill":
        (tmp_path / "skills").mkdir()
        (tmp_path / "skills" / "pdf-tools").symlink_to(outside / "pdf-tools")
    else:
        (tmp_path / "skills").symlink_to(outside)
    shelf = SkillShelf.found_in(tmp_path / "skills")
    assert shelf is not None  # found at start, said when loaded, where a client reads it
    with pytest.raises(RpcError) as raised:
        await serve(tmp_path / "skills").request("skills/list", {})
    assert "symbolic link" in raised.value.message and str(outside) not in raised.value.message


async def test_uris_are_percent_encoded_per_segment_and_read_back(tmp_path: Path) -> None:
    folder = write_skill(tmp_path / "My Group")
    for name in ("a b.md", "x#y.md", "q?.md", "100%.md"):
        (folder / "references" / name).write_text(name, encoding="utf-8")
    client = serve(tmp_path)
    (entry,) = (await client.request("skills/list", {}))["skills"]
    assert entry["uri"] == "skill://My%20Group/pdf-tools/SKILL.md"
    uris = {resource["uri"] for resource in entry["resources"]}
    base = "skill://My%20Group/pdf-tools/references/"
    for encoded, name in (("a%20b.md", "a b.md"), ("x%23y.md", "x#y.md"), ("q%3F.md", "q?.md")):
        assert base + encoded in uris
        assert await read_bytes(client, base + encoded) == name.encode()
    assert await read_bytes(client, base + "100%25.md") == b"100%.md"
    with pytest.raises(RpcError):
        await read_bytes(client, base + "a b.md")  # the unencoded form names nothing


async def test_a_skill_inside_a_skill_is_its_own_not_a_file_of_the_outer(tmp_path: Path) -> None:
    outer = write_skill(tmp_path, "outer", frontmatter(name="outer", description="Outer."))
    (outer / "inner").mkdir()
    (outer / "inner" / "SKILL.md").write_text(
        frontmatter(name="inner", description="Inner."), encoding="utf-8"
    )
    entries = {
        entry["frontmatter"]["name"]: entry
        for entry in (await serve(tmp_path).request("skills/list", {}))["skills"]
    }
    assert sorted(entries) == ["inner", "outer"]
    outer_files = {resource["uri"] for resource in entries["outer"]["resources"]}
    assert "skill://outer/inner/SKILL.md" not in outer_files
    assert [r["uri"] for r in entries["inner"]["resources"]] == ["skill://outer/inner/SKILL.md"]


def test_a_skill_only_in_a_hidden_folder_is_no_skill(tmp_path: Path) -> None:
    write_skill(tmp_path / ".drafts")
    assert SkillShelf.found_in(tmp_path) is None
