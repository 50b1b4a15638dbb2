"""The project's command line (the console script, and ``python -m <package>``): ``main(project)``.

With no command, or ``serve``
    Run the stdio MCP server (what hosts start). stdout is the wire; logs go to stderr.
``http [--host 127.0.0.1] [--port 8000]`` (the HTTP wing)
    Serve the same tools over MCP's Streamable HTTP transport at ``/mcp`` (2026-07-28 only; needs
    the ``http`` extra). Replicas started with the same signing key serve one conversation.
    ``MRTR_HTTP_TOKEN``, ``MRTR_HTTP_ALLOWED_ORIGINS`` and ``MRTR_HTTP_ALLOWED_HOSTS`` set who may
    call it (docs/http.md).
``health [--url http://127.0.0.1:8000/mcp]`` (the HTTP wing)
    Ask a running ``http`` server for ``server/discover`` and exit 0 only on a valid discover
    result (the Docker image's HEALTHCHECK). ``MRTR_HTTP_TOKEN``, when set, is sent as the bearer.
``config <host> [--uv | --installed | --http URL] [--name NAME]``
    Print a ready-to-paste host configuration that starts this server with this interpreter
    (``--uv``: through ``uv run`` in this checkout; ``--installed``: ``uvx <slug>``, the package
    from PyPI), or, with ``--http``, one that reaches a server already serving at URL (``http``),
    its bearer token named by a placeholder the host fills in, never printed.
``bundle [--output-dir DIR]`` (the bundle wing)
    Write ``dist/<slug>-<version>.mcpb``, an MCP Bundle of this project (see ``_bundle.py``).

A command of a wing the project was generated without is not offered; asked for anyway, it is
refused with exit status 2 and a line naming the template option that adds it (`_wings`).
``keygen [--rotate | --force] [--path FILE]``
    Write a new requestState signing key file (mode 0600): ``$MRTR_SIGNING_KEY_FILE``, else the
    checkout's ``.mrtr-signing-key``, else this user's key file for an installed server.
    ``--rotate`` keeps the old key as a verify-only previous key, in a file beside the key file,
    so rounds in flight can finish; ``--force`` just replaces it. Prints paths and public key
    ids, never a key.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import stat
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .._audit import AuditTrailError
from .._config import (
    PREVIOUS_KEYS_FILE_NAME,
    Rotation,
    Settings,
    SigningConfigError,
    rotate_key_file,
    write_key_file,
)
from .._project import Project
from .._router import Server
from .._stdio import configure_logging, serve_stdio
from .._tokens import DEFAULT_TTL_SECONDS, MAX_TTL_SECONDS
from .._wings import WingName, has_wing, load_wing, missing_wing
from . import _hosts as hosts

KEY_FILE_ENV = hosts.KEY_FILE_ENV
#: Where the project's own docs say how to publish it.
PUBLISHING = "docs/distribution.md, Publishing"
#: Where an installed server's per-user key file lives on Linux; copied into the installed form's
#: env when set, so the server a host starts and ``keygen`` run from a shell use the same file.
STATE_HOME_ENV = "XDG_STATE_HOME"
CONFIG_CHOICES = (*hosts.HOSTS, "mcp-json", "all")
#: What uv reads to trust a TLS-intercepting proxy's certificate (docs.astral.sh/uv, "TLS
#: certificates"; UV_NATIVE_TLS is the name before uv 0.11). Hosts start the server without the
#: shell's environment, so a uv or uvx launch that downloads fails with "invalid peer
#: certificate" and the host shows only "Connection closed": the uv forms carry these when set.
UV_TLS_ENV = ("SSL_CERT_FILE", "SSL_CERT_DIR", "UV_SYSTEM_CERTS", "UV_NATIVE_TLS")
#: Certificate locations, made absolute: a host starts the server from a directory of its own.
_TLS_PATHS = frozenset({"SSL_CERT_FILE", "SSL_CERT_DIR"})
#: A server's name in a host: what Claude Code, VS Code and Cursor accept as a key and in tool
#: names (``mcp__<name>__<tool>``).
HOST_NAME_LIMIT = 64
_HOST_NAME = re.compile(rf"[A-Za-z0-9][A-Za-z0-9_-]{{0,{HOST_NAME_LIMIT - 1}}}")
#: basic/transports/streamable-http "Security & Endpoint": a local server SHOULD bind to localhost.
HTTP_DEFAULT_HOST = "127.0.0.1"
HTTP_DEFAULT_PORT = 8000


def _mcp_url(text: str) -> str:
    if endpoint_of(text.strip()) is None:
        raise argparse.ArgumentTypeError(
            f"not an http(s) URL: {text!r} (the server's MCP endpoint, e.g. "
            f"http://{HTTP_DEFAULT_HOST}:{HTTP_DEFAULT_PORT}/mcp)"
        )
    return text.strip()


def http_name(name: str) -> str:
    """The default name of the HTTP form of a server named `name` in a host: its own, so that
    adding both forms never fails with "already exists" (a host keys servers by name)."""
    return f"{name[: HOST_NAME_LIMIT - len('-http')]}-http"


def _host_name(text: str) -> str:
    if _HOST_NAME.fullmatch(text) is None:
        raise argparse.ArgumentTypeError(
            f"not a server name: {text!r} (letters, digits, '-' and '_', at most {HOST_NAME_LIMIT})"
        )
    return text


def build_parser(project: Project) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=project.name,
        description="A stdio MCP server. With no command, serve on stdin/stdout.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {project.version}")
    commands = parser.add_subparsers(dest="command", metavar="command")
    commands.add_parser("serve", help="run the stdio server (the default)")
    if has_wing("http"):
        load_wing("http", ".cli._http_commands").add_commands(commands)
    _add_config_command(commands, project)
    _add_keygen_command(commands)
    if has_wing("bundle"):
        bundle = commands.add_parser(
            "bundle",
            help=f"write {project.name}-{project.version}.mcpb, an MCP Bundle of this project",
        )
        bundle.add_argument(
            "--output-dir", type=Path, help="where to write it (default: the project's dist/)"
        )
    return parser


def _add_config_command(commands: Any, project: Project) -> None:
    config = commands.add_parser("config", help="print a host configuration for this server")
    config.add_argument("host", choices=CONFIG_CHOICES, help="which host (or all)")
    form = config.add_mutually_exclusive_group()
    form.add_argument(
        "--uv", action="store_true", help="start through 'uv run --directory' instead of this venv"
    )
    form.add_argument(
        "--installed",
        action="store_true",
        help=f"start the package published on PyPI with 'uvx' (see {PUBLISHING})",
    )
    form.add_argument(
        "--http",
        metavar="URL",
        type=_mcp_url,
        help=(
            f"reach a server already serving over Streamable HTTP at URL ('{project.name} "
            "http'); with MRTR_HTTP_TOKEN or MRTR_HTTP_TOKENS_FILE set here, the form sends "
            "the token the host finds in its MRTR_HTTP_TOKEN"
        ),
    )
    config.add_argument(
        "--name",
        type=_host_name,
        help=(
            f"the server's name in the host (default: {project.name}, and "
            f"{http_name(project.name)} with --http: a host can hold both forms at once)"
        ),
    )


def _add_keygen_command(commands: Any) -> None:
    keygen = commands.add_parser(
        "keygen",
        help="write a new requestState signing key file",
        description=(
            "Write a new requestState signing key file (mode 0600). Prints paths and key ids, "
            "never a key."
        ),
    )
    replace = keygen.add_mutually_exclusive_group()
    replace.add_argument(
        "--rotate",
        action="store_true",
        help=(
            "replace an existing key and keep the old one, verify-only, in "
            f"{PREVIOUS_KEYS_FILE_NAME} beside the key file (the newest few), so input rounds "
            "in flight can finish"
        ),
    )
    replace.add_argument(
        "--force",
        action="store_true",
        help="replace an existing key and drop it: input rounds in flight fail",
    )
    keygen.add_argument(
        "--path",
        type=Path,
        help=f"key file (default: ${KEY_FILE_ENV}, the checkout's, or this user's)",
    )


#: The commands each optional wing brings.
WING_COMMANDS: dict[str, WingName] = {"http": "http", "health": "http", "bundle": "bundle"}


def main(project: Project, argv: Sequence[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else list(argv)
    wing = WING_COMMANDS.get(arguments[0]) if arguments else None
    if wing is not None and not has_wing(wing):
        # argparse would say "invalid choice" and list the others; say why it is not there.
        sys.stderr.write(f"{project.name}: no '{arguments[0]}' command: {missing_wing(wing)}\n")
        return 2
    args = build_parser(project).parse_args(arguments)
    if args.command == "config":
        if args.http is not None:
            name = args.name or http_name(project.name)
            return print_http_config(project, args.host, args.http, name=name)
        return print_config(
            project,
            args.host,
            use_uv=args.uv,
            installed=args.installed,
            name=args.name or project.name,
        )
    if args.command == "keygen":
        return keygen(project, force=args.force, rotate=args.rotate, path=args.path)
    if args.command == "bundle":
        return write_bundle(project, args.output_dir)
    if args.command in ("http", "health"):
        # Loaded here: stdio serving never loads the HTTP side.
        commands: Any = load_wing("http", ".cli._http_commands")
        status: int = commands.run(project, args)
        return status
    return serve(project)


def serve(project: Project) -> int:
    closed = _closed_stdio()
    if closed is not None:
        sys.stderr.write(f"{project.name}: cannot start: {closed}\n")
        return 2
    server = server_or_none(project)
    return 2 if server is None else serve_stdio(server)


def _closed_stdio() -> str | None:
    """Which of the client's pipes (fd 0, fd 1) this process was started without, if one."""
    # Checked before anything opens a file: a closed fd 0 or 1 is the number the next file
    # gets, and the server would then read requests from it, or answer into it.
    pipes = ((0, sys.stdin, "stdin", "input"), (1, sys.stdout, "stdout", "output"))
    for fd, stream, name, role in pipes:
        # Python sets sys.stdin or sys.stdout to None when it starts without that fd.
        if stream is None or not is_open(fd):
            return (
                f"{name} (fd {fd}) is closed: start the server with its standard {role} "
                "connected to the MCP client (a host starts it with pipes)"
            )
    return None


