"""Start-up: the first answer does not wait for the tools, and a broken tool stops the server.

The runtime's side, with a probe tools package (the project's smoke test checks the same with
its real CLI and tools).

Hosts wait for the answer to `server/discover` (or `initialize`) before they consider a server
up, so the server answers it before importing the tools package and loads the tools right
after. A tools package that cannot be imported must still end the process with a traceback on
stderr and a non-zero status, as it would if it were loaded first.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mrtr_runtime._tokens import new_signing_key_hex
from support import PACKAGE

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}

SERVER_SCRIPT = """\
import os
import sys

from PACKAGE.mrtr_runtime import Registry
from PACKAGE.mrtr_runtime.server import Server, codec_from_environment, serve_stdio

registry = Registry()
registry.defer_package("late_tools")
codec = codec_from_environment(os.environ, default_key_file=None)
sys.exit(serve_stdio(Server(name="startup", version="0", registry=registry, signing=codec)))
"""


Outcome = tuple[list[dict[str, Any]], str, int]


def run_server(tmp_path: Path, tools_source: str, *requests: dict[str, object]) -> Outcome:
    package = tmp_path / "late_tools"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "probe.py").write_text(tools_source)
    script = tmp_path / "serve.py"
    script.write_text(SERVER_SCRIPT.replace("PACKAGE", PACKAGE))
    env = {
        "PATH": os.defpath,
        "PYTHONPATH": str(tmp_path),
        "MRTR_SIGNING_KEY": new_signing_key_hex(),
    }
    lines = "".join(json.dumps(request) + "\n" for request in requests)
    completed = subprocess.run(
        [sys.executable, str(script)],
        input=lines,
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        timeout=60,
        check=False,
    )
    responses = [json.loads(line) for line in completed.stdout.splitlines()]
    return responses, completed.stderr, completed.returncode


def request(request_id: int, method: str, **params: object) -> dict[str, object]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": method,
        "params": {"_meta": META, **params},
    }


def test_discover_is_answered_before_a_broken_tools_package_stops_the_server(
    tmp_path: Path,
) -> None:
    responses, stderr, status = run_server(
        tmp_path,
        "raise RuntimeError('this tool module is broken')\n",
        request(1, "server/discover"),
    )

    assert [response["id"] for response in responses] == [1]
    assert "result" in responses[0]
    assert status == 1
    assert "this tool module is broken" in stderr
    assert "the tools could not be loaded" in stderr


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("raise RuntimeError('the config file has no [deploy] section')\n", "RuntimeError"),
        ("def broken(:\n", "SyntaxError"),
        ("import no_such_module_anywhere\n", "ModuleNotFoundError"),
    ],
)
def test_a_broken_tool_module_is_named_to_the_host_with_its_reason(
    tmp_path: Path, source: str, reason: str
) -> None:
    # tools/list as the first request: its answer says which module broke and why, where the
    # host shows it, instead of a bare "Internal error"; the server still stops after it.
    responses, stderr, status = run_server(tmp_path, source, request(1, "tools/list"))

    assert status == 1
    (response,) = responses
    message = response["error"]["message"]
    assert response["error"]["code"] == -32603
    assert "the tool module late_tools.probe raised " + reason in message, message
    assert "server log" in message
    assert "while loading the tool module late_tools.probe" in stderr


def test_tools_list_as_the_first_request_loads_the_tools_first(tmp_path: Path) -> None:
    tools_source = (
        "import __main__\n"
        "\n"
        "@__main__.registry.tool()\n"
        "async def probe() -> str:\n"
        "    return 'loaded'\n"
    )
    responses, stderr, status = run_server(
        tmp_path, tools_source, request(1, "tools/list"), request(2, "tools/call", name="probe")
    )

    assert status == 0, stderr
    by_id = {response["id"]: response for response in responses}
    assert [tool["name"] for tool in by_id[1]["result"]["tools"]] == ["probe"]
    assert by_id[2]["result"]["content"][0]["text"] == "loaded"


def test_the_first_answer_does_not_wait_for_pydantic(tmp_path: Path) -> None:
    # Importing pydantic is most of a start-up; the tools bring it, after the first answer.
    tools_source = (
        "import sys\nprint('pydantic before tools:', 'pydantic' in sys.modules, file=sys.stderr)\n"
    )
    responses, stderr, status = run_server(tmp_path, tools_source, request(1, "server/discover"))

    assert status == 0, stderr
    assert [response["id"] for response in responses] == [1]
    assert "pydantic before tools: False" in stderr


def test_the_first_answer_does_not_wait_for_the_task_engine(tmp_path: Path) -> None:
    # The tasks extension loads with the first task, or the engine's loop after the first
    # answer: never before the first answer (nor its store, which opens later still).
    tools_source = (
        "import sys\n"
        "ends = ('._tasks', '._task_store')\n"
        "loaded = sorted(name for name in sys.modules if name.endswith(ends))\n"
        "print('task modules before tools:', loaded, file=sys.stderr)\n"
    )
    responses, stderr, status = run_server(tmp_path, tools_source, request(1, "server/discover"))

    assert status == 0, stderr
    assert [response["id"] for response in responses] == [1]
    assert "task modules before tools: []" in stderr


def test_a_stdio_server_never_loads_the_http_transport(tmp_path: Path) -> None:
    # The HTTP side is an optional extra: serving stdio imports none of it, not even the
    # runtime's own HTTP modules (checked once the tools are in, after the first answers).
    tools_source = (
        "import sys\n"
        "loaded = sorted(name for name in sys.modules if '.http' in name"
        " or name.split('.')[0] in ('uvicorn', 'httptools', 'uvloop', 'h11'))\n"
        "print('http modules:', loaded, file=sys.stderr)\n"
    )
    responses, stderr, status = run_server(
        tmp_path, tools_source, request(1, "server/discover"), request(2, "tools/list")
    )

    assert status == 0, stderr
    assert [response["id"] for response in responses] == [1, 2]
    assert "http modules: []" in stderr
