"""The Streamable HTTP rules as plain functions (2026-07-28 basic/transports/streamable-http):
Host/Origin/bearer, the request metadata headers against the body, Base64 sentinel values,
`x-mcp-header` parameters, the legacy refusal and the status per JSON-RPC error."""

from __future__ import annotations

import base64
import contextlib
import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mrtr_runtime._jsonrpc import Request
from mrtr_runtime.http._rules import (
    HEADER_MISMATCH,
    AccessPolicy,
    HeaderMismatch,
    HeadMeter,
    MirroredParam,
    access_warning,
    check_headers,
    decode_header_value,
    http_status,
    legacy_version_problem,
    login_accounts,
    mirrored_params,
    refuse_post,
    refuse_request,
    refuse_session_get,
)
from support import MODERN, meta


def modern(method: str, request_id: int = 1, **params: Any) -> Request:
    return Request(request_id, method, {**params, "_meta": meta()})


def headers(method: str, **extra: str) -> dict[str, str]:
    return {"mcp-protocol-version": MODERN, "mcp-method": method, **extra}


def encoded(text: str) -> str:
    return f"=?base64?{base64.b64encode(text.encode()).decode()}?="


# -- Host and Origin (DNS rebinding), bearer token ----------------------------------------------


LOOPBACK = AccessPolicy.for_bind_address("127.0.0.1")
EVERYWHERE = AccessPolicy.for_bind_address("0.0.0.0")  # noqa: S104 -- what a container binds


@pytest.mark.parametrize(
    "host", ["127.0.0.1:8000", "localhost:8000", "LOCALHOST", "[::1]:8000", "127.0.0.2"]
)
def test_a_loopback_server_accepts_loopback_host_names(host: str) -> None:
    assert LOOPBACK.host_problem(host) is None


@pytest.mark.parametrize(
    "host",
    ["evil.example.com", "evil.example.com:8000", "10.0.0.1:8000", "127.0.0.1.evil.com", None],
)
def test_a_loopback_server_refuses_every_other_host_name(host: str | None) -> None:
    # The DNS-rebinding attack: a page on evil.example.com resolved to 127.0.0.1.
    assert LOOPBACK.host_problem(host) is not None


@pytest.mark.parametrize("host", ["user@127.0.0.1", "127.0.0.1:port", "127.0.0.1/path", ""])
def test_a_malformed_host_header_is_refused(host: str) -> None:
    assert LOOPBACK.host_problem(host) is not None


def test_a_server_bound_elsewhere_accepts_any_host_unless_given_a_list() -> None:
    assert EVERYWHERE.host_problem("mcp.example.com") is None
    listed = AccessPolicy.for_bind_address("0.0.0.0", allowed_hosts=["mcp.example.com"])  # noqa: S104
    assert listed.host_problem("MCP.example.com:443") is None
    assert listed.host_problem("localhost:8000") is None
    assert listed.host_problem("other.example.com") is not None


def test_listed_hosts_match_whatever_port_and_final_dot() -> None:
    listed = AccessPolicy.for_bind_address(
        "0.0.0.0",  # noqa: S104
        allowed_hosts=["mcp.example.com:8443", "api.example.com.", " ", "bad host"],
    )
    for host in ("mcp.example.com", "mcp.example.com:443", "api.example.com", "api.example.com."):
        assert listed.host_problem(host) is None, host
    assert listed.host_problem("example.com") is not None


@pytest.mark.parametrize(
    "origin",
    ["http://localhost:6274", "http://127.0.0.1", "https://[::1]:3000", "http://LOCALHOST"],
)
def test_loopback_origins_are_accepted(origin: str) -> None:
    assert LOOPBACK.origin_problem(origin) is None
    assert EVERYWHERE.origin_problem(origin) is None


@pytest.mark.parametrize(
    "origin", ["http://evil.example.com", "null", "file://", "http://127.0.0.1.evil.com", ""]
)
def test_every_other_origin_is_refused_even_when_bound_everywhere(origin: str) -> None:
    # basic/transports/streamable-http "Security & Endpoint": an invalid Origin gets 403.
    assert LOOPBACK.origin_problem(origin) is not None
    assert EVERYWHERE.origin_problem(origin) is not None


