"""Host configs: the snippets themselves, and a server started exactly as a printed config says."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from bakery import (
    DEFAULT_PACKAGE,
    DEFAULT_SLUG,
    KEY_FILE,
    REPO,
    BakeFactory,
    Installed,
    dev_pin,
    run,
)
from host_client import MODERN, answer, fill, meta
from hypothesis import given, settings
from hypothesis import strategies as st
from uv import find_uv_bin

HOSTS_PY = (
    REPO
    / "{{cookiecutter.project_slug}}"
    / "src"
    / "{{cookiecutter.package_name}}"
    / "mrtr_runtime"
    / "cli"
    / "_hosts.py"
)
MAX_ROUNDS = 6


def load_hosts() -> ModuleType:
    # _hosts.py holds no Jinja, so the template's file is the one a bake gets; the post-gen hook
    # loads it by path the same way.
    spec = importlib.util.spec_from_file_location("_template_hosts", HOSTS_PY)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


hosts = load_hosts()
LAUNCH = hosts.venv_launch(
    "/home/ada/My Servers/demo/.venv/bin/python",
    "demo",
    key_file_path="/home/ada/My Servers/demo/.mrtr-signing-key",
)


def test_vscode_uses_servers_and_a_stdio_type() -> None:
    document = json.loads(hosts.snippet("vscode", "demo", LAUNCH))
    assert document == {
        "servers": {
            "demo": {
                "type": "stdio",
                "command": LAUNCH.command,
                "args": ["-m", "demo"],
                "env": {"MRTR_SIGNING_KEY_FILE": "/home/ada/My Servers/demo/.mrtr-signing-key"},
            }
        }
    }


@pytest.mark.parametrize("host", ["claude-desktop", "cursor", "mcp-json"])
def test_mcp_servers_hosts_share_one_shape(host: str) -> None:
    entry = json.loads(hosts.snippet(host, "demo", LAUNCH))["mcpServers"]["demo"]
    assert entry["command"] == LAUNCH.command
    assert entry["args"] == ["-m", "demo"]
    assert entry["env"] == dict(LAUNCH.env)
    assert ("type" in entry) is (host == "mcp-json")


def test_claude_code_command_round_trips_through_a_posix_shell() -> None:
    command = hosts.snippet("claude-code", "demo", LAUNCH)
    assert shlex.split(command) == [
        "claude",
        "mcp",
        "add",
        "--transport",
        "stdio",
        "demo",
        "--env",
        "MRTR_SIGNING_KEY_FILE=/home/ada/My Servers/demo/.mrtr-signing-key",
        "--",
        "/home/ada/My Servers/demo/.venv/bin/python",
        "-m",
        "demo",
    ]


def test_claude_code_command_puts_nothing_positional_after_an_env_value() -> None:
    """Claude Code's ``--env`` is variadic: a word after its value that is not an option or
    ``--`` is taken as another ``KEY=VALUE``, the server's name included."""
    launch = hosts.Launch(command="/srv/py", args=("-m", "demo"), env={"A": "1", "B": "2"})
    words = shlex.split(hosts.claude_code_command("demo", launch))
    assert words[:6] == ["claude", "mcp", "add", "--transport", "stdio", "demo"]
    for index, word in enumerate(words[:-1]):
        if word == "--":
            break
        if word == "--env":
            after = words[index + 2]
            assert after == "--" or after.startswith("-"), words


def test_windows_paths_use_the_scripts_directory() -> None:
    python = hosts.venv_python("C:\\Users\\ada\\demo", windows=True)
    assert python == "C:\\Users\\ada\\demo\\.venv\\Scripts\\python.exe"
    command = hosts.claude_code_command(
        "demo", hosts.venv_launch(python, "demo", key_file_path=None), windows=True
    )
    assert command.endswith("demo -- C:\\Users\\ada\\demo\\.venv\\Scripts\\python.exe -m demo")


