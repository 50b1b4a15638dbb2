"""The one redactor (`redact_secrets`) and every path out that goes through it.

Properties (hypothesis): a secret in any of the shapes AWS material travels in, inside any
text, never survives; the text around it is kept exactly; redacting twice changes nothing; any
text at all is redacted without an error. Then the paths: every line of the configured logging
(message, arguments, exception text and traceback, stack_info, uvicorn's loggers in HTTP mode)
and a ToolError's message in a tool result.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from mrtr_runtime import Registry, ToolError, _redact, redact_secrets
from mrtr_runtime._context import InvalidInputResponse
from mrtr_runtime._jsonrpc import encode
from mrtr_runtime.testing import MemoryClient, RpcError
from support import PACKAGE, make_server

BOUND = 30  # seconds for a subprocess

BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="
# What a secret key or a session token is made of; long enough not to occur by chance.
secrets_ = st.text(alphabet=BASE64, min_size=16, max_size=80)
key_ids = st.builds(
    lambda prefix, rest: prefix + rest,
    st.sampled_from(["AKIA", "ASIA", "AROA", "AIDA"]),
    st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", min_size=16, max_size=16),
)
# Ordinary text: no separator a secret's name is followed by (":" "="), no markup ("<"), no
# URL userinfo ("@"), no capitals (key ids), so nothing in it looks like a secret.
ordinary = st.text(
    alphabet=st.characters(
        categories=["Ll", "Nd", "Zs", "Po", "Pd", "Ps", "Pe"], exclude_characters=":=<@\\"
    ),
    max_size=60,
)

Form = Callable[[str], str]
# Each shape: how the secret appears in the text (repr() of dicts and bytes, JSON in JSON, a
# header block, a query string, an ini file, XML with or without its end tag, a header).
FORMS: dict[str, Form] = {
    "xml": lambda s: f"<SecretAccessKey>{s}</SecretAccessKey>",
    "xml-namespaced-pretty": lambda s: f'<sts:SessionToken a="1">\n  {s}\n</sts:SessionToken>',
    "xml-truncated": lambda s: f"<Credentials><SessionToken>{s}",
    "json": lambda s: json.dumps({"Credentials": {"SecretAccessKey": s}}),
    "json-escaped-slash": lambda s: '{"SessionToken":"' + s.replace("/", "\\/") + '"}',
    "json-in-json": lambda s: json.dumps(json.dumps({"SessionToken": s})),
    "dict-of-bytes-repr": lambda s: repr({"X-Amz-Security-Token": s.encode()}),
    "asgi-headers-repr": lambda s: repr([(b"host", b"h"), (b"x-amz-security-token", s.encode())]),
    "go-header-json": lambda s: json.dumps(
        {"Authorization": [f"Bearer {s}"], "X-Amz-Signature": [s]}
    ),
    "cgi-environ": lambda s: f"HTTP_X_AMZ_SECURITY_TOKEN={s}\nHTTP_AUTHORIZATION=AWS {s}:x",
    "header-lines-bytes-repr": lambda s: repr(
        f"Host: sts.amazonaws.com\r\nx-amz-security-token: {s}\r\n".encode()
    ),
    "query-string": lambda s: f"https://h/?X-Amz-Security-Token={quote(s, safe='')}&X-Amz-Date=1",
    "presigned-signature": lambda s: f"https://h/?a=1&X-Amz-Signature={s}",
    "ini": lambda s: f"[default]\naws_secret_access_key = {s}\naws_session_token={s}",
    "sigv4-authorization": lambda s: (
        "Authorization: AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20260728/us-east-1/"
        f"sts/aws4_request, SignedHeaders=host;x-amz-date, Signature={s}"
    ),
    "bearer": lambda s: f"{{'authorization': 'Bearer {s}'}}",
    "signature-param": lambda s: f"Signature={s}",
    "url-userinfo": lambda s: f"https://deployer:{quote(s, safe='')}@sts.example/",
    "xml-cdata": lambda s: f"<SecretAccessKey><![CDATA[{s}]]></SecretAccessKey>",
    "xml-cdata-truncated": lambda s: f"<Credentials><SecretAccessKey><![CDATA[{s}",
    "xml-quoted-on-next-line": lambda s: f'<SessionToken>\n\t"{s}"</SessionToken>',
    "yaml-quoted-on-next-line": lambda s: f'SessionToken:\n  "{s}"',
    "yaml-literal-block": lambda s: f"SecretAccessKey: |\n  {s}",
    "yaml-folded-block": lambda s: f"SessionToken: >-\n    {s}",
    "spaced-name": lambda s: f"Secret Access Key: {s}",
    "dotted-name": lambda s: f"secret.access.key={s}",
    "html-attribute": lambda s: f'<input type="hidden" name="SecretAccessKey" value="{s}">',
    "html-table": lambda s: f"<tr><td>SecretAccessKey</td><td>{s}</td></tr>",
    "url-escaped-name": lambda s: f"https://h/?X-Amz-Security%2DToken={quote(s, safe='')}",
    "url-escaped-separator": lambda s: f"X-Amz-Security-Token%3D{quote(s, safe='')}",
    "entity-separator": lambda s: f"X-Amz-Signature&#61;{s}",
    "sigv2-bare": lambda s: f"string to sign for AWS AKIAIOSFODNN7EXAMPLE:{s}",
    "scheme-relative-userinfo": lambda s: f"//deployer:{quote(s, safe='')}@sts.example/x",
    "backslash-userinfo": lambda s: f"http:\\\\deployer:{quote(s, safe='')}@sts.example",
}
# Exactly what each shape becomes: the secret, and only the secret, replaced.
REDACTED: dict[str, str] = {
    "xml": "<SecretAccessKey>[redacted]</SecretAccessKey>",
    "xml-namespaced-pretty": '<sts:SessionToken a="1">\n  [redacted]\n</sts:SessionToken>',
    "xml-truncated": "<Credentials><SessionToken>[redacted]",
    "json": '{"Credentials": {"SecretAccessKey": "[redacted]"}}',
    "json-escaped-slash": '{"SessionToken":"[redacted]"}',
    "json-in-json": '"{\\"SessionToken\\": \\"[redacted]\\"}"',
    "dict-of-bytes-repr": "{'X-Amz-Security-Token': b'[redacted]'}",
    "asgi-headers-repr": "[(b'host', b'h'), (b'x-amz-security-token', b'[redacted]')]",
    "go-header-json": '{"Authorization": ["[redacted]"], "X-Amz-Signature": ["[redacted]"]}',
    "cgi-environ": "HTTP_X_AMZ_SECURITY_TOKEN=[redacted]\nHTTP_AUTHORIZATION=[redacted]",
    "header-lines-bytes-repr": (
        "b'Host: sts.amazonaws.com\\r\\nx-amz-security-token: [redacted]\\r\\n'"
    ),
    "query-string": "https://h/?X-Amz-Security-Token=[redacted]&X-Amz-Date=1",
    "presigned-signature": "https://h/?a=1&X-Amz-Signature=[redacted]",
    "ini": "[default]\naws_secret_access_key = [redacted]\naws_session_token=[redacted]",
    "sigv4-authorization": "Authorization: [redacted]",
    "bearer": "{'authorization': '[redacted]'}",
    "signature-param": "Signature=[redacted]",
    "url-userinfo": "https://[redacted]@sts.example/",
    "xml-cdata": "<SecretAccessKey><![CDATA[[redacted]]]></SecretAccessKey>",
    "xml-cdata-truncated": "<Credentials><SecretAccessKey><![CDATA[[redacted]",
    "xml-quoted-on-next-line": '<SessionToken>\n\t"[redacted]"</SessionToken>',
    "yaml-quoted-on-next-line": 'SessionToken:\n  "[redacted]"',
    "yaml-literal-block": "SecretAccessKey: |\n  [redacted]",
    "yaml-folded-block": "SessionToken: >-\n    [redacted]",
    "spaced-name": "Secret Access Key: [redacted]",
    "dotted-name": "secret.access.key=[redacted]",
    "html-attribute": '<input type="hidden" name="SecretAccessKey" value="[redacted]">',
    "html-table": "<tr><td>SecretAccessKey</td><td>[redacted]</td></tr>",
    "url-escaped-name": "https://h/?X-Amz-Security%2DToken=[redacted]",
    "url-escaped-separator": "X-Amz-Security-Token%3D[redacted]",
    "entity-separator": "X-Amz-Signature&#61;[redacted]",
    "sigv2-bare": "string to sign for AWS [redacted]:[redacted]",
    "scheme-relative-userinfo": "//[redacted]@sts.example/x",
    "backslash-userinfo": "http:\\\\[redacted]@sts.example",
}


def spellings(secret: str) -> list[str]:
    return [secret, quote(secret, safe=""), secret.replace("/", "\\/")]


@pytest.mark.parametrize("form", FORMS, ids=FORMS.keys())
@settings(max_examples=60, deadline=None)
@given(secret=secrets_, before=st.text(max_size=60), after=st.text(max_size=60))
def test_a_secret_in_any_shape_never_survives_whatever_surrounds_it(
    form: str, secret: str, before: str, after: str
) -> None:
    assume(not any(spelling in before + "\0" + after for spelling in spellings(secret)))
    redacted = redact_secrets(before + FORMS[form](secret) + after)
    for spelling in spellings(secret):
        assert spelling not in redacted


@pytest.mark.parametrize("form", FORMS, ids=FORMS.keys())
@settings(max_examples=40, deadline=None)
@given(secret=secrets_, before=ordinary, after=ordinary)
def test_only_the_secret_changes(form: str, secret: str, before: str, after: str) -> None:
    text = f"{before}\n{FORMS[form](secret)}\n{after}"
    assert redact_secrets(text) == f"{before}\n{REDACTED[form]}\n{after}"


@settings(max_examples=200, deadline=None)
@given(key_id=key_ids, before=st.text(max_size=40), after=st.text(max_size=40))
def test_an_access_key_id_never_survives_even_glued_to_other_text(
    key_id: str, before: str, after: str
) -> None:
    assert key_id not in redact_secrets(before + key_id + after)


@settings(max_examples=200, deadline=None)
@given(
    key_id=key_ids,
    cut=st.integers(min_value=5, max_value=19),
    indent=st.text(alphabet=" \t", max_size=40),
    before=ordinary,
    after=ordinary,
)
def test_an_access_key_id_lowercased_or_split_across_lines_never_survives(
    key_id: str, cut: int, indent: str, before: str, after: str
) -> None:
    # Lowercased, only the ids that pair with a secret key (AKIA, ASIA) are taken.
    lowered = ("akia" if key_id.startswith("AKIA") else "asia") + key_id[4:].lower()
    assert lowered not in redact_secrets(f"{before} {lowered} {after}")
    split = f"{key_id[:cut]}\n{indent}{key_id[cut:]}"
    assert redact_secrets(f"{before} {split} {after}") == f"{before} [redacted] {after}"


@pytest.mark.parametrize("word", ["acca1234567890abcdef", "asia" + "x" * 17, "akiakiakia"])
def test_lowercase_words_that_only_look_like_key_ids_are_kept(word: str) -> None:
    # A hex digest may hold "acca"; a lowercase id is taken only as a whole 20-character word.
    assert redact_secrets(f"digest {word} ok") == f"digest {word} ok"


# -- worst cases: each pattern on a megabyte built to make it backtrack -------------------------

MEGABYTE = 1_000_000
WORST_SECRET = "FwoGZXIvYXdzEWorstCaseTokenValue0123456789"


def megabyte_of(unit: str) -> str:
    return unit * (MEGABYTE // len(unit) + 1)


# A guard is that the call returns (pytest-timeout stops a quadratic one) with the secret after
# the megabyte gone.
WORST_CASES: dict[str, str] = {
    "cdata-whitespace": "<SecretAccessKey><![CDATA[" + " " * MEGABYTE,
    "cdata-openings": megabyte_of("<SessionToken><![CDATA["),
    "labelled-unclosed": megabyte_of("<td>SecretAccessKey</td> <td"),
    "labelled-whitespace": "<td>SecretAccessKey" + " " * MEGABYTE,
    "attribute-names": megabyte_of('name="SecretAccessKey" '),
    "attribute-gap": 'name="SessionToken"' + " x" * (MEGABYTE // 2),
    "block-indicators": megabyte_of("SecretAccessKey: |"),
    "block-whitespace": "SessionToken: >-\n" + " " * MEGABYTE,
    "joined-words": megabyte_of("secret%2Daccess "),
    "escaped-separators": megabyte_of("SessionToken%3D&#61;"),
    "sigv2-prefixes": megabyte_of("AWS AKIAIOSFODNN7EXAMPL"),
    "split-key-ids": megabyte_of("AKIAIOSFODNN7EXAM\n" + " " * 40),
    "lowercase-key-ids": megabyte_of("akiaasia"),
    "scheme-relative-userinfo": "//" + "user:" * (MEGABYTE // 5),
    "backslash-userinfo": megabyte_of(":\\\\u"),
}


@pytest.mark.parametrize("case", WORST_CASES, ids=WORST_CASES.keys())
def test_a_megabyte_worst_case_for_each_pattern_is_redacted(case: str) -> None:
    text = f"{WORST_CASES[case]}\nSessionToken={WORST_SECRET}"
    assert len(text) >= MEGABYTE
    assert WORST_SECRET not in redact_secrets(text)


@settings(max_examples=200, deadline=None)
@given(
    secret=st.text(min_size=8, max_size=40).filter(
        lambda s: "[" not in s and "]" not in s and s != "redacted"
    ),
    before=st.text(max_size=40),
    after=st.text(max_size=40),
)
def test_a_known_secret_never_survives_in_any_spelling(
    secret: str, before: str, after: str
) -> None:
    # A known value may contain anything; only pieces of the marker itself could rebuild it.
    for spelling in {secret, quote(secret, safe=""), secret.replace("/", "\\/")}:
        assert secret not in redact_secrets(before + spelling + after, [secret])


@settings(max_examples=200, deadline=None)
@given(text=ordinary)
def test_ordinary_text_is_left_as_it_is(text: str) -> None:
    assert redact_secrets(text) == text


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=300), known=st.lists(st.text(max_size=20), max_size=3))
def test_any_text_is_redacted_without_error_and_redacting_again_changes_nothing(
    text: str, known: list[str]
) -> None:
    once = redact_secrets(text, known)
    assert redact_secrets(once, known) == once


def test_short_known_values_are_not_replaced() -> None:
    # Seven characters would blank ordinary words; eight is the bound, and 10x that still works.
    assert redact_secrets("the word abcdefg", ["abcdefg"]) == "the word abcdefg"
    assert redact_secrets("the word abcdefgh", ["abcdefgh"]) == "the word [redacted]"
    long_value = "q" * 80
    assert redact_secrets(f"x {long_value} y", [long_value]) == "x [redacted] y"


@pytest.mark.parametrize("attributes", [200, 2000])
def test_an_xml_tag_with_long_attributes_still_hides_its_value(attributes: int) -> None:
    tag = f'<SessionToken a="{"x" * (attributes - 4)}">'  # a="...": 4 more characters
    assert redact_secrets(f"{tag}FwoGZXIvYXdzEJr</SessionToken>") == (
        f"{tag}[redacted]</SessionToken>"
    )


# -- the configured logging: every line, whatever the exception's class ---------------------------

ASSUMED = {
    "AccessKeyId": "ASIAQ3EGZK7BXMPL4Y2N",
    "SecretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY",
    "SessionToken": "FwoGZXIvYXdzEJr//////////wEaDOLf+Assumed/Session=Token",
}
BASE_TOKEN = "IQoJb3JpZ2luX2VjEBase/Session+Token=="

LOGGING_SCRIPT = f"""
import logging
from {PACKAGE}.mrtr_runtime.server import configure_logging

