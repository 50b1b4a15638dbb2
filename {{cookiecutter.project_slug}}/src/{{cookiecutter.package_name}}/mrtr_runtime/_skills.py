"""The project's skills, served as the skills extension defines (`io.modelcontextprotocol/skills`,
SEP-2640, against 2026-07-28).

A skill is a directory holding a ``SKILL.md`` (YAML frontmatter with at least ``name`` and
``description``, then Markdown) and any files beside it, as the Agent Skills specification
defines it. A project keeps its skills in ``src/<package>/skills/``; each is served as resources
``skill://<skill-path>/<file-path>`` (read with the ordinary ``resources/read``, in both eras),
listed by ``skills/list`` and found by ``skills/get``, each entry carrying the frontmatter as
JSON and every file with its ``sha256:`` digest and size.

The rules of the extension this module holds: the last segment of the skill path is the
frontmatter ``name``, which follows the Agent Skills naming rules; ``resources`` lists every
file, ``SKILL.md`` included, each once; a skill over 512 files or 16 MiB is not served; an
unknown URI is -32602. What is served is what the artifacts rule lets a wheel ship
(`cli/_artifacts`): a hidden file, byte code or a backup copy is no file of the skill; a symbolic
link anywhere under the skills folder (the folder itself included), a file named like a
credential, and a file that holds one of the server's signing keys or an AWS key stop the load
and are named, by their path from the skills folder down. URIs are percent-encoded per segment;
a folder holding its own SKILL.md is a skill of its own, not a file of the one above it.

The files are read once, at the first request that needs them (never at start-up: the server's
first answer does not wait), and served from that snapshot, so a digest always matches the bytes
served. YAML is PyYAML's (a dependency of every project baked with skills), imported then:
frontmatter is YAML, and its JSON form must be what a YAML parser reads.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import mimetypes
import os
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

from ._errors import MrtrError
from ._jsonrpc import INVALID_PARAMS, JSONObject, RpcError, clip
from ._wire import SKILLS_EXTENSION
from .cli._artifacts import EXCLUDE, REFUSE, ArtifactFilter, name_verdict

__all__ = ("SKILLS_EXTENSION", "SkillError", "SkillShelf")

SKILL_FILE: Final = "SKILL.md"
#: The extension's per-skill limits: what every conforming host must accept.
MAX_FILES_PER_SKILL: Final = 512
MAX_BYTES_PER_SKILL: Final = 16 * 1024 * 1024
#: Agent Skills: 1-64 characters, lowercase letters, digits and single hyphens inside.
_NAME: Final = re.compile(r"(?!.*--)[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?")
#: A SKILL.md starts with its frontmatter between two `---` lines (a BOM before it is allowed).
_FRONTMATTER: Final = re.compile(r"\A\ufeff?---\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)
#: How long a client may keep a skill's file: the snapshot does not change while the server runs.
FILE_TTL_SECONDS: Final = 300
#: The mime type of a directory resource (`resources/directory/read`).
DIRECTORY: Final = "inode/directory"
_TEXT_TYPES: Final = frozenset(
    {"application/json", "application/xml", "application/x-sh", "application/javascript"}
)


class SkillError(MrtrError, ValueError):
    """A skill in the project's skills directory cannot be served; says which file and why."""


@dataclass(frozen=True)
class SkillFile:
    uri: str
    relative: str  # within the skill directory, with "/"
    content: bytes
    mime_type: str

    @property
    def digest(self) -> str:
        return "sha256:" + hashlib.sha256(self.content).hexdigest()


@dataclass(frozen=True)
class Skill:
    uri: str
    frontmatter: Mapping[str, Any]
    files: tuple[SkillFile, ...]

    def entry(self) -> JSONObject:
        """The extension's `Skill` entry, the same in `skills/list` and `skills/get`."""
        return {
            "uri": self.uri,
            "frontmatter": dict(self.frontmatter),
            "resources": [
                {"uri": file.uri, "digest": file.digest, "size": len(file.content)}
                for file in self.files
            ],
        }


