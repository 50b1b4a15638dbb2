"""The generated server over HTTP as an OAuth 2.1 resource server (2026-07-28 basic/authorization),
against a real authorization server: npm `oidc-provider`, a certified OpenID Provider, started on
loopback by these tests (tests/peers/oidc_provider.mjs) with resource indicators and JWT access
tokens, and the baked project's own `http` command with only `MRTR_OAUTH_ISSUER` and
`MRTR_OAUTH_RESOURCE` set.

A client with no token is sent to the Protected Resource Metadata, finds the authorization server
there, gets a token for this server by the client credentials grant and calls. Two clients are two
principals: one completes `deploy_to_aws`'s rounds as a task against moto, the other can neither
finish those rounds nor see the task. Tokens that must not pass are refused with their status:
expired, for another resource, from another issuer, unsigned, HMAC keyed with the public key, an
ID token, one without the scope `deploy_to_aws` declares, and one signed by a key the
authorization server has rotated out. Opaque tokens are read by introspection (RFC 7662), with the
same checks, and one revoked at the authorization server stops working. With the authorization
server unreachable, a call is 503 and nothing is deployed. Run with ``-rA`` to see the transcripts.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.client
import json
import os
import secrets
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import jwt
import pytest
from bakery import DEFAULT_SLUG, Installed, run
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from host_client import MODERN
from jwt.algorithms import RSAAlgorithm
from peers.aws_moto import moto_server, stack_status
from peers.node import NodePeers, PeersUnavailableError, ensure_node_peers
from runtime.redis_server import find_redis_server, running_redis
from test_http_replicas import (
    FORM_ANSWERS,
    ROLE_ARN,
    Replica,
    messages_in,
    start_replica,
)

pytestmark = pytest.mark.baked_checks

Json = dict[str, Any]
TASKS = "io.modelcontextprotocol/tasks"
START_TIMEOUT_SECONDS = 60
CALL_TIMEOUT_SECONDS = 60
#: The server fetches keys again for an unknown kid at most this often (REFRESH_INTERVAL_SECONDS).
KEY_REFRESH_INTERVAL_SECONDS = 5.0
SCOPES = ["mcp", "deploy"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def signing_key(kid: str) -> tuple[rsa.RSAPrivateKey, Json]:
    """An RSA key and its private JWK, for oidc-provider's keystore."""
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk: Json = RSAAlgorithm.to_jwk(private, as_dict=True)
    return private, {**jwk, "kid": kid, "use": "sig", "alg": "RS256"}


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


# -- the authorization server -------------------------------------------------------------------