configure_logging()
log = logging.getLogger("tool")
body = (
    b'<AssumeRoleResponse><AssumeRoleResult><Credentials><AccessKeyId>{ASSUMED["AccessKeyId"]}'
    b'</AccessKeyId><SecretAccessKey>{ASSUMED["SecretAccessKey"]}</SecretAccessKey>'
    b'<SessionToken>{ASSUMED["SessionToken"][:30]}'
)


class ResponseParserError(Exception):
    pass


try:
    try:
        raise ValueError(b"echo: X-Amz-Security-Token: {BASE_TOKEN}\\r\\n")
    except ValueError as inner:
        raise ResponseParserError(f"Unable to parse response: {{body}}") from inner
except ResponseParserError:
    log.exception("tool %r raised", "deploy")
log.warning("headers %s", {{"X-Amz-Security-Token": b"{BASE_TOKEN}"}}, stack_info=True)
log.error("sent %s", "Authorization: AWS4-HMAC-SHA256 Credential={ASSUMED["AccessKeyId"]}/x")
"""


def run_script(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=BOUND, check=True
    )


def test_every_part_of_every_log_line_is_redacted() -> None:
    done = run_script(LOGGING_SCRIPT)
    assert done.stdout == ""
    assert "Traceback" in done.stderr and "Stack (most recent call last)" in done.stderr
    assert "ResponseParserError: Unable to parse response" in done.stderr
    assert "<SecretAccessKey>[redacted]</SecretAccessKey>" in done.stderr
    for secret in [*ASSUMED.values(), ASSUMED["SessionToken"][:30], BASE_TOKEN]:
        assert secret not in done.stderr


UNCAUGHT_SCRIPT = f"""
import threading
from {PACKAGE}.mrtr_runtime.server import configure_logging