def is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def endpoint_of(url: str) -> tuple[str, str, int | None, str] | None:
    """(scheme, host, port, path) of an http(s) URL; None for anything else, a bad port too."""
    try:
        parts = urlsplit(url)
        port = parts.port  # raises ValueError for a port out of range or not a number
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return parts.scheme, parts.hostname, port, parts.path or "/"


def settings_of(server: Server) -> Settings:
    return server.settings or Settings.from_environment(os.environ)


def server_or_none(project: Project) -> Server | None:
    """Logging configured and the server built, or None once the reason is on stderr."""
    # Every MRTR_* variable, read once: logging, the signing key and the transports share it.
    settings = Settings.from_environment(os.environ)
    configure_logging(settings)
    try:
        return project.build_server(settings=settings)
    except (SigningConfigError, AuditTrailError) as error:
        # The message names the variable or file and how to fix it; it never quotes a key.
        sys.stderr.write(f"{project.name}: cannot start: {error}\n")
        return None


def write_bundle(project: Project, output_dir: Path | None) -> int:
    # Loaded here: it loads every tool module to list the tools, which serving must not wait for.
    bundle = load_wing("bundle")

    root = project.root()
    if root is None:
        sys.stderr.write(
            f"{project.name}: bundle needs the project's source tree; run it from an editable "
            "install "
            "(pip install -e . or uv sync)\n"
        )
        return 1
    try:
        archive = bundle.build(project, root, (output_dir or root / "dist").absolute())
    except bundle.BundleError as error:
        sys.stderr.write(f"{project.name}: cannot bundle: {error}\n")
        return 1
    sys.stdout.write(f"{archive}\n")
    sys.stderr.write(
        f"Wrote an MCP Bundle (manifest server type uv) to {archive}.\n"
        "Check it with 'npx @anthropic-ai/mcpb info' and install it in Claude Desktop.\n"
    )
    return 0


