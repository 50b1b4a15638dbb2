"""A scripted stdio MCP server for testing the client in isolation (stdlib only).

Run as ``python fake_stdio_server.py MODE``:

- ``modern``  2026-07-28: every request must carry ``params._meta`` (else -32602). Tools:
  ``three_round`` (asks a, then b, then c; one new key per round), ``always`` (always
  input_required), ``state_only`` (two state-only rounds with odd tokens), ``pair`` (two keys
  in one round, echoes the answers), ``progress``, ``slow`` (never answers), ``exit`` (dies),
  ``ask_anyway`` (sends a request to the client, which a modern server must not),
  ``bad_result_type``, ``no_result_type``.
- ``junk``    ``modern``, but first prints a line that is not JSON to stdout.
- ``chatty``  ``modern``, but writes 256 KiB to stderr before every response.
- ``legacy``  2025-11-25: ``initialize``; tool ``ask`` sends ping, elicitation/create,
  sampling/createMessage, roots/list and an unknown method to the client and reports the
  answers.
- ``hang``    ignores SIGTERM and stdin; announces itself with one notification.

The method ``fake/received`` returns everything received so far and every requestState sent,
so tests can check the exact wire traffic.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import sys
import time
from typing import Any

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
STATE_ONLY_TOKENS = ['s1 \u00e9\u2713 +/== \\ "quoted" \u2028', "s2\ttab  two  spaces"]

received: list[Any] = []
sent_states: list[str] = []
pending_tool_calls: dict[str, dict[str, Any]] = {}  # legacy: server request id -> call info
always_counter = [0]


def write(message: dict[str, Any]) -> None:
    if MODE == "chatty":
        sys.stderr.write("chatty " + "x" * (256 * 1024) + "\n")
        sys.stderr.flush()
    if isinstance(message.get("result"), dict):
        state = message["result"].get("requestState")
        if isinstance(state, str):
            sent_states.append(state)
    sys.stdout.buffer.write(json.dumps(message).encode("utf-8") + b"\n")
    sys.stdout.buffer.flush()


def result(request_id: object, body: dict[str, Any]) -> None:
    write({"jsonrpc": "2.0", "id": request_id, "result": body})


def error(request_id: object, code: int, message: str, data: object = None) -> None:
    err: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    write({"jsonrpc": "2.0", "id": request_id, "error": err})


def elicit(message: str, prop: str) -> dict[str, Any]:
    schema = {"type": "object", "properties": {prop: {"type": "string"}}, "required": [prop]}
    return {
        "method": "elicitation/create",
        "params": {"message": message, "requestedSchema": schema},
    }


def encode_state(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data, sort_keys=True).encode()).decode()


def decode_state(token: object) -> Any:
    if not isinstance(token, str):
        return {}
    return json.loads(base64.urlsafe_b64decode(token.encode()))


def input_required(requests: dict[str, Any] | None, state: str | None) -> dict[str, Any]:
    body: dict[str, Any] = {"resultType": "input_required"}
    if requests is not None:
        body["inputRequests"] = requests
    if state is not None:
        body["requestState"] = state
    return body


def complete(text: str, structured: object = None) -> dict[str, Any]:
    body: dict[str, Any] = {"resultType": "complete", "content": [{"type": "text", "text": text}]}
    if structured is not None:
        body["structuredContent"] = structured
    return body


def three_round(params: dict[str, Any]) -> dict[str, Any]:
    state = decode_state(params.get("requestState"))
    answers = dict(state.get("answers", {}))
    answers.update(params.get("inputResponses") or {})
    if state and state.get("arguments") != params.get("arguments"):
        raise ValueError("arguments changed between rounds")
    asks = {
        "a": elicit("Your name?", "name"),
        "b": {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}},
        "c": {"method": "roots/list"},
    }
    for key, ask in asks.items():
        if key not in answers:
            token = encode_state({"answers": answers, "arguments": params.get("arguments")})
            return input_required({key: ask}, token)
    return complete("done", {"answers": answers})


def state_only(params: dict[str, Any]) -> dict[str, Any]:
    token = params.get("requestState")
    if token is None:
        return input_required(None, STATE_ONLY_TOKENS[0])
    if token == STATE_ONLY_TOKENS[0]:
        return input_required(None, STATE_ONLY_TOKENS[1])
    if token == STATE_ONLY_TOKENS[1]:
        return complete("settled")
    raise ValueError("requestState was not echoed byte-exact")


def call_tool(request_id: object, params: dict[str, Any]) -> None:
    name = params.get("name")
    if name == "three_round":
        result(request_id, three_round(params))
    elif name == "always":
        always_counter[0] += 1
        result(
            request_id,
            input_required({"again": elicit("Again?", "v")}, f"always-{always_counter[0]}"),
        )
    elif name == "state_only":
        result(request_id, state_only(params))
    elif name == "pair":
        if "inputResponses" not in params:
            asks = {"confirm": elicit("Sure?", "ok"), "name": elicit("Name?", "name")}
            result(request_id, input_required(asks, None))
        else:
            result(request_id, complete("pair", {"inputResponses": params["inputResponses"]}))
    elif name == "progress":
        meta = params["_meta"]
        token = meta.get("progressToken")
        for step in (1, 2):
            note = {"progressToken": token, "progress": step, "total": 2}
            write({"jsonrpc": "2.0", "method": "notifications/progress", "params": note})
        result(request_id, complete("progressed"))
    elif name == "slow":
        pass  # never answered; the client gives up and sends notifications/cancelled
    elif name == "exit":
        sys.stderr.write("fake server exiting on purpose\n")
        sys.stderr.flush()
        os._exit(3)
    elif name == "ask_anyway":
        write({"jsonrpc": "2.0", "id": "srv-1", "method": "elicitation/create", "params": {}})
        pending_tool_calls["srv-1"] = {"call": request_id, "responses": {}, "want": 1}
    elif name == "bad_result_type":
        result(request_id, {"resultType": "weird"})
    elif name == "no_result_type":
        result(request_id, {"content": []})
    else:
        error(request_id, -32602, f"Unknown tool: {name}", {"tool": name})


def legacy_ask(request_id: object) -> None:
    asks = {
        "s-ping": ("ping", None),
        "s-elicit": ("elicitation/create", elicit("Legacy name?", "name")["params"]),
        "s-sample": ("sampling/createMessage", {"messages": [], "maxTokens": 5}),
        "s-roots": ("roots/list", None),
        "s-bogus": ("bogus/method", {}),
    }
    info: dict[str, Any] = {"call": request_id, "responses": {}, "want": len(asks)}
    for server_id, (method, params) in asks.items():
        pending_tool_calls[server_id] = info
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": server_id, "method": method}
        if params is not None:
            message["params"] = params
        write(message)


def on_response(message: dict[str, Any]) -> None:
    info = pending_tool_calls.pop(str(message.get("id")), None)
    if info is None:
        return
    responses = info["responses"]
    responses[str(message["id"])] = {k: v for k, v in message.items() if k != "jsonrpc"}
    if len(responses) == info["want"]:
        body: dict[str, Any] = {"content": [], "structuredContent": {"responses": responses}}
        if MODE != "legacy":
            body["resultType"] = "complete"
        result(info["call"], body)


def handle(message: dict[str, Any]) -> None:
    if "method" not in message:
        on_response(message)
        return
    method = message["method"]
    request_id = message.get("id")
    params = message.get("params") or {}
    if "id" not in message:
        return  # notifications are only recorded
    if method == "fake/received":
        result(
            request_id,
            {"resultType": "complete", "messages": received[:-1], "sentStates": sent_states},
        )
        return
    if MODE == "legacy":
        if method == "initialize":
            result(
                request_id,
                {
                    "protocolVersion": LEGACY,
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "fake", "version": "0"},
                },
            )
        elif method == "tools/call" and params.get("name") == "ask":
            legacy_ask(request_id)
        else:
            error(request_id, -32601, f"Method not found: {method}")
        return
    meta = params.get("_meta") if isinstance(params, dict) else None
    if (
        not isinstance(meta, dict)
        or meta.get("io.modelcontextprotocol/protocolVersion") != MODERN
        or "io.modelcontextprotocol/clientCapabilities" not in meta
    ):
        error(request_id, -32602, "missing or invalid _meta")
        return
    if method == "tools/call":
        try:
            call_tool(request_id, params)
        except ValueError as exc:
            error(request_id, -32602, str(exc))
    elif method == "tools/list":
        result(request_id, {"resultType": "complete", "tools": []})
    else:
        error(request_id, -32601, f"Method not found: {method}")


def hang() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    write({"jsonrpc": "2.0", "method": "notifications/fake_ready"})
    while True:
        time.sleep(60)


def main() -> None:
    if MODE == "hang":
        hang()
    if MODE == "junk":
        sys.stdout.write("this is not JSON-RPC\n")
        sys.stdout.flush()
    while True:
        line = sys.stdin.buffer.readline()
        if not line:
            return  # stdin EOF: exit promptly, as stdio servers SHOULD
        try:
            message = json.loads(line)
        except ValueError:
            received.append({"raw": line.decode("utf-8", "replace")})
            error(None, -32700, "Parse error")
            continue
        received.append(message)
        if isinstance(message, dict):
            handle(message)


MODE = sys.argv[1] if len(sys.argv) > 1 else "modern"

if __name__ == "__main__":
    main()
