"""Host configuration snippets: how Claude Desktop, Claude Code, VS Code and Cursor start us.

One implementation for two callers: the template's post-gen hook (which loads this file by path,
before the project is even installed) and the project's ``<slug> config`` command. So this module
uses the standard library only and has no relative imports.

Hosts start a stdio server from a working directory that "may be undefined (like ``/`` on macOS)"
and pass it "only a limited subset of environment variables" (modelcontextprotocol.io, debugging
guide); the official SDK client passes HOME, LOGNAME, PATH, SHELL, TERM and USER. So every path
here is absolute, the interpreter (or ``uv``) is named by its absolute path rather than found on
PATH ("spawn uv ENOENT" is the most reported setup failure), and the signing key file travels in
the config's ``env``.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath, PureWindowsPath

__all__ = (
    "CLAUDE_DESKTOP_FILES",
    "HOSTS",
    "KEY_FILE_ENV",
    "KEY_FILE_NAME",
    "Launch",
    "claude_code_command",
    "key_file",
    "render_all",
    "render_host",
    "snippet",
    "uv_launch",
    "uv_sync_first",
    "uvx_launch",
    "venv_interpreter",
    "venv_launch",
    "venv_python",
    "where",
)

#: The hosts we print configuration for, in the order we print them.
HOSTS = ("claude-desktop", "claude-code", "vscode", "cursor")
#: The environment variable that names the requestState signing key file (see ``_keys``).
KEY_FILE_ENV = "MRTR_SIGNING_KEY_FILE"
#: The key file the post-gen hook writes at the project root.
KEY_FILE_NAME = ".mrtr-signing-key"

_TITLES = {
    "claude-desktop": "Claude Desktop",
    "claude-code": "Claude Code",
    "vscode": "VS Code",
    "cursor": "Cursor",
}


@dataclass(frozen=True)
class Launch:
    """How a host starts the server: an absolute command, its arguments, extra environment."""

    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)

    def argv(self) -> list[str]:
        return [self.command, *self.args]


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


def uv_sync_first(uv: str, project_dir: str, *, extras: Sequence[str] = ()) -> str:
    """What to run once before a host starts the ``uv_launch`` form, and why."""
    words = [uv, "sync", "--directory", project_dir]
    for extra in extras:
        words += ["--extra", extra]
    return (
        f"Run '{' '.join(words)}' once before the host starts it: on a first start 'uv run' "
        "resolves and installs the dependencies, which needs the network (with your shell's proxy "
        "and certificate settings, which hosts do not pass on) and can outlast the host's wait."
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


def snippet(host: str, name: str, launch: Launch, *, windows: bool = False) -> str:
    """The text to paste for ``host``: JSON for the config files, a command for Claude Code.

    ``host`` is one of ``HOSTS`` or ``"mcp-json"`` (a project's ``.mcp.json`` for Claude Code).
    """
    if host == "claude-code":
        return claude_code_command(name, launch, windows=windows)
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
    return "\n".join(parts) + "\n"


def render_all(
    name: str, launch: Launch, *, windows: bool = False, platform: str | None = None
) -> str:
    """Every host's section, in ``HOSTS`` order (``where`` for ``platform``)."""
    return "\n".join(
        render_host(host, name, launch, windows=windows, platform=platform) for host in HOSTS
    )