configure_logging()


class Finalized:
    def __del__(self):
        raise ValueError("X-Amz-Security-Token: {BASE_TOKEN}")


def in_thread():
    raise RuntimeError("<SecretAccessKey>{ASSUMED["SecretAccessKey"]}</SecretAccessKey>")


worker = threading.Thread(target=in_thread, name="worker")
worker.start()
worker.join()
Finalized()
raise LookupError("Credential={ASSUMED["AccessKeyId"]}/20261201/us-east-1/sts/aws4_request")
"""


def test_exceptions_nobody_caught_are_logged_redacted() -> None:
    """The interpreter's own hooks (main thread, other threads, finalizers) write tracebacks
    to stderr without logging; configure_logging routes them through the same redactor."""
    done = subprocess.run(
        [sys.executable, "-c", UNCAUGHT_SCRIPT], capture_output=True, text=True, timeout=BOUND
    )
    assert done.returncode == 1
    assert done.stdout == ""
    for shown in (
        "Uncaught exception in thread worker",
        "RuntimeError",
        "ValueError",
        "LookupError",
    ):
        assert shown in done.stderr
    for secret in [ASSUMED["SecretAccessKey"], ASSUMED["AccessKeyId"], BASE_TOKEN]:
        assert secret not in done.stderr


UVICORN_SCRIPT = f"""
import logging
import sys

