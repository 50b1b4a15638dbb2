"""What may ship in an artifact of this project: the wheel, the sdist, the bundle, the image.

One rule for all four (``hatch_build.py`` applies it to the wheel and the sdist, and so to the
image, which installs a wheel it builds; ``_bundle.py`` to the bundle; ``.dockerignore`` repeats
the part of it a pattern can say). Each file gets one verdict:

``exclude``
    Local clutter that is never meant to ship, left out without a word: hidden files and
    directories (any path component starting with ``.``: ``.env*``, ``.aws/``, ``.netrc``,
    ``.pypirc``, the key files themselves), byte code and editor or backup copies (``*~``,
    ``*.swp``, ``*.swo``, ``*.bak``, ``*.orig``).
``refuse``
    A problem to fix, not to hide, so the build stops and names the file: a symbolic link (an
    archive would carry what it points at, and it may point at a secret), a file that holds a
    current or previous signing key (see below; wherever the server would look for one), a
    file that holds an AWS access key id next to a secret access key, and a file named like a
    credential, in any case (``credentials``, ``credentials.*``, ``*credentials*.csv`` and
    ``*accesskeys*.csv`` as the AWS console downloads them, ``secrets``, ``secrets.*``, ``env``,
    ``*.env``, ``*service-account*.json``, ``aws_config``, a ``.pem``, ``.key``, ``.p12`` or
    ``.pfx`` anywhere among the name's suffixes, ``id_rsa*`` and the other ssh key names). A key
    copy is refused even when its name alone would have excluded it.

A key is found in the forms a copy of it takes without anyone meaning to hide it: the raw
bytes; the hex in either case, also when split by whitespace, quotes, ``,``, ``:``, ``0x`` or
``\\x`` (lines, concatenated literals, ``aa bb``, ``0xaa, 0xbb``, ``b'\\xaa'``); Python's repr
of the bytes; base64 and base64url (whitespace removed, at each of the three alignments); the
hex in UTF-16. Each form is an exact 256-bit needle, so none can turn up by chance. A key
deliberately disguised (XOR, compression, a decimal list) is not found: that is not a copy
made by mistake, and no scan of bytes could find every disguise.

Standard library only: the build hook loads this file by path, before (and without) the
project's dependencies.
"""

from __future__ import annotations

import base64
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
#: What a view drops before it searches: separators a hex dump, a literal or a repr puts
#: between digits (after lowering, so ``0X`` too), and whitespace (base64 wraps its lines).
_SEPARATORS = re.compile(rb"0x|\\x|[\s'\",:]")
_WHITESPACE = re.compile(rb"\s")
#: An AWS access key id (IAM's AKIA long-term, ASIA temporary prefixes) and, within
#: _AWS_NEAR bytes after or before it, a secret access key: 40 base64 characters, both cases
#: among them (a hex digest, such as a commit id, has one).
_AWS_KEY_ID = re.compile(rb"(?<![A-Z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Z0-9])")
_AWS_SECRET = re.compile(
    rb"(?<![A-Za-z0-9/+])(?=[A-Za-z0-9/+]{0,39}[a-z])(?=[A-Za-z0-9/+]{0,39}[A-Z])"
    rb"[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"
)
_AWS_NEAR = 512
_AWS_SECRET_CHARS = 40
_AWS_OVERLAP = 2 * (_AWS_NEAR + _AWS_SECRET_CHARS) + 64

_BYTE_CODE_SUFFIXES = frozenset({".pyc", ".pyo"})
_BYTE_CODE_DIRECTORIES = frozenset({"__pycache__"})
_BACKUP_SUFFIXES = frozenset({".swp", ".swo", ".bak", ".orig"})
_CREDENTIAL_NAMES = frozenset(
    {"credentials", "secrets", "env", "netrc", "pypirc", "aws_config", "aws_credentials"}
)
#: Names made of these and any suffixes: ``credentials.ini``, ``secrets.toml``.
_CREDENTIAL_STEMS = ("credentials.", "secrets.")
#: Key material wherever it is among the suffixes: ``server.pem``, ``key.pem.txt``.
_CREDENTIAL_SUFFIXES = frozenset({"pem", "key", "p12", "pfx"})
#: (what the name ends with, what comes before it holds one of these).
_CREDENTIAL_FILES = (
    (".csv", ("credentials", "accesskeys")),
    (".json", ("service-account", "service_account")),
)
_SSH_KEY_PREFIXES = ("id_rsa", "id_dsa", "id_ecdsa", "id_ed25519")
HIDDEN = "hidden (local settings, credentials, caches)"
BYTE_CODE = "byte code"
BACKUP = "an editor or backup copy"
CREDENTIAL = "named like a credential file; move it out of the source tree"
LINK = "a symbolic link (or under one); put the file itself there"
HOLDS_KEY = "holds a signing key; delete the copy (and rotate the key)"
AWS_KEY = "holds an AWS access key and its secret; delete the copy (and rotate the key)"


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
    if _named_like_a_credential(name.lower()):
        return REFUSE, CREDENTIAL
    return None


