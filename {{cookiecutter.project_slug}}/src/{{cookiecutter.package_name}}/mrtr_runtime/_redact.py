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
- and any secret value known to be one: passed by the caller, or registered for the whole
  process with `treat_as_secret` (credentials the server obtained, which an endpoint may echo
  back bare, with no name beside them). A known value is found as is, and also URL-, JSON- or
  HTML-escaped, split across lines, and inside base64.

The server's own log is where server/utilities/logging's rule applies first: log messages
"MUST NOT contain credentials or secrets". Standard library only, patterns compiled once on
import: the stdio path loads it with logging.
"""

from __future__ import annotations

import base64
import bisect
import functools
import re
import threading
from collections.abc import Iterable, Iterator
from typing import Final
from urllib.parse import quote

__all__ = ("WIRE_NEEDLES", "redact_known", "redact_secrets", "treat_as_secret")

REDACTED: Final = "[redacted]"
# Shorter known values are not worth replacing: they would blank ordinary words.
_MIN_KNOWN_SECRET: Final = 8
# The process-wide set keeps the most recent values: a long-running server assumes a role per
# deploy, and an unbounded set would grow forever and slow every redaction.
MAX_KNOWN_SECRETS: Final = 256

# IAM unique-id prefixes of keys (AKIA long-term, ASIA temporary) and of the ids that travel
# with them; no word boundaries, so a key glued to other text is still found.
# A line break with its indentation may fall anywhere after the prefix (a wrapped column).
_ACCESS_KEY_ID_PATTERN: Final = (
    r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|APKA|AROA|ASCA)"
    r"(?:[A-Z0-9](?:\r?\n[ \t]{0,40})?){15}[A-Z0-9]"
)
_ACCESS_KEY_ID: Final = re.compile(_ACCESS_KEY_ID_PATTERN)
# A key id someone lowercased: only the two kinds that pair with a secret key, and only as a
# whole word, so that a hex digest or an identifier that happens to hold "acca" is left alone.
_LOWER_ACCESS_KEY_ID: Final = re.compile(r"(?<![a-z0-9])(?:akia|asia)[a-z0-9]{16}(?![a-z0-9])")
# Between the words of a name: nothing, "-", "_", ".", a space, or "-" or "_" URL-escaped.
_JOIN: Final = r"(?:[-_. ]|%2[dD]|%5[fF])"
# Names under which a secret travels, in any case.
_NAME: Final = (
    rf"(?:aws{_JOIN}?)?(?:secret{_JOIN}?(?:access{_JOIN}?)?key|session{_JOIN}?token)"
    rf"|(?:x{_JOIN}amz{_JOIN})?(?:security{_JOIN}?token|signature|credential)"
    rf"|access{_JOIN}?key{_JOIN}?id"
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
# Between a name and its value: ":" or "=" (as is, URL-escaped or as a character reference), or
# the "," of a (name, value) pair in a repr (ASGI headers), which counts only between quoted
# strings.
_SEPARATOR: Final = (
    r"""(?:\s*(?:[:=]|%3[aAdD]|&#(?:58|61|[xX]3[aAdD]);|&(?:colon|equals);)\s*"""
    r"""|(?<=["'])\s*,\s*(?=b?\\*["']))"""
)
# A YAML block scalar's indicator (| or >, with chomping and indentation) and its line break:
# the value is on the next line.
_BLOCK: Final = r"(?:[|>][-+1-9]{0,2}[ \t]*(?:\r?\n|(?:\\r)?\\n)(?:\s|\\[nrt])*)?+"
# What may stand between an element's start tag and its text: whitespace (or its repr escapes),
# a CDATA section's opening and a quote mark.
_INSIDE: Final = r"(?:\s|\\[nrt])*+(?:<!\[CDATA\[(?:\s|\\[nrt])*+)?+"
# A value may come as the one item of a list (Go's http.Header as JSON, a repr of a multidict);
# a value already redacted is not taken for one.
_OPEN: Final = r"(?!\[redacted\])(?:[\[(]\s*)?+"
_NAMED_VALUE: Final = re.compile(
    # The lookahead turns most positions away before the alternatives are tried.
    rf"(?=[acsxACSX])(?P<head>(?:{_NAME}){_QUOTE}{_SEPARATOR}{_BLOCK}{_OPEN}{_QUOTE}){_VALUE}",
    re.IGNORECASE,
)
# <SecretAccessKey>value</SecretAccessKey>, namespaced or not, with or without its end tag
# (a truncated body ends inside the value); whitespace, or its repr escapes, may surround it,
# and it may be quoted or in a CDATA section.
# Attributes hold no "<", so each tag's scan ends at the next tag: linear in the text.
_XML_VALUE: Final = re.compile(
    rf"(?P<head><(?:[\w.-]+:)?(?:{_NAME})(?:\s[^<>]*)?>{_INSIDE}{_QUOTE}){_VALUE}",
    re.IGNORECASE,
)
# A name as the text of one element and the value as the text of the next: a table row
# (<td>SecretAccessKey</td><td>value</td>), a definition list, <Name>..</Name><Value>..</Value>.
_LABELLED_VALUE: Final = re.compile(
    rf"(?=<)(?P<head><[\w:-]+(?:\s[^<>]*)?>\s*(?:{_NAME})\s*+(?::\s*+)?+</[\w:-]+>\s*"
    rf"<[\w:-]+(?:\s[^<>]*)?>{_INSIDE}{_QUOTE}){_VALUE}",
    re.IGNORECASE,
)
# An HTML form field: name="SecretAccessKey" and, later in the same tag, value="...". The gap
# is bounded, so each name costs a fixed amount however long the tag.
_ATTRIBUTE_VALUE: Final = re.compile(
    rf"(?P<head>(?<![\w-])name\s*=\s*\\*[\"']?(?:{_NAME})\\*[\"']?(?=[\s/>\\])"
    rf"[^<>]{{0,200}}?(?<![\w-])value\s*=\s*{_QUOTE}){_VALUE}",
    re.IGNORECASE,
)
# Everything up to the end of the line, a repr's escaped line end or a closing quote: SigV4
# (Credential=..., Signature=...), SigV2 (AWS id:signature), Basic and Bearer alike.
_AUTHORIZATION: Final = re.compile(
    rf"(?=[apAP])(?P<head>(?:proxy-)?authorization{_QUOTE}{_SEPARATOR}{_OPEN}{_QUOTE})"
    r"(?!\[redacted\])[^\s\"'\\<>\[\]][^\r\n\"'\\<>\[\]]*",
    re.IGNORECASE,
)
# The userinfo of any URL (scheme://user:password@host), whatever the scheme, a
# scheme-relative one (//user:password@host) and one written with backslashes (http:\\...).
_URL_USERINFO: Final = re.compile(r"(?:(?<=//)|(?<=:\\\\))[^/\\@\s\"'<>\[\]]+@")

# SigV2's "AWS id:signature" outside an Authorization header (a signed request echoed back);
# the id may already be redacted by value.
_SIGV2: Final = re.compile(
    rf"(?P<head>(?<![\w-])AWS[ \t]+(?:{_ACCESS_KEY_ID_PATTERN}|\[redacted\]):)"
    rf"{_VALUE}"
)

_KEEP_HEAD: Final = rf"\g<head>{REDACTED}"


# One spelled character of a known value: a URL escape (either case), a JSON escape (\\/ and
# \\u002f, escaped again inside a repr), an HTML character reference or a line break with the
# indentation after it (a value wrapped across lines). Fixed shapes with no nested repetition:
# one pass over the text, however it is built.
_SPELLED: Final = re.compile(
    # The lookahead turns most positions away before the alternatives are tried.
    r"(?=[%&\\\r\n])(?:%[0-9a-fA-F]{2}|\\+u[0-9a-fA-F]{4}|\\+[/+=]|&#[xX][0-9a-fA-F]{1,6};"
    r"|&#[0-9]{1,7};|&(?:sol|plus|equals|amp);|(?:\r?\n|(?:\\+r)?\\+n)[ \t]*)"
)
_NAMED_CHARACTERS: Final = {"&sol;": "/", "&plus;": "+", "&equals;": "=", "&amp;": "&"}
_LINE_BREAK: Final = re.compile(r"(?:\r?\n|(?:\\+r)?\\+n)[ \t]*")


@functools.lru_cache(maxsize=1024)
def _decoded(spelled: str) -> str:
    """The character one `_SPELLED` match stands for ("" for a line break)."""
    if _LINE_BREAK.fullmatch(spelled):
        return ""
    if spelled.startswith("%"):
        return chr(int(spelled[1:], 16))
    if spelled.startswith("\\"):
        tail = spelled.lstrip("\\")
        return chr(int(tail[1:], 16)) if tail.startswith("u") else tail
    if spelled in _NAMED_CHARACTERS:
        return _NAMED_CHARACTERS[spelled]
    number = spelled[2:-1]
    code = int(number[1:], 16) if number[:1] in "xX" else int(number)
    return chr(code) if code <= 0x10FFFF else ""


def _decoded_match(match: re.Match[str]) -> str:
    return _decoded(match.group())


def _base64_pieces(secret: str) -> list[str]:
    """What base64 of any text holding `secret` is sure to contain, at each of 3 alignments.

    The first group of 4 characters mixes in the bytes before the value and the last one the
    bytes after it; the groups in between depend on the value alone.
    """
    data = secret.encode("utf-8", "surrogatepass")
    pieces = []
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + data).decode("ascii")
        start = 4 if offset else 0
        end = (offset + len(data)) // 3 * 4
        if end - start >= _MIN_KNOWN_SECRET * 4 // 3:
            pieces.append(encoded[start:end])
    return pieces


