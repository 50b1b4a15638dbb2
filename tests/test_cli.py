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


def keys_in(path: Path) -> list[str]:
    lines = [line.strip() for line in path.read_text(encoding="ascii").splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def test_keygen_writes_a_private_key_and_rotates_without_printing_a_secret(
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
    assert "--rotate" in again.stderr
    assert key_file.read_text(encoding="ascii").strip() == old

    rotated = cli(project, "keygen", "--rotate", "--path", str(key_file))
    assert rotated.returncode == 0, rotated.stderr
    new = key_file.read_text(encoding="ascii").strip()
    assert new != old
    previous = tmp_path / ".mrtr-previous-signing-keys"
    assert keys_in(previous) == [old]
    if os.name == "posix":
        assert stat.S_IMODE(previous.stat().st_mode) == 0o600
    assert str(previous) in rotated.stderr
    # Paths and key ids only: no secret, and no advice to copy one into a host config.
    assert "MRTR_PREVIOUS_SIGNING_KEYS=" not in rotated.stderr
    assert "paste" not in rotated.stderr.lower()
    assert old not in rotated.stdout + rotated.stderr
    assert new not in rotated.stdout + rotated.stderr

    # The server reads the previous keys by itself: it starts and answers.
    served = subprocess.run(
        [str(project.python), "-m", DEFAULT_PACKAGE],
        cwd="/",
        env=child_env(MRTR_SIGNING_KEY_FILE=str(key_file), MRTR_LOG_LEVEL="INFO"),
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert served.returncode == 0, served.stderr
    assert "(1 previous)" in served.stderr

    forced = cli(project, "keygen", "--force", "--path", str(key_file))
    assert forced.returncode == 0, forced.stderr
    assert key_file.read_text(encoding="ascii").strip() not in (old, new)
    assert "MRTR_PREVIOUS_SIGNING_KEYS" not in forced.stderr
    assert new not in forced.stdout + forced.stderr

    both = cli(project, "keygen", "--rotate", "--force", "--path", str(key_file))
    assert both.returncode == 2
    assert "not allowed with" in both.stderr


def test_a_ttl_above_an_hour_stops_the_server_with_status_2(
    installed: Callable[[str], Installed],
) -> None:
    project = installed("no-aws")
    result = cli(project, MRTR_STATE_TTL_SECONDS="86400")
    assert result.returncode == 2
    assert result.stdout == ""
    assert "MRTR_STATE_TTL_SECONDS" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


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
