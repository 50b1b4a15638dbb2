"""Property-based fuzzing (hypothesis) of what reads attacker-controlled input.

- ``parse_line`` raises nothing but ``InvalidMessage``, whatever the bytes.
- ``Server.handle_request`` never raises and always returns exactly one well-formed response,
  whatever the params, in either era, and that response encodes as strict JSON on one line.
- ``RequestStateCodec.verify`` raises nothing but ``InvalidRequestState``, whatever the object.

2026-07-28 basic/patterns/mrtr: "servers MUST treat requestState as an attacker-controlled input".
"""

from __future__ import annotations

import base64
import json
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from mrtr_runtime import (
    Context,
    InputRequired,
    Registry,
    RootsResult,
    elicit_form,
    list_roots,
    sample,
)
from mrtr_runtime._answers import ElicitResult
from mrtr_runtime._jsonrpc import (
    InvalidMessage,
    Notification,
    Request,
    Response,
    encode,
    parse_line,
)
from mrtr_runtime._router import Session
from mrtr_runtime._tokens import (
    Binding,
    InvalidRequestState,
    KeyRing,
    RequestStateCodec,
    RoundState,
    SigningKey,
    _mac_key,
    digest_arguments,
)
from mrtr_runtime.server import Server
from mrtr_runtime.testing import RpcError

MODERN = "2026-07-28"
KEY = SigningKey(bytes(range(32)))
OTHER_KEY = SigningKey(bytes(range(50, 82)))
NOW = 1_800_000_000.0
CODEC = RequestStateCodec(KeyRing(KEY), ttl_seconds=600, clock=lambda: NOW)
BINDING = Binding("tools/call", "ask", digest_arguments({}))
REASONS = {"malformed", "signature", "expired", "binding", "oversized", "unknown key"}
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --- strategies ---------------------------------------------------------------------------------

# What json.loads can produce from a well-formed line (finite floats: NaN and Infinity are
# refused by the parser; see test_bad_input for 1e400).
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=24)
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=24,
)
json_objects = st.dictionaries(st.text(max_size=10), json_values, max_size=6)
request_ids = st.integers(min_value=-(2**63), max_value=2**63) | st.text(max_size=12)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _signed(raw: bytes) -> str:
    """Any payload bytes under a valid MAC of KEY (audience ""): past the signature check."""
    signing_input = f"m1.{KEY.key_id}.{_b64(raw)}"
    mac = _mac_key(KEY.secret, b"")
    mac.update(signing_input.encode("ascii"))
    return f"{signing_input}.{_b64(mac.digest())}"


# --- parse_line ----------------------------------------------------------------------------------


def parses_or_refuses(raw: bytes) -> None:
    try:
        message = parse_line(raw)
    except InvalidMessage as error:
        assert isinstance(error.code, int)
        assert error.request_id is None or isinstance(error.request_id, str | int)
        return
    assert isinstance(message, Request | Notification | Response)
    if isinstance(message, Request | Notification):
        assert isinstance(message.method, str)
        assert isinstance(message.params, dict)
    if isinstance(message, Request):
        assert isinstance(message.id, str | int) and not isinstance(message.id, bool)
    if isinstance(message, Response):
        # A response to nothing we can match (id null or invalid) is kept only to be ignored.
        assert message.id is None or (
            isinstance(message.id, str | int) and not isinstance(message.id, bool)
        )


@FUZZ
@given(st.binary(max_size=600))
def test_parse_line_raises_only_invalid_message_for_any_bytes(raw: bytes) -> None:
    parses_or_refuses(raw)


@FUZZ
@given(json_values)
def test_parse_line_raises_only_invalid_message_for_any_json_value(value: Any) -> None:
    parses_or_refuses(json.dumps(value).encode())


message_keys = st.sampled_from(["jsonrpc", "id", "method", "params", "result", "error"])


@FUZZ
@given(
    st.dictionaries(message_keys, json_values | st.just("2.0") | st.just("tools/list"), max_size=6),
    st.dictionaries(st.text(max_size=6), json_values, max_size=2),
)
def test_parse_line_raises_only_invalid_message_for_any_message_shaped_object(
    fields: dict[str, Any], extra: dict[str, Any]
) -> None:
    parses_or_refuses(json.dumps({**extra, **fields}).encode())


VALID_LINE = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "ask", "arguments": {"n": 1}, "_meta": {}},
    },
    separators=(",", ":"),
).encode()


@FUZZ
@given(st.integers(0, len(VALID_LINE) - 1), st.binary(min_size=0, max_size=4), st.integers(0, 3))
def test_parse_line_raises_only_invalid_message_for_a_mutated_request(
    where: int, insert: bytes, delete: int
) -> None:
    parses_or_refuses(VALID_LINE[:where] + insert + VALID_LINE[where + delete :])


@FUZZ
@given(st.text(max_size=200))
def test_parse_line_raises_only_invalid_message_for_any_text_even_lone_surrogates(
    text: str,
) -> None:
    parses_or_refuses(text.encode("utf-8", "surrogatepass"))


