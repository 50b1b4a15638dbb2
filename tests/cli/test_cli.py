"""The generated command line: ``keygen`` and a bad signing key, run in an installed bake."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
from bakery import DEFAULT_PACKAGE, DEFAULT_SLUG, KEY_FILE, Installed, child_env
from uv import find_uv_bin

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
    # And where the forms for a server over HTTP come from.
    assert f"'{DEFAULT_SLUG} config <host> --http URL'" in result.stdout


def bake_hosts(project: Installed) -> ModuleType:
    """The bake's own ``hosts`` module, loaded by path as the post-gen hook loads it."""
    path = project.project / "src" / DEFAULT_PACKAGE / "mrtr_runtime" / "cli" / "_hosts.py"
    spec = importlib.util.spec_from_file_location("_installed_bake_hosts", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_config_from_the_console_script_names_the_venv_python_as_the_hook_does(
    installed: Callable[[str], Installed],
) -> None:
    # pip's console script runs .venv/bin/python3; the hook, the README and every config name
    # one path for the interpreter: .venv/bin/python.
    project = installed("no-aws")
    result = subprocess.run(
        [str(project.tool(DEFAULT_SLUG)), "config", "claude-desktop"],
        cwd="/",
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    entry = json.loads(result.stdout)["mcpServers"][DEFAULT_SLUG]
    hook_python = bake_hosts(project).venv_python(str(project.project), windows=os.name == "nt")
    assert entry["command"] == hook_python == str(project.python)


def uv_dir() -> str:
    return str(Path(find_uv_bin()).parent)


#: What the uv forms copy from the shell (a TLS-intercepting proxy's certificate): unset here,
#: whatever this machine sets, unless a test sets them.
UV_TLS_UNSET = dict.fromkeys(
    ("SSL_CERT_FILE", "SSL_CERT_DIR", "UV_SYSTEM_CERTS", "UV_NATIVE_TLS"), ""
)


def state_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """uv and uvx on PATH, a temporary home: ``config`` only names this user's key file."""
    return {
        "PATH": f"{uv_dir()}{os.pathsep}{os.environ.get('PATH', os.defpath)}",
        "HOME": str(tmp_path / "home"),
        "XDG_STATE_HOME": "",  # unset, whatever this shell has
        **UV_TLS_UNSET,
        **extra,
    }


def test_config_installed_starts_the_published_package_with_uvx_by_its_absolute_path(
    installed: Callable[[str], Installed], tmp_path: Path
) -> None:
    project = installed("no-aws")
    result = cli(project, "config", "vscode", "--installed", **state_env(tmp_path))
    assert result.returncode == 0, result.stderr
    entry = json.loads(result.stdout)["servers"][DEFAULT_SLUG]
    uvx = str(Path(uv_dir(), "uvx.exe" if os.name == "nt" else "uvx"))
    assert entry == {"type": "stdio", "command": uvx, "args": [DEFAULT_SLUG]}
    # No key in the config: the installed server keeps its own, and says where.
    per_user = tmp_path / "home" / ".local" / "state" / DEFAULT_SLUG / KEY_FILE
    assert f"{per_user} (created on its first start)" in result.stderr
    assert not per_user.exists()

    # A state directory set in the shell travels with the config, so the server the host starts
    # and 'keygen' run from this shell use the same key file.
    state = str(tmp_path / "state")
    moved = cli(
        project, "config", "vscode", "--installed", **state_env(tmp_path, XDG_STATE_HOME=state)
    )
    assert json.loads(moved.stdout)["servers"][DEFAULT_SLUG]["env"] == {"XDG_STATE_HOME": state}

    no_uvx = cli(project, "config", "vscode", "--installed", PATH=str(tmp_path))
    assert no_uvx.returncode == 1
    assert no_uvx.stdout == ""
    assert "--installed needs uvx on PATH" in no_uvx.stderr


def test_config_shows_the_installed_form_next_to_the_checkout_form(
    installed: Callable[[str], Installed], tmp_path: Path
) -> None:
    project = installed("no-aws")
    uvx = str(Path(uv_dir(), "uvx.exe" if os.name == "nt" else "uvx"))

    one = cli(project, "config", "claude-desktop", **state_env(tmp_path))
    assert one.returncode == 0, one.stderr
    assert json.loads(one.stdout)["mcpServers"][DEFAULT_SLUG]["command"] == str(project.python)
    assert f"Installed from PyPI instead: {uvx} {DEFAULT_SLUG} " in one.stderr

    every = cli(project, "config", "all", **state_env(tmp_path))
    assert every.returncode == 0, every.stderr
    checkout, _, published = every.stdout.partition("== Installed from PyPI ==")
    assert f'"command": "{project.python}"' in checkout
    published, _, over_http = published.partition("== Over Streamable HTTP ==")
    assert f"'{DEFAULT_SLUG} config <host> --http URL'" in over_http
    snippet = published[published.index("{") :]
    assert json.loads(snippet)["mcpServers"][DEFAULT_SLUG] == {
        "command": uvx,
        "args": [DEFAULT_SLUG],
    }


def test_config_uv_says_to_uv_sync_before_the_first_launch(
    installed: Callable[[str], Installed], tmp_path: Path
) -> None:
    project = installed("no-aws")
    result = cli(project, "config", "cursor", "--uv", **state_env(tmp_path))
    assert result.returncode == 0, result.stderr
    uv = str(Path(find_uv_bin()))
    # --inexact: a plain uv sync would uninstall the dev tools of this same .venv (test_hosts.py
    # runs the line and finds them still there).
    assert (
        f"Run '{uv} sync --inexact --directory {project.project}' once before the host starts it"
        in result.stderr
    )
    entry = json.loads(result.stdout)["mcpServers"][DEFAULT_SLUG]
    assert entry["args"] == ["run", "--directory", str(project.project), DEFAULT_SLUG]


def test_the_uv_forms_carry_this_shells_certificate_settings_made_absolute(
    installed: Callable[[str], Installed], tmp_path: Path
) -> None:
    """Behind a TLS-intercepting proxy uv needs the proxy's root certificate, and a host starts
    the server without the shell's environment: uv's download then fails with "invalid peer
    certificate" and the host says only "Connection closed"."""
    project = installed("no-aws")
    tls = {"SSL_CERT_FILE": "corp-ca.pem", "UV_SYSTEM_CERTS": "1", "UV_NATIVE_TLS": "true"}
    for form in ("--uv", "--installed"):
        result = cli(project, "config", "cursor", form, **state_env(tmp_path, **tls))
        assert result.returncode == 0, result.stderr
        env = json.loads(result.stdout)["mcpServers"][DEFAULT_SLUG]["env"]
        # cli() runs with cwd "/": a relative path is taken from where config ran.
        assert env["SSL_CERT_FILE"] == str(Path("/", "corp-ca.pem"))
        assert env["UV_SYSTEM_CERTS"] == "1"
        assert env["UV_NATIVE_TLS"] == "true"
    # The venv form downloads nothing at start: it gets none of them.
    venv_form = cli(project, "config", "cursor", **state_env(tmp_path, **tls))
    entry = json.loads(venv_form.stdout)["mcpServers"][DEFAULT_SLUG]
    assert not set(tls) & set(entry.get("env", {}))


def test_the_hosts_pages_proxy_example_is_what_config_prints(
    installed: Callable[[str], Installed], tmp_path: Path
) -> None:
    project = installed("no-aws")
    readme = (project.project / "docs" / "hosts.md").read_text(encoding="utf-8")
    command = re.search(
        r"^(SSL_CERT_FILE=\S+ UV_SYSTEM_CERTS=1) \.venv/bin/\S+ (config .+)$", readme, re.M
    )
    assert command is not None
    after = readme[command.end() :]
    opened = after.index("```json\n") + len("```json\n")
    shown = json.loads(after[opened : after.index("\n```", opened)])
    env = dict(assignment.split("=", 1) for assignment in command[1].split())
    printed = cli(project, *command[2].split(), **state_env(tmp_path, **env))
    assert printed.returncode == 0, printed.stderr
    entry = json.loads(printed.stdout)["mcpServers"][DEFAULT_SLUG]
    example = shown["mcpServers"][DEFAULT_SLUG]
    assert {**example, "command": entry["command"]} == entry  # the page's uvx is an example


def test_the_hosts_pages_claude_code_http_example_is_what_config_prints(
    installed: Callable[[str], Installed],
) -> None:
    project = installed("no-aws")
    readme = (project.project / "docs" / "hosts.md").read_text(encoding="utf-8")
    printed = cli(
        project,
        "config",
        "claude-code",
        "--http",
        "https://mcp.example.com/mcp",
        MRTR_HTTP_TOKEN=os.urandom(8).hex(),
    )
    assert printed.returncode == 0, printed.stderr
    assert f"\n{printed.stdout}```" in readme


def test_config_http_prints_each_hosts_remote_form_with_the_token_as_a_placeholder(
    installed: Callable[[str], Installed],
) -> None:
    project = installed("no-aws")
    url = "https://mcp.example.com/mcp"
    token = "s3cret-" + os.urandom(8).hex()
    every = cli(project, "config", "all", "--http", url, "--name", "team", MRTR_HTTP_TOKEN=token)
    assert every.returncode == 0, every.stderr
    assert token not in every.stdout + every.stderr
    for title in ("Claude Desktop", "Claude Code", "VS Code", "Cursor"):
        assert f"== {title} (Streamable HTTP) ==" in every.stdout
    assert "claude mcp add --transport http team https://mcp.example.com/mcp --header " in (
        every.stdout
    )

    vscode = cli(project, "config", "vscode", "--http", url, MRTR_HTTP_TOKEN=token)
    assert vscode.returncode == 0, vscode.stderr
    # The HTTP form has a name of its own (the stdio form's is the slug): a host holds both.
    entry = json.loads(vscode.stdout)["servers"][f"{DEFAULT_SLUG}-http"]  # stdout: the JSON only
    assert entry["headers"] == {"Authorization": f"Bearer ${{input:{DEFAULT_SLUG}-http-token}}"}
    assert "secret storage" in vscode.stderr

    # A tokens file on the server's side: each user sends a token of their own, the same way.
    tokens_file = cli(project, "config", "cursor", "--http", url, MRTR_HTTP_TOKENS_FILE="/x")
    entry = json.loads(tokens_file.stdout)["mcpServers"][f"{DEFAULT_SLUG}-http"]
    assert entry == {"url": url, "headers": {"Authorization": "Bearer ${env:MRTR_HTTP_TOKEN}"}}

    # No token here: no header, and stderr says how to get one.
    bare = cli(
        project, "config", "cursor", "--http", url, MRTR_HTTP_TOKEN="", MRTR_HTTP_TOKENS_FILE=""
    )
    assert bare.returncode == 0, bare.stderr
    assert json.loads(bare.stdout)["mcpServers"][f"{DEFAULT_SLUG}-http"] == {"url": url}
    assert "no Authorization header" in bare.stderr

    desktop = cli(project, "config", "claude-desktop", "--http", "http://127.0.0.1:8000/mcp")
    assert desktop.stdout == "http://127.0.0.1:8000/mcp\n"
    assert "Add custom connector" in desktop.stderr and "loopback" in desktop.stderr


def test_config_http_warns_of_plain_http_to_another_machine(
    installed: Callable[[str], Installed],
) -> None:
    project = installed("no-aws")
    plain = cli(project, "config", "cursor", "--http", "http://10.1.2.3:8000/mcp")
    assert plain.returncode == 0, plain.stderr
    assert "unencrypted" in plain.stderr
    local = cli(project, "config", "cursor", "--http", "http://127.0.0.1:8000/mcp")
    assert "unencrypted" not in local.stderr


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (("--http", "ftp://example.com/mcp"), "not an http(s) URL"),
        (("--http", "http://:80/mcp"), "not an http(s) URL"),
        (("--http", "https://h/mcp", "--uv"), "not allowed with argument"),
        (("--http", "https://h/mcp", "--installed"), "not allowed with argument"),
        (("--name", "two words"), "not a server name"),
        (("--name", "x" * 65), "not a server name"),
    ],
)
def test_config_refuses_a_bad_url_name_or_mix_of_forms(
    installed: Callable[[str], Installed], args: tuple[str, ...], complaint: str
) -> None:
    project = installed("no-aws")
    result = cli(project, "config", "cursor", *args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert complaint in result.stderr


def test_config_name_renames_the_server_in_every_form(
    installed: Callable[[str], Installed], tmp_path: Path
) -> None:
    project = installed("no-aws")
    for form in ((), ("--uv",), ("--installed",), ("--http", "https://h.example/mcp")):
        result = cli(project, "config", "vscode", *form, "--name", "mine", **state_env(tmp_path))
        assert result.returncode == 0, result.stderr
        assert list(json.loads(result.stdout)["servers"]) == ["mine"]