def test_listed_origins_are_accepted_and_no_origin_is_a_non_browser_client() -> None:
    policy = AccessPolicy.for_bind_address(
        "0.0.0.0",  # noqa: S104
        allowed_origins=["https://app.example.com/"],
    )
    assert policy.origin_problem("https://APP.example.com") is None
    assert policy.origin_problem("https://app.example.com.evil.com") is not None
    assert policy.origin_problem(None) is None


NOT_BARE = [
    "http://evil.com:80@localhost",  # userinfo: a lenient parse finds the host "localhost"
    "http://evil.com@localhost",
    "http://@localhost",
    "http://localhost:80@evil.com",
    "http://localhost/",  # a path, even "/"
    "http://localhost/x",
    "http://localhost?x",
    "http://localhost#x",
    "http://localhost:",  # an empty port
    "http://localhost:65536",
    "http://localhost:08000",  # not how RFC 6454 writes a port
    " http://localhost",  # whitespace anywhere
    "http://localhost ",
    "http://local host",
    "http://localhost\t",
    "http://l\u00f6calhost",  # non-ASCII: browsers send IDNA (xn--)
    "http://localhost\u3002",
    "http://[::1",  # an unclosed or invalid IPv6 literal
    "http://[::g]",
    "http:localhost",
    "//localhost",
    "localhost",
    "http://",
    "null ",
    "NULL",
]


@pytest.mark.parametrize("origin", NOT_BARE)
def test_an_origin_that_is_not_a_bare_origin_is_refused(origin: str) -> None:
    # RFC 6454 section 6.2: an origin is scheme "://" host [":" port]; browsers send nothing else.
    listed = AccessPolicy.for_bind_address(
        "127.0.0.1", allowed_origins=["http://evil.com", "http://localhost", "null"]
    )
    for policy in (LOOPBACK, EVERYWHERE, listed):
        problem = policy.origin_problem(origin)
        assert problem is not None, (policy, origin)
        assert "\n" not in problem


@pytest.mark.parametrize(
    ("origin", "listed"),
    [
        ("http://localhost", []),
        ("http://localhost:80", []),  # the default port, written out
        ("https://127.0.0.1:443", []),
        ("http://[::1]:8080", []),
        ("https://app.example.com", ["https://app.example.com/"]),
        ("https://app.example.com:443", ["https://app.example.com"]),
        ("https://app.example.com:8443", ["https://APP.example.com:8443"]),
        ("http://xn--bcher-kva.example", ["http://xn--bcher-kva.example"]),
        ("chrome-extension://abcdefghijklmnop", ["chrome-extension://abcdefghijklmnop"]),
        ("null", ["null"]),
    ],
)
def test_bare_origins_that_are_loopback_or_listed_pass(origin: str, listed: list[str]) -> None:
    policy = AccessPolicy.for_bind_address("0.0.0.0", allowed_origins=listed)  # noqa: S104
    assert policy.origin_problem(origin) is None


def test_a_listed_origin_allows_only_its_own_port_and_null_only_when_listed() -> None:
    policy = AccessPolicy.for_bind_address(
        "127.0.0.1", allowed_origins=["https://app.example.com", "not an origin", "http://a@b"]
    )
    assert policy.allowed_origins == frozenset({"https://app.example.com"})
    assert policy.origin_problem("https://app.example.com:8443") is not None
    assert policy.origin_problem("http://app.example.com") is not None
    assert policy.origin_problem("null") is not None


@given(st.text(max_size=60))
def test_origin_judging_never_fails_and_refusals_are_one_line(origin: str) -> None:
    problem = LOOPBACK.origin_problem(origin)
    assert problem is None or "\n" not in problem