sys.path.insert(0, {str(Path(__file__).parents[1])!r})
import support
from mrtr_runtime.http import _uvicorn
from mrtr_runtime.server import HttpSettings, configure_logging


class Listening:
    # In place of uvicorn's Server: serve_http builds the real uvicorn.Config first (which is
    # where uvicorn would configure its loggers), then this logs as uvicorn does and returns.
    started = True

    def __init__(self, config, *rest):
        del config, rest

    def run(self, sockets):
        headers = [(b"authorization", b"Bearer {BASE_TOKEN}")]
        logging.getLogger("uvicorn.error").warning("headers: %s", headers)


configure_logging()
_uvicorn._uvicorn_server_class = lambda: Listening
sys.exit(_uvicorn.serve_http(support.make_server(), HttpSettings(port=0)))
"""


def test_uvicorns_loggers_in_http_mode_go_through_the_same_redactor() -> None:
    pytest.importorskip("uvicorn")
    done = run_script(UVICORN_SCRIPT)
    assert "headers: [(b'authorization', b'[redacted]')]" in done.stderr
    assert BASE_TOKEN not in done.stderr


# -- tool results ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_tool_errors_message_is_redacted_in_the_result() -> None:
    registry = Registry()

    @registry.tool()
    async def fails_quoting() -> str:
        """Raises a ToolError built from a library's error text."""
        raise ToolError(f"call failed: b'<SessionToken>{ASSUMED['SessionToken']}</SessionToken>'")

    result = await MemoryClient(make_server(registry=registry)).call_tool("fails_quoting")
    assert result.is_error
    assert result.text == ("call failed: b'<SessionToken>[redacted]</SessionToken>'")