# --- Server.handle_request -----------------------------------------------------------------------


class NameForm(BaseModel):
    name: str


registry = Registry()


@registry.tool()
async def echo(value: Any = None) -> dict[str, Any]:
    """Echo the value as structured content."""
    return {"value": value}


@registry.tool()
async def ask(n: int = 0, *, ctx: Context) -> str | InputRequired:
    """Ask for a name, a sample and the roots, then answer."""
    name = ctx.input_response_as("name", ElicitResult[NameForm])
    if name is None:
        return ctx.request_input({"name": elicit_form("Name?", NameForm)})
    if ctx.input_response_as("roots", RootsResult) is None:
        requests = {"roots": list_roots()}
        if ctx.can_request(sample("hi", max_tokens=5)):
            requests["sample"] = sample("hi", max_tokens=5)
        return ctx.request_input(requests)
    return f"{name.action} {n}"


@registry.tool()
def blocking(n: int = 0) -> str:
    """A plain def tool (runs in a worker thread)."""
    return str(n)


@registry.tool()
async def failing(n: int = 0) -> str:
    """Always fails."""
    raise ValueError(f"failing {n}")


@registry.prompt()
async def poem(topic: str = "sea", *, ctx: Context) -> str | InputRequired:
    """A prompt that asks first."""
    answer = ctx.form_answer("style", NameForm)
    if answer is None:
        return ctx.request_input({"style": elicit_form("Style?", NameForm)})
    return f"A poem about {topic}"


@registry.resource("mem://greeting")
async def greeting() -> str:
    """A fixed resource."""
    return "hello"


@registry.resource_template("mem://items/{item}")
async def item(item: str) -> str:
    """A templated resource."""
    return item


SERVER = Server(name="fuzz", version="0", registry=registry, signing=CODEC)
VALID_TOKEN = CODEC.mint(
    BINDING, {"name": {"action": "accept", "content": {"name": "Ada"}}}, {"roots": "roots/list"}
)


