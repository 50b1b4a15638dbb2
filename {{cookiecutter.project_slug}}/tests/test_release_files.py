"""What a release ships agrees with itself: the versions, the registry name, the MCP Bundle.

The package's ``__version__`` (which pyproject.toml reads), ``server.json`` (the MCP Registry
entry, twice: the server and its PyPI package) and ``manifest.json`` (the MCP Bundle's) must say
the same version: bump all three together. The README carries the registry's ownership marker
for PyPI, ``mcp-name: <the name in server.json>``. The bundle lists this project's tools.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

from {{ cookiecutter.package_name }} import __version__
from {{ cookiecutter.package_name }}.app import main
from {{ cookiecutter.package_name }}.tools import registry

ROOT = Path(__file__).resolve().parents[1]


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
    # What ships in it (no hidden file, link, key copy or credential file) is the runtime's
    # rule, tested in the template; this project checks that its own tools are listed.
    assert main(["bundle", "--output-dir", str(tmp_path)]) == 0
    archive = tmp_path / f"{{ cookiecutter.project_slug }}-{__version__}.mcpb"
    with zipfile.ZipFile(archive) as opened:
        names = set(opened.namelist())
        manifest = json.loads(opened.read("manifest.json"))
    assert {"manifest.json", "pyproject.toml", "README.md"} <= names
    assert not any(name.endswith(".pyc") or ".mrtr-signing-key" in name for name in names)
    assert manifest["version"] == __version__
    assert [tool["name"] for tool in manifest["tools"]] == list(registry.tools)
