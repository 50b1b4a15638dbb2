"""The systems hosts run on, proven here by injecting the platform: what the post-gen hook
prints (the first thing a user reads, and the first configs pasted), and that the bake every
other combination is a subset of type-checks as mypy sees it on Windows and macOS.

Claude Desktop runs only on macOS and Windows, and the generated check workflow runs there too;
these tests make that run a confirmation. The runtime's own platform choices (stdin's reader,
the permission checks) are tested in tests/runtime/stdio/test_platforms.py.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from bakery import DEFAULT_PACKAGE, DEFAULT_SLUG, FULL_COMBINATIONS, REPO, Installed, run

HOOK = REPO / "hooks" / "post_gen_project.py"
HOSTS_PY = (
    REPO
    / "{{cookiecutter.project_slug}}"
    / "src"
    / "{{cookiecutter.package_name}}"
    / "mrtr_runtime"
    / "cli"
    / "_hosts.py"
)
ANSWERS = {
    "project_name": "MRTR Server",
    "project_slug": DEFAULT_SLUG,
    "package_name": DEFAULT_PACKAGE,
    "include_aws_example": "yes",
}


def load(name: str, source: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_loader(name, loader=None, origin=str(path))
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    exec(compile(source, str(path), "exec"), module.__dict__)  # noqa: S102 (our own hook)
    return module


@pytest.fixture
def hook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[ModuleType, ModuleType]:
    """The post-gen hook as cookiecutter renders it (its one Jinja expression: the answers),
    imported, not run; and the runtime's cli/_hosts.py, which the hook loads by path."""
    monkeypatch.chdir(tmp_path)  # the hook reads its project directory from the cwd
    # No uv on PATH: the uv form is printed only where uv is found, and is not what is tested.
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))
    source = HOOK.read_text(encoding="utf-8")
    assert source.count("{{ cookiecutter | tojson }}") == 1
    rendered = source.replace("{{ cookiecutter | tojson }}", json.dumps(ANSWERS))
    hosts = load("_platform_test_hosts", HOSTS_PY.read_text(encoding="utf-8"), HOSTS_PY)
    return load("_platform_test_hook", rendered, HOOK), hosts


def claude_desktop_entry(text: str) -> dict[str, Any]:
    """The server entry of the first Claude Desktop config in ``text``."""
    start = text.index("== Claude Desktop ==")
    document, _ = json.JSONDecoder().raw_decode(text, text.index("\n{", start) + 1)
    entry: dict[str, Any] = document["mcpServers"][DEFAULT_SLUG]
    return entry


def claude_code_line(text: str) -> str:
    return next(line for line in text.splitlines() if line.startswith("claude mcp add"))


#: (platform, project directory, what each printed path must be). A space in the Windows
#: folder: quoting there is cmd/PowerShell's double quotes, not POSIX single quotes.
PLATFORMS = [
    (
        "win32",
        "C:\\Users\\Ada Lovelace\\mrtr-server",
        {
            "python": "C:\\Users\\Ada Lovelace\\mrtr-server\\.venv\\Scripts\\python.exe",
            "key": "C:\\Users\\Ada Lovelace\\mrtr-server\\.mrtr-signing-key",
            "desktop": "Merge into %APPDATA%\\Claude\\claude_desktop_config.json, then restart",
            "venv": "  python -m venv .venv",
            "install": '  .venv\\Scripts\\pip install -e ".[dev,aws]"',
            "cd": '  cd "C:\\Users\\Ada Lovelace\\mrtr-server"',
            "quoted": '"C:\\Users\\Ada Lovelace\\mrtr-server\\.venv\\Scripts\\python.exe"',
            "eof": "(Ctrl-Z then Enter ends it)",
        },
    ),
    (
        "darwin",
        "/Users/ada lovelace/mrtr-server",
        {
            "python": "/Users/ada lovelace/mrtr-server/.venv/bin/python",
            "key": "/Users/ada lovelace/mrtr-server/.mrtr-signing-key",
            "desktop": (
                "Merge into ~/Library/Application Support/Claude/claude_desktop_config.json, "
                "then restart"
            ),
            "venv": "  python3 -m venv .venv",
            "install": "  .venv/bin/pip install -e '.[dev,aws]'",
            "cd": "  cd '/Users/ada lovelace/mrtr-server'",
            "quoted": "'/Users/ada lovelace/mrtr-server/.venv/bin/python'",
            "eof": "(Ctrl-D ends it)",
        },
    ),
    (
        "linux",
        "/home/ada/mrtr-server",
        {
            "python": "/home/ada/mrtr-server/.venv/bin/python",
            "key": "/home/ada/mrtr-server/.mrtr-signing-key",
            "desktop": "Merge into ~/.config/Claude/claude_desktop_config.json, then restart",
            "venv": "  python3 -m venv .venv",
            "install": "  .venv/bin/pip install -e '.[dev,aws]'",
            "cd": "  cd /home/ada/mrtr-server",
            "quoted": "/home/ada/mrtr-server/.venv/bin/python",
            "eof": "(Ctrl-D ends it)",
        },
    ),
]


@pytest.mark.parametrize(("platform", "project", "expected"), PLATFORMS)
def test_the_hooks_next_steps_spell_every_path_for_the_users_system(
    hook: tuple[ModuleType, ModuleType], platform: str, project: str, expected: dict[str, str]
) -> None:
    module, hosts = hook
    text = module.next_steps(hosts, expected["key"], True, platform=platform, project=project)
    lines = text.splitlines()
    for name in ("venv", "install", "cd"):
        assert expected[name] in lines, (name, text)
    assert expected["eof"] in text
    assert expected["desktop"] in text
    # The JSON configs carry the paths as they are on that system (json escapes backslashes).
    entry = claude_desktop_entry(text)
    assert entry["command"] == expected["python"]
    assert entry["env"] == {"MRTR_SIGNING_KEY_FILE": expected["key"]}
    command = claude_code_line(text)
    assert f"-- {expected['quoted']} -m {DEFAULT_PACKAGE}" in command
    # POSIX mode bits mean nothing on Windows: the hook does not promise them there.
    assert ("mode 0600" in text) is (platform != "win32")


def test_the_hook_writes_the_key_with_one_newline_and_no_carriage_return(
    hook: tuple[ModuleType, ModuleType], tmp_path: Path
) -> None:
    module, hosts = hook
    path, written = module.write_signing_key(hosts)
    data = path.read_bytes()
    assert (written, len(data), data[-1:]) == (True, 65, b"\n")
    assert bytes.fromhex(data[:-1].decode("ascii"))  # 32 bytes of hex, nothing else


#: The bake with every wing and the AWS example: every other combination's code is a subset of
#: it (the wings' and the example's modules left out, two `Project` arguments fewer in `app.py`),
#: and the code that differs by system is the runtime's, which every combination vendors byte for
#: byte (test_baked_checks.py). Each combination's own mypy run, on Linux, is in that module.
PLATFORM_COMBINATION = "aws"


@pytest.mark.parametrize("platform", ["win32", "darwin"])
def test_every_bake_type_checks_as_mypy_sees_it_on_windows_and_macos(
    installed: Callable[[str], Installed], platform: str
) -> None:
    # The workflow's Types step runs mypy on each system, where typeshed hides what the system
    # lacks (os.getuid, pwd, O_NOFOLLOW on Windows): checked here first, with --platform.
    assert PLATFORM_COMBINATION in FULL_COMBINATIONS
    project = installed(PLATFORM_COMBINATION)
    run([project.tool("mypy"), "--platform", platform], cwd=project.project, timeout=1200)
