"""requestState bound to the principal that asked (HTTP with named tokens or an auth layer).

2026-07-28 basic/patterns/mrtr, requestState "Security Considerations": servers SHOULD bind the
state to the authenticated user. Without it, anyone holding the shared bearer token could
finish another user's round with the answers that user gave.
"""

from __future__ import annotations

import base64
import json
import os
from collections import Counter
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_http_app import Client, app_over

from mrtr_runtime._tokens import (
    Binding,
    InvalidRequestState,
    KeyRing,
    RequestStateCodec,
    SigningKey,
    digest_arguments,
    digest_principal,
)
from mrtr_runtime.http._app import HttpApp, HttpSettings
from mrtr_runtime.http._rules import AccessPolicy, parse_token_lines
from support import BOTH_ANSWERS, DEPLOY, make_server

pytestmark = pytest.mark.anyio

CODEC = RequestStateCodec(KeyRing(SigningKey(bytes(range(32)))), audience="a")
ASKED = {"confirm": "elicitation/create"}


def bound(principal: str | None) -> Binding:
    digest = digest_principal(principal)
    return Binding("tools/call", "deploy", digest_arguments({"stack": "x"}), digest)


def payload_of(token: str) -> dict[str, Any]:
    encoded = token.split(".")[2]
    body: dict[str, Any] = json.loads(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))
    return body


def verify_as(minted_for: str | None, presented_by: str | None) -> str | None:
    """The refusal reason, or None when the token of `minted_for` verifies for `presented_by`."""
    token = CODEC.mint(bound(minted_for), {}, ASKED)
    try:
        CODEC.verify(token, bound(presented_by))
    except InvalidRequestState as error:
        return error.reason
    return None


# -- the codec, sans-IO -------------------------------------------------------------------------


def test_a_token_minted_for_one_principal_is_refused_for_another() -> None:
    assert verify_as("token:alice", "token:bob") == "binding"


def test_a_token_minted_for_a_principal_verifies_for_it_and_for_nobody_else() -> None:
    assert verify_as("token:alice", "token:alice") is None
    assert verify_as("token:alice", None) == "binding"
    assert verify_as(None, "token:alice") == "binding"


def test_with_no_principal_on_either_side_the_token_is_as_before() -> None:
    assert verify_as(None, None) is None
    assert "p" not in payload_of(CODEC.mint(bound(None), {}, ASKED))  # nothing more signed


@given(st.text(max_size=40), st.text(max_size=40))
def test_any_two_principals_verify_exactly_when_they_are_equal(first: str, second: str) -> None:
    assert (verify_as(first, second) is None) == (first == second)


def test_the_token_carries_a_digest_of_the_principal_not_its_name() -> None:
    body = payload_of(CODEC.mint(bound("user:alice@example.com"), {}, ASKED))
    assert body["p"] == digest_principal("user:alice@example.com")
    assert "alice" not in json.dumps(body)


# -- the tokens file ----------------------------------------------------------------------------


def test_token_lines_name_their_principals() -> None:
    text = "# who may call\nalice: tok-a\n\nbob:tok-b\n"
    assert parse_token_lines(text, source="f") == (("alice", "tok-a"), ("bob", "tok-b"))


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("alice tok-a", "f line 1: expected principal:token"),
        (":tok-a", "f line 1: expected principal:token"),
        ("alice:", "f line 1: expected principal:token"),
        ("alice:tok a", "f line 1: a token must be ASCII without spaces (an HTTP header)"),
        ("alice:a\nalice:b", "f line 2: principal 'alice' is named twice"),
        ("alice:same\nbob:same", "f line 2: the same token is given to two principals"),
        ("# nothing\n", "f names no principal:token"),
    ],
)
def test_a_bad_tokens_file_is_one_clear_error_that_never_quotes_a_token(
    text: str, problem: str
) -> None:
    with pytest.raises(ValueError) as caught:
        parse_token_lines(text, source="f")
    assert str(caught.value) == problem


def test_a_tokens_file_others_can_read_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text("alice:tok-a\n", encoding="utf-8")
    os.chmod(path, 0o644)
    environ = {"MRTR_HTTP_TOKENS_FILE": str(path)}
    with pytest.raises(ValueError, match="readable by others; chmod 600"):
        HttpSettings.from_environment(environ, host="127.0.0.1", port=0)
    os.chmod(path, 0o600)
    settings = HttpSettings.from_environment(environ, host="127.0.0.1", port=0)
    assert settings.bearer_tokens == (("alice", "tok-a"),)


def test_any_named_token_lets_a_request_in_and_names_who_sent_it() -> None:
    policy = AccessPolicy.for_bind_address(
        "127.0.0.1", named_tokens=(("alice", "tok-a"), ("bob", "tok-b"))
    )
    assert policy.authorised("Bearer tok-b")
    assert policy.bearer_principal("Bearer tok-b") == "bob"
    assert not policy.authorised("Bearer tok-c")
    assert policy.bearer_principal("Bearer tok-c") is None
    assert not policy.authorised(None)


# -- over the HTTP app, in process --------------------------------------------------------------

TOKENS = (("alice", "tok-alice"), ("bob", "tok-bob"))


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


async def round_two(client: Client, token: str, state: str) -> dict[str, Any]:
    retry = {**DEPLOY, "inputResponses": BOTH_ANSWERS, "requestState": state}
    message: dict[str, Any] = (await client.rpc("tools/call", retry, headers=bearer(token))).json()
    return message


async def test_round_two_with_another_principals_token_is_refused_and_with_the_same_completes(
    calls: Counter[str],
) -> None:
    client = Client(app_over(make_server(calls=calls), bearer_tokens=TOKENS))
    first = (await client.rpc("tools/call", DEPLOY, headers=bearer("tok-alice"))).json()
    state = first["result"]["requestState"]
    refused = await round_two(client, "tok-bob", state)
    assert refused["error"] == {"code": -32602, "message": "Invalid requestState: binding"}
    assert calls["deploy_stack"] == 1  # the handler never saw bob's retry
    done = await round_two(client, "tok-alice", state)
    assert done["result"]["content"][0]["text"] == "Deployed prod-api successfully"


class User:
    """What Starlette's AuthenticationMiddleware puts in `scope["user"]`."""

    is_authenticated = True

    def __init__(self, identity: str) -> None:
        self.identity = identity


def behind_auth_layer(app: HttpApp, who: dict[str, str]) -> HttpApp:
    """An ASGI authorization layer in front of the app: it names the user of each request."""

    async def layer(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await app({**scope, "user": User(who["name"])}, receive, send)

    return cast("HttpApp", layer)  # the in-process client calls it as it would the app


async def test_an_authorization_layer_in_front_binds_the_round_to_its_user() -> None:
    who = {"name": "alice"}
    client = Client(behind_auth_layer(app_over(), who))
    state = (await client.rpc("tools/call", DEPLOY)).json()["result"]["requestState"]
    who["name"] = "mallory"
    retry = {**DEPLOY, "inputResponses": BOTH_ANSWERS, "requestState": state}
    refused = (await client.rpc("tools/call", retry)).json()
    assert refused["error"]["message"] == "Invalid requestState: binding"
    who["name"] = "alice"
    done = (await client.rpc("tools/call", retry)).json()
    assert done["result"]["resultType"] == "complete"