def test_uv_launch_names_the_project_and_extras() -> None:
    launch = hosts.uv_launch(
        "/opt/uv/bin/uv", "/srv/demo", "demo", key_file_path="/srv/demo/k", extras=("aws",)
    )
    assert launch.argv() == [
        "/opt/uv/bin/uv",
        "run",
        "--directory",
        "/srv/demo",
        "--extra",
        "aws",
        "demo",
    ]
    assert launch.env == {"MRTR_SIGNING_KEY_FILE": "/srv/demo/k"}


def test_uvx_launch_starts_the_published_package_with_its_extras() -> None:
    assert hosts.uvx_launch("/opt/uv/bin/uvx", "demo", key_file_path=None).argv() == [
        "/opt/uv/bin/uvx",
        "demo",
    ]
    launch = hosts.uvx_launch("/opt/uv/bin/uvx", "demo", extras=("aws",), key_file_path=None)
    assert launch.argv() == ["/opt/uv/bin/uvx", "--from", "demo[aws]", "demo"]
    assert launch.env == {}


def test_a_venv_has_one_interpreter_name_in_every_config() -> None:
    assert hosts.venv_interpreter("/srv/demo/.venv", windows=False) == "/srv/demo/.venv/bin/python"
    assert hosts.venv_python("/srv/demo", windows=False) == "/srv/demo/.venv/bin/python"
    assert (
        hosts.venv_interpreter("C:\\demo\\.venv", windows=True)
        == "C:\\demo\\.venv\\Scripts\\python.exe"
    )