def _needles(secrets: Iterable[str]) -> list[str]:
    """The literal strings to find: each value, URL-quoted whole (UTF-8 escapes, which the
    decoded copy does not rebuild) and its base64 pieces."""
    found = {
        needle
        for secret in secrets
        if len(secret) >= _MIN_KNOWN_SECRET
        for needle in (secret, quote(secret, safe=""), quote(secret), *_base64_pieces(secret))
    }
    return sorted(found, key=len, reverse=True)  # a longer needle first: no piece left behind


def _wire_form(needle: str) -> str:
    # What a needle becomes inside a JSON string with ensure_ascii: JSON escapes each character
    # on its own, so a string holding the needle is encoded holding this.
    escaped = []
    for char in needle:
        if char in '"\\':
            escaped.append("\\" + char)
        elif char < " " or char > "~":
            escaped.append("".join(f"\\u{unit:04x}" for unit in _utf16(char)))
        else:
            escaped.append(char)
    return "".join(escaped)


def _utf16(char: str) -> Iterator[int]:
    data = char.encode("utf-16-be", "surrogatepass")
    for index in range(0, len(data), 2):
        yield int.from_bytes(data[index : index + 2], "big")


_known_lock: Final = threading.Lock()
_known: dict[str, None] = {}  # insertion order is age: the oldest value goes first
_kept: dict[str, None] = {}  # `for_good`: never pushed out
_known_needles: list[str] = []
# What the JSON-RPC encoder looks for in every outgoing line; empty (one truthiness check) in
# a server that never registered a secret.
WIRE_NEEDLES: tuple[str, ...] = ()


