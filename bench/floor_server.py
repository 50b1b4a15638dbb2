"""The floor: the least a Python stdio MCP server can do for the benchmark's traffic.

Stdlib only, one thread, one blocking newline-JSON loop. It answers exactly what the driver
sends and nothing more, so its figures are the ceiling no Python server on this interpreter can
beat by much: `server/discover`, `initialize` (+ `notifications/initialized`), and `tools/call`
for `echo` and `deploy` (the two-round elicitation tool, same shape as `bench_tools.py`).

- 2026-07-28 era (`params._meta` carries the protocol version): `deploy` answers round 1 with an
  `input_required` result holding two form elicitations and an HMAC-SHA256 `requestState` bound
  to the tool, a digest of its arguments and an expiry; round 2 verifies the token and answers.
- 2025-11-25 era (after `initialize`): `deploy` sends the two `elicitation/create` requests to
  the client, reads their answers off stdin (the loop blocks meanwhile: a floor, not a server).

No validation beyond what the driver's traffic needs. Never use this as a server.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import sys
import time
from typing import Any

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
META_VERSION = "io.modelcontextprotocol/protocolVersion"
SERVER_INFO = {"name": "floor", "version": "0"}
TTL_SECONDS = 600
KEY = os.urandom(32)

ECHO_TOOL = {
    "name": "echo",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
}
CONFIRM_REQUEST = {
    "method": "elicitation/create",
    "params": {
        "mode": "form",
        "message": "Deploy this stack?",
        "requestedSchema": {
            "type": "object",
            "properties": {"confirmed": {"type": "boolean"}},
            "required": ["confirmed"],
        },
    },
}
ROLE_REQUEST = {
    "method": "elicitation/create",
    "params": {
        "mode": "form",
        "message": "Which IAM role should the deploy assume?",
        "requestedSchema": {
            "type": "object",
            "properties": {"arn": {"type": "string"}},
            "required": ["arn"],
        },
    },
}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def binding_digest(tool: str, arguments: object) -> str:
    canonical = json.dumps([tool, arguments], sort_keys=True, separators=(",", ":"))
    return _b64(hashlib.sha256(canonical.encode()).digest())


def mint(binding: str, answers: dict[str, Any], key: bytes = KEY) -> str:
    body = json.dumps(
        {"b": binding, "a": answers, "e": int(time.time()) + TTL_SECONDS}, separators=(",", ":")
    ).encode()
    return _b64(body) + "." + _b64(hmac.new(key, body, hashlib.sha256).digest())


def verify(token: str, binding: str, key: bytes = KEY) -> dict[str, Any] | None:
    try:
        body_text, mac_text = token.split(".")
        body = _unb64(body_text)
        if not hmac.compare_digest(_unb64(mac_text), hmac.new(key, body, hashlib.sha256).digest()):
            return None
        state = json.loads(body)
    except ValueError:
        return None
    if state.get("b") != binding or state.get("e", 0) < time.time():
        return None
    answers = state.get("a")
    return answers if isinstance(answers, dict) else None


def _text(text: str, *, modern: bool) -> dict[str, Any]:
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": False}
    if modern:
        result["resultType"] = "complete"
        result["_meta"] = {"io.modelcontextprotocol/serverInfo": SERVER_INFO}
    return result


def _deploy_text(arguments: dict[str, Any], answers: dict[str, Any]) -> str:
    confirm = answers.get("confirm") or {}
    if confirm.get("action") != "accept" or not (confirm.get("content") or {}).get("confirmed"):
        return "Deploy cancelled by user."
    arn = ((answers.get("role-arn") or {}).get("content") or {}).get("arn", "")
    return f"Deployed {arguments.get('stack')} to {arguments.get('region', 'us-east-1')} as {arn}"


class Floor:
    def __init__(self) -> None:
        self.legacy = False
        self.next_id = 0
        self.stdin = sys.stdin.buffer
        self.stdout = sys.stdout

    def send(self, message: dict[str, Any]) -> None:
        self.stdout.write(json.dumps(message, separators=(",", ":")) + "\n")
        self.stdout.flush()

    def ask_client(self, requests: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """Legacy era: send every request to the client at once, block until all are answered."""
        waiting: dict[str, str] = {}
        for key, request in requests.items():
            self.next_id += 1
            request_id = f"floor-{self.next_id}"
            waiting[request_id] = key
            self.send({"jsonrpc": "2.0", "id": request_id, **request})
        answers: dict[str, Any] = {}
        while waiting:
            line = self.stdin.readline()
            if not line:
                raise SystemExit(0)
            reply = json.loads(line)
            reply_id = reply.get("id")
            if isinstance(reply_id, str) and reply_id in waiting:
                answers[waiting.pop(reply_id)] = reply.get("result")
        return answers

    def call_tool(self, params: dict[str, Any], modern: bool) -> dict[str, Any]:
        name = params.get("name")
        arguments = params.get("arguments") or {}
        if name == "echo":
            return _text(str(arguments.get("text", "")), modern=modern)
        if name != "deploy":
            raise LookupError(name)
        requests = {"confirm": CONFIRM_REQUEST, "role-arn": ROLE_REQUEST}
        if not modern:
            return _text(_deploy_text(arguments, self.ask_client(requests)), modern=False)
        binding = binding_digest("deploy", arguments)
        answers: dict[str, Any] = {}
        token = params.get("requestState")
        if token is not None:
            verified = verify(token, binding) if isinstance(token, str) else None
            if verified is None:
                raise ValueError("Invalid requestState")
            answers.update(verified)
        answers.update(params.get("inputResponses") or {})
        missing = {key: req for key, req in requests.items() if key not in answers}
        if missing:
            return {
                "resultType": "input_required",
                "inputRequests": missing,
                "requestState": mint(binding, answers),
                "_meta": {"io.modelcontextprotocol/serverInfo": SERVER_INFO},
            }
        return _text(_deploy_text(arguments, answers), modern=True)

    def handle(self, message: dict[str, Any]) -> dict[str, Any] | None:
        method = message.get("method")
        if "id" not in message or method is None:
            return None  # notifications (and stray responses)
        params = message.get("params") or {}
        modern = (params.get("_meta") or {}).get(META_VERSION) == MODERN
        try:
            if method == "server/discover":
                result: dict[str, Any] = {
                    "resultType": "complete",
                    "supportedVersions": [MODERN, LEGACY],
                    "capabilities": {"tools": {}},
                    "ttlMs": 0,
                    "cacheScope": "private",
                    "_meta": {"io.modelcontextprotocol/serverInfo": SERVER_INFO},
                }
            elif method == "initialize":
                self.legacy = True
                result = {
                    "protocolVersion": LEGACY,
                    "capabilities": {"tools": {}},
                    "serverInfo": SERVER_INFO,
                }
            elif method == "tools/list":
                result = {"tools": [ECHO_TOOL], **({"resultType": "complete"} if modern else {})}
            elif method == "tools/call":
                result = self.call_tool(params, modern and not self.legacy)
            else:
                return _error(message["id"], -32601, "Method not found")
        except (LookupError, ValueError) as exc:
            return _error(message["id"], -32602, str(exc))
        return {"jsonrpc": "2.0", "id": message["id"], "result": result}

    def run(self) -> None:
        for line in self.stdin:
            try:
                message = json.loads(line)
            except ValueError:
                self.send(_error(None, -32700, "Parse error"))
                continue
            response = self.handle(message)
            if response is not None:
                self.send(response)


def _error(request_id: object, code: int, text: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": text}}


if __name__ == "__main__":
    Floor().run()
