"""The generated project's local stack (`local-stack/start.py`, baked with the HTTP wing): one
command that starts a real authorization server (npm `oidc-provider`, installed by the script's
own `npm ci`) and the project's server as its resource server, then walks both ways in that it
prints: a host's (dynamic registration, RFC 7591; authorization code with PKCE and a resource
indicator) and a script's (client credentials), each to a `tools/call`. Ctrl-C stops both.
Run with ``-rA`` to see the transcript.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import http.client
import http.cookiejar
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
import pytest
from bakery import DEFAULT_SLUG, Installed, run
from host_client import MODERN
from peers.node import NodePeers, PeersUnavailableError, ensure_node_peers

pytestmark = pytest.mark.baked_checks

Json = dict[str, Any]
READY_TIMEOUT_SECONDS = 180  # the first run installs oidc-provider with npm ci
STOP_TIMEOUT_SECONDS = 20
REDIRECT_URI = "http://127.0.0.1:1/callback"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class LocalStack:
    process: subprocess.Popen[str]
    printed: str
    resource: str
    issuer: str
    secret: str
    ports: tuple[int, int]


@contextlib.contextmanager
def running_stack(project: Installed, home: Path, *flags: str) -> Iterator[LocalStack]:
    """`local-stack/start.py` of `project`, copied into `home` (its node_modules must never
    land in the bake other modules read), started with `flags` and stopped after."""
    try:
        peers: NodePeers = ensure_node_peers()
    except PeersUnavailableError as error:
        pytest.fail(f"cannot install Node: {error}")
    shutil.copytree(project.project / "local-stack", home / "local-stack")
    key = home / "signing-key"
    run([project.tool(DEFAULT_SLUG), "keygen", "--path", key], cwd=home)
    port, issuer_port = free_port(), free_port()
    # The developer's environment as it is (npm's registry, proxy and CA settings come with it),
    # but for this server's own settings and state.
    env = {name: value for name, value in os.environ.items() if not name.startswith("MRTR_")}
    env |= {
        "PATH": os.pathsep.join([str(peers.node.parent), os.environ.get("PATH", os.defpath)]),
        "XDG_STATE_HOME": str(home / "state"),
        "MRTR_SIGNING_KEY_FILE": str(key),
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": str(home / "no-aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(home / "no-aws-credentials"),
    }
    script = home / "local-stack" / "start.py"
    command = [str(project.python), str(script), "--port", str(port)]
    command += ["--issuer-port", str(issuer_port), *flags]
    with (home / "stack.log").open("w") as log:
        process = subprocess.Popen(
            command,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
        try:
            assert process.stdout is not None
            printed: list[str] = []
            deadline = time.monotonic() + READY_TIMEOUT_SECONDS
            while "Ctrl-C stops both." not in "".join(printed):
                line = process.stdout.readline()
                if not line or time.monotonic() > deadline:
                    pytest.fail(f"the stack did not start:\n{(home / 'stack.log').read_text()}")
                printed.append(line)
            text = "".join(printed)
            found = re.search(r"-u local-script:(\S+) ", text)
            assert found, text
            yield LocalStack(
                process,
                text,
                f"http://127.0.0.1:{port}/mcp",
                f"http://127.0.0.1:{issuer_port}",
                found[1],
                (port, issuer_port),
            )
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()


@pytest.fixture(scope="module")
def project(installed: Any) -> Installed:
    found: Installed = installed("aws")
    return found


@pytest.fixture(scope="module")
def stack(project: Installed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    with running_stack(project, tmp_path_factory.mktemp("local-stack")) as running:
        yield running


def script_token(stack: LocalStack) -> str:
    """A token by the client credentials grant, as start.py prints how to get one."""
    discovery_url = stack.issuer + "/.well-known/openid-configuration"
    with urllib.request.urlopen(discovery_url, timeout=30) as answer:  # noqa: S310
        token_endpoint = json.load(answer)["token_endpoint"]
    scope = re.search(r"-d scope='([^']*)'", stack.printed)
    assert scope, stack.printed
    tokens = post_form(
        token_endpoint,
        {"grant_type": "client_credentials", "resource": stack.resource, "scope": scope[1]},
        basic=("local-script", stack.secret),
    )
    access_token: str = tokens["access_token"]
    return access_token


def call(stack: LocalStack, token: str, method: str, params: Json) -> tuple[int, Json]:
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": method,
        "Authorization": f"Bearer {token}",
    }
    if "name" in params:
        headers["Mcp-Name"] = params["name"]
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    target = urllib.parse.urlsplit(stack.resource)
    connection = http.client.HTTPConnection(target.netloc, timeout=60)
    try:
        connection.request("POST", target.path, json.dumps(body), headers)
        response = connection.getresponse()
        payload = response.read()
    finally:
        connection.close()
    return response.status, json.loads(payload)


class NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class Browser:
    """What a host's browser window does: follows the sign-in pages with its cookies, one hop
    at a time, until the authorization server sends it back to the host's redirect URI."""

    def __init__(self) -> None:
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()), NoRedirects()
        )

    def open(self, url: str, form: dict[str, str] | None = None) -> tuple[str | None, str]:
        """(where a redirect points, "") or (None, the page)."""
        data = urllib.parse.urlencode(form).encode() if form is not None else None
        try:
            request = urllib.request.Request(url, data=data)  # noqa: S310 -- loopback http
            with self.opener.open(request, timeout=30) as answer:
                return None, answer.read().decode()
        except urllib.error.HTTPError as redirect:
            assert redirect.code in (302, 303), (url, redirect.code, redirect.read()[:500])
            return urllib.parse.urljoin(url, redirect.headers["Location"]), ""

    def sign_in(self, url: str, login: str) -> tuple[str, list[str]]:
        """From the authorization request to the redirect URI: each page's form submitted
        as a person would (the sign-in page with `login`, then the consent page)."""
        seen = []
        for _ in range(12):
            if url.startswith(REDIRECT_URI):
                return url, seen
            target, page = self.open(url)
            if target is None:
                prompt = re.search(r'name="prompt" value="(\w+)"', page)
                assert prompt, page[:500]
                seen.append(prompt[1])
                form = {"prompt": prompt[1]}
                if prompt[1] == "login":
                    form |= {"login": login, "password": "any"}
                target, _ = self.open(url, form)
                assert target is not None
            url = target
        raise AssertionError(f"no way back to the host after {seen}")