def treat_as_secret(*values: str, for_good: bool = False) -> None:
    """Redact `values` from every text `redact_secrets` sees, and from every outgoing message.

    For secrets the process obtains at run time (credentials an AWS call returned), which
    can come back bare, with no name beside them. Values shorter than 8 characters are
    ignored; the set keeps the 256 most recent values, and besides them every value given
    `for_good` (the process's own configured secrets, however many run-time ones come after).
    Thread-safe.
    """
    global WIRE_NEEDLES, _known_needles
    with _known_lock:
        for value in values:
            if isinstance(value, str) and len(value) >= _MIN_KNOWN_SECRET:
                if for_good:
                    _kept[value] = None
                    continue
                _known.pop(value, None)
                _known[value] = None
        while len(_known) > MAX_KNOWN_SECRETS:
            del _known[next(iter(_known))]
        _known_needles = _needles({**_kept, **_known})
        WIRE_NEEDLES = tuple(dict.fromkeys(_wire_form(needle) for needle in _known_needles))


def _forget_known_secrets() -> None:
    """Empty the process-wide set (for tests)."""
    global WIRE_NEEDLES, _known_needles
    with _known_lock:
        _known.clear()
        _kept.clear()
        _known_needles = []
        WIRE_NEEDLES = ()


def _spans_decoded(text: str, needles: list[str]) -> list[tuple[int, int]]:
    """Where in `text` the needles are once every `_SPELLED` character is decoded.

    The decoded copy is built in one pass, with the start of each piece in both texts; a find
    in the copy maps back through them. str.find is linear in the text (two-way search), so
    the whole is linear in the text for a bounded set of needles.
    """
    # A first pass in C finds whether there is anything to map back at all (there seldom is).
    if not any(needle in _SPELLED.sub(_decoded_match, text) for needle in needles):
        return []
    pieces: list[str] = []
    decoded_starts: list[int] = []  # where each piece starts in the decoded copy
    spelled: list[tuple[int, int] | None] = []  # a spelled piece's span in `text`; None: plain
    original_starts: list[int] = []  # where a plain piece starts in `text`
    position = decoded = 0

    def plain(end: int) -> None:
        nonlocal decoded
        decoded_starts.append(decoded)
        spelled.append(None)
        original_starts.append(position)
        pieces.append(text[position:end])
        decoded += end - position

    for match in _SPELLED.finditer(text):
        if match.start() > position:
            plain(match.start())
        char = _decoded(match.group())
        if char:
            decoded_starts.append(decoded)
            spelled.append(match.span())
            original_starts.append(match.start())
            pieces.append(char)
            decoded += 1
        position = match.end()
    if not spelled:
        return []
    if position < len(text):
        plain(len(text))
    copy = "".join(pieces)
    spans = []
    for needle in needles:
        start = copy.find(needle)
        while start >= 0:
            end = start + len(needle)
            first = bisect.bisect_right(decoded_starts, start) - 1
            last = bisect.bisect_right(decoded_starts, end - 1) - 1
            first_span, last_span = spelled[first], spelled[last]
            begin = (
                original_starts[first] + start - decoded_starts[first]
                if first_span is None
                else first_span[0]
            )
            finish = (
                original_starts[last] + end - decoded_starts[last]
                if last_span is None
                else last_span[1]
            )
            spans.append((begin, finish))
            start = copy.find(needle, end)
    return spans


