"""THE HEAVY ONE: every combination, installed in its own venv, passes its own checks and the
runtime's suite.

For each named option combination (``bakery.COMBINATIONS``: the AWS example on and off with every
wing, the default bake, the minimal one) one bake gets its own ``.venv`` with
``pip install -e .[dev(,aws)]`` (the README's "Run it", pip cache shared), and then runs what its
README promises: ``ruff check``, ``ruff format --check``, ``mypy`` and ``pytest``. Then the
template's runtime suite (``tests/runtime``: protocol, tokens, fuzz, bad input, stdio end to end,
legacy bridge, clients) runs with that venv's python against the baked package
(``MRTR_PACKAGE``), under its own ``pytest.ini`` so neither this directory's conftest nor the
project's settings apply: in full against the "aws" combination, and against the other one with
every wing its tests that reach past the vendored runtime into the baked project (its package,
directory, tools, README, real server), since every combination vendors the same runtime byte for
byte (less the wings it was generated without) and installs the same versions of what they share
(both checked here). A combination without some wing is checked for what a user of it meets: the
stdio server serves, and the wing's command and store are refused naming the option that adds
them. The samples suite (``tests/samples``: the engines behind the sample tools, end to end over
pipes) runs in full against "aws" and "minimal", ``tests/samples/aws`` only where the AWS example
is baked.
Slow (a few minutes per combination), and part of every ``python3 dev.py test``.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from bakery import (
    COMBINATIONS,
    DEFAULT_PACKAGE,
    DEFAULT_SLUG,
    FULL_COMBINATIONS,
    REPO,
    Installed,
    run,
)

pytestmark = pytest.mark.baked_checks

CHECKS = {
    "ruff-check": ["ruff", "check", "."],
    "ruff-format": ["ruff", "format", "--check", "."],
    "mypy": ["mypy"],
    "pytest": ["pytest", "-q", "-p", "no:cacheprovider"],
}
RUNTIME_SUITE = REPO / "tests" / "runtime"
SAMPLES_SUITE = REPO / "tests" / "samples"
#: The samples of the AWS example (the CloudFormation engine, deploy_to_aws end to end).
AWS_SAMPLES = SAMPLES_SUITE / "aws"
#: The combination the runtime suite runs against in full: every wing, and the AWS example.
FULL_RUNTIME_COMBINATION = "aws"
#: The combinations the samples suite runs against: every wing, and none.
SAMPLES_COMBINATIONS = ("aws", "minimal")
#: What a combination without a wing is refused, by option: the command and what it says.
WING_COMMANDS = {"include_http": ("http", "health"), "include_bundle": ("bundle",)}
#: What the runtime suite's support module names the baked package and its directory by.
PROJECT_NAMES = frozenset({"PACKAGE", "PROJECT", "MRTR_PACKAGE"})


@pytest.mark.parametrize("check", list(CHECKS))
@pytest.mark.parametrize("combination", sorted(COMBINATIONS))
def test_baked_project_passes_its_own_checks(
    installed: Callable[[str], Installed], combination: str, check: str
) -> None:
    project = installed(combination)
    tool, *args = CHECKS[check]
    run([project.tool(tool), *args], cwd=project.project, timeout=1200)


def run_suite(
    project: Installed, suite: Path, *options: str | Path, targets: Sequence[str] = ()
) -> None:
    """Run the template's ``suite`` (or only its tests ``targets``) with ``project``'s python,
    under the suite's own settings."""
    settings: list[str | Path] = ["-c", suite / "pytest.ini", "--rootdir", suite]
    run(
        [project.python, "-m", "pytest", *settings, *options, *(targets or [str(suite)]), "-q"],
        cwd=project.project,
        timeout=1200,
        env={"MRTR_PACKAGE": DEFAULT_PACKAGE},
    )


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
    for path in sorted(RUNTIME_SUITE.glob("test_*.py")):
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
        run_suite(installed(combination), RUNTIME_SUITE)
    else:
        tests = runtime_tests_reaching_the_project()
        run_suite(installed(combination), RUNTIME_SUITE, targets=tests)


