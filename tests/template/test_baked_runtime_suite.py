"""The template's runtime suite passes against the installed bakes that carry every wing.

The runtime suite (``tests/runtime``: protocol, tokens, fuzz, bad input, stdio end to end, legacy
bridge, clients) runs with a bake's own python against its package (``MRTR_PACKAGE``), under its
own ``pytest.ini``: in full against the "aws" combination, and against "no-aws" only its tests
that reach past the vendored runtime into the baked project (its package, directory, tools,
README, real server), since both vendor the same runtime byte for byte
(test_baked_checks.py checks that). Slow (minutes), and part of every ``python3 dev.py test``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable

import pytest
from bakery import (
    FULL_COMBINATIONS,
    REPO,
    RUNTIME_SUITE_WORKERS,
    Installed,
    run_template_suite,
)

pytestmark = pytest.mark.baked_checks

RUNTIME_SUITE = REPO / "tests" / "runtime"
#: The combination the runtime suite runs against in full: every wing, and the AWS example.
FULL_RUNTIME_COMBINATION = "aws"
#: What the runtime suite's support module names the baked package and its directory by.
PROJECT_NAMES = frozenset({"PACKAGE", "PROJECT", "MRTR_PACKAGE"})


def mentions(source: str, names: set[str] | frozenset[str]) -> bool:
    return re.search(rf"\b({'|'.join(map(re.escape, sorted(names)))})\b", source) is not None


def names_reaching_the_project() -> set[str]:
    """``PROJECT_NAMES`` and the runtime conftest's fixtures built on them, directly or through
    one another."""
    source = (RUNTIME_SUITE / "conftest.py").read_text(encoding="utf-8")
    fixtures = {
        node.name: ast.get_source_segment(source, node) or ""
        for node in ast.parse(source).body
        if isinstance(node, ast.FunctionDef)
        and any("fixture" in ast.unparse(decorator) for decorator in node.decorator_list)
    }
    names = set(PROJECT_NAMES)
    while grown := {name for name, body in fixtures.items() if mentions(body, names)} - names:
        names |= grown
    return names


def lines_of(lines: list[str], node: ast.stmt) -> str:
    """The lines ``node`` spans, its decorators included."""
    decorators: list[ast.expr] = getattr(node, "decorator_list", [])
    first = min([node.lineno, *(decorator.lineno for decorator in decorators)])
    return "\n".join(lines[first - 1 : node.end_lineno])


def runtime_tests_reaching_the_project() -> list[str]:
    """The runtime suite's tests (``path::name``) that use the baked project beyond its
    ``mrtr_runtime``: those whose code, decorators included, names the project, directly or
    through their module's functions, classes, fixtures and constants."""
    project_names = names_reaching_the_project()
    selected = []
    for path in sorted(RUNTIME_SUITE.rglob("test_*.py")):
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        definitions: dict[str, str] = {}
        for node in ast.parse(source).body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                definitions[node.name] = lines_of(lines, node)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        definitions[target.id] = lines_of(lines, node)
        names = set(project_names)
        while grown := {n for n, code in definitions.items() if mentions(code, names)} - names:
            names |= grown
        selected += [
            f"{path}::{name}"
            for name in definitions
            if name.startswith(("test_", "Test")) and name in names
        ]
    return selected


def test_the_project_reaching_selection_finds_the_tests_that_reach_the_real_project() -> None:
    selected = {test.rpartition("/")[2] for test in runtime_tests_reaching_the_project()}
    assert "build_server" in names_reaching_the_project()
    # They start `python -m <package>`, import the project's own tools or app, read its README.
    assert {
        "test_bad_input.py::test_every_bad_line_gets_the_right_error_or_none_and_the_server_keeps_serving",
        "test_startup.py::test_tools_list_as_the_first_request_loads_the_tools_first",
    } <= selected
    assert not any(test.startswith("test_jsonrpc.py") for test in selected)


@pytest.mark.parametrize("combination", sorted(FULL_COMBINATIONS))
def test_the_runtime_suite_passes_against_every_combination_with_every_wing(
    installed: Callable[[str], Installed], combination: str
) -> None:
    if combination == FULL_RUNTIME_COMBINATION:
        run_template_suite(installed(combination), RUNTIME_SUITE, workers=RUNTIME_SUITE_WORKERS)
    else:
        tests = runtime_tests_reaching_the_project()
        run_template_suite(
            installed(combination), RUNTIME_SUITE, targets=tests, workers=RUNTIME_SUITE_WORKERS
        )
