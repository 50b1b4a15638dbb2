"""What a release ships agrees with itself: the versions, the registry name, the MCP Bundle.

The package's ``__version__`` (which pyproject.toml reads), ``server.json`` (the MCP Registry
entry, twice: the server and its PyPI package) and ``manifest.json`` (the MCP Bundle's) must say
the same version: bump all three together. The README carries the registry's ownership marker
for PyPI, ``mcp-name: <the name in server.json>``.
"""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path
from typing import Any

import pytest

from {{ cookiecutter.package_name }} import __version__, bundle
from {{ cookiecutter.package_name }}.tools import registry

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = Path(bundle.__file__).parent.name


def load(name: str) -> Any:
    return json.loads((ROOT / name).read_text(encoding="utf-8"))


def test_server_json_and_the_manifest_carry_the_package_version() -> None:
    server = load("server.json")
    assert server["version"] == __version__
    assert [package["version"] for package in server["packages"]] == [__version__]
    assert load("manifest.json")["version"] == __version__


def test_the_readme_carries_the_registry_ownership_marker() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"<!-- mcp-name: {load('server.json')['name']} -->" in readme


def test_the_bundle_lists_every_registered_tool_at_the_package_version(tmp_path: Path) -> None:
    archive = bundle.build(ROOT, tmp_path)
    assert archive.name == f"{{ cookiecutter.project_slug }}-{__version__}.mcpb"
    with zipfile.ZipFile(archive) as opened:
        names = set(opened.namelist())
        manifest = json.loads(opened.read("manifest.json"))
    assert {"manifest.json", "pyproject.toml", "README.md"} <= names
    assert not any(name.endswith(".pyc") or ".mrtr-signing-key" in name for name in names)
    assert manifest["version"] == __version__
    assert [tool["name"] for tool in manifest["tools"]] == list(registry.tools)


def copy_of_the_project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    for name in ("manifest.json", *bundle.PROJECT_FILES, "src"):
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, project / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, project / name)
    return project


def test_the_bundle_never_ships_hidden_files(tmp_path: Path) -> None:
    # A bundle goes to other people: a .env or an editor's swap file in src/ must stay behind.
    project = copy_of_the_project(tmp_path)
    package = project / "src" / PACKAGE
    (package / ".env").write_text("API_TOKEN=not-for-the-bundle\n", encoding="utf-8")
    (package / "tools" / ".plan.swp").write_bytes(b"swap")
    (package / ".hidden").mkdir()
    (package / ".hidden" / "notes.py").write_text("x = 1\n", encoding="utf-8")

    with zipfile.ZipFile(bundle.build(project, tmp_path / "dist")) as opened:
        names = opened.namelist()
        contents = b"".join(opened.read(name) for name in names)

    assert not [name for name in names if "/." in name], names
    assert b"not-for-the-bundle" not in contents
    assert any(name.endswith("/tools/__init__.py") for name in names)


def test_a_link_in_src_stops_the_bundle_and_is_named(tmp_path: Path) -> None:
    # A link may point at a secret; it is a problem to fix, not a file to leave out quietly.
    project = copy_of_the_project(tmp_path)
    secret = tmp_path / "secret.txt"
    secret.write_text("API_TOKEN=not-for-the-bundle\n", encoding="utf-8")
    (project / "src" / PACKAGE / "key_link").symlink_to(secret)

    with pytest.raises(bundle.BundleError, match=r"refusing to ship src/.*/key_link: a symbolic"):
        bundle.build(project, tmp_path / "dist")
    assert not (tmp_path / "dist").exists()