def _without_known(text: str, secrets: Iterable[str]) -> str:
    needles = _needles(secrets)
    if _known_needles:
        needles = sorted({*needles, *_known_needles}, key=len, reverse=True)
    if not needles:
        return text
    for needle in needles:
        text = text.replace(needle, REDACTED)
    spans = _spans_decoded(text, needles)
    if not spans:
        return text
    spans.sort()
    kept = []
    position = 0
    for start, end in spans:
        if end <= position:
            continue
        start = max(start, position)
        kept.append(text[position:start])
        kept.append(REDACTED)
        position = end
    kept.append(text[position:])
    return "".join(kept)


def redact_known(value: object) -> object:
    """`value` (a JSON value) with every known secret redacted from each of its strings."""
    if isinstance(value, str):
        return _without_known(value, ())
    if isinstance(value, dict):
        return {redact_known(key): redact_known(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [redact_known(item) for item in value]
    return value


def redact_secrets(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with secret material replaced by "[redacted]"; everything else kept as it was.

    `secrets` are values known to be secret (credentials the caller holds), added to those
    registered with `treat_as_secret`; values shorter than 8 characters are ignored.
    """
    text = _without_known(text, secrets)
    lowered = text.lower()
    if any(word in lowered for word in _NAME_WORDS):
        text = _AUTHORIZATION.sub(_KEEP_HEAD, text)
        text = _XML_VALUE.sub(_KEEP_HEAD, text)
        text = _LABELLED_VALUE.sub(_KEEP_HEAD, text)
        text = _ATTRIBUTE_VALUE.sub(_KEEP_HEAD, text)
        text = _NAMED_VALUE.sub(_KEEP_HEAD, text)
    if "AWS" in text:
        text = _SIGV2.sub(_KEEP_HEAD, text)
    text = _ACCESS_KEY_ID.sub(REDACTED, text)
    if "akia" in lowered or "asia" in lowered:
        text = _LOWER_ACCESS_KEY_ID.sub(REDACTED, text)
    return _URL_USERINFO.sub(f"{REDACTED}@", text) if "@" in text else text