@pytest.mark.anyio
@pytest.mark.parametrize("era", ["modern", "legacy"])
async def test_an_invalid_input_errors_message_is_redacted_in_the_error(era: str) -> None:
    # InvalidInputResponse becomes a JSON-RPC error (-32602) in both eras; a tool can raise it
    # with any text, a library's included.
    registry = Registry()

    @registry.tool()
    async def refuses_quoting() -> str:
        """Raises InvalidInputResponse quoting a signed header."""
        raise InvalidInputResponse("confirm", f"rejected: X-Amz-Security-Token: {BASE_TOKEN}")

    client = MemoryClient(make_server(registry=registry), era=era)
    with pytest.raises(RpcError) as raised:
        await client.call_tool("refuses_quoting")
    assert raised.value.code == -32602
    assert BASE_TOKEN not in raised.value.message
    assert raised.value.message == (
        "Invalid inputResponses['confirm']: rejected: X-Amz-Security-Token: [redacted]"
    )


KNOWN = "c0Rm+4hT8wXq/3LzV7nBk2Ps6Gd9Fy1Ja5Uo0Ei"


@pytest.fixture
def registered() -> Iterator[str]:
    _redact.treat_as_secret(KNOWN)
    yield KNOWN
    _redact._forget_known_secrets()


def html_escaped(secret: str) -> str:
    return secret.replace("/", "&#x2F;").replace("+", "&#43;").replace("=", "&#61;")


