"""The command line answers what a person types with one line and a status, never a traceback.

`keygen` writes a key only to, or over, a regular file: `--force` on a device, a FIFO, a
directory or a link would replace the thing itself (as root, `/dev/null`). A path that cannot
be (a file as its directory, a name too long) is one line. `health --url` with a URL Python cannot
split, or a port out of range, is "not an http(s) URL". Run in process through the project's own
`main`, as the console script runs it.
"""

from __future__ import annotations

import importlib
import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from support import PACKAGE

main: Callable[[list[str]], int] = importlib.import_module(f"{PACKAGE}.app").main
NAME = importlib.import_module(f"{PACKAGE}.app").PROJECT.name


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def only_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


def make_fifo(path: Path) -> None:
    os.mkfifo(path)


def make_directory(path: Path) -> None:
    path.mkdir()


def make_link(path: Path) -> None:
    target = path.with_name("linked-file")
    target.write_text("someone's file\n", encoding="utf-8")
    path.symlink_to(target)


@pytest.mark.parametrize("flag", ["--force", "--rotate"])
@pytest.mark.parametrize("make", [make_fifo, make_directory, make_link])
def test_keygen_replaces_nothing_but_a_regular_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, flag: str, make: Callable[[Path], None]
) -> None:
    path = tmp_path / "key"
    make(path)
    before = path.lstat()

    status, out, err = run(capsys, "keygen", flag, "--path", str(path))

    assert (status, out) == (1, "")
    line = only_line(err)
    assert line.startswith(f"{NAME}: cannot write {path}: it is ")
    assert "regular file" in line
    after = path.lstat()
    assert stat.S_IFMT(after.st_mode) == stat.S_IFMT(before.st_mode)
    assert after.st_ino == before.st_ino
    if path.is_symlink():
        assert path.with_name("linked-file").read_text(encoding="utf-8") == "someone's file\n"


def test_keygen_force_still_replaces_a_regular_key_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "key"
    assert run(capsys, "keygen", "--path", str(path))[0] == 0
    first = path.read_text(encoding="utf-8")

    status, out, _ = run(capsys, "keygen", "--force", "--path", str(path))

    assert (status, out) == (0, f"{path}\n")
    assert path.read_text(encoding="utf-8") != first
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


@pytest.mark.parametrize(
    ("where", "reason"),
    [
        (lambda tmp: tmp / "a-file" / "key", "Not a directory"),
        (lambda tmp: tmp / ("k" * 300), "File name too long"),
    ],
    ids=["a file as directory", "name too long"],
)
def test_keygen_to_a_path_that_cannot_be_is_one_line_and_creates_nothing(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    where: Callable[[Path], Path],
    reason: str,
) -> None:
    (tmp_path / "a-file").write_text("x\n", encoding="utf-8")
    path = where(tmp_path)

    status, out, err = run(capsys, "keygen", "--path", str(path))

    assert (status, out) == (1, "")
    assert only_line(err).startswith(f"{NAME}: cannot write {path}: ")
    assert reason in err
    assert sorted(entry.name for entry in tmp_path.iterdir()) == ["a-file"]


@pytest.mark.parametrize(
    "url",
    [
        "http://[::1",
        "http://127.0.0.1:99999/mcp",
        "http://127.0.0.1:abc/mcp",
        "ftp://127.0.0.1/mcp",
        "http:///mcp",
    ],
)
def test_health_with_a_url_that_is_not_one_is_one_line(
    capsys: pytest.CaptureFixture[str], url: str
) -> None:
    status, out, err = run(capsys, "health", "--url", url)

    assert (status, out) == (1, "")
    assert only_line(err) == f"{NAME}: unhealthy: not an http(s) URL: {url!r}"