@given(
    scheme=st.sampled_from(["http", "https", "HTTPS"]),
    host=st.from_regex(r"[a-z0-9-]{1,12}(\.[a-z0-9-]{1,12}){0,3}", fullmatch=True),
    port=st.none() | st.integers(min_value=0, max_value=65535),
    extra=st.sampled_from(["/", "/p", "?q", "#f", " ", "@localhost", ":80@localhost", "\u00e9"]),
)
def test_a_listed_bare_origin_passes_and_anything_added_to_it_is_refused(
    scheme: str, host: str, port: int | None, extra: str
) -> None:
    origin = f"{scheme}://{host}" + (f":{port}" if port is not None else "")
    policy = AccessPolicy.for_bind_address("127.0.0.1", allowed_origins=[origin.lower()])
    assert policy.origin_problem(origin) is None
    assert policy.origin_problem(origin + extra) is not None
    assert policy.origin_problem(f"{scheme}://user@{host}") is not None


def test_the_bearer_token_is_required_exactly_when_configured() -> None:
    assert LOOPBACK.authorised(None)
    policy = AccessPolicy.for_bind_address("127.0.0.1", bearer_token="s3cret-token")
    assert policy.authorised("Bearer s3cret-token")
    assert policy.authorised("bearer   s3cret-token ")
    for wrong in (None, "", "Bearer", "Bearer s3cret", "Basic s3cret-token", "s3cret-token"):
        assert not policy.authorised(wrong), wrong


# -- header values ------------------------------------------------------------------------------


def test_values_are_trimmed_and_base64_sentinels_decoded() -> None:
    # RFC 9110 section 5.5: optional whitespace around a field value is not part of it.
    assert decode_header_value("  get_weather \t") == "get_weather"
    assert decode_header_value(encoded("Hello, 世界")) == "Hello, 世界"
    assert decode_header_value(encoded(" padded ")) == " padded "
    assert decode_header_value(encoded("line1\nline2")) == "line1\nline2"
    # Without the exact sentinel the value is literal.
    assert decode_header_value("=?BASE64?SGVsbG8=?=") == "=?BASE64?SGVsbG8=?="
    assert decode_header_value("SGVsbG8=") == "SGVsbG8="


@pytest.mark.parametrize(
    "raw",
    [
        "=?base64?SGVsbG8?=",  # missing padding
        "=?base64?SGVsbG9=?=",  # non-zero padding bits
        "=?base64?SGV*bG8=?=",  # not in the alphabet
        "=?base64?//79?=",  # not UTF-8
        "caf\u00e9",  # not a header value at all
        "line1\nline2",
    ],
)
def test_malformed_values_are_mismatches(raw: str) -> None:
    with pytest.raises(HeaderMismatch):
        decode_header_value(raw)


@given(st.text(max_size=200))
def test_any_text_survives_the_sentinel_encoding(text: str) -> None:
    try:
        payload = text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates are not text a client can send
        return
    assert decode_header_value(f"=?base64?{base64.b64encode(payload).decode()}?=") == text


@given(st.text(max_size=200))
def test_decoding_never_fails_but_with_a_header_mismatch(raw: str) -> None:
    with contextlib.suppress(HeaderMismatch):
        decode_header_value(raw)


# -- the standard headers against the body ------------------------------------------------------


def test_matching_headers_pass() -> None:
    check_headers(headers("tools/list"), modern("tools/list"))
    check_headers(
        headers("tools/call", **{"mcp-name": " echo "}), modern("tools/call", name="echo")
    )
    check_headers(
        headers("resources/read", **{"mcp-name": encoded("memo://notes/é")}),
        modern("resources/read", uri="memo://notes/é"),
    )
    check_headers(headers("prompts/get", **{"mcp-name": "ask"}), modern("prompts/get", name="ask"))
    for method in ("tasks/get", "tasks/update", "tasks/cancel"):
        check_headers(headers(method, **{"mcp-name": "t-1"}), modern(method, taskId="t-1"))