# Spellings of a bare value with no name beside it (an endpoint echoing what it was sent).
KNOWN_SPELLINGS: dict[str, Form] = {
    "as-is": lambda s: s,
    "json": lambda s: json.dumps({"reason": f"saw {s}"}),
    "url-quoted": lambda s: quote(s, safe="/"),
    "url-quoted-lowercase": lambda s: quote(s, safe=""),  # lowered below, escapes only
    "html-escaped": html_escaped,
    "json-unicode-escaped": lambda s: s.replace("/", "\\u002f").replace("+", "\\u002B"),
    "base64": lambda s: base64.b64encode(f"x{s}yz".encode()).decode(),
    "base64-aligned": lambda s: base64.b64encode(f"{s}".encode()).decode(),
    "split-across-lines": lambda s: f"{s[:11]}\n        {s[11:]}",
    "split-in-a-repr": lambda s: repr(f"{s[:5]}\r\n{s[5:]}"),
}


def lower_escapes(text: str) -> str:
    return re.sub(r"%[0-9A-F]{2}", lambda match: match.group().lower(), text)


@pytest.mark.parametrize("spelling", KNOWN_SPELLINGS, ids=KNOWN_SPELLINGS.keys())
def test_a_registered_secret_is_redacted_bare_in_any_spelling(
    registered: str, spelling: str
) -> None:
    text = KNOWN_SPELLINGS[spelling](registered)
    text = lower_escapes(text) if spelling.endswith("lowercase") else text
    redacted = redact_secrets(f"before {text} after")
    assert "[redacted]" in redacted
    assert redacted.startswith("before ") and redacted.endswith(" after")
    for piece in (registered[i : i + 8] for i in range(0, len(registered) - 7, 4)):
        assert piece not in redacted.replace("\n", "").replace(" ", "")


