"""JSON-RPC framing: what a line may hold, and the error each bad line earns (-32700, -32600).

2026-07-28 basic/transports/stdio: newline-delimited JSON-RPC 2.0, one message per line, no
embedded newlines; basic/index: ids are strings or numbers, never null; no batches since
2025-06-18.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrtr_runtime._jsonrpc import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    InvalidMessage,
    Notification,
    Request,
    Response,
    encode,
    error_response,
    parse_json,
    parse_line,
    success_response,
)


def rejection(line: bytes) -> InvalidMessage:
    with pytest.raises(InvalidMessage) as caught:
        parse_line(line)
    return caught.value


@pytest.mark.parametrize(
    "line",
    [
        b"not json",
        b"{",
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"',
        b"",
        b'{"jsonrpc": "2.0", "id": 1, "method": "x", "params": {"n": NaN}}',
        b'{"jsonrpc": "2.0", "id": 1, "method": "x", "params": {"n": Infinity}}',
        b"[" * 100_000,
    ],
    ids=["words", "open-brace", "truncated", "empty", "nan", "infinity", "deep-nesting"],
)
def test_a_line_that_is_not_json_is_a_parse_error_with_no_id(line: bytes) -> None:
    error = rejection(line)
    assert error.code == PARSE_ERROR
    assert error.request_id is None


@pytest.mark.parametrize(
    "line",
    [b'{"jsonrpc": "2.0", "id": 1, "method": "\xff\xfe"}', b"\xc3\x28", b'"\xed\xa0\x80"'],
    ids=["bad-byte-in-method", "bad-continuation", "encoded-surrogate"],
)
def test_invalid_utf8_is_a_parse_error(line: bytes) -> None:
    assert rejection(line).code == PARSE_ERROR


@pytest.mark.parametrize("line", [b"1", b'"tools/list"', b"null", b"true", b"3.5"])
def test_a_json_value_that_is_not_an_object_is_an_invalid_request(line: bytes) -> None:
    error = rejection(line)
    assert error.code == INVALID_REQUEST
    assert error.request_id is None


@pytest.mark.parametrize(
    "line",
    [b"[]", b'[{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}]'],
    ids=["empty-batch", "batch-of-one"],
)
def test_a_batch_is_refused_as_an_invalid_request(line: bytes) -> None:
    error = rejection(line)
    assert error.code == INVALID_REQUEST
    assert "batch" in error.message


@pytest.mark.parametrize(
    "version", [None, "1.0", "2", 2.0, ""], ids=["missing", "1.0", "2", "number", "empty"]
)
def test_a_wrong_jsonrpc_version_is_an_invalid_request_that_keeps_the_id(version: object) -> None:
    message: dict[str, object] = {"id": 7, "method": "tools/list"}
    if version is not None:
        message["jsonrpc"] = version
    error = rejection(json.dumps(message).encode())
    assert error.code == INVALID_REQUEST
    assert error.request_id == 7


@pytest.mark.parametrize(
    "raw_id",
    ["true", "false", "null", "1.5", "1.0", '{"a": 1}', "[1]"],
    ids=["true", "false", "null", "float", "integral-float", "object", "array"],
)
def test_a_request_id_that_is_not_a_string_or_integer_is_an_invalid_request(raw_id: str) -> None:
    line = b'{"jsonrpc": "2.0", "id": ' + raw_id.encode() + b', "method": "tools/list"}'
    error = rejection(line)
    assert error.code == INVALID_REQUEST
    # The id cannot be trusted, so the error response carries "id": null.
    assert error.request_id is None


@pytest.mark.parametrize(
    "message",
    [{"jsonrpc": "2.0", "id": 1}, {"jsonrpc": "2.0"}, {"jsonrpc": "2.0", "id": True}],
    ids=["id-only", "nothing", "bool-id-only"],
)
def test_a_message_with_neither_method_nor_result_is_an_invalid_request(
    message: dict[str, object],
) -> None:
    assert rejection(json.dumps(message).encode()).code == INVALID_REQUEST


def test_a_method_that_is_not_a_string_is_an_invalid_request_that_keeps_the_id() -> None:
    error = rejection(b'{"jsonrpc": "2.0", "id": "a", "method": 5}')
    assert (error.code, error.request_id) == (INVALID_REQUEST, "a")


@pytest.mark.parametrize("params", ["[1, 2]", '"x"', "3"])
def test_params_that_are_not_an_object_are_invalid_params(params: str) -> None:
    line = (
        b'{"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": ' + params.encode() + b"}"
    )
    error = rejection(line)
    assert (error.code, error.request_id) == (INVALID_PARAMS, 4)


def test_a_request_keeps_its_string_or_integer_id_and_params() -> None:
    request = parse_line(
        b'{"jsonrpc": "2.0", "id": "r-1", "method": "tools/call", "params": {"name": "x"}}'
    )
    assert request == Request("r-1", "tools/call", {"name": "x"})
    assert parse_line(b'{"jsonrpc": "2.0", "id": 0, "method": "m"}') == Request(0, "m", {})


def test_null_or_absent_params_become_an_empty_object() -> None:
    assert parse_line(b'{"jsonrpc": "2.0", "id": 1, "method": "m", "params": null}') == Request(
        1, "m", {}
    )


def test_a_message_without_an_id_is_a_notification() -> None:
    message = parse_line(
        b'{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}}'
    )
    assert message == Notification("notifications/cancelled", {"requestId": 3})


def test_a_client_response_is_parsed_for_the_legacy_bridge() -> None:
    assert parse_line(
        b'{"jsonrpc": "2.0", "id": "server-1", "result": {"action": "cancel"}}'
    ) == Response("server-1", {"action": "cancel"}, None)
    failed = parse_line(b'{"jsonrpc": "2.0", "id": 2, "error": {"code": -1, "message": "no"}}')
    assert failed == Response(2, None, {"code": -1, "message": "no"})


@pytest.mark.parametrize("raw_id", ["null", "true", "1.5"])
def test_a_response_with_an_unusable_id_is_a_response_to_nothing_never_an_error(
    raw_id: str,
) -> None:
    # JSON-RPC forbids answering a response; id null is how a client says it could not
    # parse one of ours.
    line = (
        b'{"jsonrpc": "2.0", "id": '
        + raw_id.encode()
        + b', "error": {"code": -32700, "message": "x"}}'
    )
    assert parse_line(line) == Response(None, None, {"code": -32700, "message": "x"})


@pytest.mark.parametrize("number", [b"1e400", b"-1e400", b"1.5e309"])
def test_a_number_too_large_for_a_float_is_a_parse_error(number: bytes) -> None:
    # It would parse to inf, which can only be written back out as the non-JSON Infinity.
    line = b'{"jsonrpc": "2.0", "id": 1, "method": "m", "params": {"n": ' + number + b"}}"
    assert rejection(line).code == PARSE_ERROR


def test_a_carriage_return_line_ending_is_not_part_of_the_message() -> None:
    assert parse_line(b'{"jsonrpc": "2.0", "id": 1, "method": "m"}\r'.rstrip(b"\r")) == Request(
        1, "m", {}
    )


def test_encode_writes_exactly_one_ascii_line_even_for_newlines_and_non_ascii() -> None:
    line = encode(success_response(1, {"text": "line one\nline two \u2028 caf\u00e9 \ud800"}))
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    assert line.isascii()
    assert json.loads(line)["result"]["text"] == "line one\nline two \u2028 caf\u00e9 \ud800"


def test_encode_never_writes_nan_or_infinity_which_are_not_json() -> None:
    # RFC 8259 section 6: NaN and Infinity are not JSON; a client's strict parser rejects the
    # whole line, so the wire must never carry them.
    for value in (float("nan"), float("inf"), float("-inf")):
        with pytest.raises(ValueError):
            encode(success_response(1, {"value": value}))


def test_error_responses_carry_data_only_when_given() -> None:
    assert error_response(None, PARSE_ERROR, "Parse error") == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": PARSE_ERROR, "message": "Parse error"},
    }
    with_data = error_response(3, -32022, "Unsupported", {"supported": ["2026-07-28"]})
    assert with_data["error"]["data"] == {"supported": ["2026-07-28"]}


# -- duplicate names (RFC 8259 section 4) ------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "name"),
    [
        (b'{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"tools/list"}', "method"),
        (
            b'{"jsonrpc":"2.0","id":1,"method":"tools/call",'
            b'"params":{"name":"plan_release","name":"deploy_to_aws"}}',
            "name",
        ),
        (b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":[{"k":1, "k" :2}]}}', "k"),
        (b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"u":"a:b","x":1,"x":2}}', "x"),
        (b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"\\u0061":1,"a":2}}', "a"),
    ],
    ids=["top-level", "tool-name", "nested-in-a-list", "colon-in-a-string", "escaped-name"],
)
def test_a_name_twice_in_any_object_is_an_invalid_request_that_keeps_the_id(
    line: bytes, name: str
) -> None:
    error = rejection(line)
    assert (error.code, error.request_id) == (INVALID_REQUEST, 1)
    assert error.message == f"Invalid request: duplicate name {name!r} in a JSON object"


def test_a_duplicated_id_is_refused_without_an_id() -> None:
    error = rejection(b'{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/list"}')
    assert (error.code, error.request_id) == (INVALID_REQUEST, None)


def test_a_name_twice_before_broken_json_is_still_a_parse_error() -> None:
    error = rejection(b'{"jsonrpc":"2.0","id":1,"params":{"a":1,"a":2},}')
    assert (error.code, error.request_id) == (PARSE_ERROR, None)


def test_a_name_twice_in_a_batch_or_a_server_message_is_refused_by_parse_json() -> None:
    with pytest.raises(InvalidMessage) as caught:
        parse_json(b'[{"a":1,"a":1}]')
    assert (caught.value.code, caught.value.request_id) == (INVALID_REQUEST, None)
    with pytest.raises(InvalidMessage):
        parse_json(b'{"jsonrpc":"2.0","id":1,"result":{"content":[],"content":[]}}')


def test_colons_and_quotes_inside_strings_are_not_duplicates() -> None:
    line = (
        b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"a\\":":"\\":b", "u":"http://x:1",'
        b'"q" : "\\"  :", "e":{}}}'
    )
    params = {'a":': '":b', "u": "http://x:1", "q": '"  :', "e": {}}
    assert parse_line(line) == Request(1, "m", params)


def _refusing_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise KeyError("duplicate")
    return result


def reference(text: str) -> object:
    """The slow, obviously strict parser parse_json must agree with."""
    return json.loads(text, object_pairs_hook=_refusing_pairs)


#: Names from a tiny alphabet, so duplicates are common, holding the characters that could fool
#: a count: quotes, colons, backslashes, whitespace.
_names = st.text(alphabet='ab":\\ \t', max_size=3)
_scalars = st.none() | st.booleans() | st.integers() | _names


def _members(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    pairs = st.lists(st.tuples(_names, children), max_size=4).map(lambda p: ("obj", p))
    return st.lists(children, max_size=4) | pairs


_trees = st.recursive(_scalars, _members, max_leaves=20)


def _string(text: str, draw: st.DrawFn) -> str:
    """`text` as a JSON string, each quote written as `\\"` or `\\u0022`."""
    quote = draw(st.sampled_from(['\\"', "\\u0022"]))
    return '"' + "".join(quote if c == '"' else json.dumps(c)[1:-1] for c in text) + '"'


def _write(tree: Any, draw: st.DrawFn) -> str:
    """`tree` as JSON text, objects as written pairs (so a name can repeat), with whitespace
    and escapes chosen by hypothesis."""
    if isinstance(tree, tuple):
        parts = []
        for name, child in tree[1]:
            written = _string(name, draw)
            before = draw(st.sampled_from(["", " ", "\n\t"]))
            parts.append(
                f"{written}{before}:{draw(st.sampled_from(['', ' ']))}{_write(child, draw)}"
            )
        return "{" + ",".join(parts) + "}"
    if isinstance(tree, list):
        return "[" + ", ".join(_write(child, draw) for child in tree) + "]"
    return json.dumps(tree)


@st.composite
def json_texts(draw: st.DrawFn) -> str:
    tree = draw(_members(_trees))
    return _write(tree, draw)


@settings(max_examples=600)
@given(json_texts())
def test_parse_json_refuses_exactly_what_a_strict_parser_refuses(text: str) -> None:
    try:
        expected = reference(text)
    except KeyError:
        with pytest.raises(InvalidMessage) as caught:
            parse_json(text.encode())
        assert caught.value.code == INVALID_REQUEST
        return
    assert parse_json(text.encode()) == expected
