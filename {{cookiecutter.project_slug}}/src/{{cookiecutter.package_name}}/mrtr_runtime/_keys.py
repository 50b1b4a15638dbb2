"""Signing keys for ``requestState``: parse, load from the environment or a key file, generate.

Where the key comes from, first match wins:

1. ``MRTR_SIGNING_KEY``: hex, at least 32 bytes (64 hex characters).
2. ``MRTR_SIGNING_KEY_FILE``: a file holding that hex. Configured but unreadable is an error.
3. ``default_key_file`` (the project's own key file, written at bake time), if it exists.
4. Nothing configured: a random key for this process only, with a WARNING on the
   ``mrtr_runtime`` logger. Still safe (tokens are signed), but a round in flight does not
   survive a restart, which is MRTR's reason to exist (2026-07-28 basic/patterns/mrtr).

Rotation: make a new key, move the old one to ``MRTR_PREVIOUS_SIGNING_KEYS`` (comma-separated hex,
verify-only), and drop it from there after one TTL (``MRTR_STATE_TTL_SECONDS``, default 86400).
``MRTR_INSECURE_PLAINTEXT=1`` switches to unsigned tokens, for debugging only.

Key material never appears in messages, logs or reprs; only the public key id (8 hex characters,
also visible in every token) does. Nothing here writes to stdout: stdout is the wire.

This module needs only the standard library at import time (``_state`` is imported lazily), so the
post-gen hook can load it by file path to call ``write_key_file`` before the project is installed.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import secrets
import stat
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._state import RequestStateCodec

__all__ = (
    "MIN_KEY_BYTES",
    "KeyRing",
    "SigningConfigError",
    "SigningKey",
    "WeakSigningKey",
    "codec_from_environment",
    "new_signing_key_hex",
    "parse_signing_key",
    "write_key_file",
)

logger = logging.getLogger("mrtr_runtime")

# HMAC-SHA256 keys shorter than the hash output weaken it; python-sdk's request_state.py and
# RFC 2104 section 3 both ask for at least the output length.
MIN_KEY_BYTES = 32
# A random 32-byte key has about 30 distinct byte values; fewer than 16 means a placeholder such as
# "00" * 32 or "0123456789abcdef" * 4, never a key from `keygen` (odds below 1e-30).
_MIN_DISTINCT_BYTES = 16
_MAX_KEY_FILE_BYTES = 4096  # a key file is one line of hex; refuse to slurp anything bigger
_HEX_RE = re.compile(r"[0-9a-fA-F]*")
_KEYGEN_HINT = 'generate one with: python3 -c "import secrets; print(secrets.token_hex(32))"'


class SigningConfigError(ValueError):
    """The requestState configuration cannot be used. The message is safe to show a person."""


class WeakSigningKey(SigningConfigError):
    """A signing key is missing, unreadable, not hex or too weak. Never quotes the key."""


@dataclass(frozen=True)
class SigningKey:
    """A secret and its public id (first 8 hex characters of sha256(secret)).

    ``SigningKey(secret)`` computes the id; passing a wrong id is an error.
    """

    secret: bytes = field(repr=False)
    key_id: str = ""

    def __post_init__(self) -> None:
        if len(self.secret) < MIN_KEY_BYTES:
            raise WeakSigningKey(f"a signing key must be at least {MIN_KEY_BYTES} bytes")
        key_id = hashlib.sha256(self.secret).hexdigest()[:8]
        if not self.key_id:
            object.__setattr__(self, "key_id", key_id)
        elif self.key_id != key_id:
            raise ValueError("key_id does not match the secret")


@dataclass(frozen=True)
class KeyRing:
    """``current`` signs and verifies; ``previous`` only verifies (rotation)."""

    current: SigningKey
    previous: tuple[SigningKey, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "previous", tuple(self.previous))
        seen: dict[str, bytes] = {}
        for key in (self.current, *self.previous):
            if seen.setdefault(key.key_id, key.secret) != key.secret:
                # 32-bit ids collide for about one pair in 4 billion; refuse rather than guess.
                raise SigningConfigError("two different signing keys share a key id")


def parse_signing_key(hex_text: str, *, source: str = "signing key") -> SigningKey:
    """A key from hex text (surrounding whitespace ignored). ``source`` names it in errors."""
    text = hex_text.strip()
    if not text:
        raise WeakSigningKey(f"{source} is empty; {_KEYGEN_HINT}")
    if _HEX_RE.fullmatch(text) is None or len(text) % 2:
        raise WeakSigningKey(f"{source} is not hex; {_KEYGEN_HINT}")
    secret = bytes.fromhex(text)
    if len(secret) < MIN_KEY_BYTES:
        raise WeakSigningKey(
            f"{source} is {len(secret)} bytes; at least {MIN_KEY_BYTES} bytes "
            f"({2 * MIN_KEY_BYTES} hex characters) are required; {_KEYGEN_HINT}"
        )
    if len(set(secret)) < _MIN_DISTINCT_BYTES:
        raise WeakSigningKey(f"{source} looks like a placeholder, not random; {_KEYGEN_HINT}")
    return SigningKey(secret)


def new_signing_key_hex() -> str:
    """A fresh key: 32 random bytes from ``secrets``, as 64 hex characters."""
    return secrets.token_hex(MIN_KEY_BYTES)


def write_key_file(path: Path, *, overwrite: bool = False) -> SigningKey:
    """Write a fresh key to ``path`` with mode 0600 and return it (for its id; never print it).

    The file is created with O_EXCL, so an existing file is never touched unless ``overwrite``;
    then the new key goes to a sibling temp file (also 0600, also O_EXCL) that replaces ``path``
    atomically. Raises ``FileExistsError`` when ``path`` exists and ``overwrite`` is false.
    """
    hex_text = new_signing_key_hex()
    key = parse_signing_key(hex_text)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    data = (hex_text + "\n").encode("ascii")
    if not overwrite:
        _create_private(path, data)
        return key
    temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    _create_private(temp, data)
    try:
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return key


def codec_from_environment(
    environ: Mapping[str, str],
    *,
    default_key_file: Path | None,
    clock: Callable[[], float] = time.time,
) -> RequestStateCodec:
    """The codec the environment asks for. Raises ``SigningConfigError`` (or its subclass
    ``WeakSigningKey``) with a message fit for stderr; the CLI exits 2 on it."""
    from ._state import RequestStateCodec  # lazy: keeps this module loadable on its own

    ttl = _ttl_from(environ)
    insecure = _flag_from(environ, "MRTR_INSECURE_PLAINTEXT")
    current = _configured_key(environ, default_key_file)
    if current is None and not insecure:
        current = SigningKey(secrets.token_bytes(MIN_KEY_BYTES))
        logger.warning(
            "no requestState signing key configured (MRTR_SIGNING_KEY, MRTR_SIGNING_KEY_FILE%s): "
            "using a random key for this process only; multi-round tool calls in progress "
            "will fail after a restart",
            f", or {default_key_file}" if default_key_file is not None else "",
        )
    ring = KeyRing(current, _previous_keys(environ, current)) if current is not None else None
    if insecure:
        logger.warning(
            "MRTR_INSECURE_PLAINTEXT=1: requestState tokens are NOT signed; any client can forge "
            "the answers a tool acts on. For debugging only; never run this in production"
        )
    if ring is not None:
        logger.info(
            "requestState signing key id %s (%d previous); ttl %ds",
            ring.current.key_id,
            len(ring.previous),
            ttl,
        )
    return RequestStateCodec(ring, ttl_seconds=ttl, clock=clock, insecure_plaintext=insecure)


def _configured_key(environ: Mapping[str, str], default_key_file: Path | None) -> SigningKey | None:
    # An empty variable counts as unset: host config snippets often carry "KEY": "" placeholders.
    inline = environ.get("MRTR_SIGNING_KEY", "")
    if inline.strip():
        return parse_signing_key(inline, source="MRTR_SIGNING_KEY")
    named = environ.get("MRTR_SIGNING_KEY_FILE", "").strip()
    if named:
        return _read_key_file(Path(named).expanduser(), "MRTR_SIGNING_KEY_FILE")
    if default_key_file is not None and default_key_file.exists():
        return _read_key_file(default_key_file, "key file")
    return None


def _previous_keys(environ: Mapping[str, str], current: SigningKey) -> tuple[SigningKey, ...]:
    keys: dict[str, SigningKey] = {}
    entries = environ.get("MRTR_PREVIOUS_SIGNING_KEYS", "").split(",")
    for number, entry in enumerate(entries, start=1):
        if entry.strip():  # tolerate "a, b," and stray spaces
            source = f"MRTR_PREVIOUS_SIGNING_KEYS entry {number}"
            key = parse_signing_key(entry, source=source)
            if key.key_id != current.key_id:
                keys.setdefault(key.key_id, key)
    return tuple(keys.values())


def _ttl_from(environ: Mapping[str, str]) -> int:
    from ._state import DEFAULT_TTL_SECONDS

    text = environ.get("MRTR_STATE_TTL_SECONDS", "").strip()
    if not text:
        return DEFAULT_TTL_SECONDS
    if not text.isascii() or not text.isdigit() or len(text) > 10 or int(text) <= 0:
        raise SigningConfigError(
            "MRTR_STATE_TTL_SECONDS must be a positive whole number of seconds"
        )
    return int(text)


def _flag_from(environ: Mapping[str, str], name: str) -> bool:
    value = environ.get(name, "").strip()
    if value in ("", "0"):
        return False
    if value == "1":
        return True
    # A security switch is spelled one way only, so "false" can never mean "on".
    raise SigningConfigError(f"{name} must be 1 or unset")


def _read_key_file(path: Path, label: str) -> SigningKey:
    try:
        # O_NONBLOCK: opening a FIFO must not hang the server at start; regular files ignore it.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise WeakSigningKey(f"{label} {path} cannot be read ({_why(exc)})") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise WeakSigningKey(f"{label} {path} is not a regular file")
    with os.fdopen(fd, "rb") as handle:
        try:
            data = handle.read(_MAX_KEY_FILE_BYTES + 1)
        except OSError as exc:
            raise WeakSigningKey(f"{label} {path} cannot be read ({_why(exc)})") from None
    if len(data) > _MAX_KEY_FILE_BYTES:
        raise WeakSigningKey(f"{label} {path} is too large to be a key file")
    if os.name == "posix" and info.st_mode & 0o077:
        logger.warning(
            "%s %s is readable or writable by other users (mode %s); run: chmod 600 %s",
            label,
            path,
            oct(stat.S_IMODE(info.st_mode)),
            path,
        )
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise WeakSigningKey(f"{label} {path} is not hex; {_KEYGEN_HINT}") from None
    return parse_signing_key(text, source=f"{label} {path}")


def _create_private(path: Path, data: bytes) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        if hasattr(os, "fchmod"):
            os.fchmod(fd, 0o600)  # the umask can only remove bits, but be exact
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        path.unlink(missing_ok=True)
        raise
    os.close(fd)


def _why(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__