@settings(max_examples=100, deadline=None)
@given(
    secret=secrets_,
    cuts=st.lists(st.integers(min_value=1, max_value=79), max_size=3),
    indent=st.text(alphabet=" \t", max_size=8),
    escape=st.booleans(),
    # Nothing a secret is made of, so the text around it cannot extend or repeat it.
    before=st.text(alphabet=" .,;!?-()", max_size=30),
    after=st.text(alphabet=" .,;!?-()", max_size=30),
)
def test_a_known_secret_split_or_escaped_anywhere_never_survives(
    secret: str, cuts: list[int], indent: str, escape: bool, before: str, after: str
) -> None:
    spelled = html_escaped(secret) if escape else secret
    pieces, start = [], 0
    for cut in sorted({cut for cut in cuts if cut < len(spelled)}):
        # Cut between characters of the value, never inside an escape.
        if not re.match(r"[^&]*;", spelled[cut:]) and spelled[cut - 1] != "&":
            pieces.append(spelled[start:cut])
            start = cut
    pieces.append(spelled[start:])
    text = before + " " + ("\n" + indent).join(pieces) + " " + after
    assert redact_secrets(text, [secret]) == f"{before} [redacted] {after}"


def test_registered_secrets_are_kept_up_to_the_bound_and_the_oldest_go_first() -> None:
    limit = _redact.MAX_KNOWN_SECRETS
    values = [f"value-{number:08d}-known" for number in range(10 * limit)]
    try:
        _redact.treat_as_secret(*values[:limit])
        assert all(redact_secrets(value) == "[redacted]" for value in values[:limit])
        _redact.treat_as_secret(*values[limit:])
        assert redact_secrets(values[-limit]) == "[redacted]"
        assert redact_secrets(values[-limit - 1]) == values[-limit - 1]
        assert len(_redact.WIRE_NEEDLES) <= limit * 6
    finally:
        _redact._forget_known_secrets()


def test_a_known_secret_split_in_a_megabyte_of_lines_is_found() -> None:
    filler = "line of an ordinary log %2f &amp;\n" * 30_000
    text = f"{filler}{KNOWN[:9]}\n   {KNOWN[9:]}{filler}"
    redacted = redact_secrets(text, [KNOWN])
    assert len(text) >= 2_000_000
    assert redacted == f"{filler}[redacted]{filler}"


def test_every_outgoing_message_loses_the_registered_secrets(registered: str) -> None:
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {
            "content": [{"type": "text", "text": f"Output Echo = {registered}"}],
            "structuredContent": {"outputs": {"Echo": registered, registered: "as a name"}},
        },
    }
    line = encode(message)
    assert registered.encode() not in line
    decoded = json.loads(line)
    assert decoded["result"]["structuredContent"]["outputs"] == {
        "Echo": "[redacted]",
        "[redacted]": "as a name",
    }
    assert decoded["result"]["content"][0]["text"] == "Output Echo = [redacted]"


def test_a_secret_that_looks_like_a_number_leaves_the_line_valid_json() -> None:
    try:
        _redact.treat_as_secret("12345678", "é/ünïcode-secret")
        line = encode({"jsonrpc": "2.0", "id": 12345678, "result": {"t": "é/ünïcode-secret"}})
        assert json.loads(line) == {"jsonrpc": "2.0", "id": 12345678, "result": {"t": "[redacted]"}}
    finally:
        _redact._forget_known_secrets()


def test_messages_are_unchanged_when_no_secret_is_registered() -> None:
    message = {"jsonrpc": "2.0", "id": 1, "result": {"t": KNOWN}}
    assert _redact.WIRE_NEEDLES == ()
    assert json.loads(encode(message)) == message
