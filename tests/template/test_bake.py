"""Baking the template: what a generated project contains, and what it must never contain."""

from __future__ import annotations

import json
import re
import shutil
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from bakery import (
    COMBINATIONS,
    DEFAULT_PACKAGE,
    DEFAULT_SLUG,
    KEY_FILE,
    REPO,
    BakeFactory,
    bake_into,
    cookiecutter_config,
    run,
)

# Jinja that survived rendering, or a path that was never rendered. Python's own "{{" (an escaped
# brace in an f-string) is legitimate in the vendored runtime, so only template syntax counts.
UNRENDERED = re.compile(
    r"\{\{-?\s*(?:cookiecutter|_cookiecutter)\b"
    r"|\{%-?\s*(?:if|elif|else|endif|for|endfor|raw|endraw|set|include|macro)\b"
    r"|\{#"
)
# Anything that belongs to the AWS example.
AWS_TRACE = re.compile(r"deploy_to_aws|boto3|botocore|\bmoto\b|cloudformation", re.IGNORECASE)
HEX_KEY = re.compile(r"[0-9a-f]{64}")
RUNTIME = Path("src", DEFAULT_PACKAGE, "mrtr_runtime")
#: What each optional wing adds to a project: there with its option "yes", absent with "no".
WING_FILES = {
    "include_tasks": (RUNTIME / "_tasks.py",),
    "include_http": (
        RUNTIME / "http" / "__init__.py",
        RUNTIME / "http" / "_app.py",
        RUNTIME / "testing" / "_http.py",
        RUNTIME / "testing" / "_http_session.py",
        RUNTIME / "cli" / "_http_commands.py",
        Path("Dockerfile"),
        Path(".dockerignore"),
        Path("tests", "test_http_mode.py"),
        Path("docs", "http.md"),
        Path("docs", "replicas.md"),
        Path("docs", "oauth.md"),
        Path("local-stack", "start.py"),
        Path("local-stack", "authorization_server.mjs"),
        Path("local-stack", "package-lock.json"),
    ),
    "include_redis_store": (RUNTIME / "redis" / "__init__.py", RUNTIME / "redis" / "_store.py"),
    "include_bundle": (
        RUNTIME / "cli" / "_bundle.py",
        Path("manifest.json"),
        Path("server.json"),
        Path("tests", "test_release_files.py"),
    ),
    "include_skills": (
        RUNTIME / "_skills.py",
        Path("src", DEFAULT_PACKAGE, "skills", "multi-round-tool", "SKILL.md"),
        Path("tests", "test_skills.py"),
        Path("docs", "skills.md"),
    ),
}


@pytest.mark.parametrize("combination", sorted(COMBINATIONS))
def test_bake_produces_the_documented_layout(bake: BakeFactory, combination: str) -> None:
    baked = bake(**COMBINATIONS[combination])
    assert baked.project.name == DEFAULT_SLUG
    package = Path("src", DEFAULT_PACKAGE)
    files = set(baked.files())
    for expected in (
        Path("pyproject.toml"),
        Path("README.md"),
        Path(".gitignore"),
        Path(KEY_FILE),
        Path("hatch_build.py"),
        package / "__init__.py",
        package / "__main__.py",
        package / "app.py",
        package / "tools" / "__init__.py",
        package / "mrtr_runtime" / "__init__.py",
        package / "mrtr_runtime" / "server.py",
        package / "mrtr_runtime" / "testing" / "__init__.py",
        package / "mrtr_runtime" / "cli" / "_commands.py",
        package / "mrtr_runtime" / "cli" / "_hosts.py",
        package / "mrtr_runtime" / "cli" / "_artifacts.py",
    ):
        assert expected in files
    for option, wing_files in WING_FILES.items():
        picked = COMBINATIONS[combination][option] == "yes"
        assert [path for path in wing_files if (path in files) != picked] == [], option
    # Ours lives in the runtime: beside the user's app.py and tools, nothing of the template's.
    skills = ["skills"] if COMBINATIONS[combination]["include_skills"] == "yes" else []
    assert sorted(path.name for path in (baked.project / package).iterdir()) == [
        "__init__.py",
        "__main__.py",
        "app.py",
        "mrtr_runtime",
        *skills,
        "tools",
    ]