def _named_key_file() -> Path | None:
    """MRTR_SIGNING_KEY_FILE (``~`` expanded), as the settings read it; None when unset."""
    return Settings.from_environment(os.environ).signing_key_file


def _key_file_for_config(project: Project) -> str | None:
    named = _named_key_file()
    if named is not None:
        return str(named.absolute())
    default = project.default_key_file()
    if default is None:
        sys.stderr.write(
            "note: not a source checkout; the server keeps its signing key in "
            f"{_user_key_note(project)}\n"
        )
        return None
    if not default.exists():
        sys.stderr.write(f"note: {default} does not exist yet; run '{project.name} keygen'.\n")
    return str(default)


def _user_key_note(project: Project) -> str:
    path = project.user_key_file()
    if path is None:
        return "no file: HOME is unset, so it signs with a per-process key"
    return f"{path} (created on its first start)"


def _interpreter(*, windows: bool = os.name == "nt") -> str:
    """This interpreter, named as the post-gen hook and the README name it."""
    # Not resolved: inside a venv, sys.executable is a symlink whose location *is* the venv.
    python = os.path.abspath(sys.executable)
    if sys.prefix != sys.base_prefix:
        # Run as a console script, sys.executable is the venv's python3 (pip's shebang); every
        # printed config and message names one path for one interpreter: the venv's python.
        canonical = hosts.venv_interpreter(os.path.abspath(sys.prefix), windows=windows)
        if os.path.exists(canonical) and os.path.samefile(canonical, python):
            return canonical
    return python


