"""Every combination, installed in its own venv, passes its own checks, and the ones without a
wing serve stdio and name the option for the rest.

For each named option combination (``bakery.COMBINATIONS``: the AWS example on and off with every
wing, the default bake, the minimal one) one bake gets its own ``.venv`` with
``pip install -e .[dev(,aws)]`` (the README's "Run it": with pip for one, with uv for the others,
caches shared), and then runs what its README promises: ``ruff check``, ``ruff format
--check``, ``mypy`` and ``pytest``. Every
combination vendors the same runtime byte for byte (less the wings it was generated without) and
installs the same versions of what they share, which is what lets the template's runtime suite
(test_baked_runtime_suite.py) run in full against one of them. A combination without some wing
is checked for what a user of it meets: the stdio server serves, and the wing's command and
store are refused naming the option that adds them.

The heavy modules (this one, the runtime suite's and the samples suite's) are split so that
pytest-xdist hands them to different workers; each is part of every ``python3 dev.py test``.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable

import pytest
from bakery import (
    COMBINATIONS,
    DEFAULT_PACKAGE,
    DEFAULT_SLUG,
    FULL_COMBINATIONS,
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
#: The combination the others' runtimes are compared with: every wing, and the AWS example.
FULL_RUNTIME_COMBINATION = "aws"
#: What a combination without a wing is refused, by option: the command and what it says.
WING_COMMANDS = {"include_http": ("http", "health"), "include_bundle": ("bundle",)}


@pytest.mark.parametrize("check", list(CHECKS))
@pytest.mark.parametrize("combination", sorted(COMBINATIONS))
def test_baked_project_passes_its_own_checks(
    installed: Callable[[str], Installed], combination: str, check: str
) -> None:
    project = installed(combination)
    tool, *args = CHECKS[check]
    run([project.tool(tool), *args], cwd=project.project, timeout=1200)


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
        "include_tasks": ("_tasks.py",),
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
    # The stdio server itself: 2026-07-28 requests answered on stdout; the tasks extension is
    # declared, and its methods found, only with the tasks wing.
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {
            "extensions": {"io.modelcontextprotocol/tasks": {}}
        },
    }
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tasks/get",
            "params": {"_meta": meta, "taskId": "x"},
        },
    ]
    served = subprocess.run(
        [script],
        cwd=project.project,
        input="".join(json.dumps(request) + "\n" for request in requests),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    discovered, task = sorted(map(json.loads, served.stdout.splitlines()), key=lambda m: m["id"])
    server_info = discovered["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]
    assert server_info["name"] == DEFAULT_SLUG, served.stderr
    tasks = answers["include_tasks"] == "yes"
    extensions = discovered["result"]["capabilities"].get("extensions", {})
    assert ("io.modelcontextprotocol/tasks" in extensions) is tasks
    # With the wing: an unknown task (-32602); without it: no such method, and the option named.
    assert task["error"]["code"] == (-32602 if tasks else -32601), task
    assert ("include_tasks=no" in task["error"]["message"]) is not tasks