def test_the_hooks_uv_config_says_to_uv_sync_before_the_first_launch(
    bake: BakeFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    uv = Path(find_uv_bin())
    monkeypatch.setenv("PATH", f"{uv.parent}{os.pathsep}{os.environ.get('PATH', os.defpath)}")
    baked = bake(include_aws_example="yes")
    expected = (
        f"Run '{uv} sync --inexact --directory {baked.project} --extra aws' once before the host"
    )
    assert expected in baked.stdout


def test_the_uv_sync_line_is_inexact_so_it_keeps_what_else_the_venv_holds() -> None:
    # uv sync is exact by default: it would uninstall the dev tools pip put into the same .venv.
    words = hosts.uv_sync_words("/opt/uv/bin/uv", "/srv/demo", extras=("aws",))
    assert words == [
        "/opt/uv/bin/uv",
        "sync",
        "--inexact",
        "--directory",
        "/srv/demo",
        "--extra",
        "aws",
    ]
    assert " ".join(words) in hosts.uv_sync_first("/opt/uv/bin/uv", "/srv/demo", extras=("aws",))


@pytest.mark.baked_checks
def test_the_printed_uv_sync_keeps_the_dev_tools_and_the_uv_config_then_starts(
    bake: BakeFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's path: ``pip install -e .[dev]`` into ``.venv``, then the ``uv sync`` line a
    ``--uv`` config asks for, in the same ``.venv``. A plain (exact) ``uv sync`` uninstalls every
    package the project does not list for those extras: pytest, ruff and mypy went with it."""
    uv = Path(find_uv_bin())
    monkeypatch.setenv("PATH", f"{uv.parent}{os.pathsep}{os.environ.get('PATH', os.defpath)}")
    baked = bake(include_aws_example="no")
    sync = re.search(r"Run '(.+?)' once before the host starts it", baked.stdout)
    assert sync is not None, baked.stdout
    venv_dir = baked.project / ".venv"
    run([sys.executable, "-m", "venv", str(venv_dir)], cwd=baked.project)
    python = hosts.venv_interpreter(str(venv_dir), windows=os.name == "nt")
    # A dev tool, as the dev extra brings it (the project itself is uv's to install here).
    run([python, "-m", "pip", "install", "--quiet", dev_pin("pytest")], cwd=baked.project)

    uv_env = {"UV_CACHE_DIR": str(REPO / ".cache" / "uv"), "UV_SYSTEM_CERTS": "1"}
    run(shlex.split(sync[1]), cwd=Path("/"), env=uv_env, timeout=900)
    still = run([python, "-c", "import pytest; print(pytest.__version__)"], cwd=Path("/"))
    assert dev_pin("pytest").endswith(f"=={still.stdout.strip()}")

    # And a host starts the server as the printed uv config says, from that .venv.
    _, _, after = baked.stdout.partition("With uv instead")
    config = json.loads(after[after.index("{") : after.index("\n}\n") + 2])
    entry = config["mcpServers"][DEFAULT_SLUG]
    assert entry["args"][:3] == ["run", "--directory", str(baked.project)]
    host = HostLaunch({**entry, "env": {**entry.get("env", {}), **uv_env}})
    result = host.one_request(1, "server/discover", {"_meta": meta()})
    assert MODERN in result["supportedVersions"]
    run([python, "-c", "import pytest"], cwd=Path("/"))  # uv run, too, kept it


def test_unknown_host_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown host 'zed'"):
        hosts.snippet("zed", "demo", LAUNCH)


def test_render_all_covers_every_host() -> None:
    text = hosts.render_all("demo", LAUNCH)
    for title in ("Claude Desktop", "Claude Code", "VS Code", "Cursor", "Codex"):
        assert f"== {title} ==" in text
    assert ".mcp.json" in text
    assert "~/.codex/config.toml" in text


def test_codex_command_round_trips_through_a_posix_shell() -> None:
    assert shlex.split(hosts.snippet("codex", "demo", LAUNCH)) == [
        "codex",
        "mcp",
        "add",
        "demo",
        "--env",
        "MRTR_SIGNING_KEY_FILE=/home/ada/My Servers/demo/.mrtr-signing-key",
        "--",
        "/home/ada/My Servers/demo/.venv/bin/python",
        "-m",
        "demo",
    ]


def test_codex_toml_is_the_table_codex_mcp_add_writes() -> None:
    document = tomllib.loads(hosts.snippet("codex-toml", "demo", LAUNCH))
    assert document == {
        "mcp_servers": {
            "demo": {
                "command": LAUNCH.command,
                "args": ["-m", "demo"],
                "env": {"MRTR_SIGNING_KEY_FILE": "/home/ada/My Servers/demo/.mrtr-signing-key"},
            }
        }
    }


#: Any text a path, a name or a value may hold, but the surrogates no file can (UTF-8 refuses).
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)


@settings(max_examples=300, deadline=None)
@given(
    name=TEXT.filter(bool),
    command=TEXT,
    args=st.lists(TEXT, max_size=4),
    env=st.dictionaries(TEXT.filter(bool), TEXT, max_size=3),
)
def test_codex_toml_reads_back_exactly_whatever_it_was_given(
    name: str, command: str, args: list[str], env: dict[str, str]
) -> None:
    """Quotes, backslashes, control characters, DEL, non-BMP letters, keys that are not bare:
    what TOML reads back is what went in, or Codex starts another command than printed."""
    launch = hosts.Launch(command=command, args=tuple(args), env=env)
    table = tomllib.loads(hosts.snippet("codex-toml", name, launch))["mcp_servers"][name]
    assert table["command"] == command
    assert table["args"] == args
    assert table.get("env", {}) == env
    remote = hosts.Remote("https://mcp.example.com/" + command.replace("\n", ""), token=True)
    over_http = tomllib.loads(hosts.http_snippet("codex-toml", name, remote))
    assert over_http["mcp_servers"][name] == {
        "url": remote.url,
        "bearer_token_env_var": "MRTR_HTTP_TOKEN",
    }


# -- a server over Streamable HTTP: each host's remote shape ---------------------------------------

REMOTE = hosts.Remote("https://mcp.example.com/mcp", token=True)
OPEN_REMOTE = hosts.Remote("https://mcp.example.com/mcp")
#: What Claude Code fills in from its environment (its MCP docs, "Environment variable
#: expansion in .mcp.json"); tests/deployments/test_claude_code.py shows it doing so.
CLAUDE_TOKEN = "Bearer ${MRTR_HTTP_TOKEN}"  # noqa: S105 -- a placeholder, not a secret


def test_claude_code_http_command_names_the_server_then_the_url_then_the_header() -> None:
    """``--header`` is variadic like ``--env``: nothing positional may follow it. The token is a
    placeholder, single-quoted so that no shell expands it."""
    command = hosts.claude_code_http_command("demo", REMOTE)
    assert command.endswith("--header 'Authorization: Bearer ${MRTR_HTTP_TOKEN}'")
    assert shlex.split(command) == [
        "claude",
        "mcp",
        "add",
        "--transport",
        "http",
        "demo",
        "https://mcp.example.com/mcp",
        "--header",
        "Authorization: Bearer ${MRTR_HTTP_TOKEN}",
    ]
    assert shlex.split(hosts.claude_code_http_command("demo", OPEN_REMOTE)) == [
        "claude",
        "mcp",
        "add",
        "--transport",
        "http",
        "demo",
        "https://mcp.example.com/mcp",
    ]


def test_claude_code_http_command_on_windows_keeps_the_placeholder_from_powershell() -> None:
    # PowerShell expands ${NAME} inside double quotes (to nothing: it is no PowerShell variable).
    command = hosts.claude_code_http_command("demo", REMOTE, windows=True)
    assert command.endswith("--header 'Authorization: Bearer ${MRTR_HTTP_TOKEN}'")
    assert "PowerShell" in hosts.http_where("claude-code", "demo", REMOTE, windows=True)


def test_claude_codes_mcp_json_for_http_has_its_type_and_placeholder() -> None:
    document = json.loads(hosts.http_snippet("mcp-json", "demo", REMOTE))
    assert document == {
        "mcpServers": {
            "demo": {
                "type": "http",
                "url": "https://mcp.example.com/mcp",
                "headers": {"Authorization": CLAUDE_TOKEN},
            }
        }
    }


def test_vscode_over_http_asks_for_the_token_as_a_password_input() -> None:
    # code.visualstudio.com MCP configuration reference: "servers", "type": "http", headers,
    # and "inputs" for secrets (promptString, password), referred to as ${input:<id>}.
    document = json.loads(hosts.http_snippet("vscode", "demo", REMOTE))
    assert document == {
        "servers": {
            "demo": {
                "type": "http",
                "url": "https://mcp.example.com/mcp",
                "headers": {"Authorization": "Bearer ${input:demo-token}"},
            }
        },
        "inputs": [
            {
                "type": "promptString",
                "id": "demo-token",
                "description": "Bearer token for demo (MRTR_HTTP_TOKEN of the server)",
                "password": True,
            }
        ],
    }
    assert "'demo-token'" in hosts.http_where("vscode", "demo", REMOTE)
    assert json.loads(hosts.http_snippet("vscode", "demo", OPEN_REMOTE)) == {
        "servers": {"demo": {"type": "http", "url": "https://mcp.example.com/mcp"}}
    }


def test_cursor_over_http_is_a_url_with_an_env_placeholder_and_no_type() -> None:
    document = json.loads(hosts.http_snippet("cursor", "demo", REMOTE))
    assert document == {
        "mcpServers": {
            "demo": {
                "url": "https://mcp.example.com/mcp",
                "headers": {"Authorization": "Bearer ${env:MRTR_HTTP_TOKEN}"},
            }
        }
    }
    assert "${env:MRTR_HTTP_TOKEN}" in hosts.http_where("cursor", "demo", REMOTE)


def test_claude_desktop_over_http_is_a_connector_url_and_says_what_a_connector_cannot_do() -> None:
    # support.claude.com, custom connectors using remote MCP: added in Settings > Connectors,
    # reached from Anthropic's cloud, authless or OAuth.
    assert hosts.http_snippet("claude-desktop", "demo", OPEN_REMOTE) == OPEN_REMOTE.url
    said = hosts.http_where("claude-desktop", "demo", OPEN_REMOTE)
    assert "Settings > Connectors > Add custom connector" in said
    assert "claude_desktop_config.json" in said and "internet" in said
    assert "stdio config" not in said
    assert "stdio config" in hosts.http_where("claude-desktop", "demo", REMOTE)
    local = hosts.Remote("http://127.0.0.1:8000/mcp")
    assert "loopback" in hosts.http_where("claude-desktop", "demo", local)


@pytest.mark.parametrize("host", ["claude-desktop", "mcp-json", "vscode", "cursor"])
def test_the_http_forms_in_files_are_the_same_on_windows(host: str) -> None:
    # Only a command is quoted for a shell; a file's JSON (or a URL) is the same everywhere.
    for remote in (REMOTE, OPEN_REMOTE):
        posix = hosts.http_snippet(host, "demo", remote)
        assert hosts.http_snippet(host, "demo", remote, windows=True) == posix


@pytest.mark.parametrize(
    ("url", "loopback"),
    [
        ("http://localhost:8000/mcp", True),
        ("http://127.0.0.1:8000/mcp", True),
        ("http://127.9.9.9/mcp", True),
        ("http://[::1]:8000/mcp", True),
        ("https://mcp.example.com/mcp", False),
        ("http://10.0.0.7:8000/mcp", False),
        ("http://[2001:db8::1]/mcp", False),
    ],
)
def test_a_remote_knows_a_loopback_url(url: str, loopback: bool) -> None:
    assert hosts.Remote(url).loopback is loopback


def test_codex_over_http_names_the_variable_that_holds_the_token_never_the_token() -> None:
    command = shlex.split(hosts.http_snippet("codex", "demo-http", REMOTE))
    assert command == [
        "codex",
        "mcp",
        "add",
        "demo-http",
        "--url",
        REMOTE.url,
        "--bearer-token-env-var",
        "MRTR_HTTP_TOKEN",
    ]
    assert "--bearer-token-env-var" not in hosts.http_snippet("codex", "demo-http", OPEN_REMOTE)
    assert "start codex where MRTR_HTTP_TOKEN" in hosts.http_where("codex", "demo-http", REMOTE)


def test_render_http_all_covers_every_host_and_names_no_token() -> None:
    text = hosts.render_http_all("demo", REMOTE)
    for title in ("Claude Desktop", "Claude Code", "VS Code", "Cursor", "Codex"):
        assert f"== {title} (Streamable HTTP) ==" in text
    assert ".mcp.json" in text
    # The only credential in any form is a placeholder the host fills in.
    values = re.findall(r"Authorization\"?: \"?Bearer ([^\"'\n]+)", text)
    assert len(values) == 4, values  # Claude Code's command, its .mcp.json, VS Code, Cursor
    assert all(value.startswith("${") for value in values), values


@pytest.mark.parametrize("remote", [REMOTE, OPEN_REMOTE])
def test_unknown_host_over_http_is_a_clear_error(remote: Any) -> None:
    with pytest.raises(ValueError, match="unknown host 'zed'"):
        hosts.http_snippet("zed", "demo", remote)
    with pytest.raises(ValueError, match="unknown host 'zed'"):
        hosts.http_where("zed", "demo", remote)


# -- the real thing: a server launched the way a host would ---------------------------------------


class HostLaunch:
    """Starts the server from a printed config: cwd ``/``, env = HOME + PATH (+ this run's
    XDG_STATE_HOME) + the config's env."""

    def __init__(self, entry: Mapping[str, Any]) -> None:
        self.argv = [entry["command"], *entry["args"]]
        self.env = {
            "HOME": os.environ.get("HOME", "/"),
            "PATH": os.environ.get("PATH", os.defpath),
            # The user's per-user state (the default task store) is this test run's own
            # (tests/conftest.py), never the developer's: a host's user has theirs.
            **({"XDG_STATE_HOME": state} if (state := os.environ.get("XDG_STATE_HOME")) else {}),
            **entry.get("env", {}),
        }
        self.stderr = ""

    def one_request(self, request_id: int, method: str, params: Mapping[str, Any]) -> Any:
        """A fresh server process answers one request, then sees EOF and must exit 0."""
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        process = subprocess.run(
            self.argv,
            cwd="/",
            env=self.env,
            input=json.dumps(message) + "\n",
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=60,
            check=False,
        )
        self.stderr += process.stderr
        assert process.returncode == 0, process.stderr
        lines = process.stdout.splitlines()
        assert len(lines) == 1, f"stdout must carry exactly one message: {process.stdout!r}"
        response = json.loads(lines[0])
        assert response["jsonrpc"] == "2.0" and response["id"] == request_id
        assert "error" not in response, response
        return response["result"]


def _printed_config(project: Installed) -> dict[str, Any]:
    printed = run(
        [project.python, "-m", DEFAULT_PACKAGE, "config", "claude-desktop"], cwd=Path("/")
    )
    config: dict[str, Any] = json.loads(printed.stdout)  # stdout is the snippet and nothing else
    return config["mcpServers"][DEFAULT_SLUG]


@pytest.mark.baked_checks
def test_server_starts_as_the_printed_claude_desktop_config_says(
    installed: Callable[[str], Installed],
) -> None:
    project = installed("no-aws")
    entry = _printed_config(project)
    assert entry["command"] == str(project.python)
    assert entry["args"] == ["-m", DEFAULT_PACKAGE]
    assert entry["env"] == {"MRTR_SIGNING_KEY_FILE": str(project.project / KEY_FILE)}

    host = HostLaunch(entry)
    result = host.one_request(1, "server/discover", {"_meta": meta()})
    assert MODERN in result["supportedVersions"]
    assert "tools" in result["capabilities"]
    assert result["resultType"] == "complete"
    # The key file was found (its public id is logged), and the key itself never shows.
    key = (project.project / KEY_FILE).read_text(encoding="ascii").strip()
    assert hashlib.sha256(bytes.fromhex(key)).hexdigest()[:8] in host.stderr
    assert key not in host.stderr


@pytest.mark.baked_checks
def test_a_multi_round_call_survives_a_new_process_per_round(
    installed: Callable[[str], Installed],
) -> None:
    # Each round goes to a *new* server process started from the printed config: only the signing
    # key file can make round N+1 accept the requestState minted by round N.
    project = installed("no-aws")
    host = HostLaunch(_printed_config(project))
    tools = host.one_request(1, "tools/list", {"_meta": meta()})["tools"]
    request_id = 2
    for tool in tools:
        arguments = fill(tool["inputSchema"], required_only=True)
        params: dict[str, Any] = {"name": tool["name"], "arguments": arguments, "_meta": meta()}
        result = host.one_request(request_id, "tools/call", params)
        request_id += 1
        states = 0
        for _ in range(MAX_ROUNDS):
            if result.get("resultType") != "input_required":
                break
            answers = {
                key: answer(request) for key, request in result.get("inputRequests", {}).items()
            }
            # Each retry is a new request: the answers to this round, plus the state (if any)
            # that carries the earlier ones (2026-07-28 basic/patterns/mrtr).
            params = {**params, "inputResponses": answers}
            params.pop("requestState", None)
            if "requestState" in result:
                params["requestState"] = result["requestState"]
                states += 1
            result = host.one_request(request_id, "tools/call", params)
            request_id += 1
        if states:
            assert result.get("resultType") == "complete", result
            assert not result.get("isError"), result
            return
    pytest.fail(
        "no tool in the no-AWS bake answers input_required with a requestState; every bake must "
        f"ship an AWS-free multi-round sample (tools: {[tool['name'] for tool in tools]})"
    )
