"""`python3 dev.py demo`, run as a newcomer runs it, in a fresh copy of the template.

The copy has no venv at all (only the pip cache is shared with this checkout), so the first run
is the cold start: the demo builds one small venv with cookiecutter to bake and the baked project
to serve, and never the test venv (.venv/ at the root). A second run does nothing it did already
and says nothing about it: three lines, then a complete `server/discover` request to paste,
which the server answers. basic/transports/stdio: the server "SHOULD exit promptly when
their standard input is closed" -- /dev/null is closed from the start. Last, the README's fast
loop: `dev.py test <path>` runs only that path.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import IO

import pytest
from bakery import DEFAULT_PACKAGE, DEFAULT_SLUG, PIP_CACHE, REPO, dev_pin, run

#: The first run creates two venvs (pip, from the shared cache); later runs take seconds.
FIRST_RUN_BOUND = 900
#: Once the venvs exist: re-bake, start, answer, read EOF, exit.
RUN_BOUND = 120
DEMO = Path("build") / "demo"


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The template's tracked files in a new directory, sharing this checkout's pip cache."""
    copy = tmp_path_factory.mktemp("demo-checkout")
    listed = run(["git", "ls-files", "-z"], cwd=REPO).stdout.split("\0")
    for name in filter(None, listed):
        if (REPO / name).exists():  # not deleted in the working tree
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, copy / name, follow_symlinks=False)
    (copy / ".cache").mkdir()
    (copy / ".cache" / "pip").symlink_to(PIP_CACHE, target_is_directory=True)
    return copy.resolve()


def demo_env() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if not name.startswith("MRTR_")}


def said_before_serving(stderr: str) -> tuple[list[str], str]:
    """What dev.py said before the server took over (whose own log lines follow), and the line
    it offered to paste."""
    lines = [line for line in stderr.splitlines() if line]
    offered = [index for index, line in enumerate(lines) if line.startswith("{")]
    assert offered, stderr
    return lines[: offered[0]], lines[offered[0]]


def announced(checkout: Path) -> list[str]:
    """The three lines before the paste line, with nothing to build: the host configurations
    command, the Inspector command, what is served."""
    python = checkout / DEMO / ".venv" / "bin" / "python"
    return [
        f"dev.py: host configurations: {python.parent / DEFAULT_SLUG} config all",
        "dev.py: the MCP Inspector (needs Node.js): "
        f"npx @modelcontextprotocol/inspector {python} -m {DEFAULT_PACKAGE}",
        f"dev.py: serving {DEMO / DEFAULT_SLUG} on stdin/stdout, one JSON-RPC message per line; "
        "Ctrl-D or Ctrl-C stops it. Paste this line to ask it what it offers:",
    ]


@pytest.fixture(scope="module")
def cold(checkout: Path) -> subprocess.CompletedProcess[str]:
    """The first demo in the copy, with stdin closed: it builds, bakes, starts and exits."""
    return subprocess.run(
        [sys.executable, "dev.py", "demo"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=checkout,
        env=demo_env(),
        timeout=FIRST_RUN_BOUND,
        check=False,
    )


def test_a_cold_demo_builds_only_what_baking_and_serving_need(
    checkout: Path, cold: subprocess.CompletedProcess[str]
) -> None:
    assert cold.returncode == 0, cold.stderr
    assert cold.stdout == ""  # stdout is the wire: nothing but JSON-RPC, and here nothing
    said, _ = said_before_serving(cold.stderr)
    assert said == [
        f"dev.py: creating {DEMO}/.venv: pip install {dev_pin('cookiecutter')}",
        f"dev.py: installing into {DEMO}/.venv: pip install -e '{DEMO / DEFAULT_SLUG}[aws]'",
        *announced(checkout),
    ]
    assert not (checkout / ".venv").exists()  # the test venv is for `dev.py test` only
    assert (checkout / DEMO / DEFAULT_SLUG / ".mrtr-signing-key").is_file()
    assert "Traceback" not in cold.stderr


def pump_until_paste_line(stream: IO[str], lines: list[str], ready: threading.Event) -> None:
    for line in stream:
        lines.append(line)
        if line.startswith("{"):
            ready.set()
    ready.set()


def test_a_warm_demo_says_three_lines_and_answers_the_line_it_offers(
    checkout: Path, cold: subprocess.CompletedProcess[str]
) -> None:
    assert cold.returncode == 0, cold.stderr
    demo = subprocess.Popen(
        [sys.executable, "dev.py", "demo"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=checkout,
        env=demo_env(),
    )
    assert demo.stdin and demo.stdout and demo.stderr
    lines: list[str] = []
    ready = threading.Event()
    pump = threading.Thread(target=pump_until_paste_line, args=(demo.stderr, lines, ready))
    pump.start()
    try:
        assert ready.wait(RUN_BOUND), "the demo printed no line to paste"
        said, paste = said_before_serving("".join(lines))
        assert said == announced(checkout)
        request = json.loads(paste)
        assert request["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == (
            "2026-07-28"
        )
        demo.stdin.write(paste + "\n")
        demo.stdin.close()
        answer = demo.stdout.readline()
        assert demo.wait(RUN_BOUND) == 0, "".join(lines)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
        pump.join()
        demo.stdout.close()
        demo.stderr.close()
    response = json.loads(answer)
    assert response["id"] == request["id"]
    assert response["result"]["supportedVersions"] == ["2026-07-28"]
    assert "Traceback" not in "".join(lines)


def load_dev_py() -> ModuleType:
    spec = importlib.util.spec_from_file_location("dev_py", REPO / "dev.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_dev_py_test_runs_only_the_paths_it_is_given() -> None:
    names_a_path = load_dev_py().names_a_path
    assert names_a_path("tests/template/test_pre_gen.py")
    assert names_a_path("tests/template/test_pre_gen.py::test_a_hostile_answer_is_refused")
    assert not names_a_path("pre_gen")  # the value of -k: every test, filtered by name
    assert not names_a_path("-x")
    assert not names_a_path("tests/no_such_file.py")


@pytest.mark.parametrize("uv_status", [0, 2])
def test_the_test_venv_is_installed_by_uv_and_by_pip_where_uv_cannot(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], uv_status: int
) -> None:
    # uv reads no pip configuration: where it cannot install (an index only pip.conf names),
    # pip installs everything, and dev.py says why; where it can, pip installs only uv.
    dev = load_dev_py()
    pip_installs: list[list[str]] = []
    uv_commands: list[list[str]] = []
    monkeypatch.setattr(dev, "pip_install", lambda _venv, install: pip_installs.append(install))

    def fake_run(command: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        uv_commands.append(command)
        failed = "error: Failed to fetch: `https://pypi.org/simple/anyio/`\n"
        return subprocess.CompletedProcess(command, uv_status, "", failed if uv_status else "")

    monkeypatch.setattr(dev.subprocess, "run", fake_run)
    dev.uv_install(Path("venv"), ["-r", "requirements-dev.txt"])

    (uv,) = uv_commands
    assert uv[1:5] == ["-m", "uv", "pip", "install"] and uv[-2:] == ["-r", "requirements-dev.txt"]
    expected = [[dev_pin("uv")]]
    if uv_status:
        expected.append(["-r", "requirements-dev.txt"])
        said = "dev.py: uv could not install (error: Failed to fetch: `https://pypi.org/simple/"
        assert capsys.readouterr().err.startswith(said)
    assert pip_installs == expected