class FuzzPeer:
    """Legacy era: answers the server's requests with whatever the example says."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        json.dumps(params)

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(self.answer, dict):
            raise RpcError(-32603, "no")
        return self.answer


capabilities = st.one_of(
    json_objects,
    st.fixed_dictionaries(
        {},
        optional={
            "elicitation": st.sampled_from(
                [{}, {"form": {}}, {"url": {}}, {"form": {}, "url": {}}, "yes", None, []]
            ),
            "sampling": st.sampled_from([{}, {"tools": {}}, True, None]),
            "roots": st.sampled_from([{}, {"listChanged": True}, 1]),
        },
    ),
)
metas = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {
            "io.modelcontextprotocol/protocolVersion": st.sampled_from(
                [MODERN, "2025-11-25", "", 5]
            ),
            "io.modelcontextprotocol/clientCapabilities": capabilities,
        },
        optional={"progressToken": json_values, "io.modelcontextprotocol/clientInfo": json_values},
    ),
)
params_strategy = st.fixed_dictionaries(
    {},
    optional={
        "_meta": metas,
        "name": st.sampled_from(["echo", "ask", "blocking", "failing", "poem", "nope"])
        | json_values,
        "arguments": json_objects | json_values,
        "inputResponses": st.dictionaries(
            st.sampled_from(["name", "roots", "sample", "style", "x"]),
            json_objects
            | json_values
            | st.just({"action": "accept", "content": {"name": "Ada"}})
            | st.just({"roots": [{"uri": "file:///"}]})
            | st.just(
                {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}
            ),
            max_size=3,
        )
        | json_values,
        "requestState": st.just(VALID_TOKEN) | st.text(max_size=40) | json_values,
        "uri": st.sampled_from(["mem://greeting", "mem://items/a", "mem://items/", "x"])
        | json_values,
        "cursor": json_values,
        "protocolVersion": st.sampled_from(["2025-11-25", "2024-11-05", "1999"]) | json_values,
        "capabilities": capabilities | json_values,
    },
)
methods = st.sampled_from(
    [
        "tools/call",
        "tools/list",
        "prompts/get",
        "prompts/list",
        "resources/read",
        "resources/list",
        "resources/templates/list",
        "server/discover",
        "initialize",
        "ping",
        "completion/complete",
    ]
) | st.text(max_size=12)


@FUZZ
@given(
    request_id=request_ids,
    method=methods,
    params=params_strategy,
    legacy=st.booleans(),
    client_answer=json_values | st.just({"action": "accept", "content": {"name": "Ada"}}),
)
def test_handle_request_always_returns_exactly_one_well_formed_response(
    request_id: str | int, method: str, params: dict[str, Any], legacy: bool, client_answer: Any
) -> None:
    session = Session()
    if legacy:
        session.legacy_version = "2025-11-25"

    async def serve() -> dict[str, Any]:
        with anyio.fail_after(10):
            return await SERVER.handle_request(
                Request(request_id, method, params), session, FuzzPeer(client_answer)
            )

    response = anyio.run(serve)
    assert response["jsonrpc"] == "2.0"
    assert response["id"] == request_id
    assert ("result" in response) != ("error" in response)
    if "error" in response:
        error = response["error"]
        assert isinstance(error["code"], int) and isinstance(error["message"], str)
        assert error["code"] != -32603, "a client's bad params are never an internal error"
    else:
        assert isinstance(response["result"], dict)
        meta = params.get("_meta")
        if (
            method != "initialize"
            and isinstance(meta, dict)
            and "io.modelcontextprotocol/protocolVersion" in meta
        ):
            # basic/index: every 2026-07-28 result carries resultType.
            assert "resultType" in response["result"]
    wire = encode(response)
    assert wire.endswith(b"\n") and wire.count(b"\n") == 1

    def reject(name: str) -> Any:
        raise ValueError(name)

    assert json.loads(wire, parse_constant=reject) == json.loads(wire)


# --- the requestState verifier -------------------------------------------------------------------


def verify_or_refuse(
    codec: RequestStateCodec, token: object, binding: Binding = BINDING
) -> RoundState | None:
    try:
        state = codec.verify(token, binding)
    except InvalidRequestState as error:
        assert error.reason in REASONS
        assert str(error) == error.reason
        assert error.__cause__ is None
        return None
    assert isinstance(state, RoundState)
    assert all(isinstance(answer, dict) for answer in state.answers.values())
    assert all(isinstance(method, str) for method in state.asked.values())
    assert type(state.expires_at) is int
    return state


anything = st.one_of(
    json_values,
    st.binary(max_size=64),
    st.builds(object),
    st.sets(st.integers(), max_size=3),
    st.tuples(st.text(max_size=5)),
    st.complex_numbers(),
)


@FUZZ
@given(anything)
def test_verify_raises_only_invalid_request_state_for_any_object(token: object) -> None:
    assert verify_or_refuse(CODEC, token) is None


@FUZZ
@given(st.text(max_size=300))
def test_verify_raises_only_invalid_request_state_for_any_string(token: str) -> None:
    assert verify_or_refuse(CODEC, token) is None


b64_parts = st.binary(max_size=80).map(_b64) | st.text(alphabet="ABCxyz019-_=+/. ", max_size=60)


@FUZZ
@given(
    st.sampled_from(["m1", "p1", "m2", "M1", ""]),
    st.sampled_from([KEY.key_id, OTHER_KEY.key_id, "00000000", KEY.key_id.upper(), "zzzzzzzz", ""]),
    b64_parts,
    b64_parts,
)
def test_verify_raises_only_invalid_request_state_for_token_shaped_strings(
    version: str, kid: str, payload: str, tag: str
) -> None:
    assert verify_or_refuse(CODEC, f"{version}.{kid}.{payload}.{tag}") is None


@FUZZ
@given(st.integers(0, len(VALID_TOKEN) - 1), st.text(max_size=3), st.integers(0, 3))
def test_any_edit_of_a_valid_token_is_refused(where: int, insert: str, delete: int) -> None:
    edited = VALID_TOKEN[:where] + insert + VALID_TOKEN[where + delete :]
    state = verify_or_refuse(CODEC, edited)
    assert (state is not None) == (edited == VALID_TOKEN)


@FUZZ
@given(
    json_values
    | json_objects
    | st.fixed_dictionaries(
        {
            "a": json_values,
            "d": json_values,
            "e": json_values,
            "m": json_values,
            "q": json_values,
            "t": json_values,
        }
    )
)
def test_any_signed_payload_decodes_to_typed_state_or_is_refused(body: Any) -> None:
    # Signed by hand, so any payload gets past the MAC into the strict decoder.
    token = _signed(json.dumps(body).encode())
    verify_or_refuse(CODEC, token, Binding("tools/call", "ask", "x"))


@FUZZ
@given(st.binary(max_size=200))
def test_any_signed_payload_bytes_are_refused_or_typed(raw: bytes) -> None:
    verify_or_refuse(CODEC, _signed(raw))


@FUZZ
@given(st.binary(max_size=200))
def test_any_unsigned_token_is_refused_as_a_forgery(raw: bytes) -> None:
    with pytest.raises(InvalidRequestState, match="signature"):
        CODEC.verify("p1." + _b64(raw), BINDING)


@settings(FUZZ, max_examples=60)
@given(st.dictionaries(st.text(max_size=8), json_objects, max_size=5), json_objects)
def test_minted_tokens_round_trip_or_are_refused_as_oversized(
    answers: dict[str, dict[str, Any]], arguments: dict[str, Any]
) -> None:
    binding = Binding("tools/call", "echo", digest_arguments(arguments))
    try:
        token = CODEC.mint(binding, answers, {key: "elicitation/create" for key in answers})
    except InvalidRequestState as error:
        assert error.reason == "oversized"
        return
    state = CODEC.verify(token, binding)
    assert state.answers == answers