def _named_like_a_credential(lowered: str) -> bool:
    # Each test is one a .dockerignore pattern can say too (with a bracket class per letter,
    # as its patterns have no case-insensitive flag); a test holds the two equal.
    return (
        lowered in _CREDENTIAL_NAMES
        or lowered.startswith(_CREDENTIAL_STEMS)
        or lowered.endswith(".env")
        or lowered.startswith(_SSH_KEY_PREFIXES)
        or not _CREDENTIAL_SUFFIXES.isdisjoint(lowered.split(".")[1:])
        or any(
            lowered.endswith(ending) and any(word in lowered[: -len(ending)] for word in words)
            for ending, words in _CREDENTIAL_FILES
        )
    )


class ArtifactFilter:
    """The rule, with the signing keys it must never let through."""

    def __init__(self, keys: Iterable[bytes]) -> None:
        raw = tuple(dict.fromkeys(key for key in keys if key))
        hexes = [key.hex() for key in raw]
        # Each view of the file is searched for its own needles. Hex is looked for in lowered
        # bytes, so either case matches, as parse_signing_key accepts either.
        self._views = (
            _View(None, False, [*raw, *(repr(key)[2:-1].encode("ascii") for key in raw)]),
            _View(
                None,
                True,
                [
                    text.encode(codec)
                    for text in hexes
                    for codec in ("ascii", "utf-16-le", "utf-16-be")
                ],
            ),
            _View(_SEPARATORS, True, [text.encode("ascii") for text in hexes]),
            _View(_WHITESPACE, False, [needle for key in raw for needle in _base64_needles(key)]),
        )

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
        found = self._scan(path)
        if found is not None:
            return REFUSE, found
        return by_name

    def _scan(self, path: Path) -> str | None:
        """HOLDS_KEY, AWS_KEY or None: the file is read once, a chunk at a time, and each view
        keeps the tail of the chunk before so a needle across a boundary is found."""
        tails = [b""] * len(self._views)
        aws_tail = b""
        try:
            with path.open("rb") as handle:
                # A separator is two bytes at most: a byte that may begin one waits for the
                # next chunk, so no view sees half of one.
                held = b""
                while True:
                    chunk = handle.read(_CHUNK_BYTES)
                    body, held = (held + chunk, b"") if not chunk else _split(held + chunk)
                    for index, view in enumerate(self._views):
                        found, tails[index] = view.search(tails[index], body)
                        if found:
                            return HOLDS_KEY
                    window = aws_tail + body
                    if _holds_aws_key(window):
                        return AWS_KEY
                    aws_tail = window[-_AWS_OVERLAP:]
                    if not chunk:
                        return None
        except OSError:
            return None

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


class _View:
    """One way of reading a file's bytes (as they are, lowered, with ``drop`` removed) and the
    needles looked for in it."""

    def __init__(self, drop: re.Pattern[bytes] | None, lower: bool, needles: list[bytes]) -> None:
        self._drop = drop
        self._lower = lower
        self._needles = tuple(dict.fromkeys(needles))
        self._overlap = max((len(needle) for needle in self._needles), default=1) - 1

    def search(self, tail: bytes, body: bytes) -> tuple[bool, bytes]:
        """Whether a needle is in ``tail`` + this view of ``body``; the tail to keep."""
        if not self._needles:
            return False, b""
        if self._lower:
            body = body.lower()
        if self._drop is not None:
            body = self._drop.sub(b"", body)
        window = tail + body
        found = any(needle in window for needle in self._needles)
        return found, window[-self._overlap :] if self._overlap else b""


def _split(data: bytes) -> tuple[bytes, bytes]:
    """``data`` as what may be searched now and the byte that must wait: one that may begin a
    separator (``0x``, ``\\x``) whose second byte is in the next chunk."""
    if data.endswith((b"0", b"\\")):
        return data[:-1], data[-1:]
    return data, b""


def _base64_needles(key: bytes) -> Iterator[bytes]:
    """What base64 and base64url of any text holding ``key`` contain whatever surrounds it: at
    each alignment, the key's whole 3-byte groups, which encode the same way wherever they are."""
    for skip in (0, 1, 2):
        groups = key[skip:]
        groups = groups[: len(groups) - len(groups) % 3]
        if groups:
            encoded = base64.b64encode(groups)
            yield encoded
            yield encoded.translate(_URL_SAFE)


_URL_SAFE = bytes.maketrans(b"+/", b"-_")


def _holds_aws_key(window: bytes) -> bool:
    for match in _AWS_KEY_ID.finditer(window):
        start, end = match.span()
        # A secret that starts (or ends) within _AWS_NEAR bytes of the id, read whole, with
        # the byte on each side that tells where it begins and ends.
        near = window[
            max(0, start - _AWS_NEAR - _AWS_SECRET_CHARS - 1) : end
            + _AWS_NEAR
            + _AWS_SECRET_CHARS
            + 1
        ]
        if _AWS_SECRET.search(near):
            return True
    return False


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