@dataclass
class AuthorizationServer:
    """oidc-provider on a fixed loopback port; `restart` gives it another keystore (a rotation)."""

    peers: NodePeers
    home: Path
    port: int
    resource: str
    clients: dict[str, str]
    #: A second resource, whose tokens are opaque; and the client the MCP server introspects as.
    opaque_resource: str = ""
    resource_server: tuple[str, str] = ("mcp-server", secrets.token_urlsafe(24))
    process: subprocess.Popen[bytes] | None = None
    keys: list[tuple[rsa.RSAPrivateKey, Json]] = field(default_factory=list)

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, keys: list[tuple[rsa.RSAPrivateKey, Json]]) -> None:
        self.keys = keys
        config = {
            "port": self.port,
            "jwks": {"keys": [jwk for _, jwk in keys]},
            "resource": self.resource,
            "opaqueResource": self.opaque_resource,
            "resourceServer": {
                "client_id": self.resource_server[0],
                "client_secret": self.resource_server[1],
            },
            "scopes": SCOPES,
            "clients": [
                {"client_id": name, "client_secret": secret, "scope": SCOPE_OF[name]}
                for name, secret in self.clients.items()
            ],
            "accessTokenTtl": 600,
        }
        path = self.home / f"oidc-{secrets.token_hex(3)}.json"
        path.write_text(json.dumps(config), encoding="utf-8")
        log = path.with_suffix(".log")
        with log.open("wb") as sink:
            self.process = subprocess.Popen(
                self.peers.oidc_provider_command(str(path)),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=sink,
            )
        assert self.process.stdout is not None
        line = self.process.stdout.readline().decode()
        if not line.startswith("ready "):
            self.stop()
            pytest.fail(f"oidc-provider did not start: {line!r}\n{log.read_text()}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=15)
        self.process = None

    def restart(self, keys: list[tuple[rsa.RSAPrivateKey, Json]]) -> None:
        self.stop()
        self.start(keys)

    def token(self, client: str, scope: str | None = None, resource: str | None = None) -> str:
        """An access token for `client` by the client credentials grant, with the resource
        indicator (RFC 8707) naming this server (or `resource`), as basic/authorization
        requires of clients."""
        form = {"grant_type": "client_credentials", "resource": resource or self.resource}
        form["scope"] = scope or SCOPE_OF[client]
        body = self.post(client, "token_endpoint", form)
        access_token: str = body["access_token"]
        return access_token

    def revoke(self, client: str, token: str) -> None:
        """RFC 7009: `client` withdraws its token."""
        self.post(client, "revocation_endpoint", {"token": token})

    def post(self, client: str, endpoint: str, form: dict[str, str]) -> Json:
        """POST `form` to the endpoint the discovery document names, as `client`."""
        discovery = get_json(self.issuer + "/.well-known/openid-configuration")
        credentials = b64(f"{client}:{self.clients[client]}".encode())
        target = urlsplit(discovery[endpoint])
        connection = http.client.HTTPConnection(target.netloc, timeout=CALL_TIMEOUT_SECONDS)
        try:
            connection.request(
                "POST",
                target.path,
                urlencode(form),
                {
                    "Content-Type": "application/x-www-form-urlencoded",
                    "Authorization": f"Basic {credentials}",
                },
            )
            response = connection.getresponse()
            payload = response.read()
        finally:
            connection.close()
        assert response.status == 200, payload
        body: Json = json.loads(payload) if payload else {}
        return body

    def forge(self, claims: Mapping[str, Any], **header: Any) -> str:
        """A token signed with the authorization server's own current key: only its claims or
        header can be what refuses it."""
        private, jwk = self.keys[0]
        headers = {"kid": jwk["kid"], "typ": "at+jwt", **header}
        return jwt.encode(dict(claims), private, algorithm="RS256", headers=headers)

    def claims(self, client: str, **changes: Any) -> Json:
        now = int(time.time())
        found: Json = {
            "iss": self.issuer,
            "sub": client,
            "client_id": client,
            "aud": self.resource,
            "scope": SCOPE_OF[client],
            "iat": now,
            "exp": now + 600,
            "jti": secrets.token_hex(8),
        }
        found.update(changes)
        return found


#: The clients registered at the authorization server, and what each may ask for.
SCOPE_OF = {"alice-app": "mcp deploy", "bob-app": "mcp deploy", "carol-app": "mcp"}


def get_json(url: str) -> Json:
    status, _, body = http_request("GET", url)
    assert status == 200, (url, status, body)
    found: Json = json.loads(body)
    return found


def http_request(
    method: str,
    url: str,
    body: bytes | None = None,
    headers: Mapping[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    target = urlsplit(url)
    connection = http.client.HTTPConnection(target.netloc, timeout=CALL_TIMEOUT_SECONDS)
    try:
        connection.request(method, target.path, body, dict(headers or {}))
        response = connection.getresponse()
        payload = response.read()
    finally:
        connection.close()
    return response.status, {k.lower(): v for k, v in response.getheaders()}, payload


# -- the MCP server ------------------------------------------------------------------------------


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    messages: list[Json]

    @property
    def reply(self) -> Json:
        (found,) = [message for message in self.messages if "id" in message]
        return found

    @property
    def result(self) -> Json:
        assert self.status == 200, (self.status, self.messages)
        result: Json = self.reply["result"]
        return result


def task_meta() -> Json:
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {
            "elicitation": {"form": {}},
            "extensions": {TASKS: {}},
        },
        "io.modelcontextprotocol/clientInfo": {"name": "oauth-test", "version": "0"},
    }


def call(url: str, token: str | None, method: str, params: Json) -> Answer:
    """One 2026-07-28 request over HTTP, with the request metadata headers."""
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": method,
    }
    name = params.get("name", params.get("taskId"))
    if isinstance(name, str):
        headers["Mcp-Name"] = name
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": method,
        "params": {**params, "_meta": task_meta()},
    }
    status, found, payload = http_request("POST", url, json.dumps(body).encode(), headers)
    content_type = found.get("content-type", "")
    if content_type.startswith(("application/json", "text/event-stream")):
        messages = messages_in(payload, content_type)
    else:
        messages = [{"text": payload.decode(errors="replace")}]
    return Answer(status, found, messages)