@dataclass(frozen=True)
class SkillResource:
    """One skill file as a resource: its metadata and the handler that reads it."""

    uri: str
    name: str
    description: str | None
    mime_type: str
    read: Callable[[], Awaitable[str | bytes]]
    #: Cacheable by anyone this long: the snapshot does not change while the server runs.
    cache_ttl_seconds: int = FILE_TTL_SECONDS


class SkillShelf:
    """The skills under `directory`, read on first use (`load`)."""

    def __init__(self, directory: Path, keys: Callable[[], Iterable[bytes]] = tuple) -> None:
        """`keys`: the signing keys the server could hold, read when the skills are loaded: a
        skill file that holds one is refused, as the artifact rule refuses it in a wheel."""
        self.directory = directory
        self._keys = keys
        self._skills: dict[str, Skill] | None = None
        #: Every directory resource (`inode/directory`) by URI: its direct children.
        self._directories: dict[str, list[JSONObject]] = {}

    @staticmethod
    def found_in(directory: Path, keys: Callable[[], Iterable[bytes]] = tuple) -> SkillShelf | None:
        """A shelf for `directory` when it holds a skill (a SKILL.md outside hidden folders);
        None otherwise (the server then declares no skills). Reads no file."""
        if not directory.is_dir():
            return None
        try:
            found = bool(_skill_roots(directory))
        except SkillError:
            found = True  # a link: said where the skills are loaded, not at start-up
        return SkillShelf(directory, keys) if found else None

    def load(self) -> dict[str, Skill]:
        """Every skill, by its SKILL.md URI. Raises SkillError naming the file and the reason."""
        if self._skills is None:
            rule = ArtifactFilter(self._keys())
            skills: dict[str, Skill] = {}
            for root in _skill_roots(self.directory):
                skill = self._read_skill(root, rule)
                skills[skill.uri] = skill
            self._directories = _directories_of(skills.values())
            self._skills = skills
        return self._skills

    def resources(self) -> list[SkillResource]:
        """Every file of every skill as the resource it is served as (`resources/list` and
        `/read`); the router adds them to the registry with the tools."""
        served = []
        for skill in self.load().values():
            for file in skill.files:
                if file.relative == SKILL_FILE:
                    name = str(skill.frontmatter["name"])
                    description: str | None = str(skill.frontmatter["description"])
                else:
                    name, description = file.relative, None
                served.append(
                    SkillResource(file.uri, name, description, file.mime_type, _reader(file))
                )
        return served

    def list_result(self, params: Mapping[str, Any]) -> JSONObject:
        """`skills/list`: every entry on one page (pagination: any cursor is one never issued)."""
        if params.get("cursor") is not None:
            raise RpcError(INVALID_PARAMS, "Invalid cursor")
        return {"skills": [skill.entry() for skill in self.load().values()]}

    def get_result(self, params: Mapping[str, Any]) -> JSONObject:
        """`skills/get`: the entry of the skill whose SKILL.md is `params.uri`; -32602 else."""
        uri = params.get("uri")
        if not isinstance(uri, str):
            raise RpcError(INVALID_PARAMS, "skills/get needs the uri of a skill's SKILL.md")
        skill = self.load().get(uri)
        if skill is None:
            raise RpcError(INVALID_PARAMS, f"No skill is served at {clip(uri)}")
        return {"skill": skill.entry()}

    def directory_result(self, params: Mapping[str, Any]) -> JSONObject:
        """`resources/directory/read` (`directoryRead`): a directory's direct children, files
        with their resource metadata and subdirectories as `inode/directory`; -32602 for a URI
        that is not a directory served here."""
        uri = params.get("uri")
        if not isinstance(uri, str):
            raise RpcError(INVALID_PARAMS, "resources/directory/read needs a uri")
        if params.get("cursor") is not None:
            raise RpcError(INVALID_PARAMS, "Invalid cursor")
        self.load()
        children = self._directories.get(uri)
        if children is None:
            raise RpcError(INVALID_PARAMS, f"{clip(uri)} is not a directory resource")
        return {"resources": [dict(child) for child in children]}

    # -- reading one skill ------------------------------------------------------------------

    def _read_skill(self, root: Path, rule: ArtifactFilter) -> Skill:
        shown = _shown(self.directory, root / SKILL_FILE)
        if root == self.directory:
            raise SkillError(
                f"{shown}: a skill is a directory inside {self.directory.name}/, named as its "
                "frontmatter names it"
            )
        frontmatter = _frontmatter(root / SKILL_FILE, shown)
        name = frontmatter["name"]
        if _NAME.fullmatch(name) is None:
            raise SkillError(
                f"{shown}: name {name!r} breaks the Agent Skills naming rules "
                "(1-64 lowercase letters, digits and single hyphens, not first or last)"
            )
        if root.name != name:
            raise SkillError(
                f"{shown}: the skill's directory is {root.name!r} but its name is "
                f"{name!r}; the last segment of a skill's path must be its name"
            )
        base = "skill://" + _uri_path(root.relative_to(self.directory).as_posix())
        paths = _files_of(root, self.directory)
        # Counted before anything is read: a runaway folder is refused, not loaded.
        total = sum(path.stat().st_size for _, path in paths)
        if len(paths) > MAX_FILES_PER_SKILL or total > MAX_BYTES_PER_SKILL:
            raise SkillError(
                f"{_shown(self.directory, root)}: {len(paths)} files, {total} bytes; a skill may "
                f"hold at most {MAX_FILES_PER_SKILL} files and {MAX_BYTES_PER_SKILL} bytes (the "
                "extension's limits: hosts need not load more)"
            )
        files = []
        for relative, path in paths:
            # What a wheel may not ship, a server does not serve: a signing key, AWS keys.
            verdict = rule.judge(path, relative)
            if verdict is not None and verdict[0] == REFUSE:
                raise SkillError(f"{_shown(self.directory, path)}: {verdict[1]}")
            content = path.read_bytes()
            uri = f"{base}/{_uri_path(relative)}"
            files.append(SkillFile(uri, relative, content, _mime_type(relative, content)))
        return Skill(f"{base}/{SKILL_FILE}", frontmatter, tuple(files))


