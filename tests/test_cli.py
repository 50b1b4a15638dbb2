"""The generated command line: ``keygen`` and a bad signing key, run in an installed bake."""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from bakery import DEFAULT_PACKAGE, Installed, child_env

pytestmark = pytest.mark.baked_checks


def cli(project: Installed, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(project.python), "-m", DEFAULT_PACKAGE, *args],
        cwd="/",
        env=child_env(**env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        check=False,
    )


def test_keygen_writes_a_private_key_and_rotates_on_force(
    installed: Callable[[str], Installed], tmp_path: Path
) -> None:
    project = installed("no-aws")
    key_file = tmp_path / "key"
    first = cli(project, "keygen", "--path", str(key_file))
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == str(key_file)
    old = key_file.read_text(encoding="ascii").strip()
    assert len(old) == 64
    if os.name == "posix":
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert old not in first.stdout + first.stderr

    again = cli(project, "keygen", "--path", str(key_file))
    assert again.returncode == 1
    assert "already exists" in again.stderr
    assert key_file.read_text(encoding="ascii").strip() == old

    rotated = cli(project, "keygen", "--force", "--path", str(key_file))
    assert rotated.returncode == 0, rotated.stderr
    new = key_file.read_text(encoding="ascii").strip()
    assert new != old
    assert (tmp_path / "key.previous").read_text(encoding="ascii").strip() == old
    assert "MRTR_PREVIOUS_SIGNING_KEYS" in rotated.stderr
    assert old not in rotated.stdout + rotated.stderr
    assert new not in rotated.stdout + rotated.stderr


def test_a_weak_key_stops_the_server_with_status_2(installed: Callable[[str], Installed]) -> None:
    project = installed("no-aws")
    result = cli(project, MRTR_SIGNING_KEY="abcd")
    assert result.returncode == 2
    assert result.stdout == ""
    assert "MRTR_SIGNING_KEY" in result.stderr
    assert "abcd" not in result.stderr


def test_config_all_prints_every_host_for_this_interpreter(
    installed: Callable[[str], Installed],
) -> None:
    project = installed("no-aws")
    result = cli(project, "config", "all")
    assert result.returncode == 0, result.stderr
    for title in ("Claude Desktop", "Claude Code", "VS Code", "Cursor"):
        assert f"== {title} ==" in result.stdout
    assert f'"command": "{project.python}"' in result.stdout
