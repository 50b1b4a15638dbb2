"""requestState codec: round trips, tampering, rotation, expiry, replay, audience, no unsigned form,
caps.

2026-07-28 basic/patterns/mrtr: servers MUST treat requestState as attacker-controlled and MUST
reject state that fails verification; they SHOULD bind a TTL and the originating request.
"""

from __future__ import annotations

import base64
import hmac
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mrtr_runtime._tokens import (
    DEFAULT_TTL_SECONDS,
    MAX_TOKEN_CHARS,
    MAX_TTL_SECONDS,
    Binding,
    InvalidRequestState,
    KeyRing,
    RequestStateCodec,
    RoundState,
    SigningKey,
    digest_arguments,
)

NOW = 1_800_000_000.25
TTL = 600
KEY_A = SigningKey(bytes(range(32)))
KEY_B = SigningKey(bytes(range(100, 132)))
ANSWER = {"action": "accept", "content": {"name": "Alice"}}
ARGS = {"stack": "prod-api", "region": "us-east-1"}
BINDING = Binding("tools/call", "deploy", digest_arguments(ARGS))
REASONS = {"malformed", "signature", "expired", "binding", "oversized", "unknown key"}


class Clock:
    """A settable clock for the codec (injected, so expiry is tested without sleeping)."""

    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def codec(
    current: SigningKey = KEY_A,
    previous: tuple[SigningKey, ...] = (),
    *,
    clock: Clock | None = None,
    audience: str = "",
) -> RequestStateCodec:
    return RequestStateCodec(
        KeyRing(current, previous), audience=audience, ttl_seconds=TTL, clock=clock or Clock()
    )


def answers(count: int) -> dict[str, object]:
    return {f"q{i}": dict(ANSWER) for i in range(count)}


def asked(count: int) -> dict[str, str]:
    return {f"q{i}": "elicitation/create" for i in range(count)}


def token(count: int = 2) -> str:
    return codec().mint(BINDING, answers(count), asked(count))


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def payload(**overrides: object) -> dict[str, object]:
    fields: dict[str, object] = {
        "a": {"confirm": ANSWER},
        "d": BINDING.arguments_digest,
        "e": int(NOW) + TTL,
        "m": BINDING.method,
        "q": {"confirm": "elicitation/create"},
        "t": BINDING.target,
    }
    fields.update(overrides)
    return fields


def signed(body: object, key: SigningKey = KEY_A) -> str:
    """A token over any payload (bytes, text or JSON), signed with `key` the way `codec()` signs
    (audience ""): how these tests reach the strict payload decoder past the MAC."""
    if isinstance(body, bytes):
        raw = body
    else:
        raw = (body if isinstance(body, str) else json.dumps(body)).encode("utf-8", "surrogatepass")
    label = b"mrtr-server/requestState/m1/hmac-sha256" + b"\x00\x00"
    derived = hmac.digest(key.secret, label, "sha256")
    signing_input = f"m1.{key.key_id}.{b64(raw)}"
    return f"{signing_input}.{b64(hmac.digest(derived, signing_input.encode(), 'sha256'))}"


def rejected(value: object, with_codec: RequestStateCodec | None = None) -> str:
    """Verify must fail with InvalidRequestState and a short, content-free reason."""
    with pytest.raises(InvalidRequestState) as info:
        (with_codec or codec()).verify(value, BINDING)
    reason = info.value.reason
    assert reason in REASONS
    assert str(info.value) == reason
    assert info.value.__cause__ is None
    return reason


# --- round trips -------------------------------------------------------------------------------


def test_minted_token_round_trips_answers_asked_and_expiry() -> None:
    state = codec().verify(token(2), BINDING)

    assert state == RoundState(answers=answers(2), asked=asked(2), expires_at=int(NOW) + TTL)


@pytest.mark.parametrize("count", [0, 1, 5, 20])
def test_round_trip_holds_for_any_number_of_answers(count: int) -> None:
    state = codec().verify(token(count), BINDING)

    assert state.answers == answers(count)
    assert state.asked == asked(count)


def test_non_ascii_and_lone_surrogate_answers_round_trip() -> None:
    odd = {"w": {"action": "accept", "content": {"name": "Zoë 漢字 \ud800"}}}
    minted = codec().mint(BINDING, odd, {})

    assert minted.isascii()
    assert codec().verify(minted, BINDING).answers == odd