#: The generated README's bound: what it is, run, write a tool, test it, connect a host, and
#: where everything else is; each wing's manual is a docs/ page baked with the wing.
README_MAX_LINES = 350
LINK = re.compile(r"\]\(([^)#:]+\.md)(?:#[^)]*)?\)")


@pytest.mark.parametrize("combination", sorted(COMBINATIONS))
def test_the_readme_fits_an_afternoon_and_links_only_pages_the_bake_has(
    bake: BakeFactory, combination: str
) -> None:
    baked = bake(**COMBINATIONS[combination])
    readme = (baked.project / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= README_MAX_LINES
    pages = sorted(path.name for path in (baked.project / "docs").iterdir())
    for page in ("multi-round-handlers.md", "results-and-completions.md", "tasks.md"):
        assert page in pages
    aws = COMBINATIONS[combination]["include_aws_example"] == "yes"
    assert ("aws.md" in pages) is aws
    # Every page is listed in the README, and every link of every page leads to a file here.
    for page in pages:
        assert f"(docs/{page})" in readme, page
    for document in [baked.project / "README.md", *(baked.project / "docs").iterdir()]:
        for target in LINK.findall(document.read_text(encoding="utf-8")):
            assert (document.parent / target).is_file(), f"{document.name} links {target}"


@pytest.mark.parametrize("combination", sorted(COMBINATIONS))
def test_nothing_is_left_unrendered(bake: BakeFactory, combination: str) -> None:
    baked = bake(**COMBINATIONS[combination])
    for relative in baked.files():
        assert "{{" not in str(relative) and "cookiecutter" not in str(relative), relative
    for relative, text in baked.text_files().items():
        match = UNRENDERED.search(text)
        assert match is None, f"{relative}: unrendered {match.group(0)!r}"


def test_no_caches_or_bytecode_are_shipped(bake: BakeFactory) -> None:
    baked = bake()
    found = [
        path
        for path in baked.project.rglob("*")
        if path.name in {"__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache"}
        or path.suffix == ".pyc"
    ]
    assert found == []


def test_aws_off_leaves_no_trace(bake: BakeFactory) -> None:
    baked = bake(include_aws_example="no")
    for relative in baked.files():
        assert not AWS_TRACE.search(str(relative)), relative
    for relative, text in baked.text_files().items():
        match = AWS_TRACE.search(text)
        assert match is None, f"{relative} mentions {match.group(0)!r}"
    readme = (baked.project / "README.md").read_text(encoding="utf-8")
    assert not re.search(r"^#+ .*\bAWS\b", readme, re.MULTILINE)
    pyproject = tomllib.loads((baked.project / "pyproject.toml").read_text(encoding="utf-8"))
    # Only what every project has: the tests' and OpenTelemetry's (the API, any transport).
    assert set(pyproject["project"]["optional-dependencies"]) == {"dev", "otel"}


def test_the_default_combination_is_what_cookiecutter_bakes_with_no_answers() -> None:
    defaults = json.loads((REPO / "cookiecutter.json").read_text(encoding="utf-8"))
    options = {
        name: choices[0]
        for name, choices in defaults.items()
        if isinstance(choices, list) and not name.startswith("_")
    }
    assert options == COMBINATIONS["default"]
    # What a desktop host's user needs, and nothing a stdio server never runs.
    assert options == {
        "include_aws_example": "yes",
        "include_tasks": "yes",
        "include_http": "no",
        "include_redis_store": "no",
        "include_bundle": "no",
        "include_skills": "yes",
    }


@pytest.mark.parametrize("combination", sorted(COMBINATIONS))
def test_pyproject_declares_exactly_the_promised_dependencies(
    bake: BakeFactory, combination: str
) -> None:
    baked = bake(**COMBINATIONS[combination])
    aws = COMBINATIONS[combination]["include_aws_example"] == "yes"
    pyproject = tomllib.loads((baked.project / "pyproject.toml").read_text(encoding="utf-8"))
    project = pyproject["project"]
    assert project["name"] == DEFAULT_SLUG
    assert project["requires-python"] == ">=3.11"
    # Two runtime dependencies, each with a floor (the runtime owns the exact floors), and
    # PyYAML where the project serves skills (their frontmatter is YAML).
    names = [re.split(r"[\s<>=!~;\[]", dep, maxsplit=1)[0] for dep in project["dependencies"]]
    skills = COMBINATIONS[combination]["include_skills"] == "yes"
    assert names == ["anyio", "pydantic", *(["pyyaml"] if skills else [])]
    assert all(">=" in dep for dep in project["dependencies"])
    assert project["scripts"] == {DEFAULT_SLUG: f"{DEFAULT_PACKAGE}.app:main"}
    extras = project["optional-dependencies"]
    assert ("aws" in extras) is aws
    if aws:
        assert extras["aws"] == ["boto3>=1.34", "pyyaml>=6"]
    http_wing = COMBINATIONS[combination]["include_http"] == "yes"
    redis_wing = COMBINATIONS[combination]["include_redis_store"] == "yes"
    assert ("http" in extras, "redis" in extras) == (http_wing, redis_wing)
    # HTTP mode is an extra of its own (the stdio server keeps its two dependencies); the dev
    # extra pulls it in, because the project's tests and type checks cover HTTP mode too.
    if http_wing:
        http = [re.split(r"[\s<>=!~;\[]", dep, maxsplit=1)[0] for dep in extras["http"]]
        assert http == ["uvicorn", "httptools", "uvloop"]
    # The Redis task store (replicas) is an extra too: redis-py, imported only for redis:// URLs.
    if redis_wing:
        assert extras["redis"] == ["redis>=8.1,<9"]
    # The OAuth resource server is the HTTP wing's own extra: PyJWT with its crypto backend.
    assert ("oauth" in extras) == http_wing
    if http_wing:
        assert extras["oauth"] == ["pyjwt[crypto]>=2.10,<3"]
    # OpenTelemetry (the API) is an extra of every project, and tested in every one.
    assert extras["otel"] == ["opentelemetry-api>=1.30,<2"]
    wings = (("http", http_wing), ("oauth", http_wing), ("redis", redis_wing), ("otel", True))
    tested = [name for name, picked in wings if picked]
    assert [dep for dep in extras["dev"] if dep.startswith(DEFAULT_SLUG)] == (
        [f"{DEFAULT_SLUG}[{','.join(tested)}]"] if tested else []
    )
    dev = " ".join(extras["dev"])
    for tool in ("pytest", "ruff", "mypy"):
        assert tool in dev
    # The runtime's property tests run in the template: a project carries no hypothesis.
    assert "hypothesis" not in dev
    assert ("moto[cloudformation,server,sts]>=5" in extras["dev"]) is aws
    assert ("boto3>=1.34" in extras["dev"]) is aws
    assert "mcp" not in " ".join(project["dependencies"] + extras["dev"])
    assert pyproject["build-system"]["build-backend"] == "hatchling.build"
    assert pyproject["tool"]["mypy"]["strict"] is True
    assert pyproject["tool"]["ruff"]["line-length"] == 100


def test_answers_are_data_not_code(bake: BakeFactory) -> None:
    description = """Say "hi" & it's done: $(not run) `nor this` #1 <b>bold</b> 100% ✓ 🚀"""
    author = "Siobhán O'Connor-Smith Jr."
    baked = bake(
        project_name="Acme Deploy Bot",
        description=description,
        author_name=author,
        author_email="siobhan+mcp@example.co.uk",
    )
    assert baked.project.name == "acme-deploy-bot"
    assert (baked.project / "src" / "acme_deploy_bot" / "__main__.py").is_file()
    pyproject = tomllib.loads((baked.project / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["project"]["description"] == description
    assert pyproject["project"]["authors"] == [
        {"name": author, "email": "siobhan+mcp@example.co.uk"}
    ]
    assert description in (baked.project / "README.md").read_text(encoding="utf-8")


def test_signing_key_is_private_random_hex(bake: BakeFactory) -> None:
    baked = bake()
    key_file = baked.project / KEY_FILE
    mode = stat.S_IMODE(key_file.stat().st_mode)
    if sys.platform != "win32":
        assert mode == 0o600, oct(mode)
    key = key_file.read_text(encoding="ascii").strip()
    assert HEX_KEY.fullmatch(key)
    assert key not in baked.stdout
    assert key not in baked.stderr
    assert str(key_file) in baked.stdout  # where it is, never what it is


def test_two_bakes_get_different_keys(bake: BakeFactory) -> None:
    first = (bake().project / KEY_FILE).read_text(encoding="ascii")
    second = (bake().project / KEY_FILE).read_text(encoding="ascii")
    assert first != second


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_signing_key_is_git_ignored(bake: BakeFactory) -> None:
    baked = bake()
    run(["git", "init", "--quiet"], cwd=baked.project)
    for name in (KEY_FILE, f"{KEY_FILE}.previous", ".venv/bin/python"):
        ignored = subprocess.run(
            ["git", "check-ignore", "--quiet", name], cwd=baked.project, check=False
        )
        assert ignored.returncode == 0, f"{name} is not git-ignored"
    status = run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=baked.project)
    assert KEY_FILE not in status.stdout
    assert "pyproject.toml" in status.stdout


def _tree(project: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(project)): path.read_bytes()
        for path in sorted(project.rglob("*"))
        if path.is_file()
    }


@pytest.mark.parametrize("combination", sorted(COMBINATIONS))
def test_rendering_twice_gives_the_same_project_except_the_key(
    bake: BakeFactory, combination: str
) -> None:
    first = _tree(bake(**COMBINATIONS[combination]).project)
    second = _tree(bake(**COMBINATIONS[combination]).project)
    assert first.pop(KEY_FILE) != second.pop(KEY_FILE)
    assert first.keys() == second.keys()
    assert [name for name in first if first[name] != second[name]] == []


def test_rebaking_over_a_project_keeps_its_key(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "out"
    output.mkdir()
    first = bake_into(output, capfd)
    before = _tree(first.project)
    second = bake_into(output, capfd, overwrite=True)
    assert second.project == first.project
    assert _tree(second.project) == before
    assert "was kept" in second.stdout


@pytest.mark.parametrize("combination", sorted(COMBINATIONS))
def test_hook_prints_host_configs_with_absolute_paths(bake: BakeFactory, combination: str) -> None:
    baked = bake(**COMBINATIONS[combination])
    out = baked.stdout
    python = str(baked.project / ".venv" / "bin" / "python")
    for heading in ("Claude Desktop", "Claude Code", "VS Code", "Cursor"):
        assert f"== {heading} ==" in out
    assert f'"command": "{python}"' in out
    assert '"servers"' in out and '"type": "stdio"' in out and '"mcpServers"' in out
    assert f'"MRTR_SIGNING_KEY_FILE": "{baked.project / KEY_FILE}"' in out
    assert f"claude mcp add --transport stdio {DEFAULT_SLUG} --env MRTR_SIGNING_KEY_FILE=" in out
    assert f" -- {python} -m {DEFAULT_PACKAGE}" in out


def test_long_names_still_give_a_lint_clean_project(bake: BakeFactory) -> None:
    # Names at the pre-gen limits must not push a generated line past ruff's line length.
    baked = bake(
        project_name="A" * 40 + " " + "b" * 39,
        project_slug="s" * 50,
        package_name="p" * 50,
        description="d" * 100,
        author_name="N" * 100,
        github_owner="o" * 39,
    )
    ruff = [sys.executable, "-m", "ruff"]
    run([*ruff, "check", "--no-cache", "."], cwd=baked.project)
    run([*ruff, "format", "--no-cache", "--check", "."], cwd=baked.project)


def test_a_template_given_as_a_relative_path_bakes_with_its_defaults(tmp_path: Path) -> None:
    # `cookiecutter ./mrtr-server` from the directory above the checkout, as a shell runs it
    # (PWD set): the pre-gen hook must find the template's defaults, not refuse them as Jinja.
    output = tmp_path / "out"
    result = run(
        [
            sys.executable,
            "-m",
            "cookiecutter",
            "--no-input",
            "--output-dir",
            output,
            "--config-file",
            cookiecutter_config(tmp_path),
            f"./{REPO.name}",
            "include_aws_example=no",
        ],
        cwd=REPO.parent,
        env={"PWD": str(REPO.parent)},
    )

    assert (output / DEFAULT_SLUG / "pyproject.toml").is_file(), result.stderr