@pytest.mark.parametrize(
    ("sent", "body"),
    [
        ({"mcp-method": "tools/list"}, modern("tools/list")),  # no MCP-Protocol-Version
        (
            {"mcp-protocol-version": "2025-11-25", "mcp-method": "tools/list"},
            modern("tools/list"),
        ),
        ({"mcp-protocol-version": MODERN}, modern("tools/list")),  # no Mcp-Method
        (headers("prompts/list"), modern("tools/list")),
        (headers("TOOLS/LIST"), modern("tools/list")),  # values are case-sensitive
        (headers("tools/call"), modern("tools/call", name="echo")),  # no Mcp-Name
        (headers("tools/call", **{"mcp-name": "shout"}), modern("tools/call", name="echo")),
        (headers("resources/read", **{"mcp-name": "memo://a"}), modern("resources/read", uri="b")),
        (headers("prompts/get", **{"mcp-name": encoded("as")}), modern("prompts/get", name="ask")),
        # tasks "Streamable HTTP: Routing Headers": Mcp-Name MUST be params.taskId.
        (headers("tasks/update", **{"mcp-name": "t-2"}), modern("tasks/update", taskId="t-1")),
        (headers("tasks/cancel", **{"mcp-name": "T-1"}), modern("tasks/cancel", taskId="t-1")),
    ],
)
def test_missing_or_mismatched_headers_are_rejected(sent: dict[str, str], body: Request) -> None:
    with pytest.raises(HeaderMismatch, match="Header mismatch"):
        check_headers(sent, body)


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
def test_a_tasks_request_without_mcp_name_is_served_by_its_body(method: str) -> None:
    # The decision: the header is the client's duty, for intermediaries; a server holding the
    # request serves it by params.taskId (FastMCP 4.1.4's client sends none: refused, its
    # tasks looked failed while their work went on). A header that disagrees is refused.
    check_headers(headers(method), modern(method, taskId="t-1"))
    with pytest.raises(HeaderMismatch, match="does not match body taskId"):
        check_headers(headers(method, **{"mcp-name": "t-2"}), modern(method, taskId="t-1"))
    with pytest.raises(HeaderMismatch, match="missing Mcp-Name"):
        check_headers(headers("tools/call"), modern("tools/call", name="echo"))


def test_a_header_mismatch_is_400_with_the_transport_s_own_code() -> None:
    assert HEADER_MISMATCH == -32020
    assert http_status(HEADER_MISMATCH) == 400


# -- x-mcp-header parameters --------------------------------------------------------------------


SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "priority": {"type": "integer", "x-mcp-header": "Priority"},
        "verbose": {"type": "boolean", "x-mcp-header": "Verbose"},
        "ratio": {"type": "number", "x-mcp-header": "Ratio"},  # numbers may not be mirrored
        "bad": {"type": "string", "x-mcp-header": "Bad Name"},  # not a token
        "target": {
            "type": "object",
            "properties": {"zone": {"type": "string", "x-mcp-header": "Zone"}},
        },
        "tags": {"type": "array", "items": {"type": "string", "x-mcp-header": "Tag"}},
        "query": {"type": "string"},
    },
}


def test_only_valid_statically_reachable_annotations_are_mirrored() -> None:
    assert mirrored_params(SCHEMA) == (
        MirroredParam(("region",), "mcp-param-region", "string"),
        MirroredParam(("priority",), "mcp-param-priority", "integer"),
        MirroredParam(("verbose",), "mcp-param-verbose", "boolean"),
        MirroredParam(("target", "zone"), "mcp-param-zone", "string"),
    )


def call(**arguments: Any) -> Request:
    return modern("tools/call", name="query", arguments=arguments)


def call_headers(**params: str) -> dict[str, str]:
    return headers(
        "tools/call", **{"mcp-name": "query"}, **{f"mcp-param-{k}": v for k, v in params.items()}
    )


MIRRORED = mirrored_params(SCHEMA)


def test_mirrored_parameters_that_match_pass() -> None:
    check_headers(
        call_headers(region="us-west1", priority="42.0", verbose="false", zone=encoded(" z ")),
        call(region="us-west1", priority=42, verbose=False, target={"zone": " z "}),
        MIRRORED,
    )
    check_headers(call_headers(priority="-7"), call(priority=-7), MIRRORED)
    check_headers(call_headers(priority="0"), call(priority=0), MIRRORED)
    # "Parameter value is null" / "not in arguments": no header expected.
    check_headers(call_headers(), call(region=None, query="SELECT 1"), MIRRORED)


