"""After the files are written: drop switched-off options, write the signing key, say what next.

Cookiecutter runs this with the new project as the working directory; if it fails, cookiecutter
deletes the project again. The signing key is written here (never rendered from a template, never
printed) and the host configurations come from the runtime's own ``cli/_hosts.py``, the same
code ``<slug> config`` uses later.
"""

from __future__ import annotations

import importlib.util
import json
import os
import secrets
import shlex
import shutil
import stat
import sys
from pathlib import Path
from types import ModuleType

# Answers as JSON data, never as Python source (see pre_gen_project.py for why the newlines).
ANSWERS: dict[str, str] = json.loads(
    r"""
{{ cookiecutter | tojson }}
""".strip()
)

PROJECT = Path.cwd().resolve()
PACKAGE = ANSWERS["package_name"]
SLUG = ANSWERS["project_slug"]
AWS = ANSWERS["include_aws_example"] == "yes"
PACKAGE_DIR = PROJECT / "src" / PACKAGE

RUNTIME = f"src/{PACKAGE}/mrtr_runtime"
#: What each option adds, by exact path, removed when the option is "no": a name here that the
#: template does not generate is a bug in the template, and baking stops on it rather than passing
#: it by. The README, pyproject and workflow sections of an option are switched off with Jinja in
#: those files. Tools are discovered by Registry.load_package, so removing a tool module leaves no
#: import behind; the runtime loads its optional wings by name (mrtr_runtime/_wings.py), so
#: removing one leaves no import behind either, and what would use it says which option adds it.
OPTION_FILES: dict[str, tuple[str, ...]] = {
    "include_aws_example": (
        f"src/{PACKAGE}/tools/deploy_to_aws.py",
        f"src/{PACKAGE}/tools/_cloudformation.py",
        f"src/{PACKAGE}/tools/_stack_changes.py",
        f"src/{PACKAGE}/tools/cloudformation",
        "tests/test_deploy_to_aws.py",
        "docs/aws.md",
    ),
    "include_tasks": (f"{RUNTIME}/_tasks.py",),
    "include_http": (
        f"{RUNTIME}/http",
        f"{RUNTIME}/testing/_http.py",
        f"{RUNTIME}/testing/_http_session.py",
        f"{RUNTIME}/cli/_http_commands.py",
        "Dockerfile",
        ".dockerignore",
        "tests/test_http_mode.py",
        "docs/http.md",
        "docs/replicas.md",
        "docs/oauth.md",
        "local-stack",
    ),
    "include_redis_store": (f"{RUNTIME}/redis",),
    "include_bundle": (
        f"{RUNTIME}/cli/_bundle.py",
        "manifest.json",
        "server.json",
        "tests/test_release_files.py",
    ),
    "include_skills": (
        f"{RUNTIME}/_skills.py",
        f"src/{PACKAGE}/skills",
        "tests/test_skills.py",
        "docs/skills.md",
    ),
}
# Caches that a developer's checkout of the template may hold; a generated project never ships them.
CACHE_DIRS = frozenset(
    {"__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache", ".hypothesis"}
)
SKIP_DIRS = frozenset({".venv", ".git"})


def remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
    else:
        raise SystemExit(f"mrtr-server: template bug: {path} was to be removed but does not exist")


def remove_unpicked_options() -> None:
    for option, names in OPTION_FILES.items():
        if ANSWERS[option] != "yes":
            for name in names:
                remove(PROJECT / name)


def remove_caches() -> None:
    for root, dirs, _files in os.walk(PROJECT):
        for name in list(dirs):
            if name in SKIP_DIRS:
                dirs.remove(name)
            elif name in CACHE_DIRS:
                dirs.remove(name)
                shutil.rmtree(Path(root, name))


