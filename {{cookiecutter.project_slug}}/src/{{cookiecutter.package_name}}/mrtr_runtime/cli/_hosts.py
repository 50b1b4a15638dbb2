"""Host configuration snippets: how Claude Desktop, Claude Code, VS Code, Cursor and Codex start
us.

One implementation for two callers: the template's post-gen hook (which loads this file by path,
before the project is even installed) and the project's ``<slug> config`` command. So this module
uses the standard library only and has no relative imports.

Hosts start a stdio server from a working directory that "may be undefined (like ``/`` on macOS)"
and pass it "only a limited subset of environment variables" (modelcontextprotocol.io, debugging
guide); the official SDK client passes HOME, LOGNAME, PATH, SHELL, TERM and USER. So every path
here is absolute, the interpreter (or ``uv``) is named by its absolute path rather than found on
PATH ("spawn uv ENOENT" is the most reported setup failure), and the signing key file travels in
the config's ``env``.

A server already running over Streamable HTTP (``<slug> http``) is reached by URL instead: each
host's documented shape for a remote server, its bearer token named by a placeholder the host
fills in (never the token itself), and for Claude Desktop, which adds remote servers as
connectors in its settings rather than in a file, the URL and the steps.
"""

from __future__ import annotations

import ipaddress
import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath, PureWindowsPath
from urllib.parse import urlsplit

__all__ = (
    "CLAUDE_DESKTOP_FILES",
    "HOSTS",
    "KEY_FILE_ENV",
    "KEY_FILE_NAME",
    "TOKEN_ENV",
    "Launch",
    "Remote",
    "claude_code_command",
    "claude_code_http_command",
    "codex_command",
    "codex_http_command",
    "http_snippet",
    "http_where",
    "key_file",
    "render_all",
    "render_host",
    "render_http_all",
    "render_http_host",
    "snippet",
    "uv_launch",
    "uv_sync_first",
    "uv_sync_words",
    "uvx_launch",
    "venv_interpreter",
    "venv_launch",
    "venv_python",
    "where",
)

#: The hosts we print configuration for, in the order we print them.
HOSTS = ("claude-desktop", "claude-code", "vscode", "cursor", "codex")
#: The environment variable that names the requestState signing key file (see ``_keys``).
KEY_FILE_ENV = "MRTR_SIGNING_KEY_FILE"
#: The key file the post-gen hook writes at the project root.
KEY_FILE_NAME = ".mrtr-signing-key"
#: Where a host finds the bearer token of an HTTP server: the variable the server reads its
#: token from and ``<slug> health`` sends, set in the host's environment (or asked for).
TOKEN_ENV = "MRTR_HTTP_TOKEN"  # noqa: S105 -- the variable's name, not a secret

_TITLES = {
    "claude-desktop": "Claude Desktop",
    "claude-code": "Claude Code",
    "vscode": "VS Code",
    "cursor": "Cursor",
    "codex": "Codex",
}


@dataclass(frozen=True)
class Launch:
    """How a host starts the server: an absolute command, its arguments, extra environment."""

    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)

    def argv(self) -> list[str]:
        return [self.command, *self.args]


@dataclass(frozen=True)
class Remote:
    """A server a host reaches over Streamable HTTP: its MCP endpoint, and whether every
    request must carry ``Authorization: Bearer <token>`` (the server has ``MRTR_HTTP_TOKEN``
    or ``MRTR_HTTP_TOKENS_FILE``)."""

    url: str
    token: bool = False

    @property
    def loopback(self) -> bool:
        """Whether the URL names this machine (``localhost``, 127.0.0.0/8, ``[::1]``)."""
        host = urlsplit(self.url).hostname or ""
        if host == "localhost":
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False


def _path(windows: bool, *parts: str) -> str:
    return str(PureWindowsPath(*parts) if windows else PurePosixPath(*parts))


def venv_python(project_dir: str, *, windows: bool) -> str:
    """The interpreter of the project's ``.venv`` (``Scripts\\python.exe`` on Windows)."""
    return venv_interpreter(_path(windows, project_dir, ".venv"), windows=windows)


def venv_interpreter(venv_dir: str, *, windows: bool) -> str:
    """A venv's ``python``: the one name every config and message uses for it (a venv also has
    ``python3`` and ``python3.X``, and pip's console scripts start with ``python3``)."""
    if windows:
        return _path(True, venv_dir, "Scripts", "python.exe")
    return _path(False, venv_dir, "bin", "python")