def _shown(directory: Path, path: Path) -> str:
    """`path` as a message shows it: from the skills folder's name down (a client reads these
    messages too; the server's own paths are not theirs to know)."""
    return path.relative_to(directory.parent).as_posix()


def _uri_path(path: str) -> str:
    """A path as URI segments: each percent-encoded (RFC 3986), so a space, `#`, `?` or `%` in a
    name stays part of the name."""
    return "/".join(quote(segment, safe="") for segment in path.split("/"))


def _skill_roots(directory: Path) -> list[Path]:
    """Every directory under `directory` (itself included) holding a SKILL.md, sorted; hidden
    and byte-code folders are not looked into, and a symbolic link anywhere stops the load."""
    if directory.is_symlink():
        raise SkillError(f"{directory.name}/ is a symbolic link; {_LINK}")
    roots = []
    for current, subdirectories, files in os.walk(directory):
        here = Path(current)
        kept = []
        for name in sorted(subdirectories):
            path = here / name
            verdict = name_verdict(path.relative_to(directory).as_posix())
            if verdict is not None and verdict[0] == EXCLUDE:
                continue
            if path.is_symlink():
                raise SkillError(f"{_shown(directory, path)}: a symbolic link; {_LINK}")
            kept.append(name)
        subdirectories[:] = kept
        if SKILL_FILE in files:
            roots.append(here)
    return sorted(roots)


_LINK = "it could serve what it points at. Copy the files in, or remove the link"


def _directories_of(skills: Iterable[Skill]) -> dict[str, list[JSONObject]]:
    """Each directory level of the served files (a skill's root, its subdirectories, and any
    prefix above it), with its direct children, files first, each once, sorted."""
    files: dict[str, SkillFile] = {}
    for skill in skills:
        for file in skill.files:
            files.setdefault(file.uri, file)
    listing: dict[str, dict[str, JSONObject]] = {}
    for uri, file in sorted(files.items()):
        parent, _, base = uri.rpartition("/")
        listing.setdefault(parent, {})[uri] = {
            "uri": uri,
            "name": base,
            "mimeType": file.mime_type,
        }
        # Every level up to the authority (`skill://<first segment>`) is a directory.
        while parent.count("/") > 2:
            above, _, name = parent.rpartition("/")
            listing.setdefault(above, {}).setdefault(
                parent, {"uri": parent, "name": name, "mimeType": DIRECTORY}
            )
            parent = above
    return {uri: sorted(children.values(), key=_child_order) for uri, children in listing.items()}


