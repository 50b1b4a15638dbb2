"""The template's own tooling (dev.py, hooks, these tests) meets the generated project's lint."""

from __future__ import annotations

import re
import sys

import pytest
from bakery import REPO, run

# The files of the template foundation. The hooks are Jinja templates, but they are valid Python
# before rendering too (the answers arrive inside a raw string), so they are linted as they are.
#: The folders of the template's own tests (the runtime and samples suites lint themselves).
TEMPLATE_TEST_FOLDERS = ("template", "cli", "interop", "deployments", "peers")
#: The template's own Python: its tooling and every template test module, new ones included.
LINTED = sorted(
    [
        "dev.py",
        "hooks/pre_gen_project.py",
        "hooks/post_gen_project.py",
        *(str(path.relative_to(REPO)) for path in REPO.glob("tests/*.py")),
        *(
            str(path.relative_to(REPO))
            for folder in TEMPLATE_TEST_FOLDERS
            for path in REPO.glob(f"tests/{folder}/*.py")
        ),
    ]
)
RUFF = [
    sys.executable,
    "-m",
    "ruff",
    "--quiet",
]
SETTINGS = [
    "--isolated",
    "--line-length=100",
    "--target-version=py311",
]


def test_template_tooling_is_ruff_clean() -> None:
    run(
        [
            *RUFF,
            "check",
            *SETTINGS,
            "--select=E,F,W,I,UP,B,S,T20,SIM,RUF",
            # dev.py and the tests start fixed commands built from our own paths, never a shell.
            "--ignore=S603,S606,S607",
            # assert is how pytest states expectations.
            "--per-file-ignores=tests/**:S101",
            *LINTED,
        ],
        cwd=REPO,
    )
    run([*RUFF, "format", "--check", *SETTINGS, *LINTED], cwd=REPO)


def test_ci_runs_exactly_the_readme_test_command() -> None:
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert ci.startswith("#!/usr/bin/env bash\n")
    assert "set -euo pipefail" in ci
    assert re.search(r"^exec python3 dev\.py test$", ci, re.MULTILINE)
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "python3 dev.py test" in readme
    assert "python3 dev.py demo" in readme


@pytest.mark.parametrize("suite", ["runtime", "samples"])
def test_the_suites_run_against_bakes_are_ruff_clean(suite: str) -> None:
    # They run with a baked project's python, not the template's; their own ruff.toml holds
    # the project's rules.
    config = ["--config", f"tests/{suite}/ruff.toml"]
    run([*RUFF, "check", *config, f"tests/{suite}"], cwd=REPO)
    run([*RUFF, "format", "--check", *config, f"tests/{suite}"], cwd=REPO)