def _uvx() -> str | None:
    uvx = shutil.which("uvx")
    return str(Path(uvx).absolute()) if uvx else None


def _uv_tls_env() -> dict[str, str]:
    """The certificate settings of ``UV_TLS_ENV`` this shell has, for a uv or uvx launch."""
    found = {}
    for name in UV_TLS_ENV:
        value = os.environ.get(name, "").strip()
        if value and name in _TLS_PATHS:
            value = os.pathsep.join(os.path.abspath(part) for part in value.split(os.pathsep))
        if value:
            found[name] = value
    return found


def _installed_launch(project: Project, uvx: str) -> hosts.Launch:
    extra_env = {
        name: os.environ[name] for name in project.pass_through_env if os.environ.get(name)
    }
    extra_env.update(_uv_tls_env())
    state_home = os.environ.get(STATE_HOME_ENV, "").strip()
    if state_home:
        extra_env[STATE_HOME_ENV] = state_home
    named = _named_key_file()
    return hosts.uvx_launch(
        uvx,
        project.name,
        extras=project.uv_extras,
        key_file_path=str(named.absolute()) if named is not None else None,
        extra_env=extra_env,
    )


def print_config(
    project: Project,
    host: str,
    *,
    use_uv: bool,
    installed: bool = False,
    name: str | None = None,
    platform: str = sys.platform,
) -> int:
    """``config``: `platform` (a ``sys.platform``) decides how paths and commands are spelled and
    where each host keeps its config; the caller's own by default, another's in tests."""
    windows = platform == "win32"
    name = name or project.name
    if installed:
        uvx = _uvx()
        if uvx is None:
            sys.stderr.write(
                f"{project.name}: --installed needs uvx on PATH (it comes with uv: "
                "https://docs.astral.sh/uv/); leave out --installed to use this interpreter\n"
            )
            return 1
        sys.stderr.write(
            f"note: this starts {project.name} as published on PyPI ({PUBLISHING}); the server "
            f"keeps its signing key in {_user_key_note(project)}\n"
        )
        launch = _installed_launch(project, uvx)
        return _write_config(name, host, launch, windows=windows, platform=platform)
    key_file = _key_file_for_config(project)
    extra_env = {
        name: os.environ[name] for name in project.pass_through_env if os.environ.get(name)
    }
    if use_uv:
        uv = shutil.which("uv")
        root = project.root()
        if uv is None or root is None:
            sys.stderr.write(
                f"{project.name}: --uv needs uv on PATH and the project's source tree; "
                "leave out --uv to use this interpreter\n"
            )
            return 1
        uv_path = str(Path(uv).absolute())
        sys.stderr.write(hosts.uv_sync_first(uv_path, str(root), extras=project.uv_extras) + "\n")
        launch = hosts.uv_launch(
            uv_path,
            str(root),
            project.name,
            key_file_path=key_file,
            extras=project.uv_extras,
            extra_env={**extra_env, **_uv_tls_env()},
        )
        return _write_config(name, host, launch, windows=windows, platform=platform)
    launch = hosts.venv_launch(
        _interpreter(windows=windows), project.package, key_file_path=key_file, extra_env=extra_env
    )
    status = _write_config(name, host, launch, windows=windows, platform=platform)
    uvx = _uvx()
    if host != "all":
        if uvx is not None:
            sys.stderr.write(
                f"Installed from PyPI instead: {' '.join(_installed_launch(project, uvx).argv())} "
                f"('{project.name} config {host} --installed' prints that config).\n"
            )
        return status
    if uvx is None:
        sys.stdout.write(
            f"\n== Installed from PyPI ==\nOnce published ({PUBLISHING}), hosts can "
            f"start it with 'uvx {project.name}'; install uv for "
            f"'{project.name} config <host> --installed'.\n" + _over_http_note(project)
        )
        return status
    sys.stdout.write(
        f"\n== Installed from PyPI ==\nOnce published ({PUBLISHING}), hosts can start "
        "the package instead of this checkout; "
        f"'{project.name} config <host> --installed' prints this "
        "form for each host. Claude Desktop:\n"
        + hosts.snippet("claude-desktop", name, _installed_launch(project, uvx), windows=windows)
        + "\n"
        + _over_http_note(project)
    )
    return status