def key_file(project_dir: str, *, windows: bool) -> str:
    """The signing key file at the project root."""
    return _path(windows, project_dir, KEY_FILE_NAME)


def venv_launch(
    python: str,
    package: str,
    *,
    key_file_path: str | None,
    extra_env: Mapping[str, str] | None = None,
) -> Launch:
    """``<python> -m <package>``: no PATH lookup, no working directory needed."""
    return Launch(python, ("-m", package), _env(key_file_path, extra_env))


def uv_launch(
    uv: str,
    project_dir: str,
    slug: str,
    *,
    key_file_path: str | None,
    extras: Sequence[str] = (),
    extra_env: Mapping[str, str] | None = None,
) -> Launch:
    """``<uv> run --directory <project> [--extra X] <slug>``; uv keeps ``.venv`` in sync itself."""
    args = ["run", "--directory", project_dir]
    for extra in extras:
        args += ["--extra", extra]
    args.append(slug)
    return Launch(uv, tuple(args), _env(key_file_path, extra_env))


def uv_sync_words(uv: str, project_dir: str, *, extras: Sequence[str] = ()) -> list[str]:
    """``uv sync --inexact``: installs what ``uv run`` needs into the project's ``.venv``.

    ``--inexact`` because a plain ``uv sync`` is exact: it removes every package the project's
    lock does not list for these extras, the dev tools ``pip install -e .[dev]`` put into the
    same ``.venv`` (pytest, ruff, mypy) among them. ``uv run`` itself syncs inexactly.
    """
    words = [uv, "sync", "--inexact", "--directory", project_dir]
    for extra in extras:
        words += ["--extra", extra]
    return words


def uv_sync_first(uv: str, project_dir: str, *, extras: Sequence[str] = ()) -> str:
    """What to run once before a host starts the ``uv_launch`` form, and why."""
    words = uv_sync_words(uv, project_dir, extras=extras)
    return (
        f"Run '{' '.join(words)}' once before the host starts it: on a first start 'uv run' "
        "resolves and installs the dependencies, which needs the network (with your shell's proxy "
        "and certificate settings, which hosts do not pass on) and can outlast the host's wait. "
        "'--inexact' keeps the dev tools already in .venv."
    )