def answers_to(result: Json) -> Json:
    answers: Json = {}
    for key, request in result["inputRequests"].items():
        asked = request["params"]["requestedSchema"]["properties"]
        answers[key] = {
            "action": "accept",
            "content": {name: FORM_ANSWERS[name] for name in asked},
        }
    return answers


@pytest.fixture(scope="module")
def node_peers() -> NodePeers:
    try:
        return ensure_node_peers()
    except PeersUnavailableError as error:
        pytest.fail(f"cannot install oidc-provider: {error}")


@pytest.fixture(scope="module")
def project(installed: Any) -> Installed:
    """The AWS bake: its dev extra brings the http and oauth ones."""
    found: Installed = installed("aws")
    return found


@pytest.fixture(scope="module")
def aws_env() -> Iterator[dict[str, str]]:
    with moto_server() as env:
        yield env


@dataclass
class Stack:
    authorization: AuthorizationServer
    server: Replica
    url: str
    env: dict[str, str]
    home: Path


@pytest.fixture(scope="module")
def stack(
    project: Installed,
    node_peers: NodePeers,
    aws_env: dict[str, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Stack]:
    home = tmp_path_factory.mktemp("oauth")
    mcp_port = free_port()
    resource = f"http://127.0.0.1:{mcp_port}/mcp"
    clients = {name: secrets.token_urlsafe(24) for name in SCOPE_OF}
    authorization = AuthorizationServer(node_peers, home, free_port(), resource, clients)
    authorization.opaque_resource = f"http://127.0.0.1:{free_port()}/mcp"
    authorization.start([signing_key("key-1")])
    key_file = home / "secrets" / "mrtr-signing-key"
    run([project.tool(DEFAULT_SLUG), "keygen", "--path", key_file], cwd=home)
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(home),
        "MRTR_SIGNING_KEY_FILE": str(key_file),
        "MRTR_TASK_STORE": f"sqlite:///{home / 'tasks.db'}",
        # The whole configuration of the resource server: who issues tokens, and who we are.
        "MRTR_OAUTH_ISSUER": authorization.issuer,
        "MRTR_OAUTH_RESOURCE": resource,
        # The consent audit trail, read back by the two-principals test.
        "MRTR_AUDIT_LOG": str(home / "audit.jsonl"),
        **aws_env,
        "AWS_CONFIG_FILE": str(home / "no-aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(home / "no-aws-credentials"),
    }
    command = [str(project.tool(DEFAULT_SLUG)), "http", "--host", "127.0.0.1"]
    server = start_replica("oauth", [*command, "--port", str(mcp_port)], env, home)
    try:
        yield Stack(authorization, server, server.url, env, home)
    finally:
        server.stop()
        authorization.stop()


def show(title: str, lines: list[str]) -> None:
    print(f"\n{title}")  # noqa: T201 (the transcript this test exists to show)
    for line in lines:
        print(f"  {line}")  # noqa: T201


# -- discovery ----------------------------------------------------------------------------------


def test_a_client_without_a_token_finds_the_authorization_server_and_gets_one(
    stack: Stack,
) -> None:
    transcript = []
    refused = call(stack.url, None, "tools/list", {})
    challenge = refused.headers["www-authenticate"]
    transcript.append(f"POST /mcp tools/list, no token -> {refused.status}")
    transcript.append(f"  WWW-Authenticate: {challenge}")
    assert refused.status == 401
    assert challenge.startswith("Bearer resource_metadata=")
    metadata_url = challenge.split('resource_metadata="', 1)[1].split('"', 1)[0]
    assert metadata_url == stack.url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
    metadata = get_json(metadata_url)
    transcript.append(f"GET {urlsplit(metadata_url).path} -> 200 {json.dumps(metadata)}")
    # RFC 9728: the resource is this server; its authorization server is the one we run; the
    # scopes include what deploy_to_aws declares.
    assert metadata["resource"] == stack.url
    assert metadata["authorization_servers"] == [stack.authorization.issuer]
    assert "deploy" in metadata["scopes_supported"]
    token = stack.authorization.token("alice-app")
    transcript.append(
        "POST /token grant_type=client_credentials resource=<this server> -> 200, a JWT: "
        + json.dumps(jwt.get_unverified_header(token))
        + " "
        + json.dumps(
            {k: v for k, v in jwt.decode(token, options={"verify_signature": False}).items()}
        )
    )
    listed = call(stack.url, token, "tools/list", {})
    names = sorted(tool["name"] for tool in listed.result["tools"])
    transcript.append(f"POST /mcp tools/list with it -> {listed.status}: {', '.join(names)}")
    show("discovery, as a host does it", transcript)
    assert "deploy_to_aws" in names


# -- two principals -----------------------------------------------------------------------------


def test_one_principal_deploys_and_another_can_neither_finish_its_rounds_nor_see_its_task(
    stack: Stack, aws_env: dict[str, str]
) -> None:
    alice = stack.authorization.token("alice-app")
    bob = stack.authorization.token("bob-app")
    name = f"oauth-{secrets.token_hex(3)}"
    transcript = []
    params: Json = {"name": "deploy_to_aws", "arguments": {"stack": name}}
    first = call(stack.url, alice, "tools/call", params).result
    transcript.append(f"alice: tools/call deploy_to_aws -> {first['resultType']}")
    assert first["resultType"] == "input_required"
    second_params = {
        **params,
        "inputResponses": answers_to(first),
        "requestState": first["requestState"],
    }
    second = call(stack.url, alice, "tools/call", second_params).result
    transcript.append(
        f"alice: answers {', '.join(first['inputRequests'])} -> {second['resultType']}"
    )
    assert second["resultType"] == "input_required"
    final_params = {
        **params,
        "inputResponses": answers_to(second),
        "requestState": second["requestState"],
    }
    # Bob replays alice's rounds with her answers: the requestState is bound to her.
    stolen = call(stack.url, bob, "tools/call", final_params)
    transcript.append(f"bob: the same round with alice's requestState -> {stolen.reply}")
    assert "error" in stolen.reply or stolen.reply["result"].get("isError") is True
    assert stack_status(aws_env, name, role_arn=None) is None
    created = call(stack.url, alice, "tools/call", final_params).result
    transcript.append(f"alice: answers {', '.join(second['inputRequests'])} -> {created}")
    task_id = created["task"]["taskId"] if "task" in created else created.get("taskId")
    assert isinstance(task_id, str), created
    # Bob cannot see alice's task: the same answer as for a task that does not exist.
    peeked = call(stack.url, bob, "tasks/get", {"taskId": task_id})
    unknown = call(stack.url, bob, "tasks/get", {"taskId": "no-such-task"})
    transcript.append(f"bob: tasks/get {task_id} -> {peeked.reply.get('error')}")
    assert "error" in peeked.reply
    assert peeked.reply["error"]["code"] == unknown.reply["error"]["code"]
    deadline = time.monotonic() + CALL_TIMEOUT_SECONDS
    status: Json = {}
    while time.monotonic() < deadline:
        status = call(stack.url, alice, "tasks/get", {"taskId": task_id}).result
        if status.get("status") in ("completed", "failed", "cancelled"):
            break
        time.sleep(0.2)
    transcript.append(f"alice: tasks/get -> {status.get('status')}")
    show("two principals, one deploy", transcript)
    trail = [
        json.loads(line)
        for line in (stack.home / "audit.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    alice_lines = [
        line
        for line in trail
        if line.get("tool") == "deploy_to_aws"
        and (line.get("principal") or "").startswith('oauth:["alice-app"')
    ]
    mine = alice_lines + [
        line for line in trail if line.get("event") == "task" and line["task"] == task_id
    ]
    show("the audit trail of that deploy", [json.dumps(line) for line in mine])
    events = [(line["event"], line.get("outcome") or line.get("status")) for line in mine]
    # Round 1 asks the role; round 2 decides on it and asks the yes (its own next round);
    # round 3 decides on the yes and becomes the task, which ends.
    assert events[:4] == [
        ("asked", None),
        ("decided", None),
        ("asked", None),
        ("finished", "asked-again"),
    ]
    assert ("finished", "task") in events and ("task", "completed") in events
    # Bob's attempt failed verification: no decision of his is in the trail.
    assert not [line for line in trail if "bob-app" in (line.get("principal") or "")]
    assert ROLE_ARN not in json.dumps(trail)
    assert status.get("status") == "completed", status
    assert stack_status(aws_env, name, role_arn=None) == "CREATE_COMPLETE"
    assert ROLE_ARN.endswith(":role/deployer")


def test_a_token_without_the_deploy_scope_is_403_and_deploys_nothing(
    stack: Stack, aws_env: dict[str, str]
) -> None:
    carol = stack.authorization.token("carol-app")
    name = f"oauth-{secrets.token_hex(3)}"
    answer = call(
        stack.url,
        carol,
        "tools/call",
        {"name": "deploy_to_aws", "arguments": {"stack": name}},
    )
    show(
        "a token granted only 'mcp'",
        [
            f"tools/call deploy_to_aws -> {answer.status}",
            f"  WWW-Authenticate: {answer.headers['www-authenticate']}",
        ],
    )
    assert answer.status == 403
    assert 'error="insufficient_scope"' in answer.headers["www-authenticate"]
    assert 'scope="deploy"' in answer.headers["www-authenticate"]
    assert stack_status(aws_env, name, role_arn=None) is None
    # Tools that need no more than every request does still answer.
    assert call(stack.url, carol, "tools/list", {}).status == 200


# -- tokens that must not pass ------------------------------------------------------------------


def refused_tokens(authorization: AuthorizationServer) -> dict[str, str]:
    now = int(time.time())
    private, jwk = authorization.keys[0]
    claims = authorization.claims("alice-app")
    unsigned = (
        b64(json.dumps({"alg": "none", "typ": "at+jwt", "kid": jwk["kid"]}).encode())
        + "."
        + b64(json.dumps(claims).encode())
        + "."
    )
    public_pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    confused = (
        b64(json.dumps({"alg": "HS256", "typ": "at+jwt", "kid": jwk["kid"]}).encode())
        + "."
        + b64(json.dumps(claims).encode())
    )
    confused += "." + b64(hmac.new(public_pem, confused.encode(), hashlib.sha256).digest())
    return {
        "expired": authorization.forge(authorization.claims("alice-app", exp=now - 120)),
        "not yet valid": authorization.forge(authorization.claims("alice-app", nbf=now + 600)),
        "for another resource": authorization.forge(
            authorization.claims("alice-app", aud="http://127.0.0.1:1/mcp")
        ),
        "from another issuer": authorization.forge(
            authorization.claims("alice-app", iss="http://127.0.0.1:2")
        ),
        "unsigned (alg none)": unsigned,
        "HS256 keyed with the public key": confused,
        "an ID token (typ JWT)": authorization.forge(claims, typ="JWT"),
        "garbage": "not-a-jwt",
    }


def test_tokens_that_must_not_pass_are_refused_with_401(stack: Stack) -> None:
    lines = []
    for why, token in refused_tokens(stack.authorization).items():
        answer = call(stack.url, token, "tools/list", {})
        description = answer.headers.get("www-authenticate", "").split("error_description=")[-1]
        lines.append(f"{why}: {answer.status} {description}")
        assert answer.status == 401, (why, answer)
        assert 'error="invalid_token"' in answer.headers["www-authenticate"], why
    show("refused tokens", lines)


def test_opaque_tokens_are_introspected_and_a_revoked_one_stops_working(
    project: Installed, stack: Stack, aws_env: dict[str, str]
) -> None:
    authorization = stack.authorization
    resource = authorization.opaque_resource
    client_id, client_secret = authorization.resource_server
    env = {
        **stack.env,
        "MRTR_OAUTH_RESOURCE": resource,
        # This server's own client at the authorization server, to introspect with; answers
        # are trusted for a second here (60 s by default).
        "MRTR_OAUTH_CLIENT_ID": client_id,
        "MRTR_OAUTH_CLIENT_SECRET": client_secret,
        "MRTR_OAUTH_INTROSPECTION_CACHE_SECONDS": "1",
    }
    port = str(urlsplit(resource).port)
    command = [str(project.tool(DEFAULT_SLUG)), "http", "--host", "127.0.0.1", "--port", port]
    server = start_replica("opaque", command, env, stack.home)
    try:
        alice = authorization.token("alice-app", resource=resource)
        carol = authorization.token("carol-app", resource=resource)
        lines = [
            f"alice's token for {resource}: {alice[:12]}... ({len(alice)} characters, no dots)"
        ]
        assert "." not in alice
        listed = call(server.url, alice, "tools/list", {})
        lines.append(f"tools/list -> {listed.status}")
        name = f"oauth-{secrets.token_hex(3)}"
        params: Json = {"name": "deploy_to_aws", "arguments": {"stack": name}}
        first = call(server.url, alice, "tools/call", params)
        lines.append(f"tools/call deploy_to_aws -> {first.status} {first.result['resultType']}")
        narrow = call(server.url, carol, "tools/call", params)
        lines.append(
            f"carol (scope mcp): tools/call deploy_to_aws -> {narrow.status} "
            + narrow.headers["www-authenticate"]
        )
        # A JWT the same authorization server issued for the other resource: read with its
        # keys, and refused for its audience; a made-up opaque token: inactive.
        elsewhere = call(server.url, authorization.token("alice-app"), "tools/list", {})
        made_up = call(server.url, secrets.token_urlsafe(32), "tools/list", {})
        authorization.revoke("alice-app", alice)
        time.sleep(1.2)  # the kept answer is trusted for a second
        revoked = call(server.url, alice, "tools/list", {})
        for label, answer in (
            ("a JWT for the other resource", elsewhere),
            ("a made-up opaque token", made_up),
            ("alice's token, revoked (RFC 7009)", revoked),
        ):
            lines.append(f"{label} -> {answer.status} {answer.headers.get('www-authenticate')}")
        show("opaque tokens, introspected (RFC 7662)", lines)
        assert listed.status == 200
        assert first.result["resultType"] == "input_required"
        assert narrow.status == 403 and 'scope="deploy"' in narrow.headers["www-authenticate"]
        assert (
            elsewhere.status == 401 and "another resource" in elsewhere.headers["www-authenticate"]
        )
        assert made_up.status == 401 and "not active" in made_up.headers["www-authenticate"]
        assert revoked.status == 401 and "not active" in revoked.headers["www-authenticate"]
        assert stack_status(aws_env, name, role_arn=None) is None
    finally:
        server.stop()


def test_after_a_key_rotation_new_tokens_pass_and_one_signed_by_the_old_key_does_not(
    stack: Stack,
) -> None:
    old = stack.authorization.token("alice-app")
    assert call(stack.url, old, "tools/list", {}).status == 200
    stack.authorization.restart([signing_key("key-2")])
    # An unknown kid fetches the keys again, but no more often than the server's interval.
    time.sleep(KEY_REFRESH_INTERVAL_SECONDS + 0.5)
    new = stack.authorization.token("alice-app")
    assert jwt.get_unverified_header(new)["kid"] == "key-2"
    fresh = call(stack.url, new, "tools/list", {})
    replayed = call(stack.url, old, "tools/list", {})
    show(
        "rotation (key-1 -> key-2)",
        [
            f"new token (kid key-2) -> {fresh.status}",
            f"old token (kid key-1, unexpired) -> {replayed.status} "
            + replayed.headers.get("www-authenticate", ""),
        ],
    )
    assert fresh.status == 200
    assert replayed.status == 401


def test_with_the_authorization_server_unreachable_a_call_is_503_and_nothing_runs(
    project: Installed, stack: Stack, aws_env: dict[str, str]
) -> None:
    # A second server whose authorization server is nowhere: no keys can be had.
    port = free_port()
    env = {
        **stack.env,
        "MRTR_OAUTH_ISSUER": f"http://127.0.0.1:{free_port()}",
        "MRTR_OAUTH_RESOURCE": f"http://127.0.0.1:{port}/mcp",
    }
    command = [str(project.tool(DEFAULT_SLUG)), "http", "--host", "127.0.0.1"]
    server = start_replica(
        "no-authorization-server", [*command, "--port", str(port)], env, stack.home
    )
    try:
        name = f"oauth-{secrets.token_hex(3)}"
        token = stack.authorization.token("alice-app")
        answer = call(
            server.url,
            token,
            "tools/call",
            {"name": "deploy_to_aws", "arguments": {"stack": name}},
        )
        show(
            "authorization server down",
            [
                (
                    f"tools/call deploy_to_aws -> {answer.status}, Retry-After "
                    f"{answer.headers.get('retry-after')}: {answer.messages[0]['error']['message']}"
                )
            ],
        )
        assert answer.status == 503
        assert answer.headers["retry-after"] == "5"
        assert stack_status(aws_env, name, role_arn=None) is None
    finally:
        server.stop()


# -- limits per principal, and readiness --------------------------------------------------------


def pause_redis(port: int, milliseconds: int) -> None:
    """CLIENT PAUSE: redis answers no client for that long, as a store that hangs would."""
    words = [b"CLIENT", b"PAUSE", str(milliseconds).encode(), b"ALL"]
    command = b"*%d\r\n" % len(words) + b"".join(b"$%d\r\n%s\r\n" % (len(w), w) for w in words)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as connection:
        connection.sendall(command)
        assert connection.recv(64).startswith(b"+OK")


def test_one_principal_past_its_rate_is_429_while_another_is_served_and_readiness_follows_the_store(
    project: Installed, stack: Stack
) -> None:
    port = free_port()
    with running_redis(find_redis_server()) as redis:
        # The same resource as the stack's (its tokens are for it); its own port and store.
        env = {
            **stack.env,
            "MRTR_TASK_STORE": redis.url,
            "MRTR_HTTP_RATE_PER_PRINCIPAL": "3",
        }
        command = [str(project.tool(DEFAULT_SLUG)), "http", "--host", "127.0.0.1"]
        server = start_replica("limits", [*command, "--port", str(port)], env, stack.home)
        try:
            url = server.url
            alice = stack.authorization.token("alice-app")
            bob = stack.authorization.token("bob-app")
            lines = []
            statuses = []
            for _ in range(8):
                answer = call(url, alice, "tools/list", {})
                statuses.append(answer.status)
            refused = call(url, alice, "tools/list", {})
            served = call(url, bob, "tools/list", {})
            lines.append(f"alice, 8 requests at once (rate 3/s, burst 6): {statuses}")
            retry = refused.headers.get("retry-after")
            message = refused.messages[0]["error"]["message"]
            lines.append(f"alice again -> {refused.status}, Retry-After {retry}: {message}")
            lines.append(f"bob meanwhile -> {served.status}")
            assert statuses[:6] == [200] * 6 and 429 in statuses[6:]
            assert refused.status == 429 and refused.headers["retry-after"] == "1"
            assert served.status == 200
            # Readiness: not behind OAuth; false while the store does not answer, then true.
            base = url.removesuffix("/mcp")
            before = http_request("GET", base + "/readyz")
            pause_redis(redis.port, 4000)
            time.sleep(1.2)  # a verdict of "works" stands a second (READY_CACHE_SECONDS)
            during = http_request("GET", base + "/readyz")
            live = http_request("GET", base + "/healthz")
            time.sleep(3.5)
            after = http_request("GET", base + "/readyz")
            for label, (status, _, body) in (
                ("/readyz", before),
                ("/readyz, redis paused", during),
                ("/healthz, redis paused", live),
                ("/readyz, redis back", after),
            ):
                lines.append(f"{label} -> {status} {body.decode().strip()}")
            show("limits and readiness (OAuth principals, tasks on Redis)", lines)
            assert before[0] == 200 and after[0] == 200 and live[0] == 200
            assert during[0] == 503
            assert "task store did not answer" in json.loads(during[2])["reason"]
        finally:
            server.stop()