def vendored_runtime(project: Installed) -> dict[str, bytes]:
    runtime = project.project / "src" / DEFAULT_PACKAGE / "mrtr_runtime"
    return {
        path.relative_to(runtime).as_posix(): path.read_bytes()
        for path in sorted(runtime.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    }


def installed_versions(project: Installed) -> dict[str, str]:
    listed = run([project.python, "-m", "pip", "list", "--format=json"], cwd=project.project)
    return {entry["name"].lower(): entry["version"] for entry in json.loads(listed.stdout)}


def test_every_combination_vendors_the_same_runtime_with_the_same_dependencies(
    installed: Callable[[str], Installed],
) -> None:
    """What lets the runtime suite's runtime-only modules run against one combination: the same
    runtime byte for byte, less the wings a combination was generated without."""
    full = installed(FULL_RUNTIME_COMBINATION)
    runtime, versions = vendored_runtime(full), installed_versions(full)
    assert "server.py" in runtime
    wing_paths = {
        "include_http": ("http/", "testing/_http", "cli/_http_commands.py"),
        "include_redis_store": ("redis/",),
        "include_bundle": ("cli/_bundle.py",),
        "include_skills": ("_skills.py",),
    }
    for combination in sorted(set(COMBINATIONS) - {FULL_RUNTIME_COMBINATION}):
        other = installed(combination)
        left_out = tuple(
            path
            for option, paths in wing_paths.items()
            if COMBINATIONS[combination][option] == "no"
            for path in paths
        )
        expected = {name: data for name, data in runtime.items() if not name.startswith(left_out)}
        assert vendored_runtime(other) == expected, combination
        other_versions = installed_versions(other)
        shared = sorted(set(versions) & set(other_versions))
        assert {"anyio", "pydantic", "pytest", "hypothesis"} <= set(shared)
        assert [other_versions[name] for name in shared] == [versions[name] for name in shared]


@pytest.mark.parametrize("combination", sorted(set(COMBINATIONS) - FULL_COMBINATIONS))
def test_a_combination_without_a_wing_serves_stdio_and_names_the_option_for_the_rest(
    installed: Callable[[str], Installed], combination: str
) -> None:
    project = installed(combination)
    answers = COMBINATIONS[combination]
    script = project.tool(DEFAULT_SLUG)
    for option, commands in WING_COMMANDS.items():
        for command in commands:
            result = run([script, command], cwd=project.project, check=False)
            picked = answers[option] == "yes"
            assert (result.returncode == 2 and option in result.stderr) is not picked, result
            if not picked:
                assert f"no '{command}' command" in result.stderr
                assert f'--variables-to-update \'{{"{option}": "yes"}}\'' in result.stderr
    listed = run([script, "--help"], cwd=project.project).stdout
    assert ("http" in listed.split()) is (answers["include_http"] == "yes")
    # The stdio server itself: one 2026-07-28 request answered on stdout.
    discover = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "server/discover",
            "params": {
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                }
            },
        }
    )
    served = subprocess.run(
        [script],
        cwd=project.project,
        input=discover + "\n",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    (line,) = served.stdout.splitlines()
    server_info = json.loads(line)["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]
    assert server_info["name"] == DEFAULT_SLUG, served.stderr


@pytest.mark.parametrize("combination", SAMPLES_COMBINATIONS)
def test_the_samples_suite_passes_against_every_combination(
    installed: Callable[[str], Installed], combination: str
) -> None:
    aws = COMBINATIONS[combination]["include_aws_example"] == "yes"
    ignored: list[str | Path] = [] if aws else ["--ignore", AWS_SAMPLES]
    run_suite(installed(combination), SAMPLES_SUITE, *ignored)