@pytest.mark.parametrize(
    ("sent", "arguments"),
    [
        ({}, {"region": "us-west1"}),  # the client omitted the header: MUST reject
        ({"region": "us-east1"}, {"region": "us-west1"}),
        ({"region": "=?base64?SGVsbG8?="}, {"region": "Hello"}),  # invalid padding
        ({"priority": "43"}, {"priority": 42}),
        ({"priority": "forty-two"}, {"priority": 42}),
        ({"priority": str(2**53)}, {"priority": 2**53}),  # outside JavaScript's safe range
        # Only plain decimal text: what a proxy reads must be what the server acts on.
        ({"priority": "4_2"}, {"priority": 42}),
        ({"priority": "+42"}, {"priority": 42}),
        ({"priority": "0042"}, {"priority": 42}),
        ({"priority": "42.00000000000000001"}, {"priority": 42}),
        ({"priority": "4.2e1"}, {"priority": 42}),
        ({"priority": encoded("\u0664\u0662")}, {"priority": 42}),  # Arabic-Indic digits
        ({"priority": encoded(" 42 ")}, {"priority": 42}),
        ({"verbose": "True"}, {"verbose": True}),
        ({"verbose": "1"}, {"verbose": True}),
        ({"zone": "a"}, {"target": {"zone": "b"}}),
        ({"region": "caf\u00e9"}, {}),  # a header with invalid characters, even unexpected
    ],
)
def test_mirrored_parameters_that_do_not_match_are_rejected(
    sent: dict[str, str], arguments: dict[str, Any]
) -> None:
    with pytest.raises(HeaderMismatch, match="Mcp-Param-"):
        check_headers(call_headers(**sent), call(**arguments), MIRRORED)


# -- the legacy era and statuses ----------------------------------------------------------------


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18", "2025-03-26", " 2025-11-25\t"])
def test_a_session_request_may_name_any_legacy_version(version: str) -> None:
    # 2025-11-25 basic/transports "Protocol Version Header": the negotiated version is sent on
    # every request after initialize.
    assert legacy_version_problem(version) is None


def test_a_session_request_may_omit_the_version_header() -> None:
    # "If the server does not receive an MCP-Protocol-Version header ... SHOULD assume
    # protocol version 2025-03-26": a legacy version, so the session's own is used.
    assert legacy_version_problem(None) is None


@pytest.mark.parametrize("version", [MODERN, "2024-01-01", "", "x" * 10_000])
def test_a_session_request_naming_another_version_is_refused(version: str) -> None:
    # "... invalid or unsupported MCP-Protocol-Version, it MUST respond with 400 Bad Request".
    problem = legacy_version_problem(version)
    assert problem is not None
    assert "2025-11-25" in problem
    assert len(problem) < 400  # the client's value is clipped


@pytest.mark.parametrize(
    ("code", "malformed", "status"),
    [
        (-32601, False, 404),
        (-32700, False, 400),
        (-32600, False, 400),
        (-32021, False, 400),
        (-32022, False, 400),
        (-32602, True, 400),  # a missing _meta field (basic/index)
        (-32602, False, 200),  # invalid tool arguments: the request itself was fine
        (-32603, False, 200),
        (-32002, False, 200),
    ],
)
def test_each_error_class_travels_with_its_status(code: int, malformed: bool, status: int) -> None:
    assert http_status(code, malformed=malformed) == status


# -- serving without a token -------------------------------------------------------------------


def test_login_accounts_counts_the_other_people_who_can_log_in() -> None:
    passwd = [
        (0, "/bin/bash"),  # root
        (33, "/usr/sbin/nologin"),  # a service
        (1000, "/bin/bash"),  # the server's own account
        (1001, "/bin/zsh"),
        (1002, "/usr/sbin/nologin"),  # a person's uid, but no login
        (1003, "/bin/false"),
        (1004, ""),
        (65534, "/bin/sh"),  # nobody
        (1001, "/bin/zsh"),  # a second name for uid 1001 is not a second person
    ]
    assert login_accounts(passwd, own_uid=1000) == 1
    assert login_accounts(passwd, own_uid=1001) == 1
    assert login_accounts(passwd, own_uid=0) == 2
    assert login_accounts([(0, "/bin/sh"), (1000, "/bin/bash")], own_uid=1000) == 0