def _child_order(child: JSONObject) -> tuple[bool, str]:
    return child["mimeType"] == DIRECTORY, str(child["uri"])


def _files_of(root: Path, directory: Path) -> list[tuple[str, Path]]:
    """(path within the skill, path) of every file that ships, sorted, SKILL.md first; a
    folder holding a SKILL.md of its own is another skill, not part of this one."""
    found: list[tuple[str, Path]] = []
    for current, subdirectories, files in os.walk(root):
        here = Path(current)
        kept = []
        for name in sorted(subdirectories):
            path = here / name
            verdict = name_verdict(path.relative_to(root).as_posix())
            if (verdict is not None and verdict[0] == EXCLUDE) or (path / SKILL_FILE).is_file():
                continue
            kept.append(name)  # _skill_roots refused any link among them
        subdirectories[:] = kept
        for name in files:
            path = here / name
            relative = path.relative_to(root).as_posix()
            if path.is_symlink():
                raise SkillError(f"{_shown(directory, path)}: a symbolic link; {_LINK}")
            verdict = name_verdict(relative)
            if verdict is not None:
                kind, why = verdict
                if kind == EXCLUDE:
                    continue
                raise SkillError(f"{_shown(directory, path)}: {why}")
            if path.is_file():
                found.append((relative, path))
    found.sort(key=lambda item: (item[0] != SKILL_FILE, item[0]))
    return found


def _frontmatter(skill_md: Path, shown: str) -> dict[str, Any]:
    try:
        text = skill_md.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise SkillError(f"{shown}: not UTF-8 text") from None
    match = _FRONTMATTER.match(text)
    if match is None:
        raise SkillError(f"{shown}: it must begin with YAML frontmatter between '---' lines")
    try:
        yaml = importlib.import_module("yaml")
    except ImportError:
        raise SkillError(
            "serving skills needs PyYAML to read their frontmatter: pip install 'pyyaml>=6' "
            "(a project baked with include_skills=yes lists it in its dependencies)"
        ) from None
    try:
        data = yaml.safe_load(match.group(1))
    except yaml.YAMLError as error:
        raise SkillError(f"{shown}: its frontmatter is not YAML: {error}") from None
    if not isinstance(data, dict):
        raise SkillError(f"{shown}: its frontmatter must be a mapping of fields")
    for field in ("name", "description"):
        if not isinstance(data.get(field), str) or not data[field].strip():
            raise SkillError(f"{shown}: its frontmatter needs a non-empty string {field!r}")
    try:
        # "Rendered verbatim as a JSON object": a value JSON cannot hold (a YAML date, a
        # set) would be changed on the way; the author quotes it instead.
        json.dumps(data, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise SkillError(
            f"{shown}: its frontmatter holds a value JSON cannot carry ({error}); quote it"
        ) from None
    return data


def _mime_type(relative: str, content: bytes) -> str:
    if relative.endswith(".md"):
        return "text/markdown"
    guessed, _ = mimetypes.guess_type(relative, strict=False)
    if guessed is not None:
        return guessed
    return "text/plain" if _utf8(content) is not None else "application/octet-stream"


def _utf8(content: bytes) -> str | None:
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _reader(file: SkillFile) -> Callable[[], Awaitable[str | bytes]]:
    """The resource handler of one file: its text where it is text, else its bytes (a blob);
    either way exactly the bytes the digest covers."""
    text = _utf8(file.content)
    as_text = text is not None and (
        file.mime_type.startswith("text/") or file.mime_type in _TEXT_TYPES
    )
    served: str | bytes = text if as_text and text is not None else file.content

    async def read() -> str | bytes:
        return served

    return read
