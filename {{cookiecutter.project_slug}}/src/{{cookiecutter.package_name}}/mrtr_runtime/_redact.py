"""Secret material out of text that leaves the process: log lines, tracebacks, error results.

One pure function, `redact_secrets`, for every path out. It works on the text alone, whatever
produced it: a library's exception can quote a raw response body (an AWS SDK's parser error
quotes a truncated STS answer, credentials and all, and is no error class a handler would
think to catch), an endpoint can echo the request's signed headers back, and a log argument
can be the repr() of a dict of bytes.
So it looks for the shapes secrets travel in rather than for exception classes:

- AWS access key ids (AKIA..., ASIA..., 20 characters);
- values named like secrets in XML (`<SecretAccessKey>`), JSON and Python reprs
  (`"SessionToken": "..."`, `'x-amz-security-token': b'...'`), headers
  (`x-amz-security-token: ...`), query strings (`X-Amz-Signature=...`) and ini files
  (`aws_secret_access_key = ...`), even when the text is cut off inside the value;
- the whole value of an Authorization header (SigV4's Credential and Signature, a bearer token);
- the userinfo of any URL (`scheme://user:password@host`);
- and any secret value the caller knows, also URL- and JSON-escaped.

The server's own log is where server/utilities/logging's rule applies first: log messages
"MUST NOT contain credentials or secrets". Standard library only, patterns compiled once on
import: the stdio path loads it with logging.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final
from urllib.parse import quote

__all__ = ("redact_secrets",)

REDACTED: Final = "[redacted]"
# Shorter known values are not worth replacing: they would blank ordinary words.
_MIN_KNOWN_SECRET: Final = 8

# IAM unique-id prefixes of keys (AKIA long-term, ASIA temporary) and of the ids that travel
# with them; no word boundaries, so a key glued to other text is still found.
_ACCESS_KEY_ID: Final = re.compile(
    r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|APKA|AROA|ASCA)[A-Z0-9]{16}"
)
# Names under which a secret travels, in any case, with - or _ or nothing between words.
_NAME: Final = (
    r"(?:aws[-_]?)?(?:secret[-_]?(?:access[-_]?)?key|session[-_]?token)"
    r"|(?:x[-_]amz[-_])?(?:security[-_]?token|signature|credential)"
    r"|access[-_]?key[-_]?id"
)
# Every name above, and "authorization", holds one of these: text without any (most log lines)
# skips the three patterns that look for names, which cost the most per character.
_NAME_WORDS: Final = ("key", "token", "signature", "credential", "authorization")
# A value's characters: base64, URL escapes (%2F), JSON escapes (\/ and \u002f, escaped again
# inside a repr), XML entities. Quotes, separators and a repr's backslash escapes end it, and so
# does "[", so a value already redacted is left alone.
_VALUE: Final = r"(?:\\+/|\\+u[0-9a-fA-F]{4}|&#?\w+;|[^\s\"'`&,;<>()\[\]{}\\])+"
# Quote marks as text shows them: plain, backslash-escaped (JSON inside a string) or a bytes repr.
_QUOTE: Final = r"(?:b?\\*[\"'])?+"
# Between a name and its value: ":" or "=", or the "," of a (name, value) pair in a repr (ASGI
# headers), which counts only between quoted strings.
_SEPARATOR: Final = r"""(?:\s*[:=]\s*|(?<=["'])\s*,\s*(?=b?\\*["']))"""
# A value may come as the one item of a list (Go's http.Header as JSON, a repr of a multidict);
# a value already redacted is not taken for one.
_OPEN: Final = r"(?!\[redacted\])(?:[\[(]\s*)?+"
_NAMED_VALUE: Final = re.compile(
    # The lookahead turns most positions away before the alternatives are tried.
    rf"(?=[acsxACSX])(?P<head>(?:{_NAME}){_QUOTE}{_SEPARATOR}{_OPEN}{_QUOTE}){_VALUE}",
    re.IGNORECASE,
)
# <SecretAccessKey>value</SecretAccessKey>, namespaced or not, with or without its end tag
# (a truncated body ends inside the value); whitespace, or its repr escapes, may surround it.
# Attributes hold no "<", so each tag's scan ends at the next tag: linear in the text.
_XML_VALUE: Final = re.compile(
    rf"(?P<head><(?:[\w.-]+:)?(?:{_NAME})(?:\s[^<>]*)?>(?:\s|\\[nrt])*){_VALUE}",
    re.IGNORECASE,
)
# Everything up to the end of the line, a repr's escaped line end or a closing quote: SigV4
# (Credential=..., Signature=...), SigV2 (AWS id:signature), Basic and Bearer alike.
_AUTHORIZATION: Final = re.compile(
    rf"(?=[apAP])(?P<head>(?:proxy-)?authorization{_QUOTE}{_SEPARATOR}{_OPEN}{_QUOTE})"
    r"(?!\[redacted\])[^\s\"'\\<>\[\]][^\r\n\"'\\<>\[\]]*",
    re.IGNORECASE,
)
# The userinfo of any URL (scheme://user:password@host), whatever the scheme.
_URL_USERINFO: Final = re.compile(r"(?<=://)[^/@\s\"'<>\[\]]+@")

_KEEP_HEAD: Final = rf"\g<head>{REDACTED}"


def _spellings(secret: str) -> set[str]:
    """How a known value can appear: as is, URL-quoted (a query string) and JSON-escaped."""
    return {secret, quote(secret, safe=""), quote(secret, safe="/"), secret.replace("/", "\\/")}


def redact_secrets(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with secret material replaced by "[redacted]"; everything else kept as it was.

    `secrets` are values known to be secret (credentials the caller holds); values shorter
    than 8 characters are ignored.
    """
    known = sorted(
        {
            form
            for secret in secrets
            if len(secret) >= _MIN_KNOWN_SECRET
            for form in _spellings(secret)
        },
        key=len,
        reverse=True,  # a longer spelling first, so no shorter one leaves a piece of it behind
    )
    for form in known:
        text = text.replace(form, REDACTED)
    lowered = text.lower()
    if any(word in lowered for word in _NAME_WORDS):
        text = _AUTHORIZATION.sub(_KEEP_HEAD, text)
        text = _XML_VALUE.sub(_KEEP_HEAD, text)
        text = _NAMED_VALUE.sub(_KEEP_HEAD, text)
    text = _ACCESS_KEY_ID.sub(REDACTED, text)
    return _URL_USERINFO.sub(f"{REDACTED}@", text) if "://" in text else text