def nobody_asked() -> int:
    raise AssertionError("the passwd database is read only when a warning may be due")


def test_a_loopback_server_without_a_token_warns_only_where_others_log_in() -> None:
    warning = access_warning(LOOPBACK, "127.0.0.1", lambda: 2, "MRTR_HTTP_TOKEN")
    assert warning is not None
    assert "MRTR_HTTP_TOKEN" in warning
    assert "\n" not in warning
    assert access_warning(LOOPBACK, "127.0.0.1", lambda: 0, "MRTR_HTTP_TOKEN") is None
    guarded = AccessPolicy.for_bind_address("127.0.0.1", bearer_token="s3cret-token")
    assert access_warning(guarded, "127.0.0.1", nobody_asked, "MRTR_HTTP_TOKEN") is None


def test_a_server_bound_beyond_loopback_without_a_token_always_warns() -> None:
    warning = access_warning(EVERYWHERE, "0.0.0.0", nobody_asked, "MRTR_HTTP_TOKEN")  # noqa: S104
    assert warning is not None
    assert "anyone who can reach this address" in warning
    guarded = AccessPolicy.for_bind_address("0.0.0.0", bearer_token="s3cret-token")  # noqa: S104
    assert access_warning(guarded, "0.0.0.0", 3, "MRTR_HTTP_TOKEN") is None  # noqa: S104


def test_named_tokens_alone_are_a_token_for_the_warning() -> None:
    # MRTR_HTTP_TOKENS_FILE without MRTR_HTTP_TOKEN: every request needs one of its tokens.
    for host in ("127.0.0.1", "0.0.0.0"):  # noqa: S104
        named = AccessPolicy.for_bind_address(host, named_tokens=(("alice", "s3cret-token"),))
        assert not named.authorised(None)
        assert access_warning(named, host, nobody_asked, "MRTR_HTTP_TOKEN") is None


# -- the request head ---------------------------------------------------------------------------

LIMIT = 64 * 1024


def request_head(size: int, end: bytes = b"\r\n\r\n") -> bytes:
    """A request head of exactly `size` bytes, ended by `end`."""
    start = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: "
    assert size >= len(start) + len(end)
    return start + b"a" * (size - len(start) - len(end)) + end


