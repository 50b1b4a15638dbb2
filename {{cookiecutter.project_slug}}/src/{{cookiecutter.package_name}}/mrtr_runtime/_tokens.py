"""Signing keys and the ``requestState`` codec: signed, bound, expiring round handles. Pure.

No I/O and no environment here (the clock is injected): where keys come from is ``_config``.

2026-07-28 ``basic/patterns/mrtr`` says servers MUST treat ``requestState`` as attacker-controlled
input, MUST protect its integrity when it influences business logic (it does here: it carries the
answers a handler acts on) and SHOULD bind a short TTL and the originating request into the
protected payload. This module does exactly that and nothing else.

Token format (signed, the default)::

    m1.<kid>.<payload>.<tag>

``m1``
    Format version. Anything else is rejected; a future ``m2`` gets its own branch.
``kid``
    The signing key's id, 8 lowercase hex characters (``SigningKey.key_id``), in the clear so
    verification is one dictionary lookup in the key ring and rotation needs no trial MACs.
    It is 32 bits of ``sha256(secret)``: public by design, and useless against the MAC key,
    which is derived separately (see ``_mac_key``).
``payload``
    Canonical base64url (no padding) of compact, key-sorted, ASCII-only JSON::

        {"a": answers, "d": args digest, "e": exp, "m": method, "q": asked, "t": target}

    ``a`` maps input-request key -> the client's answer object; ``q`` maps each key asked in the
    round that minted this token -> its input method; ``e`` is the expiry in integer unix seconds;
    ``s``, present only when the handler set one, is its own JSON value for the next round;
    ``p``, present only when the transport knew who was asking, is ``digest_principal`` of that
    principal (a digest, not the name: tokens live in host logs).
    One-letter names because the token travels twice per round and lives in host logs.
``tag``
    Canonical base64url of the full 32-byte HMAC-SHA256 over the ASCII text ``m1.<kid>.<payload>``,
    so the version and the key slot are authenticated along with the payload (no downgrade, no
    re-labelling a token into another ring slot). Compared with ``hmac.compare_digest``.
    The MAC key is not the secret but ``HMAC-SHA256(secret, label || len(audience) || audience)``
    (``_mac_key``), where ``audience`` is the server's identity (its ``serverInfo.name``). So the
    token is bound to the server that minted it without carrying its name: two different servers
    that happen to share a secret reject each other's tokens ("signature"), while replicas of one
    server (same name, same key) accept each other's, which a restart between rounds needs.

Verification order: size, shape, key slot, MAC, strict payload decoding, binding, and the expiry
last. So ``expired`` is only ever reported for a token that is authentic and was minted for this
very request: dispatch may treat that one reason as "the round took too long, ask again" and every
other reason as an attack or a bug.

Why this shape: dot-separated base64url is what JWS compact tokens look like, so people reading a
host log recognise it; the MAC covers the exact transmitted text, so no canonicalisation of JSON is
needed to verify, and the MAC is checked before any JSON is parsed. We sign rather than encrypt:
the client already knows every answer (it sent them), and HMAC needs only the standard library.
Minting is deterministic: the same clock, inputs and key give the same token (no nonce to leak or
to make tests flaky). Measured when written, for answers shaped like
``{"action":"accept","content":{"name":"Alice"}}`` under keys like ``answer_1``: 174 bytes with no
answers, 291 with one, 771 with five, 2.6 KB with twenty; the key id and signature add 53 bytes
to the bare payload.

There is no unsigned form: a token anyone can write is answers anyone can forge. A ``p1.<payload>``
token (the unsigned form of versions before 0.5.0) is refused as "signature", like any forgery.

Every rejection is one ``InvalidRequestState`` whose ``reason`` is a short fixed word; it never
contains token text or key material (style: fail closed, say little).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal, NoReturn

from ._errors import MrtrError

__all__ = (
    "DEFAULT_TTL_SECONDS",
    "MAX_TOKEN_CHARS",
    "MAX_TTL_SECONDS",
    "MIN_KEY_BYTES",
    "Binding",
    "InvalidRequestState",
    "KeyRing",
    "Reason",
    "RequestStateCodec",
    "RoundState",
    "SigningConfigError",
    "SigningKey",
    "WeakSigningKey",
    "digest_arguments",
    "digest_principal",
    "new_signing_key_hex",
    "parse_signing_key",
    "round_key",
)

# HMAC-SHA256 keys shorter than the hash output weaken it; python-sdk's request_state.py and
# RFC 2104 section 3 both ask for at least the output length.
MIN_KEY_BYTES = 32
# A random 32-byte key has about 30 distinct byte values; fewer than 16 means a placeholder such as
# "00" * 32 or "0123456789abcdef" * 4, never a key from `keygen` (odds below 1e-30).
_MIN_DISTINCT_BYTES = 16
_HEX_RE = re.compile(r"[0-9a-fA-F]*")
_KEYGEN_HINT = 'generate one with: python3 -c "import secrets; print(secrets.token_hex(32))"'


class SigningConfigError(MrtrError, ValueError):
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


# 2026-07-28 basic/patterns/mrtr: "servers MUST treat requestState as an attacker-controlled
# input". Bound the work an attacker can make us do before the MAC check: a token longer than
# this is refused without being split or decoded. 64 KiB holds a couple of hundred elicitation
# answers; dispatch caps inputResponses separately, so an honest round never gets near it.
MAX_TOKEN_CHARS = 64 * 1024

# 2026-07-28 basic/patterns/mrtr (Security Considerations) asks servers to bind "a short expiry
# (TTL)". A captured token (host logs, a proxy, a crash report) can be replayed, with the answers
# it carries, until it expires; an honest round that outlives its token only costs the user one
# re-ask, because dispatch starts the questions over on "expired". So: 15 minutes by default, and
# an hour that no configuration can exceed.
DEFAULT_TTL_SECONDS = 900
MAX_TTL_SECONDS = 3600

_SIGNED_VERSION = "m1"
_PLAIN_VERSION = "p1"  # unsigned, before 0.5.0: refused as "signature"
_TAG_BYTES = 32  # full HMAC-SHA256 output; no truncation
_KID_RE = re.compile(r"[0-9a-f]{8}")
_B64URL_RE = re.compile(r"[A-Za-z0-9_-]*")
_PAYLOAD_KEYS = frozenset({"a", "d", "e", "m", "q", "t"})
# "n" is optional only so that tokens of servers from before it (a rolling upgrade) still verify.
_OPTIONAL_KEYS = frozenset({"n", "p", "s"})
#: A round's nonce: two conversations that ask the same thing in the same second still get two
#: tokens, so one's confirmation is never taken for the other's (a confirmation is consumed
#: once, keyed by its token).
_NONCE_BYTES = 12
_NONCE_RE = re.compile(r"[A-Za-z0-9_-]{16}")
_PRINCIPAL_LABEL = b"mrtr-server/requestState/principal\x00"
# Domain separation: the MAC key is HMAC(secret, label), never the raw secret. The key id is a
# prefix of sha256(secret), so using the secret itself as the MAC key would tie the public id to
# the MAC key (for secrets over 64 bytes HMAC hashes the key to exactly sha256(secret)).
_MAC_LABEL = b"mrtr-server/requestState/m1/hmac-sha256"
_MAX_AUDIENCE_BYTES = 1024  # a server name; the length prefix below is 2 bytes
# Made once: json.dumps/json.loads with options build a new encoder or decoder per call, a
# quarter of what digesting a call's arguments costs (they run on every round of every call).
_CANONICAL_ARGUMENTS = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
_CANONICAL_PAYLOAD = json.JSONEncoder(sort_keys=True, separators=(",", ":"), allow_nan=False)

Reason = Literal["malformed", "signature", "expired", "binding", "oversized", "unknown key"]


class InvalidRequestState(MrtrError):
    """``requestState`` failed verification. ``reason`` is safe to send to the client.

    Dispatch never completes a call on such state (2026-07-28 basic/patterns/mrtr "MUST reject
    state that fails verification"). For every reason but ``expired`` it answers JSON-RPC -32602
    "Invalid requestState: <reason>"; ``expired`` is raised only for an authentic token bound to
    this request (see ``RequestStateCodec.verify``), which dispatch may answer by starting the
    questions over with a fresh token, dropping the old answers.
    """

    def __init__(self, reason: Reason) -> None:
        super().__init__(reason)
        self.reason: Reason = reason


@dataclass(frozen=True)
class Binding:
    """What a token is bound to: the originating request (basic/patterns/mrtr SHOULD)."""

    method: str  # "tools/call" | "prompts/get" | "resources/read"
    target: str  # tool or prompt name, or resource URI
    arguments_digest: str  # digest_arguments(params.arguments)
    # digest_principal(who asked): basic/patterns/mrtr (requestState, Security Considerations)
    # says servers SHOULD bind the state to the authenticated user; "" when nobody is known.
    principal_digest: str = ""


@dataclass(frozen=True)
class RoundState:
    """What a verified token carries back to dispatch."""

    answers: Mapping[str, object]  # key -> the client's answer object, accumulated over rounds
    asked: Mapping[str, str]  # key -> input method, as asked by the round that minted the token
    expires_at: int  # unix seconds; the token is refused from this second on
    state: object = None  # the handler's own JSON value for the next round (``s``), if any


def digest_arguments(arguments: Mapping[str, object] | None) -> str:
    """A 128-bit digest of a call's ``arguments``, independent of key order.

    Canonical JSON (sorted keys, no whitespace) keeps ``1``, ``1.0``, ``"1"`` and ``true`` apart.
    Absent arguments and ``{}`` are the same call. ``surrogatepass`` keeps the digest total for
    lone surrogates a client may smuggle in as ``\\udXXX`` escapes (the text is never decoded).
    Raises ``TypeError``/``ValueError`` for values JSON cannot represent.
    """
    canonical = _CANONICAL_ARGUMENTS.encode(dict(arguments) if arguments is not None else {})
    digest = hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).digest()
    return _b64encode(digest[:16])  # 22 characters


def round_key(token: str) -> str:
    """The identity of the round a verified ``token`` closes: a digest of its exact text.

    The text holds the round's nonce and its binding under the MAC and has one spelling
    (canonical base64url), so one token is one key: answers or fields added to a replay of it
    change nothing. What single use (`_once`) records a round's outcome under."""
    return hashlib.sha256(token.encode("ascii")).hexdigest()


def digest_principal(principal: str | None) -> str:
    """A 128-bit digest of who asked (``""`` for nobody): what a token binds, never the name."""
    if principal is None:
        return ""
    digest = hashlib.sha256(_PRINCIPAL_LABEL + principal.encode("utf-8", "surrogatepass"))
    return _b64encode(digest.digest()[:16])


class RequestStateCodec:
    """Mints and verifies ``requestState`` tokens under a key ring.

    ``audience`` is the identity of the server the tokens belong to (its ``serverInfo.name``):
    it goes into the MAC key, so only a codec with the same audience and key verifies them.
    """

    def __init__(
        self,
        keys: KeyRing,
        *,
        audience: str = "",
        ttl_seconds: int = DEFAULT_TTL_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not isinstance(keys, KeyRing):
            raise TypeError("a RequestStateCodec signs with a KeyRing; there is no unsigned mode")
        if type(ttl_seconds) is not int or not 0 < ttl_seconds <= MAX_TTL_SECONDS:
            raise ValueError(f"ttl_seconds must be an int from 1 to {MAX_TTL_SECONDS}")
        if not isinstance(audience, str):
            raise TypeError("audience must be a str")
        audience_bytes = audience.encode("utf-8")  # a lone surrogate raises: no ambiguous names
        if len(audience_bytes) > _MAX_AUDIENCE_BYTES:
            raise ValueError(f"audience must be at most {_MAX_AUDIENCE_BYTES} bytes of UTF-8")
        self._audience = audience
        self._ttl = ttl_seconds
        self._clock = clock
        self._macs: dict[str, hmac.HMAC] = {}
        for key in (keys.current, *keys.previous):
            # Derived once per key here, so binding the audience costs nothing per token.
            self._macs.setdefault(key.key_id, _mac_key(key.secret, audience_bytes))
        self._mint_kid = keys.current.key_id

    @property
    def audience(self) -> str:
        return self._audience

    @property
    def ttl_seconds(self) -> int:
        return self._ttl

    def mint(
        self,
        binding: Binding,
        answers: Mapping[str, object],
        asked: Mapping[str, str],
        state: object = None,
    ) -> str:
        """A token carrying ``answers``, ``asked`` and the handler's ``state`` (omitted when None),
        bound to ``binding``, expiring after the TTL.

        Raises ``TypeError`` if answers are not objects or asked methods not strings,
        ``ValueError`` if something is not JSON (e.g. NaN), and ``InvalidRequestState("oversized")``
        if the token would exceed ``MAX_TOKEN_CHARS`` (verify would refuse it, so never emit it).
        """
        answers_out: dict[str, object] = {}
        for key, answer in answers.items():
            if not isinstance(key, str) or not isinstance(answer, Mapping):
                raise TypeError("answers must map str keys to objects")
            answers_out[key] = dict(answer)
        asked_out: dict[str, str] = {}
        for key, method in asked.items():
            if not isinstance(key, str) or not isinstance(method, str):
                raise TypeError("asked must map str keys to str methods")
            asked_out[key] = method
        payload = {
            "a": answers_out,
            "d": binding.arguments_digest,
            "e": int(self._clock()) + self._ttl,
            "m": binding.method,
            "n": secrets.token_urlsafe(_NONCE_BYTES),
            "q": asked_out,
            "t": binding.target,
        }
        if state is not None:
            payload["s"] = state
        if binding.principal_digest:
            payload["p"] = binding.principal_digest
        # ASCII-only keeps encoding total (lone surrogates become escapes) and the token 7-bit.
        body = _CANONICAL_PAYLOAD.encode(payload)
        encoded = _b64encode(body.encode("ascii"))
        signing_input = f"{_SIGNED_VERSION}.{self._mint_kid}.{encoded}"
        token = f"{signing_input}.{_b64encode(self._tag(self._mint_kid, signing_input))}"
        if len(token) > MAX_TOKEN_CHARS:
            raise InvalidRequestState("oversized")
        return token

    def verify(self, token: object, binding: Binding) -> RoundState:
        """The round state inside ``token``, or ``InvalidRequestState``. Never anything else."""
        if not isinstance(token, str):
            _reject("malformed")
        if len(token) > MAX_TOKEN_CHARS:
            _reject("oversized")
        if not token.isascii():
            _reject("malformed")
        parts = token.split(".")
        if parts[0] == _SIGNED_VERSION and len(parts) == 4:
            encoded = self._check_signed(parts)
        elif parts[0] == _PLAIN_VERSION and len(parts) == 2:
            # An unsigned token: exactly the forgery signing stops.
            _reject("signature")
        else:
            _reject("malformed")
        state, claimed = _parse_payload(_b64decode(encoded))
        if claimed != binding:
            # Another tool, another method, the same tool with other arguments, or another
            # principal's round: a replay.
            _reject("binding")
        # Last: "expired" is the one reason dispatch answers by asking again, so it must only
        # ever describe an authentic token that belongs to this very request.
        if not self._clock() < state.expires_at:
            _reject("expired")
        return state

    def _check_signed(self, parts: list[str]) -> str:
        """Authenticate ``m1.<kid>.<payload>.<tag>``; return the still-encoded payload."""
        _, kid, encoded, tag_text = parts
        if _KID_RE.fullmatch(kid) is None:
            _reject("malformed")
        if kid not in self._macs:
            _reject("unknown key")
        tag = _b64decode(tag_text)
        if len(tag) != _TAG_BYTES:
            _reject("malformed")
        # MAC before parsing: nothing attacker-shaped reaches the JSON parser.
        expected = self._tag(kid, f"{_SIGNED_VERSION}.{kid}.{encoded}")
        if not hmac.compare_digest(tag, expected):
            _reject("signature")
        return encoded

    def _tag(self, kid: str, signing_input: str) -> bytes:
        mac = self._macs[kid].copy()  # the keyed prototype is never updated, so copies are safe
        mac.update(signing_input.encode("ascii"))
        return mac.digest()


def _mac_key(secret: bytes, audience: bytes) -> hmac.HMAC:
    # The label has a fixed length and the audience a length prefix, so no two (label, audience)
    # pairs give the same derivation input: "ab" + "c" can never pass for "a" + "bc".
    info = _MAC_LABEL + len(audience).to_bytes(2, "big") + audience
    derived = hmac.digest(secret, info, "sha256")
    return hmac.new(derived, digestmod=hashlib.sha256)


def _reject(reason: Reason) -> NoReturn:
    # "from None" everywhere we convert: the cause could quote token text in a traceback.
    raise InvalidRequestState(reason) from None


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64decode(text: str) -> bytes:
    """Strict inverse of ``_b64encode``: exactly one spelling of each byte string decodes.

    Rejects padding, ``+``/``/``, whitespace, impossible lengths and non-zero trailing bits
    (re-encoding must reproduce the text), so a token cannot be re-spelled and still verify.
    """
    if _B64URL_RE.fullmatch(text) is None or len(text) % 4 == 1:
        _reject("malformed")
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if _b64encode(data) != text:
        _reject("malformed")
    return data


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict[str, object]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise ValueError("duplicate key")
    return result


def _no_constants(name: str) -> NoReturn:
    raise ValueError("non-finite number")


_PAYLOAD_DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicates, parse_constant=_no_constants)


def _parse_payload(raw: bytes) -> tuple[RoundState, Binding]:
    """Decode and type-check a payload: exactly the keys and types ``mint`` writes."""
    try:
        data = _PAYLOAD_DECODER.decode(raw.decode("ascii"))
    except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        _reject("malformed")
    if not isinstance(data, dict) or data.keys() - _OPTIONAL_KEYS != _PAYLOAD_KEYS:
        _reject("malformed")
    if "s" in data and data["s"] is None:  # mint omits a None state: one spelling per token
        _reject("malformed")
    if "n" in data and not (isinstance(data["n"], str) and _NONCE_RE.fullmatch(data["n"])):
        _reject("malformed")
    principal = data.get("p", "")
    if "p" in data and not (isinstance(principal, str) and principal):  # the same for "p"
        _reject("malformed")
    answers, digest, exp = data["a"], data["d"], data["e"]
    method, asked, target = data["m"], data["q"], data["t"]
    if not (isinstance(method, str) and isinstance(target, str) and isinstance(digest, str)):
        _reject("malformed")
    if type(exp) is not int:  # bool is an int subclass; "true" is not an expiry
        _reject("malformed")
    if not isinstance(answers, dict) or not all(isinstance(v, dict) for v in answers.values()):
        _reject("malformed")
    if not isinstance(asked, dict) or not all(isinstance(v, str) for v in asked.values()):
        _reject("malformed")
    return (
        RoundState(answers=answers, asked=asked, expires_at=exp, state=data.get("s")),
        Binding(method=method, target=target, arguments_digest=digest, principal_digest=principal),
    )
