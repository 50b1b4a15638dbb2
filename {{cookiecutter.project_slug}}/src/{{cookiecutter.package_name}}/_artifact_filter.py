"""What may ship in an artifact of this project: the wheel, the sdist, the bundle, the image.

One rule for all four (``hatch_build.py`` applies it to the wheel and the sdist, and so to the
image, which installs a wheel it builds; ``bundle.py`` to the bundle; ``.dockerignore`` repeats
the part of it a pattern can say). Each file gets one verdict:

``exclude``
    Local clutter that is never meant to ship, left out without a word: hidden files and
    directories (any path component starting with ``.``: ``.env*``, ``.aws/``, ``.netrc``,
    ``.pypirc``, the key files themselves), byte code and editor or backup copies (``*~``,
    ``*.swp``, ``*.swo``, ``*.bak``, ``*.orig``).
``refuse``
    A problem to fix, not to hide, so the build stops and names the file: a symbolic link (an
    archive would carry what it points at, and it may point at a secret), a file that holds a
    current or previous signing key (hex as the key files store it, either case, or the raw
    bytes; wherever the server would look for one), and a file named like a credential
    (``credentials``, ``credentials.json``, ``*.pem``, ``*.key``, ``id_rsa*`` and the other ssh
    key names). A key copy is refused even when its name alone would have excluded it.

Standard library only: the build hook loads this file by path, before (and without) the
project's dependencies.
"""

from __future__ import annotations

import os
import re
import stat
import sys
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path, PurePosixPath, PureWindowsPath

EXCLUDE = "exclude"
REFUSE = "refuse"
#: (EXCLUDE or REFUSE, why): one line a person can act on.
Verdict = tuple[str, str]

#: Where the server looks for keys (``mrtr_runtime/_config.py``); kept in step by a test.
KEY_FILE_NAME = ".mrtr-signing-key"
PREVIOUS_KEYS_FILE_NAME = ".mrtr-previous-signing-keys"
KEY_ENV = "MRTR_SIGNING_KEY"
KEY_FILE_ENV = "MRTR_SIGNING_KEY_FILE"
PREVIOUS_KEYS_ENV = "MRTR_PREVIOUS_SIGNING_KEYS"
PREVIOUS_KEYS_FILE_ENV = "MRTR_PREVIOUS_SIGNING_KEYS_FILE"
#: A key is at least 32 bytes: 64 hex characters (``_tokens.MIN_KEY_BYTES``).
_MIN_KEY_HEX = 64
_HEX_RUN = re.compile(r"[0-9a-fA-F]+")
#: A key file is a few lines; anything larger is not one and is not read whole.
_MAX_KEY_FILE_BYTES = 64 * 1024
_CHUNK_BYTES = 1 << 20

_BYTE_CODE_SUFFIXES = frozenset({".pyc", ".pyo"})
_BYTE_CODE_DIRECTORIES = frozenset({"__pycache__"})
_BACKUP_SUFFIXES = frozenset({".swp", ".swo", ".bak", ".orig"})
_CREDENTIAL_NAMES = frozenset({"credentials", "credentials.json", "netrc", "pypirc"})
_CREDENTIAL_SUFFIXES = frozenset({".pem", ".key", ".p12", ".pfx"})
_SSH_KEY_PREFIXES = ("id_rsa", "id_dsa", "id_ecdsa", "id_ed25519")
HIDDEN = "hidden (local settings, credentials, caches)"
BYTE_CODE = "byte code"
BACKUP = "an editor or backup copy"
CREDENTIAL = "named like a credential file; move it out of the source tree"
LINK = "a symbolic link (or under one); put the file itself there"
HOLDS_KEY = "holds a signing key; delete the copy (and rotate the key)"


class ArtifactRefused(Exception):
    """Files that must not ship were found; one line per file, naming it and why."""

    def __init__(self, refused: Iterable[tuple[str, str]]) -> None:
        self.refused = tuple(refused)
        super().__init__(
            "\n".join(f"refusing to ship {path}: {reason}" for path, reason in self.refused)
        )


def name_verdict(relative: str) -> Verdict | None:
    """The verdict a path earns by its name alone, or None when only its bytes can tell."""
    parts = PurePosixPath(relative.replace("\\", "/")).parts
    for part in parts:
        if part.startswith("."):
            return EXCLUDE, HIDDEN
        if part in _BYTE_CODE_DIRECTORIES:
            return EXCLUDE, BYTE_CODE
    name = parts[-1] if parts else relative
    suffix = PurePosixPath(name).suffix.lower()
    if suffix in _BYTE_CODE_SUFFIXES:
        return EXCLUDE, BYTE_CODE
    if name.endswith("~") or suffix in _BACKUP_SUFFIXES:
        return EXCLUDE, BACKUP
    lowered = name.lower()
    if (
        lowered in _CREDENTIAL_NAMES
        or suffix in _CREDENTIAL_SUFFIXES
        or lowered.startswith(_SSH_KEY_PREFIXES)
    ):
        return REFUSE, CREDENTIAL
    return None


