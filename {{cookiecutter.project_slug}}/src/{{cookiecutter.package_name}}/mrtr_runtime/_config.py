"""Where ``requestState`` keys come from: the environment and key files; writing and rotating them.

Where the key comes from, first match wins:

1. ``MRTR_SIGNING_KEY``: hex, at least 32 bytes (64 hex characters).
2. ``MRTR_SIGNING_KEY_FILE``: a file holding that hex. Configured but unreadable is an error.
3. ``default_key_file`` (the project's own key file, written at bake time), if it exists.
4. ``per_user_key_file`` (``per_user_key_path``: the user's state directory, one directory per
   server name), created on first start if it does not exist. This is what an installed server
   (a wheel, ``uvx``, a bundle) uses: it has no project directory, yet its rounds in flight
   must survive a restart.
5. Nothing usable: a random key for this process only, with a WARNING on the ``mrtr_runtime``
   logger. Still safe (tokens are signed), but a round in flight does not survive a restart,
   which is MRTR's reason to exist (2026-07-28 basic/patterns/mrtr).

One INFO line on stderr says which key signs and where it came from (a path, or the variable).

Previous keys verify tokens but never sign them (rotation). They come from
``MRTR_PREVIOUS_SIGNING_KEYS`` (comma-separated hex) and from a file of one hex key per line
(blank lines and ``#`` comments allowed): ``.mrtr-previous-signing-keys`` beside the key file
when it exists, and ``MRTR_PREVIOUS_SIGNING_KEYS_FILE``. ``rotate_key_file`` (what
``keygen --rotate`` runs) moves the current key into the file beside it, so no secret is ever
copied by hand into a host configuration. A key is useless one TTL after it was retired: tokens live
``MRTR_STATE_TTL_SECONDS`` (default 900, at most 3600). Tokens are always signed: the unsigned
mode of earlier versions (``MRTR_INSECURE_PLAINTEXT``) is gone, and the variable is ignored with a
warning, so a host configuration that still sets it starts a server that signs.

Key files must be ours and private: one that other users can read or write, that another user
owns, or that is a symlink stops start-up (they could read the key and forge answers, or swap
in a key of their own), and so does a per-user key directory that is a symlink, another user's,
or open to other users. Where there are no POSIX owners (Windows) only the file checks apply.
Key material never appears in messages, logs or reprs; only the public key id (8 hex characters,
also visible in every token) does. Nothing here writes to stdout: stdout is the wire.

Every ``MRTR_*`` variable is read here, once, by ``Settings.from_environment``; the server and
its transports are handed the result (``Server(settings=...)``) and never read the environment.

The keys themselves, and everything pure about them, are ``_tokens``.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
import secrets
import stat
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Final
from urllib.parse import unquote_plus, urlsplit

from ._permissions import mode_bits_enforced, open_to_others
from ._tokens import (
    _KEYGEN_HINT,
    DEFAULT_TTL_SECONDS,
    MAX_TTL_SECONDS,
    MIN_KEY_BYTES,
    KeyRing,
    RequestStateCodec,
    SigningConfigError,
    SigningKey,
    WeakSigningKey,
    new_signing_key_hex,
    parse_signing_key,
)

__all__ = (
    "CLIENT_REQUEST_TIMEOUT_SECONDS",
    "DEFAULT_TASK_MAX_BYTES_PER_OWNER",
    "DEFAULT_TASK_MAX_PER_OWNER",
    "DEFAULT_TASK_MAX_ROUND_BYTES_PER_OWNER",
    "DEFAULT_TASK_MAX_STORED",
    "MAX_PREVIOUS_KEYS",
    "PREVIOUS_KEYS_FILE_ENV",
    "PREVIOUS_KEYS_FILE_NAME",
    "TASK_MAX_BYTES_PER_OWNER_VARIABLE",
    "TASK_MAX_PER_OWNER_VARIABLE",
    "TASK_MAX_ROUND_BYTES_PER_OWNER_VARIABLE",
    "TASK_MAX_STORED_VARIABLE",
    "TASK_STORE_VARIABLE",
    "Rotation",
    "Settings",
    "SigningConfigError",
    "WeakSigningKey",
    "codec_from_environment",
    "codec_from_settings",
    "default_previous_keys_file",
    "load_or_create_key_file",
    "per_user_key_path",
    "rotate_key_file",
    "shown_store_url",
    "write_key_file",
)

logger = logging.getLogger("mrtr_runtime")

_MAX_KEY_FILE_BYTES = 4096  # a key file is one line of hex; refuse to slurp anything bigger
#: The variable naming a file of previous (verify-only) keys, one hex key per line.
PREVIOUS_KEYS_FILE_ENV = "MRTR_PREVIOUS_SIGNING_KEYS_FILE"
#: The unsigned mode's switch before 0.5.0; now only named to say it is ignored.
_REMOVED_PLAINTEXT_FLAG = "MRTR_INSECURE_PLAINTEXT"
#: Where previous keys live when that variable is unset: beside the current key file.
PREVIOUS_KEYS_FILE_NAME = ".mrtr-previous-signing-keys"
#: How many retired keys ``rotate_key_file`` keeps. Tokens outlive their key by at most one TTL
#: (an hour at most), so more than a few only widens what a stolen file can verify.
MAX_PREVIOUS_KEYS = 3
_PREVIOUS_KEYS_HEADER = (
    "# Previous requestState signing keys: verify-only, newest first, one hex key per line.\n"
    "# Written by 'keygen --rotate'. Secret: never commit, paste or share this file.\n"
    "# A key here is useless once MRTR_STATE_TTL_SECONDS (at most 3600 s) have passed since\n"
    "# it was retired; after that this file may be deleted.\n"
)


#: Default bound on a server-to-client request (legacy elicitation/create, sampling, roots):
#: a person may take a while to fill in a form, but a host that never answers must not hold
#: the tool call forever. MRTR_CLIENT_REQUEST_TIMEOUT_SECONDS overrides it.
CLIENT_REQUEST_TIMEOUT_SECONDS: Final = 600.0

_TTL_VARIABLE: Final = "MRTR_STATE_TTL_SECONDS"
_TIMEOUT_VARIABLE: Final = "MRTR_CLIENT_REQUEST_TIMEOUT_SECONDS"
_MAX_CONNECTIONS_VARIABLE: Final = "MRTR_HTTP_MAX_CONNECTIONS"
_MAX_SESSIONS_VARIABLE: Final = "MRTR_HTTP_MAX_SESSIONS"
_SESSION_IDLE_VARIABLE: Final = "MRTR_HTTP_SESSION_IDLE_SECONDS"
_SESSIONS_PER_PRINCIPAL_VARIABLE: Final = "MRTR_HTTP_MAX_SESSIONS_PER_PRINCIPAL"
_SSE_POLL_VARIABLE: Final = "MRTR_HTTP_SSE_POLL_SECONDS"
_RATE_PER_PRINCIPAL_VARIABLE: Final = "MRTR_HTTP_RATE_PER_PRINCIPAL"
_PLAIN_JWT_VARIABLE: Final = "MRTR_OAUTH_ACCEPT_PLAIN_JWT"
_INTROSPECTION_CACHE_VARIABLE: Final = "MRTR_OAUTH_INTROSPECTION_CACHE_SECONDS"
#: The most an introspection's answer may be trusted (RFC 7662 section 4: the longer, the later
#: a revoked token stops working).
MAX_INTROSPECTION_CACHE_SECONDS: Final = 3600
_CALLS_PER_PRINCIPAL_VARIABLE: Final = "MRTR_HTTP_CALLS_PER_PRINCIPAL"
_HTTP_TOKEN_VARIABLE: Final = "MRTR_HTTP_TOKEN"  # noqa: S105 -- the variable's name, not a secret
TASK_STORE_VARIABLE: Final = "MRTR_TASK_STORE"
TASK_MAX_STORED_VARIABLE: Final = "MRTR_TASK_MAX_STORED"
#: The default bound on unexpired tasks in the store: plenty for one user or one fleet, and
#: a store that fills up says so (TaskStoreFull) instead of growing without end.
DEFAULT_TASK_MAX_STORED: Final = 10_000
TASK_MAX_PER_OWNER_VARIABLE: Final = "MRTR_TASK_MAX_PER_OWNER"
#: The default bound on one owner's unexpired tasks (owner: the principal and the server): a
#: tenth of the store's, so one client filling its share leaves room for the others.
DEFAULT_TASK_MAX_PER_OWNER: Final = 1_000
TASK_MAX_BYTES_PER_OWNER_VARIABLE: Final = "MRTR_TASK_MAX_BYTES_PER_OWNER"
#: The default bound on the bytes of one owner's unexpired tasks (their records as stored:
#: arguments, answers, results): a count bound alone let one owner keep about 1.2 GB (a
#: thousand tasks of a megabyte each).
DEFAULT_TASK_MAX_BYTES_PER_OWNER: Final = 64 * 1024 * 1024
TASK_MAX_ROUND_BYTES_PER_OWNER_VARIABLE: Final = "MRTR_TASK_MAX_ROUND_BYTES_PER_OWNER"
#: The default bound on the bytes of one owner's live round records (single use keeps one per
#: confirming round for as long as its token verifies, MRTR_STATE_TTL_SECONDS): a record is
#: about half a kilobyte, or at most 64 KiB with its kept result, so this is some 30,000
#: ordinary confirmations per owner at a time, or 256 of the largest.
DEFAULT_TASK_MAX_ROUND_BYTES_PER_OWNER: Final = 16 * 1024 * 1024
_TASK_STORE_FORMS: Final = (
    "sqlite:///absolute/path.db, redis://host:port/db, rediss://host:port/db or memory:"
)


@dataclass(frozen=True)
class Settings:
    """Every ``MRTR_*`` variable the runtime reads, read once and passed down.

    A value that makes no sense is never silently taken: it is named in ``problems``
    (variable -> why), and the part that needs it decides what that means. The signing setup
    (``codec_from_settings``) and the HTTP entry refuse to start (the CLI exits 2); the stdio
    transport warns on stderr and uses the default (``MRTR_CLIENT_REQUEST_TIMEOUT_SECONDS``),
    as it always has for ``MRTR_LOG_LEVEL``. Secrets never appear in a repr.
    """

    #: ``MRTR_LOG_LEVEL``: a logging level name (default INFO; an unknown name is INFO).
    log_level: str = "INFO"
    #: ``MRTR_CLIENT_REQUEST_TIMEOUT_SECONDS``: a positive number of seconds.
    client_request_timeout: float = CLIENT_REQUEST_TIMEOUT_SECONDS
    #: ``MRTR_SIGNING_KEY``: hex, as set ("" when unset or blank).
    signing_key: str = field(default="", repr=False)
    #: ``MRTR_SIGNING_KEY_FILE``, ``~`` expanded.
    signing_key_file: Path | None = None
    #: ``MRTR_PREVIOUS_SIGNING_KEYS``: comma-separated hex, as set.
    previous_signing_keys: str = field(default="", repr=False)
    #: ``MRTR_PREVIOUS_SIGNING_KEYS_FILE``, ``~`` expanded.
    previous_signing_keys_file: Path | None = None
    #: ``MRTR_STATE_TTL_SECONDS``: how long a requestState token lives.
    state_ttl_seconds: int = DEFAULT_TTL_SECONDS
    #: ``MRTR_HTTP_TOKEN``, stripped; None when unset.
    http_token: str | None = field(default=None, repr=False)
    #: ``MRTR_HTTP_TOKENS_FILE``: a file of ``principal:token`` lines; None when unset.
    http_tokens_file: str | None = None
    #: ``MRTR_HTTP_ALLOWED_ORIGINS`` and ``MRTR_HTTP_ALLOWED_HOSTS``: comma-separated lists.
    http_allowed_origins: tuple[str, ...] = ()
    http_allowed_hosts: tuple[str, ...] = ()
    #: ``MRTR_HTTP_MAX_CONNECTIONS``: a whole number from 1; None for the transport's default.
    http_max_connections: int | None = None
    #: ``MRTR_HTTP_MAX_SESSIONS``: 2025-11-25 sessions open at once, a whole number from 1;
    #: None for the transport's default.
    http_max_sessions: int | None = None
    #: ``MRTR_HTTP_MAX_SESSIONS_PER_PRINCIPAL``: of those, how many one principal may hold, a
    #: whole number from 1; None for the transport's default (a fair share).
    http_max_sessions_per_principal: int | None = None
    #: ``MRTR_HTTP_SESSION_IDLE_SECONDS``: a 2025-11-25 session unused this long is ended, a
    #: whole number of seconds from 1; None for the transport's default.
    http_session_idle_seconds: int | None = None
    #: ``MRTR_HTTP_SSE_POLL_SECONDS``: a 2025-11-25 stream's connection (a request's POST, a
    #: GET) is closed after this many seconds, with a ``retry`` field, and the client resumes
    #: the stream with ``Last-Event-ID`` (2025-11-25 basic/transports "Sending Messages" 6.:
    #: SSE polling). For a proxy that ends connections older than some age: set it below that
    #: age. A whole number of seconds from 1; None (the default) holds connections open.
    http_sse_poll_seconds: int | None = None
    #: ``MRTR_HTTP_RATE_PER_PRINCIPAL`` (requests a second) and ``MRTR_HTTP_CALLS_PER_PRINCIPAL``
    #: (tool calls running at once): what one principal may take over HTTP, whole numbers from
    #: 1; None for the transport's defaults (`http/_limits.py`).
    http_rate_per_principal: int | None = None
    http_calls_per_principal: int | None = None
    #: ``MRTR_OAUTH_ISSUER``: the authorization server whose access tokens the HTTP transport
    #: accepts (it becomes an OAuth 2.1 resource server); "" when unset. Checked by the HTTP
    #: wing, with ``MRTR_OAUTH_RESOURCE`` (this server's canonical URI, the tokens' audience)
    #: and ``MRTR_OAUTH_SCOPES`` (scopes every request needs, space- or comma-separated).
    oauth_issuer: str = ""
    oauth_resource: str = ""
    oauth_scopes: tuple[str, ...] = ()
    #: ``MRTR_OAUTH_ACCEPT_PLAIN_JWT`` (``1``): take access tokens whose ``typ`` is ``JWT``, or
    #: absent, as providers that predate RFC 9068 sign them; off by default.
    oauth_accept_plain_jwt: bool = False
    #: ``MRTR_OAUTH_CLIENT_ID`` and ``MRTR_OAUTH_CLIENT_SECRET``: this server's own client at
    #: the authorization server, with which it introspects opaque tokens (RFC 7662); "" unset.
    oauth_client_id: str = ""
    oauth_client_secret: str = field(default="", repr=False)
    #: ``MRTR_OAUTH_INTROSPECTION_CACHE_SECONDS``: how long an introspection's answer is
    #: trusted, 0 to ask for every request; None for the HTTP wing's default.
    oauth_introspection_cache_seconds: int | None = None
    #: ``MRTR_AUDIT_LOG``: where the consent audit trail goes (a file path, or ``stderr``);
    #: "" for none (`_audit`).
    audit_log: str = ""
    #: ``MRTR_TASK_STORE``: where tasks are kept (``sqlite:///abs/path.db``, ``redis://...``,
    #: ``rediss://...``, ``memory:``), as set; "" for the default (SQLite in the per-user state
    #: directory). Checked here; opened by ``_task_backends`` on the first task. Out of the repr:
    #: a Redis URL may carry a password.
    task_store: str = field(default="", repr=False)
    #: ``MRTR_TASK_MAX_STORED``: how many unexpired tasks the store may hold.
    task_max_stored: int = DEFAULT_TASK_MAX_STORED
    #: ``MRTR_TASK_MAX_PER_OWNER``: how many unexpired tasks one owner (principal) may hold.
    task_max_per_owner: int = DEFAULT_TASK_MAX_PER_OWNER
    #: ``MRTR_TASK_MAX_BYTES_PER_OWNER``: how many bytes of unexpired tasks one owner may hold.
    task_max_bytes_per_owner: int = DEFAULT_TASK_MAX_BYTES_PER_OWNER
    #: ``MRTR_TASK_MAX_ROUND_BYTES_PER_OWNER``: how many bytes of live round records (single
    #: use's) one owner may hold.
    task_max_round_bytes_per_owner: int = DEFAULT_TASK_MAX_ROUND_BYTES_PER_OWNER
    #: Variables whose value was refused, and why (in the order read).
    problems: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> Settings:
        """The settings ``environ`` gives; never raises (see ``problems``)."""
        problems: dict[str, str] = {}

        def text(name: str) -> str:
            return environ.get(name, "").strip()

        def listed(name: str) -> tuple[str, ...]:
            return tuple(item.strip() for item in environ.get(name, "").split(",") if item.strip())

        def path(name: str) -> Path | None:
            # An empty variable counts as unset: host config snippets often carry "" placeholders.
            value = text(name)
            return Path(value).expanduser() if value else None

        level = text("MRTR_LOG_LEVEL").upper() or "INFO"
        ttl = _ttl_of(text(_TTL_VARIABLE), problems)
        if text(_REMOVED_PLAINTEXT_FLAG) not in ("", "0"):
            # Read only to say it no longer does anything: unsigned tokens were removed.
            problems[_REMOVED_PLAINTEXT_FLAG] = (
                f"{_REMOVED_PLAINTEXT_FLAG} is ignored: requestState tokens are always signed "
                "(the unsigned mode was removed)"
            )
        return cls(
            log_level=level if level in logging.getLevelNamesMapping() else "INFO",
            client_request_timeout=_timeout_of(environ.get(_TIMEOUT_VARIABLE), problems),
            signing_key=text("MRTR_SIGNING_KEY"),
            signing_key_file=path("MRTR_SIGNING_KEY_FILE"),
            previous_signing_keys=environ.get("MRTR_PREVIOUS_SIGNING_KEYS", ""),
            previous_signing_keys_file=path(PREVIOUS_KEYS_FILE_ENV),
            state_ttl_seconds=ttl,
            http_token=_http_token_of(environ.get(_HTTP_TOKEN_VARIABLE), problems),
            http_tokens_file=environ.get("MRTR_HTTP_TOKENS_FILE"),
            http_allowed_origins=listed("MRTR_HTTP_ALLOWED_ORIGINS"),
            http_allowed_hosts=listed("MRTR_HTTP_ALLOWED_HOSTS"),
            http_max_connections=_whole_of(_MAX_CONNECTIONS_VARIABLE, environ, problems),
            http_max_sessions=_whole_of(_MAX_SESSIONS_VARIABLE, environ, problems),
            http_max_sessions_per_principal=_whole_of(
                _SESSIONS_PER_PRINCIPAL_VARIABLE, environ, problems
            ),
            http_session_idle_seconds=_whole_of(_SESSION_IDLE_VARIABLE, environ, problems),
            http_sse_poll_seconds=_whole_of(_SSE_POLL_VARIABLE, environ, problems),
            http_rate_per_principal=_whole_of(_RATE_PER_PRINCIPAL_VARIABLE, environ, problems),
            http_calls_per_principal=_whole_of(_CALLS_PER_PRINCIPAL_VARIABLE, environ, problems),
            oauth_issuer=text("MRTR_OAUTH_ISSUER"),
            oauth_resource=text("MRTR_OAUTH_RESOURCE"),
            oauth_scopes=tuple(text("MRTR_OAUTH_SCOPES").replace(",", " ").split()),
            audit_log=text("MRTR_AUDIT_LOG"),
            oauth_accept_plain_jwt=_switch_of(_PLAIN_JWT_VARIABLE, environ, problems),
            oauth_client_id=text("MRTR_OAUTH_CLIENT_ID"),
            oauth_client_secret=text("MRTR_OAUTH_CLIENT_SECRET"),
            oauth_introspection_cache_seconds=_cache_seconds_of(environ, problems),
            task_store=_task_store_of(text(TASK_STORE_VARIABLE), problems),
            task_max_stored=_task_bound_of(
                TASK_MAX_STORED_VARIABLE, DEFAULT_TASK_MAX_STORED, environ, problems
            ),
            task_max_per_owner=_task_bound_of(
                TASK_MAX_PER_OWNER_VARIABLE, DEFAULT_TASK_MAX_PER_OWNER, environ, problems
            ),
            task_max_bytes_per_owner=_task_bound_of(
                TASK_MAX_BYTES_PER_OWNER_VARIABLE,
                DEFAULT_TASK_MAX_BYTES_PER_OWNER,
                environ,
                problems,
            ),
            task_max_round_bytes_per_owner=_task_bound_of(
                TASK_MAX_ROUND_BYTES_PER_OWNER_VARIABLE,
                DEFAULT_TASK_MAX_ROUND_BYTES_PER_OWNER,
                environ,
                problems,
            ),
            problems=problems,
        )

    def refuse(self, *variables: str, error: type[Exception] = ValueError) -> None:
        """Raise `error` with the reason of the first of `variables` whose value was refused:
        how the part that cannot run without them stops (the HTTP entry: the MRTR_HTTP_*)."""
        for name in variables or tuple(self.problems):
            if name in self.problems:
                raise error(self.problems[name])


def _http_token_of(token: str | None, problems: dict[str, str]) -> str | None:
    """MRTR_HTTP_TOKEN, stripped; a problem when set but blank (a mistake, not a wish for no
    authentication) or not ASCII (it travels in an HTTP header)."""
    if token is None:
        return None
    if not token.strip():
        problems[_HTTP_TOKEN_VARIABLE] = (
            f"{_HTTP_TOKEN_VARIABLE} is set but empty; unset it, or give it a secret"
        )
    elif not token.strip().isascii():
        problems[_HTTP_TOKEN_VARIABLE] = (
            f"{_HTTP_TOKEN_VARIABLE} must be ASCII (it travels in an HTTP header)"
        )
    return token.strip()


def _ttl_of(text: str, problems: dict[str, str]) -> int:
    if not text:
        return DEFAULT_TTL_SECONDS
    if text.isascii() and text.isdigit() and len(text) <= 10 and 0 < int(text) <= MAX_TTL_SECONDS:
        return int(text)
    # 2026-07-28 basic/patterns/mrtr asks for a short TTL: a token can be replayed, answers
    # and all, until it expires, and an expired one only costs the user a re-ask.
    problems[_TTL_VARIABLE] = (
        f"{_TTL_VARIABLE} must be a whole number of seconds from 1 to {MAX_TTL_SECONDS} "
        f"(default {DEFAULT_TTL_SECONDS}); a requestState token can be replayed until it expires"
    )
    return DEFAULT_TTL_SECONDS


def _timeout_of(raw: str | None, problems: dict[str, str]) -> float:
    if raw is None or not raw.strip():
        return CLIENT_REQUEST_TIMEOUT_SECONDS
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if math.isfinite(seconds) and seconds > 0:
        return seconds
    problems[_TIMEOUT_VARIABLE] = (
        f"{_TIMEOUT_VARIABLE}={raw!r} is not a positive number of seconds; "
        f"using {CLIENT_REQUEST_TIMEOUT_SECONDS:g}"
    )
    return CLIENT_REQUEST_TIMEOUT_SECONDS


def _switch_of(variable: str, environ: Mapping[str, str], problems: dict[str, str]) -> bool:
    """An off-by-default switch: ``1`` turns it on, ``0`` or unset leaves it off."""
    value = environ.get(variable, "").strip()
    if value in ("", "0"):
        return False
    if value == "1":
        return True
    problems[variable] = f"{variable} must be 1 (on) or 0 (off), not {value[:40]!r}"
    return False


def _cache_seconds_of(environ: Mapping[str, str], problems: dict[str, str]) -> int | None:
    raw = environ.get(_INTROSPECTION_CACHE_VARIABLE)
    if raw is None or not raw.strip():
        return None
    value = raw.strip()
    digits = value.isascii() and value.isdigit() and len(value) <= 10
    if digits and int(value) <= MAX_INTROSPECTION_CACHE_SECONDS:
        return int(value)
    problems[_INTROSPECTION_CACHE_VARIABLE] = (
        f"{_INTROSPECTION_CACHE_VARIABLE} must be a whole number of seconds from 0 to "
        f"{MAX_INTROSPECTION_CACHE_SECONDS}, not {raw[:40]!r}"
    )
    return None


def _whole_of(variable: str, environ: Mapping[str, str], problems: dict[str, str]) -> int | None:
    """A bound of the HTTP transport: a whole number from 1; None when unset (its default)."""
    raw = environ.get(variable)
    if raw is None or not raw.strip():
        return None
    value = raw.strip()
    if value.isascii() and value.isdigit() and len(value) <= 10 and int(value) >= 1:
        return int(value)
    problems[variable] = f"{variable} must be a whole number from 1, not {raw[:40]!r}"
    return None


#: Query parameters of a store URL whose values are credentials, by their decoded, lower-case
#: name: redis-py reads ``?password=`` and ``?username=`` as it reads the userinfo, and passes
#: others through as connection options (``ssl_password``, ``ssl_keyfile_password``).
def _secret_parameter(name: str) -> bool:
    decoded = unquote_plus(name).strip().lower()
    return "password" in decoded or decoded in ("username", "user", "token", "secret")


def shown_store_url(url: str) -> str:
    """``url`` fit for a message or a log: a password in its userinfo, and the values of its
    credential query parameters (``password``, ``username``, ``ssl_password``, ... however
    their names are escaped), replaced by ``***``."""
    head, question, query = url.partition("?")
    if question:
        query, hash_mark, fragment = query.partition("#")
        pairs = []
        for pair in re.split(r"([&;])", query):
            name, equals, _value = pair.partition("=")
            pairs.append(f"{name}=***" if equals and _secret_parameter(name) else pair)
        url = f"{head}?{''.join(pairs)}{hash_mark}{fragment}"
    scheme, separator, rest = url.partition("://")
    if separator and "@" in rest:
        # Everything before the last "@" is userinfo, whatever it holds: a password with an
        # unescaped "/", "?" or "#" (as `openssl rand -base64` makes) must not end it early.
        userinfo, _, after = rest.rpartition("@")
        user, colon, _password = userinfo.partition(":")
        plain_user = colon and user and not any(mark in user for mark in "/?#")
        shown = f"{user}:***" if plain_user else "***"
        return f"{scheme}://{shown}@{after}"
    return url


def _task_store_of(value: str, problems: dict[str, str]) -> str:
    if not value or value == "memory:":
        return value
    problem = None
    if value.startswith("sqlite://"):
        path = value.removeprefix("sqlite://")
        if not path.startswith("/") or not PurePosixPath(path).name:
            problem = "a SQLite store needs an absolute file path: sqlite:///absolute/path.db"
        elif "?" in path or "#" in path:
            problem = "a SQLite store takes a file path only (no ?options)"
    elif value.startswith(("redis://", "rediss://")):
        problem = _redis_url_problem(value)
    else:
        problem = f"must be {_TASK_STORE_FORMS}"
    if problem is None:
        return value
    problems[TASK_STORE_VARIABLE] = (
        f"{TASK_STORE_VARIABLE}={shown_store_url(value)[:200]!r} is refused: {problem}"
    )
    return ""


def _redis_url_problem(value: str) -> str | None:
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        # Not the parser's words: they quote the text after a colon, a password's, say.
        return "not a URL (a password with / ? # or @ must be percent-encoded)"
    if not parts.hostname:
        return "a Redis URL needs a host: redis://host:port/db"
    database = parts.path.strip("/")
    if database and not (database.isascii() and database.isdigit()):
        return f"the database must be a number (redis://host:{port or 6379}/0)"
    return None


def _task_bound_of(
    variable: str, default: int, environ: Mapping[str, str], problems: dict[str, str]
) -> int:
    raw = environ.get(variable)
    if raw is None or not raw.strip():
        return default
    value = raw.strip()
    if value.isascii() and value.isdigit() and len(value) <= 9 and int(value) >= 1:
        return int(value)
    problems[variable] = (
        f"{variable} must be a whole number from 1 (default {default}), not {raw[:40]!r}"
    )
    return default


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
    if overwrite:
        _replace_private(path, data)
    else:
        _create_private(path, data)
    return key


#: The key file's name in its per-user directory: the same name as a project's own key file, so
#: rotation and its previous-keys file work the same way in both places.
PER_USER_KEY_FILE_NAME = ".mrtr-signing-key"


def per_user_key_path(
    server_name: str, environ: Mapping[str, str], *, platform: str = sys.platform
) -> Path | None:
    """Where this user's key for the server ``server_name`` lives; None with no home to put it in.

    The platform's directory for per-user state that is not meant to be shared or synced, then
    one directory per server name: ``$XDG_STATE_HOME`` (default ``~/.local/state``) on Linux and
    other POSIX systems (XDG Base Directory Specification), ``~/Library/Application Support`` on
    macOS, ``%LOCALAPPDATA%`` on Windows. Only ``environ`` is read, so a host's environment
    decides, and tests point it at a temporary directory.
    """
    if (
        not server_name
        or server_name in (".", "..")
        or any(character in server_name for character in "/\\\0:")
    ):
        raise ValueError(f"server name {server_name!r} cannot name a directory")
    base = _state_home(environ, platform)
    return base / server_name / PER_USER_KEY_FILE_NAME if base is not None else None


def _state_home(environ: Mapping[str, str], platform: str) -> Path | None:
    def absolute(name: str) -> Path | None:
        # XDG Base Directory Specification: a relative path in these variables is invalid and
        # must be ignored. The same rule keeps a key away from whatever cwd the host picked.
        value = environ.get(name, "").strip()
        return Path(value) if value and _is_absolute(value, platform) else None

    if platform == "win32":
        local = absolute("LOCALAPPDATA")
        profile = absolute("USERPROFILE")
        return local or (profile / "AppData" / "Local" if profile is not None else None)
    home = absolute("HOME")
    if platform == "darwin":
        return home / "Library" / "Application Support" if home is not None else None
    state = absolute("XDG_STATE_HOME")
    return state or (home / ".local" / "state" if home is not None else None)


def _is_absolute(value: str, platform: str) -> bool:
    flavour = PureWindowsPath if platform == "win32" else PurePosixPath
    return flavour(value).is_absolute()


def load_or_create_key_file(path: Path, *, platform: str = os.name) -> tuple[SigningKey, bool]:
    """The key in ``path``, which is created first (0600) if it does not exist; and whether it was.

    Two servers starting together must end with one key, or each would reject the other's
    tokens: the new key is written whole to a private temp file, which ``os.link`` then puts in
    place only if nothing is there yet (it never replaces a file), and every caller reads back
    whatever file won. A reader never sees a half-written key.

    The directory must be ours: one directory per server, created 0700, and an existing one
    that is a symlink, is owned by another user or is open to other users is refused (whoever
    can write in it can swap the key), never repaired. It is opened once and everything in it is
    reached through that descriptor, so it cannot be swapped between the check and the use.
    Raises ``OSError`` when the file cannot be created, ``WeakSigningKey`` when the directory or
    the file found cannot be used. `platform` (an ``os.name``): where mode bits mean nothing
    (Windows), neither the directory's nor the file's mode is checked (see ``_permissions``).
    """
    dir_fd = _private_directory(path.parent, platform=platform)
    try:
        return _load_or_create_in(path, dir_fd, platform=platform)
    finally:
        if dir_fd is not None:
            os.close(dir_fd)


def _load_or_create_in(
    path: Path, dir_fd: int | None, *, platform: str = os.name
) -> tuple[SigningKey, bool]:
    temp = path.with_name(f"{path.name}.{secrets.token_hex(4)}.tmp")
    name, temp_name = (path.name, temp.name) if dir_fd is not None else (str(path), str(temp))
    created = False
    if not _lexists(name, dir_fd):
        if dir_fd is None:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        _create_private(temp, (new_signing_key_hex() + "\n").encode("ascii"), dir_fd=dir_fd)
        try:
            os.link(temp_name, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            created = True
        except FileExistsError:
            created = False  # another server got there first: its key is the one
        finally:
            _unlink(temp_name, dir_fd)
    key = parse_signing_key(
        _read_private_text(path, "per-user key file", dir_fd=dir_fd, platform=platform),
        source=f"per-user key file {path}",
    )
    return key, created


def _private_directory(directory: Path, *, platform: str = os.name) -> int | None:
    """A descriptor on ``directory`` once it is known to be ours and private, created 0700 if new.

    None where the platform has no POSIX owners and modes (Windows: the profile's ACLs protect
    it) or cannot work relative to a descriptor: there the path is used as before.
    """
    if (
        not mode_bits_enforced(platform)
        or _effective_uid() is None
        or not {os.open, os.link, os.unlink} <= os.supports_dir_fd
    ):
        return None
    try:
        fd = _open_key_directory(directory)
    except FileNotFoundError:
        directory.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):  # another server starting made it first
            os.mkdir(directory, 0o700)  # the umask can only take bits away: never wider than 0700
        fd = _open_key_directory(directory)
    info = os.fstat(fd)
    problem = _not_ours(info, directory)
    if problem is None and (mode := open_to_others(info.st_mode, 0o077, platform=platform)):
        problem = (
            f"is open to other users (mode {mode}), who could swap the key file in it; "
            f"run: chmod 700 {directory}"
        )
    if problem is not None:
        os.close(fd)
        raise WeakSigningKey(f"{_DIRECTORY_LABEL} {directory} {problem}")
    return fd


_DIRECTORY_LABEL = "per-user key directory"


def _open_key_directory(directory: Path) -> int:
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
    flags |= getattr(os, "O_CLOEXEC", 0)  # neither exists on Windows (never called there)
    try:
        return os.open(directory, flags)
    except OSError:
        if directory.is_symlink():
            raise WeakSigningKey(
                f"{_DIRECTORY_LABEL} {directory} is a symlink, which can be re-pointed at a key "
                f"of someone else's; replace the symlink with a directory: rm {directory} && "
                f"mkdir -m 700 {directory}"
            ) from None
        raise


def _effective_uid() -> int | None:
    """The uid key files must belong to; None on platforms without POSIX owners (Windows)."""
    geteuid = getattr(os, "geteuid", None)
    return geteuid() if geteuid is not None else None


def _not_ours(info: os.stat_result, path: Path) -> str | None:
    """Why a file or directory that another user owns cannot hold our key; None when it is ours."""
    uid = _effective_uid()
    if uid is None or info.st_uid == uid:
        return None
    # Its owner can rewrite it or chmod it at will, so it could put in a key of its own and
    # then mint any requestState this server accepts: root included, which is why even a
    # server running as root refuses a file another user owns.
    return (
        f"is owned by uid {info.st_uid}, not by the user this server runs as (uid {uid}); "
        f"if its content is trusted, run: chown {_user_name(uid)} {path}"
    )


def _user_name(uid: int) -> str:
    if sys.platform == "win32":  # no pwd module; never called there (no POSIX owners)
        return str(uid)
    try:
        # Imported here: this runs only where ownership means something.
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return str(uid)  # a container user with no passwd entry: chown takes a number too


def _lexists(name: str, dir_fd: int | None) -> bool:
    try:
        os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return False
    return True


def _unlink(name: str, dir_fd: int | None) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(name, dir_fd=dir_fd)


def default_previous_keys_file(key_file: Path) -> Path:
    """The previous-keys file that goes with ``key_file``: read whenever it exists."""
    return key_file.with_name(PREVIOUS_KEYS_FILE_NAME)


@dataclass(frozen=True)
class Rotation:
    """What ``rotate_key_file`` did. Key ids and paths only: safe to print."""

    current: SigningKey  # the new key, now in the key file
    retired: SigningKey | None  # the key it replaced, now first in the previous-keys file
    previous: tuple[SigningKey, ...]  # everything the previous-keys file holds, newest first
    previous_file: Path


def rotate_key_file(
    path: Path, *, previous_file: Path | None = None, keep: int = MAX_PREVIOUS_KEYS
) -> Rotation:
    """Replace the key in ``path`` by a fresh one, keeping the old one as a previous key.

    The old key goes first into ``previous_file`` (default: ``default_previous_keys_file``), which
    keeps the ``keep`` newest keys; only then is the key file replaced. Both are written to a 0600
    temp file that atomically replaces the original, so a server starting at any moment reads
    either the old or the new state, and a crash in between leaves the old key current (and
    harmlessly listed as previous too). Raises ``WeakSigningKey`` if either file cannot be used
    as it is (unreadable, malformed, not private): fix it, or replace the key with
    ``write_key_file(path, overwrite=True)``.
    """
    if keep < 1:
        raise ValueError("keep must be at least 1")
    previous_path = previous_file if previous_file is not None else default_previous_keys_file(path)
    retired = _read_key_file(path, "key file") if os.path.lexists(path) else None
    kept: tuple[SigningKey, ...] = ()
    if os.path.lexists(previous_path):
        kept = _read_previous_keys_file(previous_path, "previous keys file")
    if retired is not None:
        ring: dict[str, SigningKey] = {}
        for key in (retired, *kept):
            ring.setdefault(key.key_id, key)
        kept = tuple(ring.values())[:keep]
        body = "".join(key.secret.hex() + "\n" for key in kept)
        previous_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        _replace_private(previous_path, (_PREVIOUS_KEYS_HEADER + body).encode("ascii"))
    current = write_key_file(path, overwrite=True)
    return Rotation(current=current, retired=retired, previous=kept, previous_file=previous_path)


def codec_from_environment(
    environ: Mapping[str, str],
    *,
    default_key_file: Path | None,
    per_user_key_file: Path | None = None,
    audience: str = "",
    clock: Callable[[], float] = time.time,
) -> RequestStateCodec:
    """``codec_from_settings(Settings.from_environment(environ), ...)``."""
    return codec_from_settings(
        Settings.from_environment(environ),
        default_key_file=default_key_file,
        per_user_key_file=per_user_key_file,
        audience=audience,
        clock=clock,
    )


def codec_from_settings(
    settings: Settings,
    *,
    default_key_file: Path | None,
    per_user_key_file: Path | None = None,
    audience: str = "",
    clock: Callable[[], float] = time.time,
) -> RequestStateCodec:
    """The codec the settings ask for, its tokens bound to ``audience`` (the server's name).

    ``per_user_key_file`` (see ``per_user_key_path``) is created when no other key is configured.
    Raises ``SigningConfigError`` (or its subclass ``WeakSigningKey``) with a one-line message fit
    for stderr; the CLI exits 2 on it.
    """
    settings.refuse(_TTL_VARIABLE, error=SigningConfigError)
    if problem := settings.problems.get(_REMOVED_PLAINTEXT_FLAG):
        # Ignored rather than refused: what it asked for (tokens any client can forge) is
        # exactly what a server must never do, and ignoring it only makes the server safer.
        logger.warning("%s", problem)
    ttl = settings.state_ttl_seconds
    current, key_file = _configured_key(settings, default_key_file)
    source = str(key_file) if key_file is not None else "MRTR_SIGNING_KEY"
    not_created = ""
    if current is None and per_user_key_file is not None:
        try:
            current, created = load_or_create_key_file(per_user_key_file)
        except OSError as exc:
            # A read-only home or a sandbox: the server still works, only without restarts.
            not_created = f" (cannot create {per_user_key_file}: {_why(exc)})"
        else:
            key_file = per_user_key_file
            source = f"{per_user_key_file}{' (new, mode 0600)' if created else ''}"
    if current is None:
        current = SigningKey(secrets.token_bytes(MIN_KEY_BYTES))
        source = "a random key for this process only"
        configured = [
            "MRTR_SIGNING_KEY",
            "MRTR_SIGNING_KEY_FILE",
            *(str(path) for path in (default_key_file, per_user_key_file) if path is not None),
        ]
        logger.warning(
            "no requestState signing key configured (%s)%s: using a random key for this process "
            "only; multi-round tool calls in progress will fail after a restart",
            ", ".join(configured),
            not_created,
        )
    ring = KeyRing(current, _previous_keys(settings, current, key_file))
    logger.info(
        "requestState signing key id %s from %s (%d previous); ttl %ds",
        ring.current.key_id,
        source,
        len(ring.previous),
        ttl,
    )
    return RequestStateCodec(ring, audience=audience, ttl_seconds=ttl, clock=clock)


def _configured_key(
    settings: Settings, default_key_file: Path | None
) -> tuple[SigningKey | None, Path | None]:
    """The current key, and the file it came from (None for the inline variable)."""
    if settings.signing_key:
        return parse_signing_key(settings.signing_key, source="MRTR_SIGNING_KEY"), None
    path = settings.signing_key_file
    if path is not None:
        return _read_key_file(path, "MRTR_SIGNING_KEY_FILE"), path
    # lexists: a dangling symlink in the project's place is refused, not taken for no key at all.
    if default_key_file is not None and os.path.lexists(default_key_file):
        return _read_key_file(default_key_file, "key file"), default_key_file
    return None, None


def _previous_keys(
    settings: Settings, current: SigningKey, key_file: Path | None
) -> tuple[SigningKey, ...]:
    found: list[SigningKey] = []
    entries = settings.previous_signing_keys.split(",")
    for number, entry in enumerate(entries, start=1):
        if entry.strip():  # tolerate "a, b," and stray spaces
            source = f"MRTR_PREVIOUS_SIGNING_KEYS entry {number}"
            found.append(parse_signing_key(entry, source=source))
    if settings.previous_signing_keys_file is not None:
        found += _read_previous_keys_file(
            settings.previous_signing_keys_file, PREVIOUS_KEYS_FILE_ENV
        )
    # Read even when the variable names another file: that is where `keygen --rotate` puts the
    # old key, and a rotation must never be silently ignored because of how the host was set up.
    if key_file is not None:
        beside = default_previous_keys_file(key_file)
        if os.path.lexists(beside):  # a dangling link is an error to report, not a missing file
            found += _read_previous_keys_file(beside, "previous keys file")
    keys: dict[str, SigningKey] = {}
    for key in found:
        if key.key_id != current.key_id:
            keys.setdefault(key.key_id, key)
    return tuple(keys.values())


def _read_key_file(path: Path, label: str) -> SigningKey:
    return parse_signing_key(_read_private_text(path, label), source=f"{label} {path}")


def _read_previous_keys_file(path: Path, label: str) -> tuple[SigningKey, ...]:
    keys: list[SigningKey] = []
    for number, line in enumerate(_read_private_text(path, label).splitlines(), start=1):
        text = line.strip()
        if text and not text.startswith("#"):
            keys.append(parse_signing_key(text, source=f"{label} {path} line {number}"))
    return tuple(keys)


def _read_private_text(
    path: Path, label: str, *, dir_fd: int | None = None, platform: str = os.name
) -> str:
    """The ASCII text of a small, regular, private file of ours; else ``WeakSigningKey`` naming it.

    The checks are made on the descriptor that is read, never on the path, so the file cannot
    change between them. A symlink is refused rather than followed: whoever controls the link or
    the directory it points into could re-point it at a key of their own. `platform` (an
    ``os.name``): on Windows the mode is not checked (``_permissions``: the ACLs protect it).
    """
    name = path.name if dir_fd is not None else str(path)
    # O_NONBLOCK: opening a FIFO must not hang the server at start; regular files ignore it.
    # O_BINARY (Windows): the bytes as written, no newline translation, no end at ^Z.
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    flags |= getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(name, flags | getattr(os, "O_NOFOLLOW", 0), dir_fd=dir_fd)
    except OSError as exc:
        if _is_symlink(name, dir_fd):
            raise WeakSigningKey(
                f"{label} {path} is a symlink, which can be re-pointed at a key of someone "
                "else's; replace the symlink with the file it points to"
            ) from None
        raise WeakSigningKey(f"{label} {path} cannot be read ({_why(exc)})") from None
    info = os.fstat(fd)
    problem = None
    if not stat.S_ISREG(info.st_mode):
        problem = "is not a regular file"
    elif (foreign := _not_ours(info, path)) is not None:
        problem = foreign
    elif mode := open_to_others(info.st_mode, 0o077, platform=platform):
        # Readable by others: anyone on the machine can forge answers. Writable by others:
        # anyone can swap in a key of their own. Either way the key is no longer ours.
        problem = f"is readable or writable by other users (mode {mode}); run: chmod 600 {path}"
    if problem is not None:
        os.close(fd)
        raise WeakSigningKey(f"{label} {path} {problem}")
    with os.fdopen(fd, "rb") as handle:
        try:
            data = handle.read(_MAX_KEY_FILE_BYTES + 1)
        except OSError as exc:
            raise WeakSigningKey(f"{label} {path} cannot be read ({_why(exc)})") from None
    if len(data) > _MAX_KEY_FILE_BYTES:
        raise WeakSigningKey(f"{label} {path} is too large to be a key file")
    try:
        return data.decode("ascii")
    except UnicodeDecodeError:
        raise WeakSigningKey(f"{label} {path} is not hex; {_KEYGEN_HINT}") from None


def _is_symlink(name: str, dir_fd: int | None) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(name, dir_fd=dir_fd).st_mode)
    except OSError:
        return False


def _replace_private(path: Path, data: bytes) -> None:
    # The temp name starts with the target's, so the target's ignore pattern ("name.*") covers it.
    temp = path.with_name(f"{path.name}.{secrets.token_hex(4)}.tmp")
    _create_private(temp, data)
    try:
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def _create_private(path: Path, data: bytes, *, dir_fd: int | None = None) -> None:
    name = path.name if dir_fd is not None else str(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    flags |= getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)  # O_BINARY: see above
    fd = os.open(name, flags, 0o600, dir_fd=dir_fd)
    try:
        if hasattr(os, "fchmod"):
            os.fchmod(fd, 0o600)  # the umask can only remove bits, but be exact
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        _unlink(name, dir_fd)
        raise
    os.close(fd)


def _why(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__