def load_project_module(name: str) -> ModuleType:
    # The project is not installed yet, so load the (standard-library-only) module by path. It
    # is registered in sys.modules before it runs because dataclasses look their module up
    # there. No bytecode: a __pycache__ directory would otherwise appear in the fresh project.
    sys.dont_write_bytecode = True
    spec = importlib.util.spec_from_file_location(
        f"_mrtr_bake_{name.rpartition('/')[2]}", PACKAGE_DIR / f"{name}.py"
    )
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {name} from {PACKAGE_DIR}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def write_signing_key(hosts: ModuleType) -> tuple[Path, bool]:
    """Write a fresh key (O_EXCL, mode 0600); keep an existing one when re-baking over a project."""
    path = PROJECT / hosts.KEY_FILE_NAME
    # O_EXCL: never replace a key; 0600 from the start, whatever the umask narrows it to. On
    # Windows the mode bits mean nothing (the server does not check them there): the file takes
    # the ACLs of the folder it is in, and O_BINARY keeps its line ending b"\n".
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    try:
        descriptor = os.open(path, flags, 0o600)
    except FileExistsError:
        if not stat.S_ISREG(path.lstat().st_mode):
            raise SystemExit(f"mrtr-server: {path} exists and is not a regular file") from None
        return path, False
    with os.fdopen(descriptor, "w", encoding="ascii", newline="\n") as handle:
        handle.write(secrets.token_hex(32) + "\n")
    return path, True


def next_steps(
    hosts: ModuleType,
    key_path: Path | str,
    key_written: bool,
    *,
    platform: str = sys.platform,
    project: str = str(PROJECT),
) -> str:
    """What to do next, spelled for ``platform`` (a ``sys.platform``; tests pass each one)."""
    windows = platform == "win32"
    bin_dir = ".venv\\Scripts\\" if windows else ".venv/bin/"
    extras = "dev,aws" if AWS else "dev"
    quote = (lambda text: f'"{text}"') if windows else shlex.quote
    launch = hosts.venv_launch(
        hosts.venv_python(project, windows=windows),
        PACKAGE,
        key_file_path=str(key_path),
    )
    # Windows: no python3 unless from the Store, and no POSIX modes (the folder's ACLs decide).
    python = "python" if windows else "python3"
    private = "the folder's permissions decide who can read it" if windows else "mode 0600"
    end_of_input = "Ctrl-Z then Enter ends it" if windows else "Ctrl-D ends it"
    if key_written:
        key_line = f"A new requestState signing key is in {key_path} ({private}, git-ignored)."
    else:
        key_line = f"The existing requestState signing key in {key_path} was kept."
    lines = [
        f"Created {ANSWERS['project_name']} in {project}",
        "",
        key_line,
        "Keep it secret: never commit it, never paste it into chats or issues.",
        "",
        "Next steps:",
        f"  cd {quote(project)}",
        f"  {python} -m venv .venv",
        f"  {bin_dir}pip install -e {quote('.[' + extras + ']')}",
        f"  {bin_dir}pytest",
        f"  {bin_dir}{SLUG}    # the stdio server; it waits for JSON-RPC on stdin ({end_of_input})",
        "Or with uv: uv sync --extra " + " --extra ".join(extras.split(",")) + " && uv run pytest",
        "",
        f"Connect a host. These configs start {launch.command} -m {PACKAGE}, so create the venv",
        f"first. '{bin_dir}{SLUG} config all' prints them again; docs/hosts.md explains each host.",
        "",
        hosts.render_all(SLUG, launch, windows=windows, platform=platform),
    ]
    uv = shutil.which("uv")
    if uv:
        uv_path = str(Path(uv).absolute())
        uv_run = hosts.uv_launch(
            uv_path,
            project,
            SLUG,
            key_file_path=str(key_path),
            extras=("aws",) if AWS else (),
        )
        lines += [
            f"With uv instead ({uv_path} runs the project from its own .venv, no activation):",
            hosts.uv_sync_first(uv_path, project, extras=("aws",) if AWS else ()),
            hosts.snippet("claude-desktop", SLUG, uv_run, windows=windows),
            f"('{bin_dir}{SLUG} config all --uv' prints this form for every host.)",
            "",
        ]
    return "\n".join(lines)


def main() -> int:
    remove_unpicked_options()
    remove_caches()
    hosts = load_project_module("mrtr_runtime/cli/_hosts")
    key_path, key_written = write_signing_key(hosts)
    sys.stdout.write(next_steps(hosts, key_path, key_written))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