def post_json(url: str, body: Json) -> Json:
    request = urllib.request.Request(  # noqa: S310 -- the stack's loopback http
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310
        found: Json = json.load(answer)
        return found


def post_form(url: str, form: dict[str, str], basic: tuple[str, str] | None = None) -> Json:
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    if basic is not None:
        headers["Authorization"] = "Basic " + base64.b64encode(":".join(basic).encode()).decode()
    request = urllib.request.Request(  # noqa: S310 -- the stack's loopback http
        url, urllib.parse.urlencode(form).encode(), headers
    )
    with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310
        found: Json = json.load(answer)
        return found


def test_a_host_registers_signs_its_user_in_with_pkce_and_calls_a_scoped_tool(
    stack: LocalStack,
) -> None:
    lines = [f"printed by start.py:{stack.printed}"]
    # What a host does after the server's 401: read the metadata, then the issuer's.
    metadata_url = stack.resource.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
    with urllib.request.urlopen(metadata_url, timeout=30) as answer:  # noqa: S310
        resource_metadata = json.load(answer)
    assert resource_metadata["authorization_servers"] == [stack.issuer]
    scope = " ".join(resource_metadata["scopes_supported"])
    discovery_url = stack.issuer + "/.well-known/openid-configuration"
    with urllib.request.urlopen(discovery_url, timeout=30) as answer:  # noqa: S310
        discovery = json.load(answer)
    registered = post_json(
        discovery["registration_endpoint"],
        {
            "client_name": "a host",
            "redirect_uris": [REDIRECT_URI],
            "grant_types": ["authorization_code"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        },
    )
    lines.append(f"POST /reg (RFC 7591) -> client_id {registered['client_id']}")
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
    state = secrets.token_urlsafe(12)
    query = {
        "client_id": registered["client_id"],
        "response_type": "code",
        "redirect_uri": REDIRECT_URI,
        "scope": scope,
        "resource": stack.resource,
        "state": state,
        "code_challenge": challenge.rstrip(b"=").decode(),
        "code_challenge_method": "S256",
    }
    authorize = discovery["authorization_endpoint"] + "?" + urllib.parse.urlencode(query)
    back, pages = Browser().sign_in(authorize, "alice")
    returned = urllib.parse.parse_qs(urllib.parse.urlsplit(back).query)
    assert returned["state"] == [state], back
    lines.append(f"browser: pages {pages} as alice -> back to the host with a code")
    tokens = post_form(
        discovery["token_endpoint"],
        {
            "grant_type": "authorization_code",
            "code": returned["code"][0],
            "redirect_uri": REDIRECT_URI,
            "code_verifier": verifier,
            "client_id": registered["client_id"],
            "resource": stack.resource,
        },
    )
    claims = jwt.decode(tokens["access_token"], options={"verify_signature": False})
    lines.append(
        "POST /token (code + PKCE verifier + resource) -> "
        + json.dumps({name: claims.get(name) for name in ("sub", "aud", "scope")})
    )
    status, listed = call(stack, tokens["access_token"], "tools/list", {})
    name = f"local-{secrets.token_hex(3)}"
    params = {"name": "deploy_to_aws", "arguments": {"stack": name}}
    deploy_status, deploy = call(stack, tokens["access_token"], "tools/call", params)
    lines.append(f"tools/list -> {status}; tools/call deploy_to_aws -> {deploy_status}")
    print("\n".join(lines))  # noqa: T201 (the transcript this test exists to show)
    assert claims["sub"] == "alice" and claims["aud"] == stack.resource
    assert "deploy" in claims["scope"].split()
    assert status == 200 and "deploy_to_aws" in [t["name"] for t in listed["result"]["tools"]]
    assert deploy_status == 200 and deploy["result"]["resultType"] == "input_required"


def test_a_script_gets_a_token_as_printed_and_ctrl_c_stops_both(stack: LocalStack) -> None:
    status, _ = call(stack, script_token(stack), "tools/list", {})
    unauthorised, refused = call(stack, "not-a-token", "tools/list", {})
    assert status == 200 and unauthorised == 401, refused
    stack.process.send_signal(signal.SIGINT)
    assert stack.process.wait(timeout=STOP_TIMEOUT_SECONDS) == 0
    deadline = time.monotonic() + STOP_TIMEOUT_SECONDS
    while any(listening(port) for port in stack.ports) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(listening(port) for port in stack.ports)


def test_with_opaque_tokens_the_server_introspects_them(project: Installed, tmp_path: Path) -> None:
    with running_stack(project, tmp_path, "--opaque") as stack:
        token = script_token(stack)
        status, listed = call(stack, token, "tools/list", {})
        made_up, _ = call(stack, secrets.token_urlsafe(32), "tools/list", {})
        print(f"--opaque: a {len(token)}-character token -> {status}; a made-up one -> {made_up}")  # noqa: T201
        assert "." not in token  # not a JWT: only the authorization server can read it
        assert status == 200 and "deploy_to_aws" in [t["name"] for t in listed["result"]["tools"]]
        assert made_up == 401