def test_token_has_the_documented_signed_shape() -> None:
    version, kid, body, tag = token().split(".")

    assert (version, kid, len(tag)) == ("m1", KEY_A.key_id, 43)
    assert set(json.loads(base64.urlsafe_b64decode(body + "==="))) == set("adeqmnt")


def test_two_rounds_asking_the_same_thing_in_the_same_second_get_two_tokens() -> None:
    # A confirmation is consumed once, keyed by its token: two conversations must never share
    # one because they asked the same question within a second. Member order still does not
    # matter to what a token says.
    reordered = dict(reversed(list(answers(5).items())))
    first, second = token(5), codec().mint(BINDING, reordered, asked(5))

    assert first != second
    assert codec().verify(first, BINDING) == codec().verify(second, BINDING)


def test_a_token_minted_before_nonces_still_verifies() -> None:
    # A rolling upgrade: a round minted by a server of the previous version carries no "n".
    assert "n" not in payload()
    assert codec().verify(signed(payload()), BINDING).answers == {"confirm": ANSWER}


@pytest.mark.parametrize("nonce", [None, 7, "", "short", "!" * 16, "a" * 17])
def test_a_nonce_that_mint_never_writes_is_refused(nonce: object) -> None:
    with pytest.raises(InvalidRequestState, match="malformed"):
        codec().verify(signed(payload(n=nonce)), BINDING)


def test_minted_tokens_change_with_the_clock() -> None:
    later = codec(clock=Clock(NOW + 1)).mint(BINDING, answers(1), asked(1))

    assert later != token(1)


def test_mint_refuses_answers_that_are_not_objects() -> None:
    with pytest.raises(TypeError):
        codec().mint(BINDING, {"confirm": "yes"}, {})
    with pytest.raises(TypeError):
        codec().mint(BINDING, {}, {"confirm": 3})  # type: ignore[dict-item]


def test_mint_refuses_non_finite_numbers() -> None:
    with pytest.raises(ValueError, match="JSON"):
        codec().mint(BINDING, {"x": {"n": float("nan")}}, {})


@pytest.mark.parametrize("ttl", [0, -1, True, 1.5, MAX_TTL_SECONDS + 1, 86_400])
def test_codec_refuses_a_ttl_that_is_not_an_int_from_1_to_an_hour(ttl: object) -> None:
    with pytest.raises(ValueError, match="ttl"):
        RequestStateCodec(KeyRing(KEY_A), ttl_seconds=ttl)  # type: ignore[arg-type]


def test_default_ttl_is_15_minutes_and_the_cap_an_hour() -> None:
    # 2026-07-28 basic/patterns/mrtr, Security Considerations: "a short expiry (TTL)".
    assert (DEFAULT_TTL_SECONDS, MAX_TTL_SECONDS) == (900, 3600)
    assert RequestStateCodec(KeyRing(KEY_A)).ttl_seconds == 900
    assert RequestStateCodec(KeyRing(KEY_A), ttl_seconds=3600).ttl_seconds == 3600


# --- tampering ---------------------------------------------------------------------------------


def flip(text: str, index: int) -> str:
    replacement = "A" if text[index] != "A" else "B"
    return text[:index] + replacement + text[index + 1 :]


