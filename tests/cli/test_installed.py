"""Installed mode: a bake's wheel, run with ``uvx`` the way a host starts a published server.

The project is built with ``uv build`` (sdist, then the wheel from the sdist) and started as
``uvx --from <wheel> <slug>`` from cwd ``/`` with a host's environment: PATH and a temporary
HOME/XDG_STATE_HOME, nothing of this checkout, no key in the environment. With no project key
file, the server makes this user's key file on its first start; that file is what lets a round
minted by one process finish in the next, and what ``keygen --rotate`` rotates.

uv runs with its cache in this checkout (``.cache/uv``), so a re-run resolves from the cache, and
with the machine's own certificate store (``UV_SYSTEM_CERTS``), which CI's network needs.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import tarfile
import zipfile
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from bakery import COMBINATIONS, DEFAULT_PACKAGE, DEFAULT_SLUG, KEY_FILE, REPO, bake_project, run
from host_client import LiveServer, answer, fill, meta
from uv import find_uv_bin

pytestmark = pytest.mark.baked_checks

UV_CACHE = REPO / ".cache" / "uv"
PREVIOUS_KEYS_FILE = ".mrtr-previous-signing-keys"
MAX_ROUNDS = 6
KEY_LINE = re.compile(r"requestState signing key id ([0-9a-f]{8}) from (.+?) \(\d+ previous\)")
#: How uv reaches PyPI from here: the cache in the checkout, the machine's trust store.
UV_SETTINGS = {"UV_CACHE_DIR": str(UV_CACHE), "UV_SYSTEM_CERTS": "1"}


@dataclass(frozen=True)
class Built:
    project: Path
    wheel: Path
    sdist: Path


def uvx() -> str:
    uv = Path(find_uv_bin())
    return str(uv.with_name(uv.name.replace("uv", "uvx", 1)))


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    output = tmp_path_factory.mktemp("installed-mode")
    project = bake_project(output / "bake", **COMBINATIONS["no-aws"])
    # Without its .gitignore, and with a previous-keys file beside the key: the sdist must still
    # leave both keys out (pyproject.toml excludes them itself).
    (project / ".gitignore").unlink()
    (project / PREVIOUS_KEYS_FILE).write_text("# retired keys\n", encoding="ascii")
    dist = output / "dist"
    run(
        [find_uv_bin(), "build", "--out-dir", dist, project],
        cwd=output,
        env=UV_SETTINGS,
    )
    (wheel,) = dist.glob("*.whl")
    (sdist,) = dist.glob("*.tar.gz")
    return Built(project, wheel, sdist)


def host_env(home: Path) -> dict[str, str]:
    """What a host passes a stdio server (PATH, a home) and uv's settings; nothing else."""
    return {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(home / "home"),
        "XDG_STATE_HOME": str(home / "state"),
        **UV_SETTINGS,
    }


def test_the_sdist_and_the_wheel_ship_the_server_and_never_a_signing_key(
    built: Built,
) -> None:
    # The bake has a key file at its root (the post-gen hook wrote it): it must stay there.
    assert (built.project / KEY_FILE).is_file()
    with tarfile.open(built.sdist) as sdist:
        in_sdist = [Path(name).name for name in sdist.getnames()]
    with zipfile.ZipFile(built.wheel) as wheel:
        in_wheel = wheel.namelist()
        entry_points = next(name for name in in_wheel if name.endswith("entry_points.txt"))
        console = wheel.read(entry_points).decode()
    for names in (in_sdist, [Path(name).name for name in in_wheel]):
        assert not [name for name in names if name.startswith((KEY_FILE, PREVIOUS_KEYS_FILE))]
    assert "pyproject.toml" in in_sdist and "README.md" in in_sdist
    assert f"{DEFAULT_PACKAGE}/tools/plan_release.py" in in_wheel
    assert f"{DEFAULT_PACKAGE}/mrtr_runtime/_stdio.py" in in_wheel
    assert f"{DEFAULT_SLUG} = {DEFAULT_PACKAGE}.app:main" in console


def call_until(
    server: LiveServer, params: dict[str, Any], result: Any, *, rounds: int
) -> tuple[dict[str, Any], Any]:
    """Answer up to ``rounds`` input rounds; the last params sent and the result."""
    for _ in range(rounds):
        if result.get("resultType") != "input_required":
            break
        answers = {key: answer(request) for key, request in result["inputRequests"].items()}
        # The retry carries this round's answers and the token that holds the earlier ones
        # (2026-07-28 basic/patterns/mrtr).
        params = {**params, "inputResponses": answers}
        params.pop("requestState", None)
        if "requestState" in result:
            params["requestState"] = result["requestState"]
        result = server.request("tools/call", params)
    return params, result


def start_plan_release(server: LiveServer) -> tuple[dict[str, Any], Any]:
    tools = {
        tool["name"]: tool for tool in server.request("tools/list", {"_meta": meta()})["tools"]
    }
    arguments = fill(tools["plan_release"]["inputSchema"], required_only=True)
    params = {"name": "plan_release", "arguments": arguments, "_meta": meta()}
    return params, server.request("tools/call", params)


def key_lines(stderr: str) -> list[tuple[str, str]]:
    return KEY_LINE.findall(stderr)


