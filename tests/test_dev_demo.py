"""`python3 dev.py demo` really serves, whatever its stdin is.

The README tells people to run `python3 dev.py demo`; scripts and CI run it with stdin from a
file or /dev/null. It bakes into build/demo/, builds that project's venv on first use (later
runs reuse it) and execs the server. basic/transports/stdio: the server "SHOULD exit promptly
when their standard input is closed" -- /dev/null is closed from the start.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import IO

REPO = Path(__file__).resolve().parents[1]
#: The first run creates build/demo's venv (pip, from the shared cache); later runs take seconds.
FIRST_RUN_BOUND = 900
#: Once the venv exists: re-bake, start, read EOF, exit.
RUN_BOUND = 120

DISCOVER = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "server/discover",
    "params": {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    },
}


def demo(stdin: int | IO[bytes], timeout: float) -> subprocess.CompletedProcess[bytes]:
    env = {name: value for name, value in os.environ.items() if not name.startswith("MRTR_")}
    return subprocess.run(
        [sys.executable, str(REPO / "dev.py"), "demo"],
        stdin=stdin,
        capture_output=True,
        cwd=REPO,
        env=env,
        timeout=timeout,
        check=False,
    )


def test_dev_py_demo_serves_a_file_of_requests_then_exits_0_on_dev_null(tmp_path: Path) -> None:
    requests = tmp_path / "requests.jsonl"
    requests.write_text(json.dumps(DISCOVER) + "\n", encoding="utf-8")
    with requests.open("rb") as stdin:
        served = demo(stdin, FIRST_RUN_BOUND)
    stderr = served.stderr.decode(errors="replace")
    assert served.returncode == 0, stderr
    (line,) = served.stdout.splitlines()
    assert json.loads(line)["result"]["supportedVersions"] == ["2026-07-28"]
    assert "Traceback" not in stderr

    idle = demo(subprocess.DEVNULL, RUN_BOUND)
    stderr = idle.stderr.decode(errors="replace")
    assert idle.returncode == 0, stderr
    assert idle.stdout == b""  # stdout is the wire: nothing but JSON-RPC, and here nothing
    assert "starting the stdio server" in stderr
    assert "Traceback" not in stderr