@pytest.mark.parametrize("part", [0, 1, 2, 3], ids=["version", "kid", "payload", "tag"])
@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_flipping_a_character_in_any_part_is_rejected(part: int, where: str) -> None:
    parts = token().split(".")
    index = {"first": 0, "middle": len(parts[part]) // 2, "last": len(parts[part]) - 1}[where]
    parts[part] = flip(parts[part], index)

    rejected(".".join(parts))


def test_appended_text_is_rejected() -> None:
    assert rejected(token() + "A") == "malformed"
    assert rejected(token() + ".extra") == "malformed"


def test_tampered_suffix_used_by_the_conformance_suite_is_rejected() -> None:
    rejected(token() + "-TAMPERED")


def test_every_truncation_is_rejected() -> None:
    valid = token()
    for length in range(len(valid)):
        rejected(valid[:length])


def test_swapping_payload_and_signature_parts_is_rejected() -> None:
    version, kid, body, tag = token().split(".")

    rejected(".".join([version, kid, tag, body]))


def test_padding_added_to_any_part_is_rejected() -> None:
    version, kid, body, tag = token(1).split(".")
    pad = "=" * (-len(body) % 4 or 4)

    assert rejected(".".join([version, kid, body + pad, tag])) == "signature"
    assert rejected(".".join([version, kid, body, tag + "="])) == "malformed"


@pytest.mark.parametrize("swap", [("-", "+"), ("_", "/")])
def test_standard_base64_alphabet_is_rejected(swap: tuple[str, str]) -> None:
    url_char, std_char = swap
    for tries in range(200):  # find a token whose tag uses the character
        candidate = codec(clock=Clock(NOW + tries)).mint(BINDING, answers(1), asked(1))
        version, kid, body, tag = candidate.split(".")
        if url_char in tag:
            break
    else:
        pytest.skip("no tag used the character")
    tag = tag.replace(url_char, std_char)

    assert rejected(".".join([version, kid, body, tag]), codec(clock=Clock(NOW + tries))) == (
        "malformed"
    )


def test_non_canonical_trailing_bits_are_rejected() -> None:
    version, kid, body, tag = token().split(".")
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    # 43 characters carry 258 bits for 32 bytes: the last character's low 2 bits must be zero.
    last = alphabet.index(tag[-1])
    sloppy = tag[:-1] + alphabet[last | 1]

    assert base64.urlsafe_b64decode(sloppy + "=") == base64.urlsafe_b64decode(tag + "=")
    assert rejected(".".join([version, kid, body, sloppy])) == "malformed"


@pytest.mark.parametrize("junk", [" ", "\n", "\t"])
def test_whitespace_anywhere_is_rejected(junk: str) -> None:
    valid = token()

    rejected(junk + valid)
    rejected(valid + junk)
    rejected(valid[:20] + junk + valid[20:])


def test_relabelling_a_token_with_a_trusted_key_id_fails_the_signature() -> None:
    _, _, body, tag = codec(KEY_B).mint(BINDING, answers(1), asked(1)).split(".")

    assert rejected(f"m1.{KEY_A.key_id}.{body}.{tag}") == "signature"


@pytest.mark.parametrize("version", ["m2", "M1", "v1", "m0", ""])
def test_unknown_version_is_rejected(version: str) -> None:
    assert rejected(version + token()[2:]) == "malformed"


# --- keys and rotation -------------------------------------------------------------------------


def test_token_signed_with_another_key_is_rejected() -> None:
    assert rejected(codec(KEY_B).mint(BINDING, {}, {})) == "unknown key"


def test_token_signed_with_the_previous_key_is_accepted_after_rotation() -> None:
    old = codec(KEY_A).mint(BINDING, answers(1), asked(1))

    assert codec(KEY_B, (KEY_A,)).verify(old, BINDING).answers == answers(1)


def test_rotated_codec_mints_with_the_current_key() -> None:
    minted = codec(KEY_B, (KEY_A,)).mint(BINDING, {}, {})

    assert minted.split(".")[1] == KEY_B.key_id
    assert rejected(minted) == "unknown key"  # a server that only knows KEY_A


def test_unknown_key_id_is_rejected_once_the_old_key_is_dropped() -> None:
    old = codec(KEY_A).mint(BINDING, {}, {})

    assert rejected(old, codec(KEY_B)) == "unknown key"


@pytest.mark.parametrize("kid", ["ABCDEF01", "abc", "abcdef012", "ghijklmn"])
def test_malformed_key_id_is_rejected(kid: str) -> None:
    version, _, body, tag = token().split(".")

    assert rejected(".".join([version, kid, body, tag])) == "malformed"


# --- expiry ------------------------------------------------------------------------------------


def test_token_is_accepted_until_the_second_before_expiry() -> None:
    clock = Clock()
    minted = codec(clock=clock).mint(BINDING, {}, {})
    clock.now = int(NOW) + TTL - 0.001

    assert codec(clock=clock).verify(minted, BINDING).expires_at == int(NOW) + TTL


@pytest.mark.parametrize("late", [0, 0.5, 1, 10**6])
def test_token_is_rejected_from_its_expiry_second_on(late: float) -> None:
    clock = Clock()
    minted = codec(clock=clock).mint(BINDING, {}, {})
    clock.now = int(NOW) + TTL + late

    assert rejected(minted, codec(clock=clock)) == "expired"


def test_an_expired_token_for_another_request_is_a_binding_failure_not_an_expiry() -> None:
    # Dispatch starts the questions over on "expired"; that must never happen for a replay.
    clock = Clock()
    other = Binding("tools/call", "delete_stack", BINDING.arguments_digest)
    minted = codec(clock=clock).mint(other, answers(1), asked(1))
    clock.now = int(NOW) + TTL + 1

    assert rejected(minted, codec(clock=clock)) == "binding"
    assert rejected(signed(payload(e=int(NOW), t="other"))) == "binding"


def test_an_expired_token_from_another_key_or_server_is_not_reported_as_expired() -> None:
    clock = Clock()
    foreign = codec(KEY_A, audience="other", clock=clock).mint(BINDING, {}, {})
    unknown = codec(KEY_B, clock=clock).mint(BINDING, {}, {})
    clock.now = int(NOW) + TTL + 1

    assert rejected(foreign, codec(clock=clock)) == "signature"
    assert rejected(unknown, codec(clock=clock)) == "unknown key"


# --- server identity (audience) ----------------------------------------------------------------


def test_a_token_from_another_server_sharing_the_key_fails_the_signature() -> None:
    minted = codec(audience="server-a").mint(BINDING, answers(1), asked(1))

    assert rejected(minted, codec(audience="server-b")) == "signature"
    assert rejected(minted, codec()) == "signature"  # nor a codec with no audience


def test_replicas_with_the_same_name_and_key_accept_each_others_tokens() -> None:
    minted = codec(audience="server-a").mint(BINDING, answers(1), asked(1))

    assert codec(audience="server-a").verify(minted, BINDING).answers == answers(1)
    assert codec(KEY_B, (KEY_A,), audience="server-a").verify(minted, BINDING).answers == (
        answers(1)
    )


@pytest.mark.parametrize(("one", "two"), [("ab", "a"), ("a", "a\x00"), ("", "\x00"), ("é", "e")])
def test_similar_server_names_never_share_a_mac_key(one: str, two: str) -> None:
    minted = codec(audience=one).mint(BINDING, {}, {})

    assert rejected(minted, codec(audience=two)) == "signature"


def test_mac_key_is_derived_from_the_secret_a_label_and_the_length_prefixed_name() -> None:
    # Pins the token format documented in _state: a replica built from the docstring must agree.
    version, kid, body, tag = codec(audience="acme").mint(BINDING, {}, {}).split(".")
    label = b"mrtr-server/requestState/m1/hmac-sha256"
    derived = hmac.digest(KEY_A.secret, label + b"\x00\x04acme", "sha256")
    expected = hmac.digest(derived, f"{version}.{kid}.{body}".encode(), "sha256")

    assert tag == b64(expected)


@pytest.mark.parametrize(("audience", "error"), [(b"a", TypeError), ("x" * 1025, ValueError)])
def test_codec_refuses_an_audience_that_is_not_a_short_str(
    audience: object, error: type[Exception]
) -> None:
    with pytest.raises(error, match="audience"):
        RequestStateCodec(KeyRing(KEY_A), audience=audience)  # type: ignore[arg-type]


# --- binding: replay against another request ---------------------------------------------------


def test_token_from_another_tool_is_rejected() -> None:
    other = Binding("tools/call", "delete_stack", BINDING.arguments_digest)

    assert rejected(codec().mint(other, answers(1), asked(1))) == "binding"


def test_token_from_another_method_is_rejected() -> None:
    prompt = Binding("prompts/get", BINDING.target, BINDING.arguments_digest)

    assert rejected(codec().mint(prompt, answers(1), asked(1))) == "binding"


def test_token_from_the_same_tool_with_other_arguments_is_rejected() -> None:
    staging = Binding("tools/call", "deploy", digest_arguments({**ARGS, "stack": "staging"}))

    assert rejected(codec().mint(staging, answers(1), asked(1))) == "binding"


def test_same_arguments_in_another_order_are_the_same_call() -> None:
    reordered = Binding("tools/call", "deploy", digest_arguments(dict(reversed(ARGS.items()))))

    assert codec().verify(codec().mint(reordered, {}, {}), BINDING).answers == {}


# --- no unsigned form ---------------------------------------------------------------------------


def test_an_unsigned_token_is_refused_as_a_forgery() -> None:
    forged = payload(a={"confirm": {"action": "accept", "content": {"ok": True}}})
    text = json.dumps(forged).encode()

    assert rejected("p1." + b64(text)) == "signature"
    assert codec().verify(signed(forged), BINDING).answers["confirm"] == {  # the helper is sound
        "action": "accept",
        "content": {"ok": True},
    }


def test_a_codec_has_no_unsigned_mode() -> None:
    with pytest.raises(TypeError, match="no unsigned mode"):
        RequestStateCodec(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        RequestStateCodec(KeyRing(KEY_A), insecure_plaintext=True)  # type: ignore[call-arg]


def test_every_minted_token_is_signed() -> None:
    minted = codec().mint(BINDING, answers(1), asked(1))

    assert minted.startswith(f"m1.{KEY_A.key_id}.")
    body = minted.split(".")[2]
    assert minted == signed(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))


# --- strict payload decoding (reached past the MAC with `signed`) -------------------------------


@pytest.mark.parametrize(
    "body",
    [
        payload(e=True),
        payload(e=float(int(NOW) + TTL)),
        payload(e=str(int(NOW) + TTL)),
        payload(e=None),
        payload(a=[]),
        payload(a={"confirm": "yes"}),
        payload(a={"confirm": [ANSWER]}),
        payload(q={"confirm": 1}),
        payload(q=[]),
        payload(m=1),
        payload(t=None),
        payload(d=7),
        payload(extra=1),
        {k: v for k, v in payload().items() if k != "q"},
        [payload()],
        "just a string",
        None,
    ],
    ids=lambda body: json.dumps(body)[:40],
)
def test_payload_with_wrong_keys_or_types_is_rejected(body: object) -> None:
    assert rejected(signed(json.dumps(body))) == "malformed"


@pytest.mark.parametrize(
    "text",
    [
        '{"a":{},"a":{},"d":"x","e":1,"m":"x","q":{},"t":"x"}',  # duplicate key
        json.dumps(payload()).replace(f"{int(NOW) + TTL}", "NaN"),
        json.dumps(payload()).replace(f"{int(NOW) + TTL}", "Infinity"),
        json.dumps(payload())[:-1],
        json.dumps(payload()) + " x",
        "[" * 40_000,  # deep nesting: RecursionError inside json must still be "malformed"
        "",
    ],
)
def test_payload_that_is_not_strict_json_is_rejected(text: str) -> None:
    assert rejected(signed(text)) == "malformed"


def test_payload_with_non_ascii_bytes_is_rejected() -> None:
    raw = json.dumps(payload(t="zoë"), ensure_ascii=False).encode()

    assert rejected(signed(raw)) == "malformed"


# --- caps and non-strings ----------------------------------------------------------------------


def test_token_over_the_length_cap_is_rejected_before_decoding() -> None:
    huge = "m1." + "A" * MAX_TOKEN_CHARS

    assert rejected(huge) == "oversized"
    assert rejected("\u00e9" * (MAX_TOKEN_CHARS + 1)) == "oversized"


def test_minting_past_the_length_cap_refuses() -> None:
    big = {"blob": {"action": "accept", "content": {"text": "x" * MAX_TOKEN_CHARS}}}

    with pytest.raises(InvalidRequestState) as info:
        codec().mint(BINDING, big, {})
    assert info.value.reason == "oversized"


@pytest.mark.parametrize(
    "value",
    [None, 0, 1, 1.5, True, [], {}, ["m1"], {"token": "x"}, b"m1.abc", bytearray(b"m1")],
    ids=repr,
)
def test_non_string_token_is_rejected_as_malformed(value: object) -> None:
    assert rejected(value) == "malformed"


def test_token_as_bytes_is_rejected_even_when_the_text_is_valid() -> None:
    assert rejected(token().encode()) == "malformed"


@pytest.mark.parametrize("value", ["", ".", "...", "m1", "m1...", "p1.", "m1.é.x.y", "\x00"])
def test_empty_and_skeleton_tokens_are_rejected(value: str) -> None:
    assert rejected(value) in {"malformed", "signature"}


def test_reasons_never_contain_token_text() -> None:
    valid = token(1)
    variants = [
        valid + "-TAMPERED",
        valid[:-5],
        flip(valid, 40),
        codec(KEY_B).mint(BINDING, {}, {}),
    ]
    for variant in variants:
        with pytest.raises(InvalidRequestState) as info:
            codec().verify(variant, BINDING)
        text = repr(info.value) + str(info.value.args)
        assert all(part not in text for part in variant.split(".")[1:] if len(part) > 3)


# --- properties --------------------------------------------------------------------------------

VALID = token(3)
PROPERTY = settings(max_examples=300, deadline=None)


@PROPERTY
@given(index=st.integers(0, len(VALID) - 1), char=st.characters())
def test_any_single_character_substitution_is_rejected(index: int, char: str) -> None:
    mutated = VALID[:index] + char + VALID[index + 1 :]
    if mutated != VALID:
        rejected(mutated)


@PROPERTY
@given(index=st.integers(0, len(VALID)), text=st.text(min_size=1, max_size=8))
def test_any_insertion_is_rejected(index: int, text: str) -> None:
    rejected(VALID[:index] + text + VALID[index:])


@PROPERTY
@given(start=st.integers(0, len(VALID) - 1), size=st.integers(1, 40))
def test_any_deletion_is_rejected(start: int, size: int) -> None:
    rejected(VALID[:start] + VALID[start + size :])


@PROPERTY
@given(length=st.integers(0, len(VALID) - 1))
def test_any_truncation_is_rejected(length: int) -> None:
    rejected(VALID[:length])


@PROPERTY
@given(text=st.text())
def test_any_random_string_is_rejected(text: str) -> None:
    rejected(text)


@PROPERTY
@given(rest=st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_."))
def test_any_random_token_under_a_trusted_key_id_is_rejected(rest: str) -> None:
    rejected(f"m1.{KEY_A.key_id}.{rest}")


@PROPERTY
@given(body=st.binary(max_size=300))
def test_any_signed_payload_bytes_are_rejected_or_decoded_into_the_exact_shape(body: bytes) -> None:
    try:
        state = codec().verify(signed(body), BINDING)
    except InvalidRequestState as exc:
        assert exc.reason in REASONS
    else:
        assert isinstance(state.expires_at, int)


# --- digest_arguments --------------------------------------------------------------------------


def test_digest_ignores_key_order_at_every_depth() -> None:
    one = {"a": 1, "b": {"x": [1, 2], "y": None}}
    two = {"b": {"y": None, "x": [1, 2]}, "a": 1}

    assert digest_arguments(one) == digest_arguments(two)


def test_digest_distinguishes_int_float_string_and_bool() -> None:
    digests = {digest_arguments({"n": value}) for value in (1, 1.0, "1", True, None, [1])}

    assert len(digests) == 6


def test_digest_distinguishes_list_order_and_values() -> None:
    assert digest_arguments({"l": [1, 2]}) != digest_arguments({"l": [2, 1]})
    assert digest_arguments({"s": "prod"}) != digest_arguments({"s": "prod "})


def test_absent_arguments_digest_like_an_empty_object() -> None:
    assert digest_arguments(None) == digest_arguments({})


def test_digest_is_22_url_safe_characters_even_for_odd_text() -> None:
    digest = digest_arguments({"name": "\ud800 漢字"})

    assert len(digest) == 22
    assert set(digest) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(
        st.text(max_size=5),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=5),
            lambda inner: (
                st.lists(inner, max_size=3)
                | st.dictionaries(st.text(max_size=3), inner, max_size=3)
            ),
            max_leaves=8,
        ),
        max_size=5,
    )
)
def test_digest_is_stable_under_key_reordering(arguments: dict[str, object]) -> None:
    reordered = dict(reversed(list(arguments.items())))

    assert digest_arguments(arguments) == digest_arguments(reordered)