def _over_http_note(project: Project) -> str:
    return (
        "\n== Over Streamable HTTP ==\nA server started with "
        f"'{project.name} http' (docs/http.md) is reached by URL: "
        f"'{project.name} config <host> --http URL' prints each host's form.\n"
    )


def _write_config(
    name: str, host: str, launch: hosts.Launch, *, windows: bool, platform: str
) -> int:
    if host == "all":
        sys.stdout.write(hosts.render_all(name, launch, windows=windows, platform=platform))
        return 0
    sys.stderr.write(hosts.where(host, platform=platform) + "\n")
    sys.stdout.write(hosts.snippet(host, name, launch, windows=windows) + "\n")
    return 0


def print_http_config(
    project: Project,
    host: str,
    url: str,
    *,
    name: str | None = None,
    platform: str = sys.platform,
) -> int:
    """The host config that reaches a server serving Streamable HTTP at ``url`` (`platform` as
    for ``print_config``).

    The header is printed when this shell names a token (``MRTR_HTTP_TOKEN``, or the server's
    ``MRTR_HTTP_TOKENS_FILE``): as a placeholder the host fills in, never the token, which would
    land in shell history and in files the host syncs or a team commits.
    """
    windows = platform == "win32"
    name = name or project.name
    settings = Settings.from_environment(os.environ)
    remote = hosts.Remote(url, token=bool(settings.http_token or settings.http_tokens_file))
    if not remote.token:
        sys.stderr.write(
            "note: no MRTR_HTTP_TOKEN or MRTR_HTTP_TOKENS_FILE here, so no Authorization header; "
            "a server started with a token answers 401 without one: set MRTR_HTTP_TOKEN (your "
            "token) and run this again.\n"
        )
    if urlsplit(url).scheme == "http" and not remote.loopback:
        sys.stderr.write(
            "note: plain http to another machine: the requests, the token and the tools' "
            "answers travel unencrypted; serve it behind TLS (https).\n"
        )
    if host == "all":
        sys.stdout.write(hosts.render_http_all(name, remote, windows=windows))
        return 0
    sys.stderr.write(hosts.http_where(host, name, remote, windows=windows) + "\n")
    sys.stdout.write(hosts.http_snippet(host, name, remote, windows=windows) + "\n")
    return 0