def metered(chunks: list[bytes], limit: int = LIMIT) -> tuple[bool, int, bool]:
    """Feed `chunks` as the reads of one connection: (over the limit?, head size, ended?)."""
    meter = HeadMeter(limit)
    for chunk in chunks:
        meter.feed(chunk)
        if meter.over or meter.ended:
            break
    return meter.over, meter.size, meter.ended


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({0, len(data), *(cut % (len(data) + 1) for cut in cuts)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


@pytest.mark.parametrize("size", [LIMIT, LIMIT + 1, 70_000, 10 * LIMIT])
def test_a_head_is_measured_the_same_in_one_read_or_a_byte_at_a_time(size: int) -> None:
    data = request_head(size) + b'{"jsonrpc": "2.0"}' * 1000
    for reads in ([data], [data[i : i + 1] for i in range(min(len(data), 2 * LIMIT))]):
        over, counted, ended = metered(reads)
        assert over == (size > LIMIT)
        if not over:
            assert (counted, ended) == (size, True)


def test_the_head_ends_at_its_first_empty_line_and_the_body_is_not_counted() -> None:
    meter = HeadMeter(LIMIT)
    head = request_head(200)
    assert meter.feed(head + b"\r\n\r\n" + b"x" * LIMIT) == 200
    assert (meter.ended, meter.size, meter.over) == (True, 200, False)
    assert meter.feed(b"more") == 0
    for end in (b"\n\n", b"\r\n\n", b"\n\r\n"):  # bare LFs, which lenient parsers take
        assert metered([request_head(300, end) + b"x" * (2 * LIMIT)]) == (False, 300, True)


def test_empty_lines_before_the_request_line_count_but_do_not_end_the_head() -> None:
    assert metered([b"\r\n" * 100 + request_head(100)]) == (False, 300, True)
    assert metered([b"\r\n" * LIMIT])[0]
    meter = HeadMeter(LIMIT)
    for _ in range(10):
        meter.feed(b"\r\n\r\n")
    assert (meter.ended, meter.size) == (False, 40)


def test_a_head_that_began_in_an_earlier_read_ends_at_its_first_empty_line() -> None:
    meter = HeadMeter(LIMIT, begun=True)
    assert meter.feed(b"\r\n\r\nbody") == 4
    assert meter.ended


@given(
    st.integers(min_value=60, max_value=3 * LIMIT),
    st.lists(st.integers(min_value=0), max_size=40),
    st.sampled_from([b"\r\n\r\n", b"\n\n", b"\r\n\n"]),
    st.integers(min_value=0, max_value=4),
)
def test_however_the_reads_split_the_bytes_the_verdict_is_the_same(
    size: int, cuts: list[int], end: bytes, blank_lines: int
) -> None:
    data = b"\r\n" * blank_lines + request_head(size, end) + b"\r\n\r\n{}\n\n" * 50
    head = 2 * blank_lines + size
    over, counted, ended = metered(split(data, cuts))
    assert over == (head > LIMIT)
    if not over:
        assert (counted, ended) == (head, True)
    else:
        assert counted > LIMIT


# -- the verdicts on a request's head, in their order ---------------------------------------------


@given(
    endpoint=st.booleans(),
    method=st.sampled_from(["POST", "GET", "DELETE", "PUT", "OPTIONS"]),
    session=st.booleans(),
    problem=st.none() | st.just("Forbidden: Host 'evil.example' is not allowed"),
    authorised=st.booleans(),
)
def test_the_head_is_judged_in_order_404_403_405_401(
    endpoint: bool, method: str, session: bool, problem: str | None, authorised: bool
) -> None:
    refusal = refuse_request(
        path_is_endpoint=endpoint,
        method=method,
        has_session=session,
        access_problem=problem,
        authorised=authorised,
    )
    # "Security & Endpoint": Host and Origin are judged before the method or the token is
    # looked at; "Backward Compatibility": GET and DELETE only with a 2025-11-25 session.
    method_allowed = method == "POST" or (method in ("GET", "DELETE") and session)
    expected = (
        404
        if not endpoint
        else 403
        if problem is not None
        else 405
        if not method_allowed
        else 401
        if not authorised
        else None
    )
    assert (refusal and refusal.status) == expected
    if refusal is not None and refusal.status == 405:
        assert refusal.headers == ((b"allow", b"POST"),)
    if refusal is not None and refusal.status == 401:
        assert refusal.headers == ((b"www-authenticate", b'Bearer realm="mcp"'),)
    if refusal is not None and refusal.status == 404:
        assert refusal.code is None  # not the MCP endpoint: no JSON-RPC body


@pytest.mark.parametrize(
    ("content_type", "accepts", "status"),
    [
        ("application/json", True, None),
        ("Application/JSON; charset=utf-8", True, None),
        ("text/plain", True, 415),
        ("", True, 415),
        ("text/plain", False, 415),  # the body's type first: it is what cannot be read
        ("application/json", False, 406),
    ],
)
def test_a_post_sends_json_and_accepts_it(
    content_type: str, accepts: bool, status: int | None
) -> None:
    refusal = refuse_post(content_type=content_type, accepts_json=accepts)
    assert (refusal and refusal.status) == status


def test_a_session_get_accepts_an_event_stream_before_its_version_is_read() -> None:
    assert refuse_session_get(accepts_event_stream=True, version_problem=None) is None
    refused = refuse_session_get(accepts_event_stream=False, version_problem="bad version")
    assert refused is not None and refused.status == 406
    refused = refuse_session_get(accepts_event_stream=True, version_problem="bad version")
    assert refused is not None and (refused.status, refused.message) == (400, "bad version")
