"""A generated project takes the template's fixes with cruft and keeps its own tools.

The whole path a project's author follows (README "Updating from the template"): `cruft create`
bakes a project from one commit of a scratch copy of this template; the author adds a tool with
its own test and commits; the template copy commits a runtime fix (a changed limit and the
header's version bump); `cruft check` reports the project out of date, `cruft update -y` brings
the fix in, and the project's own tests pass with the author's tool intact and the signing key
untouched. The runtime's header names the template version, which CHANGELOG.md describes.

And the same from the last 0.4.0 commit (the template's own history) to this checkout: the update
that moved the command line, host configs and bundle into the runtime leaves no conflict, and the
author's tool is intact. The author's test, written on 0.4.0's testing face (`call_tool` returned
the wire's dict), fails under the project's `filterwarnings = ["error"]` with a message saying
what to write instead (0.5.0's `ToolCallResult` still reads `result["content"]`, with a
DeprecationWarning); rewritten so, it passes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import sys
from pathlib import Path

import pytest
from bakery import DEFAULT_PACKAGE, DEFAULT_SLUG, KEY_FILE, REPO, run

RUNTIME = Path("{{cookiecutter.project_slug}}/src/{{cookiecutter.package_name}}/mrtr_runtime")
VERSION_LINE = re.compile(r'^__version__ = "(\d+)\.(\d+)\.(\d+)"$', re.MULTILINE)
#: The runtime fix the template copy commits: a limit in the JSON-RPC layer, changed.
FIXED_FILE = RUNTIME / "_jsonrpc.py"
FIX_BEFORE = "MAX_QUOTED_CHARS: Final = 64\n"
FIX_AFTER = "MAX_QUOTED_CHARS: Final = 96\n"
#: The last commit of template 0.4.0, the layout before the runtime took in the command line,
#: host configs, bundle and artifact rule (0.5.0): a project baked from it must update cleanly.
RELEASE_0_4_0 = "0ed5ff4b7ad7de566455ab136e3b11204c5a430d"
#: The last commit of template 0.7.0, before the wings became options (0.9.0): every project had
#: every wing, so an update keeps a wing only when its option is named "yes".
RELEASE_0_7_0 = "e02e5ee3fbb7a6132131e48049c688ae3a71c9ea"
#: What 0.4.0 kept beside the user's files and 0.5.0 moved into the runtime.
MOVED_IN_0_5_0 = ("cli.py", "hosts.py", "bundle.py", "_artifact_filter.py")

USER_TOOL = '''"""word_count: how many words a text has (the project's own tool)."""

from __future__ import annotations

from ..mrtr_runtime import Context, ToolAnnotations
from . import registry


@registry.tool(annotations=ToolAnnotations(read_only=True))
async def word_count(text: str, *, ctx: Context) -> str:
    """Count the words of a text."""
    return str(len(text.split()))
'''
USER_TEST_PATH = Path("tests/test_word_count.py")
USER_TEST = f"""import pytest

from {DEFAULT_PACKAGE}.app import build_server
from {DEFAULT_PACKAGE}.mrtr_runtime.testing import MemoryClient


@pytest.mark.anyio
async def test_word_count_counts_the_words() -> None:
    client = MemoryClient(build_server())
    result = await client.call_tool("word_count", {{"text": "one two  three"}})
    assert result.text == "3"
"""
#: The same test on the 0.4.0 testing face, where call_tool returned the wire's dict.
USER_TEST_0_4_0 = f"""from typing import Any

import pytest

from {DEFAULT_PACKAGE}.app import build_server
from {DEFAULT_PACKAGE}.mrtr_runtime.testing import MemoryClient


@pytest.mark.anyio
async def test_word_count_counts_the_words() -> None:
    client = MemoryClient(build_server())
    result: dict[str, Any] = await client.call_tool("word_count", {{"text": "one two  three"}})
    assert result["content"][0]["text"] == "3"
"""
USER_FILES = {
    Path(f"src/{DEFAULT_PACKAGE}/tools/word_count.py"): USER_TOOL,
    USER_TEST_PATH: USER_TEST,
}
USER_FILES_0_4_0 = {**USER_FILES, USER_TEST_PATH: USER_TEST_0_4_0}
#: What the 0.5.0 runtime says to a test that reads call_tool's result as the 0.4.0 dict.
OLD_FACE_ADVICE = (
    "call_tool() returns a ToolCallResult since runtime 0.5.0; result['content'] reads the old "
    "wire dict: write result.content (the blocks) or result.text (their text, joined) instead"
)
PASSED = "PASSED tests/test_word_count.py::test_word_count_counts_the_words"


def template_version(runtime_init: str) -> tuple[int, int, int]:
    found = VERSION_LINE.search(runtime_init)
    assert found, 'mrtr_runtime/__init__.py has no __version__ = "X.Y.Z" line'
    major, minor, patch = (int(part) for part in found.groups())
    return major, minor, patch


def dotted(version: tuple[int, int, int]) -> str:
    return ".".join(map(str, version))


def test_the_runtime_header_names_the_template_version_the_changelog_describes() -> None:
    runtime_init = (REPO / RUNTIME / "__init__.py").read_text(encoding="utf-8")
    version = dotted(template_version(runtime_init))
    docstring = runtime_init.split('"""')[1]
    assert f"mrtr-server cookiecutter template, version {version} " in docstring
    changelog = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## (\S+)$", changelog, re.MULTILINE)
    assert headings[:1] == [version], "CHANGELOG.md's newest entry must be the runtime's version"


def git_env(home: Path) -> dict[str, str]:
    """Git and cookiecutter see none of this machine's settings; commits have a fixed author."""
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_AUTHOR_NAME": "Template Test",
        "GIT_AUTHOR_EMAIL": "template-test@example.com",
        "GIT_COMMITTER_NAME": "Template Test",
        "GIT_COMMITTER_EMAIL": "template-test@example.com",
        "UV_CACHE_DIR": str(REPO / ".cache" / "uv"),
    }


def copy_tracked_files(destination: Path) -> None:
    """The template as git tracks it (working-tree contents), nothing ignored or untracked."""
    listed = run(["git", "ls-files", "-z"], cwd=REPO).stdout.split("\0")
    for name in filter(None, listed):
        source = REPO / name
        if not source.exists():  # deleted in the working tree, not yet committed
            continue
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target, follow_symlinks=False)


def extract_commit(commit: str, destination: Path) -> None:
    """The template's tracked files as they were at ``commit`` (needs the repository's history)."""
    present = run(["git", "cat-file", "-t", commit], cwd=REPO, check=False)
    assert present.stdout.strip() == "commit", (
        f"template commit {commit} is not in this clone: run the tests from a full clone "
        "(git clone without --depth)"
    )
    destination.mkdir(parents=True)
    archive = destination.parent / "release.tar"
    run(["git", "archive", "--format=tar", "-o", str(archive), commit], cwd=REPO)
    run(["tar", "-xf", str(archive), "-C", str(destination)], cwd=REPO)
    archive.unlink()


def install_and_test(project: Path, env: dict[str, str], *, check: bool = True) -> tuple[Path, str]:
    """The project as its README installs it; its own tests' output (they must pass, unless
    ``check`` is false)."""
    run(
        [sys.executable, "-m", "uv", "venv", "--quiet", "--python", sys.executable, ".venv"],
        cwd=project,
        env=env,
    )
    python = project / ".venv" / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    install = [sys.executable, "-m", "uv", "pip", "install", "--quiet", "--python", python]
    run([*install, "-e", ".[dev]"], cwd=project, env=env, timeout=900)
    tests = run(
        [python, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider"],
        cwd=project,
        env=env,
        check=check,
    )
    return python, tests.stdout


def commit_all(repository: Path, message: str, env: dict[str, str]) -> str:
    run(["git", "add", "-A"], cwd=repository, env=env)
    run(["git", "commit", "-q", "-m", message], cwd=repository, env=env)
    return run(["git", "rev-parse", "HEAD"], cwd=repository, env=env).stdout.strip()


def commit_runtime_fix(template: Path, env: dict[str, str]) -> str:
    """The template copy's next commit: the fix and the header's version bump. Returns it."""
    init = template / RUNTIME / "__init__.py"
    text = init.read_text(encoding="utf-8")
    old = template_version(text)
    new = dotted((old[0], old[1], old[2] + 1))
    assert text.count(dotted(old)) == 2, "the header names the version in its docstring and once"
    init.write_text(text.replace(dotted(old), new), encoding="utf-8")
    fixed = template / FIXED_FILE
    code = fixed.read_text(encoding="utf-8")
    assert code.count(FIX_BEFORE) == 1, f"{FIXED_FILE} changed: pick another line for the fix"
    fixed.write_text(code.replace(FIX_BEFORE, FIX_AFTER), encoding="utf-8")
    commit_all(template, f"runtime {new}: quote up to 96 characters", env)
    return new


def cruft(*args: str, cwd: Path, env: dict[str, str], check: bool = True) -> str:
    result = run([sys.executable, "-m", "cruft", *args], cwd=cwd, env=env, check=check)
    return result.stdout + result.stderr


def bake_with_cruft(
    template: Path, commit: str, user_files: dict[Path, str], env: dict[str, str]
) -> Path:
    """``cruft create`` from ``template`` at ``commit`` (no AWS example), committed, and then
    the author's own files, committed. Returns the project."""
    out = template.parent
    answers = json.dumps({"include_aws_example": "no"})
    create = ["create", str(template), "--checkout", commit, "--no-input"]
    cruft(*create, "--extra-context", answers, "--output-dir", str(out), cwd=out, env=env)
    project = out / DEFAULT_SLUG
    run(["git", "init", "-q"], cwd=project, env=env)
    commit_all(project, "baked with cruft", env)
    for relative, text in user_files.items():
        (project / relative).write_text(text, encoding="utf-8")
    commit_all(project, "word_count: a tool of our own", env)
    return project


@pytest.mark.baked_checks
def test_cruft_update_brings_a_runtime_fix_and_keeps_the_projects_own_tool(
    tmp_path: Path,
) -> None:
    env = git_env(tmp_path / "home")
    (tmp_path / "home").mkdir()
    template = tmp_path / "template"
    copy_tracked_files(template)
    run(["git", "init", "-q"], cwd=template, env=env)
    created_at = commit_all(template, "the template", env)
    project = bake_with_cruft(template, created_at, USER_FILES, env)
    key = (project / KEY_FILE).read_bytes()

    new_version = commit_runtime_fix(template, env)
    fixed_at = run(["git", "rev-parse", "HEAD"], cwd=template, env=env).stdout.strip()
    stale = run([sys.executable, "-m", "cruft", "check"], cwd=project, env=env, check=False)
    assert stale.returncode == 1, stale.stdout + stale.stderr
    assert "out of date" in stale.stdout + stale.stderr

    updated = cruft("update", "-y", cwd=project, env=env)
    assert "Project's cruft has been updated" in updated, updated

    status = run(["git", "status", "--porcelain", "--ignored"], cwd=project, env=env).stdout
    changed = {line[3:] for line in status.splitlines() if not line.startswith("!!")}
    ignored = {line[3:] for line in status.splitlines() if line.startswith("!!")}
    runtime = f"src/{DEFAULT_PACKAGE}/mrtr_runtime"
    assert changed == {".cruft.json", f"{runtime}/__init__.py", f"{runtime}/_jsonrpc.py"}, status
    assert ignored == {KEY_FILE}, status  # and no .rej file: every change applied cleanly
    assert (project / KEY_FILE).read_bytes() == key
    assert stat.S_IMODE((project / KEY_FILE).stat().st_mode) == 0o600
    for relative, text in USER_FILES.items():
        assert (project / relative).read_text(encoding="utf-8") == text
    assert json.loads((project / ".cruft.json").read_text(encoding="utf-8"))["commit"] == fixed_at

    # The project as its README installs it, with its own tests (the author's included).
    python, tests = install_and_test(project, env)
    assert PASSED in tests
    arrived = run(
        [
            python,
            "-c",
            f"from {DEFAULT_PACKAGE}.mrtr_runtime import __version__, _jsonrpc; "
            "print(__version__, _jsonrpc.MAX_QUOTED_CHARS)",
        ],
        cwd=project,
        env=env,
    )
    assert arrived.stdout.split() == [new_version, "96"]

    commit_all(project, f"template {new_version}", env)
    assert "up to date" in cruft("check", cwd=project, env=env)


def released_template(
    tmp_path: Path, release: str, version: str
) -> tuple[dict[str, str], Path, str]:
    """A scratch git copy of the template at ``release``: its environment, directory, commit."""
    env = git_env(tmp_path / "home")
    (tmp_path / "home").mkdir()
    template = tmp_path / "template"
    extract_commit(release, template)
    run(["git", "init", "-q"], cwd=template, env=env)
    return env, template, commit_all(template, f"template {version}", env)


def move_on_to_this_checkout(template: Path, env: dict[str, str]) -> str:
    """The scratch copy's next commit: this checkout's template. Returns the commit."""
    for entry in template.iterdir():
        if entry.name != ".git":
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    copy_tracked_files(template)
    return commit_all(template, "template: this checkout", env)


@pytest.mark.baked_checks
def test_cruft_update_from_0_4_0_moves_the_house_and_keeps_the_projects_own_tool(
    tmp_path: Path,
) -> None:
    env, template, created_at = released_template(tmp_path, RELEASE_0_4_0, "0.4.0")
    project = bake_with_cruft(template, created_at, USER_FILES_0_4_0, env)
    package = project / "src" / DEFAULT_PACKAGE
    assert all((package / name).is_file() for name in MOVED_IN_0_5_0)
    key = (project / KEY_FILE).read_bytes()

    # The template copy moves on to this checkout's template, the new house.
    updated_to = move_on_to_this_checkout(template, env)

    updated = cruft("update", "-y", cwd=project, env=env)
    assert "Project's cruft has been updated" in updated, updated

    assert not list(project.rglob("*.rej")), "every change applied cleanly"
    assert [name for name in MOVED_IN_0_5_0 if (package / name).exists()] == []
    runtime = package / "mrtr_runtime"
    for wing in ("testing", "cli"):
        assert (runtime / wing / "__init__.py").is_file(), wing
    # No option named: the optional wings take their default, "no" (CHANGELOG 0.9.0).
    assert not (runtime / "http").exists() and not (project / "Dockerfile").exists()
    assert "PROJECT = Project(" in (package / "app.py").read_text(encoding="utf-8")
    assert (project / KEY_FILE).read_bytes() == key
    for relative, text in USER_FILES_0_4_0.items():
        assert (project / relative).read_text(encoding="utf-8") == text
    assert json.loads((project / ".cruft.json").read_text(encoding="utf-8"))["commit"] == updated_to

    # The author's test reads call_tool's result as 0.4.0's dict. It still reads, with a
    # DeprecationWarning; the project's own filterwarnings = ["error"] makes that a failure that
    # says what to write instead, and the test written so passes.
    python, tests = install_and_test(project, env, check=False)
    assert "FAILED tests/test_word_count.py::test_word_count_counts_the_words" in tests, tests
    assert OLD_FACE_ADVICE in tests, tests
    assert re.search(r"^1 failed, \d+ passed", tests, re.MULTILINE), tests  # only that one
    (project / USER_TEST_PATH).write_text(USER_TEST, encoding="utf-8")
    rerun = [python, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", str(USER_TEST_PATH)]
    assert PASSED in run(rerun, cwd=project, env=env).stdout
    # The console script moved to app:main; the reinstalled project starts through it.
    # (0.9.0: without the HTTP wing, its command names the option that adds it.)
    no_http = run([python, "-m", DEFAULT_PACKAGE, "http"], cwd=project, env=env, check=False)
    assert no_http.returncode == 2 and "include_http" in no_http.stderr, no_http
    version = run([python, "-m", DEFAULT_PACKAGE, "--version"], cwd=project, env=env)
    assert version.stdout.split() == [DEFAULT_SLUG, "0.1.0"]


@pytest.mark.baked_checks
def test_cruft_update_from_0_7_0_keeps_the_projects_tool_and_the_wings_it_names(
    tmp_path: Path,
) -> None:
    env, template, created_at = released_template(tmp_path, RELEASE_0_7_0, "0.7.0")
    project = bake_with_cruft(template, created_at, USER_FILES, env)
    runtime = project / "src" / DEFAULT_PACKAGE / "mrtr_runtime"
    assert (runtime / "http" / "_app.py").is_file() and (runtime / "redis").is_dir()
    key = (project / KEY_FILE).read_bytes()

    updated_to = move_on_to_this_checkout(template, env)

    # The author serves HTTP and says so (README "Adding a wing"); Redis and the bundle they
    # never used take the default, and go.
    keep_http = json.dumps({"include_http": "yes"})
    updated = cruft("update", "-y", "--variables-to-update", keep_http, cwd=project, env=env)
    assert "Project's cruft has been updated" in updated, updated

    assert not list(project.rglob("*.rej")), "every change applied cleanly"
    assert (runtime / "http" / "_app.py").is_file() and (project / "Dockerfile").is_file()
    assert not (runtime / "redis").exists() and not (project / "manifest.json").exists()
    assert not (runtime / "cli" / "_bundle.py").exists()
    for relative, text in USER_FILES.items():
        assert (project / relative).read_text(encoding="utf-8") == text
    assert (project / KEY_FILE).read_bytes() == key
    cruft_state = json.loads((project / ".cruft.json").read_text(encoding="utf-8"))
    assert cruft_state["commit"] == updated_to
    answers = cruft_state["context"]["cookiecutter"]
    assert (answers["include_http"], answers["include_redis_store"]) == ("yes", "no")

    python, tests = install_and_test(project, env)
    assert PASSED in tests
    help_text = run([python, "-m", DEFAULT_PACKAGE, "--help"], cwd=project, env=env).stdout
    assert "http" in help_text.split() and "bundle" not in help_text.split()