def _default_key_path(project: Project) -> Path | None:
    named = _named_key_file()
    if named is not None:
        return named
    return project.default_key_file() or project.user_key_file()


def _key_path_problem(target: Path) -> str | None:
    """Why a key cannot be written at ``target``, or None.

    Only a regular file is ever replaced: ``--force`` on a device, a FIFO, a directory or a
    link would replace the thing itself (as root, ``/dev/null``). A missing directory is made
    (mode 0700), as for the per-user key file.
    """
    try:
        mode = target.lstat().st_mode
    except FileNotFoundError:
        mode = None
    except OSError as error:
        return error.strerror or str(error)
    if mode is not None and not stat.S_ISREG(mode):
        kind = "a symbolic link" if stat.S_ISLNK(mode) else "not a regular file"
        return f"it is {kind}; a key is only ever written to, or replaces, a regular file"
    return None


def keygen(
    project: Project,
    *,
    force: bool,
    rotate: bool,
    path: Path | None,
    platform: str = sys.platform,
) -> int:
    """``keygen``; `platform` (a ``sys.platform``) says how the file is kept private there."""
    # POSIX: the file's mode. Windows: the mode means nothing, the folder's ACLs decide.
    private = "kept private by its folder's ACLs" if platform == "win32" else "mode 0600"
    target = path or _default_key_path(project)
    if target is None:
        sys.stderr.write(
            f"{project.name}: no source checkout and no home directory for this user's key file; "
            "pass --path FILE\n"
        )
        return 1
    target = target.expanduser().absolute()
    problem = _key_path_problem(target)
    if problem is not None:
        sys.stderr.write(f"{project.name}: cannot write {target}: {problem}\n")
        return 1
    exists = os.path.lexists(target)
    if exists and not (force or rotate):
        sys.stderr.write(
            f"{project.name}: {target} already exists; 'keygen --rotate' replaces it and keeps the "
            "old "
            "key for the rounds in flight, 'keygen --force' replaces it and drops the old key\n"
        )
        return 1
    rotation: Rotation | None = None
    try:
        if rotate:
            # Always beside the key file: the server reads that one whatever else it is given.
            rotation = rotate_key_file(target)
            key = rotation.current
        else:
            key = write_key_file(target, overwrite=force)
    except SigningConfigError as error:
        sys.stderr.write(
            f"{project.name}: cannot rotate: {error} (or 'keygen --force' drops the old key)\n"
        )
        return 1
    except OSError as error:
        sys.stderr.write(f"{project.name}: cannot write {target}: {error.strerror or error}\n")
        return 1
    sys.stdout.write(f"{target}\n")
    sys.stderr.write(f"Wrote a new signing key (id {key.key_id}, {private}) to {target}.\n")
    if rotation is not None and rotation.retired is not None:
        ids = ", ".join(previous.key_id for previous in rotation.previous)
        sys.stderr.write(
            f"The old key (id {rotation.retired.key_id}) now only verifies: it is in "
            f"{rotation.previous_file}\n({private}; previous key ids, newest first: {ids}). "
            "The server reads that file by itself.\n"
            "Rounds waiting for input can finish within one token lifetime "
            f"(MRTR_STATE_TTL_SECONDS, default {DEFAULT_TTL_SECONDS} s, at most "
            f"{MAX_TTL_SECONDS} s);\nafter that, the old key is useless and "
            f"{rotation.previous_file.name} may be deleted.\n"
        )
    elif exists and force:
        sys.stderr.write(
            "The old key was dropped: tool calls waiting for input fail once and must be "
            "started again.\n"
        )
    sys.stderr.write("Restart the MCP host (or the server) so it reads the new key.\n")
    return 0
