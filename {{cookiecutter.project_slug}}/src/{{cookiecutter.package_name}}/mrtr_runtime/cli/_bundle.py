"""``<slug> bundle``: this project as an MCP Bundle, ``dist/<slug>-<version>.mcpb``.

An MCP Bundle is a zip archive with ``manifest.json`` at its root (the format of the
modelcontextprotocol/mcpb repository). Ours uses the manifest's ``uv`` server type (manifest
0.4): the archive carries ``pyproject.toml``, ``README.md``, ``hatch_build.py`` and ``src/``, not
the dependencies, and the host starts the server with ``uv run --directory <bundle> <slug>`` as
``manifest.json`` says, so uv installs anyio and pydantic (and the extras named there) from
PyPI the first time the bundle starts. A bundle of the ``python`` type would have to carry
them, and pydantic's compiled core ties such a bundle to one platform.

``manifest.json`` in the project is the source: this command copies it with ``version`` set to
the project's version and ``tools`` listed from the tools registry, so a new tool needs
no edit there. The archive is what the official CLI's ``mcpb pack`` writes for the same files
(deflate, Unix permissions kept), made with the standard library so that bundling needs no
Node. ``npx @anthropic-ai/mcpb validate`` and ``info`` read it.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .._errors import MrtrError
from .._project import Project
from ._artifacts import EXCLUDE, ArtifactFilter, ArtifactRefused

MANIFEST = "manifest.json"
#: Beside ``src/``, what uv needs to install the project from the bundle (the build hook too:
#: ``pyproject.toml`` names it).
PROJECT_FILES = ("pyproject.toml", "README.md", "hatch_build.py")


class BundleError(MrtrError):
    """The project cannot be bundled; the message says why and what to do."""


def tool_entries(project: Project) -> list[dict[str, str]]:
    """The manifest's ``tools``: every registered tool, with its description's first paragraph."""
    project.registry.load_package(project.tools.__name__)
    entries = []
    for tool in project.registry.tools.values():
        entry = {"name": tool.name}
        description = str(tool.summary.get("description", "")).split("\n\n", 1)[0]
        if description:
            entry["description"] = " ".join(description.split())
        entries.append(entry)
    return entries


def bundle_manifest(project: Project, manifest: dict[str, Any]) -> dict[str, Any]:
    """``manifest`` with the project's version and the registry's tools and prompts."""
    filled = dict(manifest)
    filled["version"] = project.version
    filled["tools"] = tool_entries(project)
    # A manifest prompt is a fixed text; ours are asked for at run time, so only flag them.
    if project.registry.prompts:
        filled["prompts_generated"] = True
    return filled


def source_files(project: Project, root: Path) -> Iterator[Path]:
    """The files of ``src/`` that ship, relative to ``root``, sorted.

    What ships is decided by ``_artifacts``, as for the wheel and the sdist: hidden files,
    byte code and backup copies are left out; a link, a copy of a signing key or a credential
    file stops the bundle (``BundleError`` names each one), for a bundle is handed to other
    people.
    """
    gate = ArtifactFilter.for_project(root, project.name, os.environ)
    shipped: list[Path] = []
    refused: list[tuple[str, str]] = []
    for path, relative, verdict in gate.walk(root, root / "src"):
        if verdict is None:
            shipped.append(path.relative_to(root))
        elif verdict[0] != EXCLUDE:
            refused.append((relative, verdict[1]))
    for name in PROJECT_FILES:
        verdict = gate.judge(root / name, name, root=root)
        if verdict is not None:
            refused.append((name, verdict[1]))
    if refused:
        raise BundleError(str(ArtifactRefused(refused)))
    yield from shipped


def lay_out(project: Project, root: Path, target: Path) -> None:
    """Write the bundle's directory: the manifest, the project files and ``src/``."""
    try:
        manifest = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise BundleError(f"cannot read {root / MANIFEST}: {error}") from error
    if not isinstance(manifest, dict):
        raise BundleError(f"{root / MANIFEST} must hold a JSON object")
    for name in PROJECT_FILES:
        if not (root / name).is_file():
            raise BundleError(f"{root / name} is missing; uv needs it to install the bundle")
        shutil.copy2(root / name, target / name)
    for relative in source_files(project, root):
        (target / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / relative, target / relative)
    text = json.dumps(bundle_manifest(project, manifest), indent=2, ensure_ascii=False) + "\n"
    (target / MANIFEST).write_text(text, encoding="utf-8")


def pack(directory: Path, archive: Path) -> None:
    """Zip ``directory`` as ``mcpb pack`` does: files only, deflated, permission bits kept."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_name(archive.name + ".partial")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as bundle:
        for path in sorted(p for p in directory.rglob("*") if p.is_file()):
            info = zipfile.ZipInfo.from_file(path, path.relative_to(directory).as_posix())
            info.compress_type = zipfile.ZIP_DEFLATED
            # Unix permission bits in the upper half of the external attributes, as mcpb does.
            info.create_system = 3
            info.external_attr = (path.stat().st_mode & 0o777) << 16
            bundle.writestr(info, path.read_bytes(), compresslevel=9)
    partial.replace(archive)


def build(project: Project, root: Path, output_dir: Path) -> Path:
    """Lay the bundle out in a temporary directory and write ``<slug>-<version>.mcpb``."""
    archive = output_dir / f"{project.name}-{project.version}.mcpb"
    with tempfile.TemporaryDirectory(prefix=f"{project.name}-bundle-") as staging:
        lay_out(project, root, Path(staging))
        pack(Path(staging), archive)
    return archive