class ArtifactFilter:
    """The rule, with the signing keys it must never let through."""

    def __init__(self, keys: Iterable[bytes]) -> None:
        self._raw = tuple(dict.fromkeys(key for key in keys if key))
        # Hex as the key files store it (lowercase), looked for in the lowered bytes: either
        # case matches, as parse_signing_key accepts either.
        self._hex = tuple(key.hex().encode("ascii") for key in self._raw)
        self._overlap = max((len(needle) for needle in self._hex), default=1) - 1

    @classmethod
    def for_project(
        cls, root: Path, server_name: str, environ: Mapping[str, str]
    ) -> ArtifactFilter:
        """Every key the server at ``root`` could sign or verify with (see ``key_sources``)."""
        return cls(read_keys(key_sources(root, server_name, environ), environ))

    def judge(self, path: Path, relative: str, *, root: Path | None = None) -> Verdict | None:
        """None when ``path`` (``relative`` to the artifact's root) may ship, else the verdict.

        ``root`` given, every directory between it and ``path`` is checked for being a link.
        """
        by_name = name_verdict(relative)
        # Hidden files never ship, so they are not read: the project's own key file is one.
        if by_name is not None and by_name[1] in (HIDDEN, BYTE_CODE):
            return by_name
        if _crosses_link(path, root):
            return REFUSE, LINK
        if self._holds_key(path):
            return REFUSE, HOLDS_KEY
        return by_name

    def _holds_key(self, path: Path) -> bool:
        if not self._raw:
            return False
        try:
            with path.open("rb") as handle:
                tail = b""
                while chunk := handle.read(_CHUNK_BYTES):
                    window = tail + chunk
                    if any(key in window for key in self._raw):
                        return True
                    lowered = window.lower()
                    if any(needle in lowered for needle in self._hex):
                        return True
                    tail = window[-self._overlap :] if self._overlap else b""
        except OSError:
            return False
        return False

    def walk(self, root: Path, top: Path) -> Iterator[tuple[Path, str, Verdict | None]]:
        """Every file under ``top`` (in a stable order), its path relative to ``root``, its verdict.

        Links are not followed: a linked directory is one entry, refused. An excluded directory
        is one entry too, and nothing under it is read.
        """
        for directory, subdirectories, files in os.walk(top):
            kept = []
            for name in sorted(subdirectories):
                path = Path(directory, name)
                relative = path.relative_to(root).as_posix()
                verdict = name_verdict(relative)
                if verdict is not None and verdict[1] in (HIDDEN, BYTE_CODE):
                    yield path, relative, verdict
                elif path.is_symlink():
                    yield path, relative, (REFUSE, LINK)
                else:
                    kept.append(name)
            subdirectories[:] = kept
            for name in sorted(files):
                path = Path(directory, name)
                relative = path.relative_to(root).as_posix()
                yield path, relative, self.judge(path, relative, root=root)


def _crosses_link(path: Path, root: Path | None) -> bool:
    if path.is_symlink():
        return True
    if root is None:
        return False
    try:
        relative = path.relative_to(root)
    except ValueError:
        return False
    current = root
    for part in relative.parts[:-1]:
        current = current / part
        if current.is_symlink():
            return True
    return False


def key_sources(root: Path, server_name: str, environ: Mapping[str, str]) -> list[Path]:
    """Every file a key of this server may be in: key files and the previous-keys file beside
    each, in the order the server looks (``mrtr_runtime/_config.py``)."""
    key_files = [root / KEY_FILE_NAME]
    named = environ.get(KEY_FILE_ENV, "").strip()
    if named:
        key_files.append(Path(named).expanduser())
    per_user = per_user_key_path(server_name, environ)
    if per_user is not None:
        key_files.append(per_user)
    sources = [path for key_file in key_files for path in (key_file, _beside(key_file))]
    previous = environ.get(PREVIOUS_KEYS_FILE_ENV, "").strip()
    if previous:
        sources.append(Path(previous).expanduser())
    return sources


def _beside(key_file: Path) -> Path:
    return key_file.with_name(PREVIOUS_KEYS_FILE_NAME)


def read_keys(sources: Iterable[Path], environ: Mapping[str, str]) -> list[bytes]:
    """The keys in ``sources`` (those that exist and can be read) and in the environment."""
    texts = [environ.get(KEY_ENV, ""), environ.get(PREVIOUS_KEYS_ENV, "")]
    for path in sources:
        try:
            info = path.stat()
            if stat.S_ISREG(info.st_mode) and info.st_size <= _MAX_KEY_FILE_BYTES:
                texts.append(path.read_text(encoding="ascii", errors="replace"))
        except OSError:
            continue  # not there, or not ours to read: nothing this build could copy either
    keys = []
    for text in texts:
        for line in text.splitlines():
            if not line.strip().startswith("#"):
                keys += [
                    bytes.fromhex(run)
                    for run in _HEX_RUN.findall(line)
                    if len(run) >= _MIN_KEY_HEX and len(run) % 2 == 0
                ]
    return keys


def per_user_key_path(
    server_name: str, environ: Mapping[str, str], *, platform: str = sys.platform
) -> Path | None:
    """``mrtr_runtime._config.per_user_key_path`` for this platform, with the standard library.

    The build hook cannot import the runtime (its package needs the dependencies); a test holds
    the two equal.
    """
    if (
        not server_name
        or server_name in (".", "..")
        or any(character in server_name for character in "/\\\0:")
    ):
        return None
    base = _state_home(environ, platform)
    return base / server_name / KEY_FILE_NAME if base is not None else None


def _state_home(environ: Mapping[str, str], platform: str) -> Path | None:
    flavour = PureWindowsPath if platform == "win32" else PurePosixPath

    def absolute(name: str) -> Path | None:
        value = environ.get(name, "").strip()
        return Path(value) if value and flavour(value).is_absolute() else None

    if platform == "win32":
        local = absolute("LOCALAPPDATA")
        profile = absolute("USERPROFILE")
        return local or (profile / "AppData" / "Local" if profile is not None else None)
    home = absolute("HOME")
    if platform == "darwin":
        return home / "Library" / "Application Support" if home is not None else None
    state = absolute("XDG_STATE_HOME")
    return state or (home / ".local" / "state" if home is not None else None)