def test_the_wheel_runs_with_uvx_and_rounds_survive_a_restart_and_a_key_rotation(
    built: Built, tmp_path: Path
) -> None:
    env = host_env(tmp_path)
    argv = [uvx(), "--from", str(built.wheel), DEFAULT_SLUG]
    key_file = tmp_path / "state" / DEFAULT_SLUG / KEY_FILE

    first = LiveServer(argv, env)
    discovered = first.request("server/discover", {"_meta": meta()})
    assert discovered["resultType"] == "complete"
    # A whole multi-round call in one process.
    params, result = start_plan_release(first)
    assert result["resultType"] == "input_required"
    _, result = call_until(first, params, result, rounds=MAX_ROUNDS)
    assert result["resultType"] == "complete" and not result.get("isError"), result
    # A second call, left waiting for input when its server dies.
    params, result = start_plan_release(first)
    params, result = call_until(first, params, result, rounds=1)
    assert result["resultType"] == "input_required" and "requestState" in result, result
    first_stderr = first.kill()

    # The key the first server made on its first start: private, and named in one stderr line.
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    ((first_id, where),) = key_lines(first_stderr)
    assert where == f"{key_file} (new, mode 0600)"
    assert key_file.read_text(encoding="ascii").strip() not in first_stderr

    # A new process finishes the round the killed one began: the token verifies with the key
    # the first one left in the per-user file.
    second = LiveServer(argv, env)
    _, finished = call_until(second, params, result, rounds=MAX_ROUNDS)
    assert finished["resultType"] == "complete" and not finished.get("isError"), finished
    # And begins one more, to be finished after a rotation.
    params, result = start_plan_release(second)
    params, result = call_until(second, params, result, rounds=1)
    assert "requestState" in result, result
    assert key_lines(second.close()) == [(first_id, str(key_file))]

    rotated = subprocess.run(
        [*argv, "keygen", "--rotate"],
        cwd="/",
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert rotated.returncode == 0, rotated.stderr
    assert rotated.stdout.strip() == str(key_file)
    assert f"(id {first_id})" in rotated.stderr
    assert (key_file.parent / PREVIOUS_KEYS_FILE).is_file()

    third = LiveServer(argv, env)
    _, finished = call_until(third, params, result, rounds=MAX_ROUNDS)
    assert finished["resultType"] == "complete" and not finished.get("isError"), finished
    ((third_id, where),) = key_lines(third.close())
    assert third_id != first_id and where == str(key_file)


def installed_python(built: Built, env: Mapping[str, str], *, python: str | None = None) -> str:
    """The interpreter of the environment ``uvx`` runs the wheel in (on ``python`` if given)."""
    found = subprocess.run(
        [
            uvx(),
            *(["--python", python] if python else []),
            "--from",
            str(built.wheel),
            "python",
            "-c",
            "import sys; print(sys.executable)",
        ],
        cwd="/",
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return found.stdout.strip()


def test_twenty_installed_servers_starting_at_once_make_one_key(
    built: Built, tmp_path: Path
) -> None:
    # Two servers starting together, ten times over: twenty first starts on an empty state dir.
    env = host_env(tmp_path)
    python = installed_python(built, env)
    servers = [
        subprocess.Popen(
            [python, "-m", DEFAULT_PACKAGE],
            cwd="/",
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(20)
    ]
    lines = []
    for server in servers:
        # Each one starts (its key is settled before it reads a request), sees the end of its
        # input and exits cleanly.
        out, err = server.communicate("", timeout=120)
        assert server.returncode == 0 and out == "", err
        lines += key_lines(err)

    key_file = tmp_path / "state" / DEFAULT_SLUG / KEY_FILE
    assert len(lines) == 20
    assert {key_id for key_id, _ in lines} == {lines[0][0]}
    assert Counter(where for _, where in lines) == {
        f"{key_file} (new, mode 0600)": 1,
        str(key_file): 19,
    }
    assert sorted(path.name for path in key_file.parent.iterdir()) == [KEY_FILE]


def early_python_311() -> str | None:
    """A Python 3.11.0-3.11.2 on this machine (Debian 12's python3 is 3.11.2), if any."""
    for candidate in ("/usr/bin/python3.11", "/usr/bin/python3"):
        if not Path(candidate).is_file():
            continue
        version = subprocess.run(
            [candidate, "-c", "import sys; print(*sys.version_info[:3])"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        ).stdout.split()
        if version[:2] == ["3", "11"] and int(version[2]) <= 2:
            return candidate
    return None


@pytest.mark.parametrize("calls", [400, 4000])
def test_the_wheel_serves_a_flood_on_the_earliest_python_it_allows(
    built: Built, tmp_path: Path, calls: int
) -> None:
    # requires-python is >=3.11 and uvx takes the first Python it finds. Before 3.11.3 asyncio's
    # pipe transports have no is_reading(): flow control (past 64 running and 256 queued) must not
    # ask for it.
    early = early_python_311()
    if early is None:
        pytest.skip("no Python 3.11.0-3.11.2 on this machine")
    env = host_env(tmp_path)
    python = installed_python(built, env, python=early)
    flood = "".join(
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": number,
                "method": "tools/list",
                "params": {"_meta": meta()},
            }
        )
        + "\n"
        for number in range(calls)
    )
    done = subprocess.run(
        [python, "-m", DEFAULT_PACKAGE],
        cwd="/",
        env=env,
        input=flood,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    ids = [json.loads(line)["id"] for line in done.stdout.splitlines()]
    assert sorted(ids) == list(range(calls)), done.stderr[-3000:]
