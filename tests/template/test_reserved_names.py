"""The pre-gen hook reserves every top-level module a baked project installs, with every extra,
and every command those put beside the project's console script.

A package named like one of those modules shadows it: the console script then dies with
ModuleNotFoundError (or imports the wrong module); a slug named like one of those commands
replaces it in the venv. The hook runs in cookiecutter's environment and cannot look the names
up, so they are data in it (``INSTALLED_MODULES``, ``INSTALLED_COMMANDS``); these tests compute
the real lists inside an installed bake, from its own metadata, and fail when the hook's miss a
name, so the lists cannot drift when a dependency gains a dependency.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import venv
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from bakery import DEFAULT_SLUG, REPO, Installed

HOOK = REPO / "hooks" / "pre_gen_project.py"

# Runs with the bake's python: the distributions reachable from the project with all its extras
# (markers evaluated for this platform), and the top-level names each one installs.
CLOSURE = r"""
import json
import re
import sys
from importlib import metadata

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

MODULE_SUFFIXES = (".py", ".pyc", ".so", ".pyd")


def top_level(dist):
    names = set((dist.read_text("top_level.txt") or "").split())
    for file in dist.files or ():
        first = file.parts[0] if file.parts else ""
        if first in ("", "..", "__pycache__") or first.endswith((".dist-info", ".data")):
            continue
        if len(file.parts) > 1:
            names.add(first)
        elif first.endswith(MODULE_SUFFIXES):
            names.add(first.split(".", 1)[0])
    return {name.split("/", 1)[0] for name in names}


def commands(dist):
    names = {
        entry.name
        for entry in dist.entry_points
        if entry.group in ("console_scripts", "gui_scripts")
    }
    for file in dist.files or ():
        parts = [part for part in file.parts if part != ".."]
        if len(parts) == 2 and parts[0] in ("bin", "Scripts"):
            names.add(parts[1])
    return names


root = sys.argv[1]
found, scripts, direct, missing = {}, {}, set(), []
todo = [(root, set(metadata.metadata(root).get_all("Provides-Extra") or ()))]
visited = set()
while todo:
    name, extras = todo.pop()
    key = (canonicalize_name(name), frozenset(extras))
    if key in visited:
        continue
    visited.add(key)
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        missing.append(name)
        continue
    if canonicalize_name(name) != canonicalize_name(root):
        found[canonicalize_name(name)] = sorted(top_level(dist))
        scripts[canonicalize_name(name)] = sorted(commands(dist))
    for text in dist.requires or ():
        requirement = Requirement(text)
        marker = requirement.marker
        if marker is None or any(marker.evaluate({"extra": e}) for e in extras | {""}):
            todo.append((requirement.name, set(requirement.extras)))
            if canonicalize_name(name) == canonicalize_name(root):
                direct.add(canonicalize_name(requirement.name))
direct.discard(canonicalize_name(root))  # the dev extra asks for the project's own http extra
report = {"found": found, "commands": scripts, "direct": sorted(direct)}
json.dump({**report, "missing": sorted(set(missing))}, sys.stdout)
"""


def hook_names(variable: str) -> set[str]:
    """Every name in one of the hook's tables (distribution -> names), read from its source: the
    hook is a Jinja template, which cannot be imported."""
    tree = ast.parse(HOOK.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and ast.unparse(node.target) == variable:
            assert node.value is not None
            table = ast.literal_eval(node.value)
            return {name for names in table.values() for name in names}
    raise AssertionError(f"{HOOK} has no {variable}")


def hook_slug_grammar() -> re.Pattern[str]:
    """The hook's PROJECT_SLUG: a slug is also the name of the project's console script."""
    for node in ast.parse(HOOK.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "PROJECT_SLUG":
            assert isinstance(node.value, ast.Call)
            return re.compile(ast.literal_eval(node.value.args[0]))
    raise AssertionError(f"{HOOK} has no PROJECT_SLUG")


def closure_of(project: Installed) -> dict[str, Any]:
    result = subprocess.run(
        [project.python, "-c", CLOSURE, DEFAULT_SLUG],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    closure: dict[str, Any] = json.loads(result.stdout)
    assert closure.pop("missing") == []
    # The walk starts where the project's pyproject.toml does (anyio, pydantic, boto3, uvicorn,
    # pytest, moto...): an empty or broken walk must not pass for a complete list.
    direct = closure.pop("direct")
    assert len(direct) >= 5 and set(direct) <= set(closure["found"]), direct
    return closure


@pytest.mark.parametrize("combination", ["aws"])  # the superset: every extra the template has
def test_the_hook_reserves_every_module_the_baked_project_installs(
    installed: Callable[[str], Installed], combination: str
) -> None:
    listed = hook_names("INSTALLED_MODULES")
    # Only names a package name could take: "_cffi_backend" or "wrapt-stubs" cannot clash.
    unlisted = {
        dist: sorted({n.lower() for n in names if n.isidentifier() and n[:1].isalpha()} - listed)
        for dist, names in closure_of(installed(combination))["found"].items()
    }
    assert {dist: names for dist, names in unlisted.items() if names} == {}


@pytest.mark.parametrize("combination", ["aws"])
def test_the_hook_reserves_every_command_the_baked_project_installs(
    installed: Callable[[str], Installed], combination: str
) -> None:
    listed = hook_names("INSTALLED_COMMANDS")
    slug = hook_slug_grammar()
    # Only names a slug could take (kebab-case): "moto_server" or "py.test" cannot clash.
    unlisted = {
        dist: sorted({n for n in names if slug.fullmatch(n)} - listed)
        for dist, names in closure_of(installed(combination))["commands"].items()
    }
    assert {dist: names for dist, names in unlisted.items() if names} == {}


def test_the_hook_reserves_every_module_a_fresh_venv_ships(tmp_path: Path) -> None:
    # A bake is installed into a venv that already holds these: a package named like one
    # shadows it (pkg_resources, say) for every tool of that venv.
    venv.create(tmp_path / "venv", with_pip=True)
    root = tmp_path / "venv"
    # lib64 is a link to lib in a POSIX venv: one directory, found twice.
    (site_packages,) = {
        path.resolve()
        for path in (*root.glob("lib*/python*/site-packages"), *root.glob("Lib/site-packages"))
    }
    shipped = {
        path.name.split(".", 1)[0]
        for path in site_packages.iterdir()
        if not path.name.endswith((".dist-info", ".pth")) and path.name != "__pycache__"
    }
    assert "pip" in shipped, shipped  # an empty listing must not pass for a complete one
    listed = hook_names("VENV_MODULES")
    assert sorted({name for name in shipped if name.isidentifier()} - listed) == []
