"""An authorization server stub for the HTTP section's `baked oauth` row: its metadata and its
JWK Set on loopback (stdlib `http.server`, a daemon thread in the bench process), and one JWT
access token (RS256, RFC 9068) for the bench's resource, minted once by the baked venv's PyJWT
(the project's `oauth` extra; the bench itself stays stdlib only).

The server under test fetches the keys once, at its first request; from then on every request
costs what verifying its token costs, which is what the row measures. The tests of the real
thing run against `oidc-provider` (tests/deployments/test_oauth_resource_server.py).
"""

from __future__ import annotations

import json
import subprocess
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import driver

#: The audience of the bench's tokens: any canonical https URI will do (the Host the bench
#: sends is the loopback one the server binds; the audience is only compared).
RESOURCE = "https://mcp.bench.invalid/mcp"

_MINT = """
import json, sys, time
import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm
issuer, resource = sys.argv[1], sys.argv[2]
key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
public = RSAAlgorithm.to_jwk(key.public_key(), as_dict=True)
public.update(kid="bench", use="sig", alg="RS256")
now = int(time.time())
claims = {"iss": issuer, "sub": "bench", "client_id": "bench", "aud": resource,
          "scope": "mcp", "iat": now, "exp": now + 24 * 3600}
token = jwt.encode(claims, key, algorithm="RS256", headers={"kid": "bench", "typ": "at+jwt"})
print(json.dumps({"jwks": {"keys": [public]}, "token": token}))
"""


class Unavailable(driver.BenchError):
    """The baked venv cannot mint a token (no `oauth` extra): the row is left out."""


@dataclass(frozen=True)
class Stub:
    issuer: str
    token: str

    @property
    def env(self) -> dict[str, str]:
        # One principal sends every request of the load: its own limits (50 requests a second
        # by default) are lifted, so that the row measures the token's verify, not the 429s.
        return {
            "MRTR_OAUTH_ISSUER": self.issuer,
            "MRTR_OAUTH_RESOURCE": RESOURCE,
            "MRTR_HTTP_RATE_PER_PRINCIPAL": "1000000000",
            "MRTR_HTTP_CALLS_PER_PRINCIPAL": "1000",
        }


def start(baked_python: Path) -> Stub:
    """Serve the stub for the rest of the bench run and mint its token."""
    documents: dict[str, Any] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = documents.get(self.path)
            if body is None:
                self.send_error(404)
                return
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    issuer = f"http://127.0.0.1:{server.server_address[1]}"
    minted = subprocess.run(
        [str(baked_python), "-c", _MINT, issuer, RESOURCE],
        capture_output=True,
        text=True,
        check=False,
    )
    if minted.returncode != 0:
        server.server_close()
        raise Unavailable(f"cannot mint a token with the baked venv: {minted.stderr[-300:]}")
    found = json.loads(minted.stdout)
    documents["/.well-known/oauth-authorization-server"] = {
        "issuer": issuer,
        "jwks_uri": f"{issuer}/jwks",
    }
    documents["/jwks"] = found["jwks"]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return Stub(issuer=issuer, token=found["token"])