def uvx_launch(
    uvx: str,
    slug: str,
    *,
    extras: Sequence[str] = (),
    key_file_path: str | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> Launch:
    """``<uvx> <slug>`` (``<uvx> --from <slug>[extras] <slug>``): the package installed from PyPI.

    No key file by default: an installed server keeps its key in the user's state directory.
    """
    args = ["--from", f"{slug}[{','.join(extras)}]", slug] if extras else [slug]
    return Launch(uvx, tuple(args), _env(key_file_path, extra_env))


def _env(key_file_path: str | None, extra_env: Mapping[str, str] | None) -> dict[str, str]:
    env = {KEY_FILE_ENV: key_file_path} if key_file_path else {}
    env.update(extra_env or {})
    return env


def _server_entry(launch: Launch, *, with_type: bool) -> dict[str, object]:
    entry: dict[str, object] = {"type": "stdio"} if with_type else {}
    entry["command"] = launch.command
    entry["args"] = list(launch.args)
    if launch.env:
        entry["env"] = dict(launch.env)
    return entry


def _quote(arg: str, *, windows: bool) -> str:
    if not windows:
        return shlex.quote(arg)
    if "$" in arg:
        # PowerShell expands $NAME and ${NAME} inside double quotes; single quotes keep them.
        return f"'{arg}'"
    # cmd.exe / PowerShell: our paths and names never contain quotes (the template refuses them).
    return f'"{arg}"' if not arg or any(c in arg for c in " \t&()^%!;,'") else arg


def claude_code_command(name: str, launch: Launch, *, windows: bool = False) -> str:
    """``claude mcp add``: the name first, then the options, the command after ``--``.

    ``--env`` takes any number of values, so a name written after it would be read as one more
    ``KEY=VALUE`` ("Invalid environment variable format"): nothing but an option or ``--`` may
    follow an ``--env`` value.
    """
    words = ["claude", "mcp", "add", "--transport", "stdio", name]
    for key, value in launch.env.items():
        words += ["--env", f"{key}={value}"]
    words += ["--", *launch.argv()]
    return " ".join(_quote(word, windows=windows) for word in words)


def codex_command(name: str, launch: Launch, *, windows: bool = False) -> str:
    """``codex mcp add <name> [--env KEY=VALUE ...] -- <command>``: Codex writes the entry into
    ``~/.codex/config.toml`` (``[mcp_servers.<name>]``)."""
    words = ["codex", "mcp", "add", name]
    for key, value in launch.env.items():
        words += ["--env", f"{key}={value}"]
    words += ["--", *launch.argv()]
    return " ".join(_quote(word, windows=windows) for word in words)


def _toml_string(value: str) -> str:
    """A TOML basic string: JSON's escapes are TOML's, but TOML also wants DEL escaped and
    refuses the escaped surrogate pairs ``ensure_ascii`` writes, so those are left as they are."""
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")


def _toml_key(name: str) -> str:
    """A bare key where TOML allows one (ASCII letters, digits, ``-``, ``_``), else quoted."""
    bare = bool(name) and all(c.isascii() and (c.isalnum() or c in "-_") for c in name)
    return name if bare else _toml_string(name)


TomlValue = str | Sequence[str] | Mapping[str, str]


def _codex_toml(name: str, fields: Mapping[str, TomlValue]) -> str:
    """One ``[mcp_servers.<name>]`` table of Codex's config.toml."""
    lines = [f"[mcp_servers.{_toml_key(name)}]"]
    for key, value in fields.items():
        if isinstance(value, str):
            rendered = _toml_string(value)
        elif isinstance(value, Mapping):
            pairs = ", ".join(f"{_toml_key(k)} = {_toml_string(v)}" for k, v in value.items())
            rendered = f"{{ {pairs} }}"
        else:
            rendered = "[" + ", ".join(_toml_string(item) for item in value) + "]"
        lines.append(f"{key} = {rendered}")
    return "\n".join(lines)


def snippet(host: str, name: str, launch: Launch, *, windows: bool = False) -> str:
    """The text to paste for ``host``: JSON for the config files, a command for Claude Code.

    ``host`` is one of ``HOSTS``, ``"mcp-json"`` (a project's ``.mcp.json`` for Claude Code) or
    ``"codex-toml"`` (the table ``codex mcp add`` writes into Codex's config.toml).
    """
    if host == "claude-code":
        return claude_code_command(name, launch, windows=windows)
    if host == "codex":
        return codex_command(name, launch, windows=windows)
    if host == "codex-toml":
        fields: dict[str, TomlValue] = {"command": launch.command, "args": list(launch.args)}
        if launch.env:
            fields["env"] = dict(launch.env)
        return _codex_toml(name, fields)
    if host == "vscode":
        # VS Code's key is "servers" and it requires "type" (code.visualstudio.com, MCP servers).
        document = {"servers": {name: _server_entry(launch, with_type=True)}}
    elif host in ("claude-desktop", "cursor", "mcp-json"):
        document = {"mcpServers": {name: _server_entry(launch, with_type=host == "mcp-json")}}
    else:
        raise ValueError(f"unknown host {host!r}; choose from {', '.join(HOSTS)}")
    return json.dumps(document, indent=2)


#: Claude Desktop's config file and logs by ``sys.platform`` (Claude Desktop's MCP guide;
#: it ships for macOS and Windows, and Linux builds read the XDG config directory).
CLAUDE_DESKTOP_FILES = {
    "darwin": (
        "~/Library/Application Support/Claude/claude_desktop_config.json",
        "~/Library/Logs/Claude/mcp*.log",
    ),
    "win32": ("%APPDATA%\\Claude\\claude_desktop_config.json", "%APPDATA%\\Claude\\logs"),
    "linux": ("~/.config/Claude/claude_desktop_config.json", "~/.config/Claude/logs"),
}


def where(host: str, *, platform: str | None = None) -> str:
    """Where the snippet goes, in a sentence or two: on ``platform`` (a ``sys.platform``), or on
    every system Claude Desktop runs on when None."""
    if host == "claude-desktop" and platform is not None:
        config, logs = CLAUDE_DESKTOP_FILES.get(platform, CLAUDE_DESKTOP_FILES["linux"])
        return f"Merge into {config}, then restart Claude Desktop. Its logs: {logs}."
    if host == "claude-desktop":
        return (
            "Merge into claude_desktop_config.json (macOS: ~/Library/Application Support/Claude/, "
            "Windows: %APPDATA%\\Claude\\, Linux: ~/.config/Claude/), then restart Claude Desktop. "
            "Its logs: ~/Library/Logs/Claude/mcp*.log or %APPDATA%\\Claude\\logs."
        )
    if host == "claude-code":
        return (
            "Run once (add --scope project after the name to share it through .mcp.json, "
            "--scope user to apply it to every project)."
        )
    if host == "mcp-json":
        return "Save as .mcp.json at the root of a project (Claude Code asks before using it)."
    if host == "vscode":
        return "Merge into .vscode/mcp.json in the workspace (or 'MCP: Open User Configuration')."
    if host == "cursor":
        return "Merge into .cursor/mcp.json in the project, or ~/.cursor/mcp.json for all projects."
    if host == "codex":
        return "Run once: Codex keeps it in ~/.codex/config.toml (`codex mcp list` shows it)."
    if host == "codex-toml":
        return "Or paste this table into ~/.codex/config.toml ($CODEX_HOME/config.toml if set)."
    raise ValueError(f"unknown host {host!r}; choose from {', '.join(HOSTS)}")


def render_host(
    host: str, name: str, launch: Launch, *, windows: bool = False, platform: str | None = None
) -> str:
    """A heading, where the snippet goes, and the snippet (plus ``.mcp.json`` for Claude Code)."""
    parts = [
        f"== {_TITLES[host]} ==",
        where(host, platform=platform),
        snippet(host, name, launch, windows=windows),
    ]
    if host == "claude-code":
        parts += [
            "Or, for one project, this .mcp.json at its root:",
            snippet("mcp-json", name, launch, windows=windows),
        ]
    if host == "codex":
        parts += [where("codex-toml"), snippet("codex-toml", name, launch, windows=windows)]
    return "\n".join(parts) + "\n"


def render_all(
    name: str, launch: Launch, *, windows: bool = False, platform: str | None = None
) -> str:
    """Every host's section, in ``HOSTS`` order (``where`` for ``platform``)."""
    return "\n".join(
        render_host(host, name, launch, windows=windows, platform=platform) for host in HOSTS
    )


# -- a server over Streamable HTTP ---------------------------------------------------------------


def _bearer(placeholder: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {placeholder}"}


def _token_input(name: str) -> str:
    return f"{name}-token"


def claude_code_http_command(name: str, remote: Remote, *, windows: bool = False) -> str:
    """``claude mcp add --transport http <name> <url>``, then the token's header, if any.

    ``--header`` takes any number of values, like ``--env``: it comes after the name and the
    URL. Its value names ``${MRTR_HTTP_TOKEN}``, quoted so no shell expands it: Claude Code
    keeps it as written and fills it in from its own environment each time it connects (its MCP
    docs, "Environment variable expansion"), so neither the command nor its config holds the
    token.
    """
    words = ["claude", "mcp", "add", "--transport", "http", name, remote.url]
    if remote.token:
        words += ["--header", f"Authorization: Bearer ${{{TOKEN_ENV}}}"]
    return " ".join(_quote(word, windows=windows) for word in words)


def codex_http_command(name: str, remote: Remote, *, windows: bool = False) -> str:
    """``codex mcp add <name> --url <url>``, and ``--bearer-token-env-var MRTR_HTTP_TOKEN`` for
    a server with a token: Codex reads the variable from its own environment when it connects,
    so neither the command nor config.toml holds the token."""
    words = ["codex", "mcp", "add", name, "--url", remote.url]
    if remote.token:
        words += ["--bearer-token-env-var", TOKEN_ENV]
    return " ".join(_quote(word, windows=windows) for word in words)


def http_snippet(host: str, name: str, remote: Remote, *, windows: bool = False) -> str:
    """What to paste for ``host`` to reach ``remote``: each host's documented remote shape.

    ``host`` is one of ``HOSTS``, ``"mcp-json"`` or ``"codex-toml"``; for Claude Desktop it is
    the URL, which goes into its connector settings (``http_where`` says where).
    """
    entry: dict[str, object]
    if host == "claude-code":
        return claude_code_http_command(name, remote, windows=windows)
    if host == "codex":
        return codex_http_command(name, remote, windows=windows)
    if host == "codex-toml":
        table: dict[str, TomlValue] = {"url": remote.url}
        if remote.token:
            table["bearer_token_env_var"] = TOKEN_ENV
        return _codex_toml(name, table)
    if host == "claude-desktop":
        return remote.url
    if host == "mcp-json":
        # Claude Code's .mcp.json: "type": "http"; ${VAR} is expanded in url and headers.
        entry = {"type": "http", "url": remote.url}
        if remote.token:
            entry["headers"] = _bearer(f"${{{TOKEN_ENV}}}")
        return json.dumps({"mcpServers": {name: entry}}, indent=2)
    if host == "vscode":
        # code.visualstudio.com, MCP configuration reference: "servers", "type": "http", and an
        # "inputs" entry VS Code asks for once and keeps in its secret storage.
        entry = {"type": "http", "url": remote.url}
        document: dict[str, object] = {"servers": {name: entry}}
        if remote.token:
            entry["headers"] = _bearer(f"${{input:{_token_input(name)}}}")
            document["inputs"] = [
                {
                    "type": "promptString",
                    "id": _token_input(name),
                    "description": f"Bearer token for {name} ({TOKEN_ENV} of the server)",
                    "password": True,
                }
            ]
        return json.dumps(document, indent=2)
    if host == "cursor":
        # Cursor's mcp.json: a remote server is "url" (and "headers"), no "type"; ${env:NAME}
        # is filled in from Cursor's environment.
        entry = {"url": remote.url}
        if remote.token:
            entry["headers"] = _bearer(f"${{env:{TOKEN_ENV}}}")
        return json.dumps({"mcpServers": {name: entry}}, indent=2)
    raise ValueError(f"unknown host {host!r}; choose from {', '.join(HOSTS)}")


def http_where(host: str, name: str, remote: Remote, *, windows: bool = False) -> str:
    """Where the HTTP form goes, and where the host gets the token from."""
    if host == "claude-desktop":
        text = (
            "Claude Desktop adds a remote server as a custom connector in its settings, not in "
            "claude_desktop_config.json: Settings > Connectors > Add custom connector, the name "
            f"{name!r} and the URL below. Claude reaches a connector from Anthropic's cloud, not "
            "from this machine, so the URL must be reachable from the internet (HTTPS), and a "
            "connector signs in with OAuth or not at all: it sends no bearer token."
        )
        if remote.loopback:
            text += " This URL is loopback, which only this machine reaches: use the stdio config."
        elif remote.token:
            text += (
                f" This server wants a bearer token ({TOKEN_ENV}): use the stdio config, or put "
                "an OAuth gateway in front of it."
            )
        return text
    location = where(host)  # a host we do not know: the one ValueError
    if not remote.token:
        return location
    if host in ("claude-code", "mcp-json"):
        token = (
            f"Claude Code fills in ${{{TOKEN_ENV}}} from its own environment each time it "
            f"connects: start claude where {TOKEN_ENV} holds your token. The text holds no "
            "secret."
        )
        if windows and host == "claude-code":
            token += " The quotes are PowerShell's."
    elif host in ("codex", "codex-toml"):
        token = (
            f"Codex reads the token from {TOKEN_ENV} in its own environment each time it "
            f"connects: start codex where {TOKEN_ENV} holds your token. The text holds no secret."
        )
    elif host == "vscode":
        token = (
            f"VS Code asks for the token (the input {_token_input(name)!r}, a password field) "
            "when it first starts the server and keeps it in its secret storage."
        )
    else:
        token = (
            f"Cursor fills in ${{env:{TOKEN_ENV}}} from its own environment: start Cursor where "
            f"{TOKEN_ENV} holds your token."
        )
    return f"{location} {token}"


def render_http_host(host: str, name: str, remote: Remote, *, windows: bool = False) -> str:
    """A heading, where the HTTP form goes, and the form (plus ``.mcp.json`` for Claude Code)."""
    parts = [
        f"== {_TITLES[host]} (Streamable HTTP) ==",
        http_where(host, name, remote, windows=windows),
        http_snippet(host, name, remote, windows=windows),
    ]
    if host == "claude-code":
        parts += [
            "Or, for one project, this .mcp.json at its root:",
            http_snippet("mcp-json", name, remote, windows=windows),
        ]
    if host == "codex":
        parts += [where("codex-toml"), http_snippet("codex-toml", name, remote, windows=windows)]
    return "\n".join(parts) + "\n"


def render_http_all(name: str, remote: Remote, *, windows: bool = False) -> str:
    """Every host's HTTP form, in ``HOSTS`` order."""
    return "\n".join(render_http_host(host, name, remote, windows=windows) for host in HOSTS)
