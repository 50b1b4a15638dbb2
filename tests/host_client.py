"""A host's side of the stdio wire, for tests that start the server as a host would: the
2026-07-28 request ``_meta``, plausible answers to a tool's input requests, and a live server
process spoken to one JSON-RPC line at a time."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Mapping, Sequence
from typing import Any

MODERN = "2026-07-28"
ALL_CAPABILITIES = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}


# Strings tried, in order, against a property's pattern (a version, then plain words).
CANDIDATES = ("1.0.0", "demo", "Demo notes", "yes")


def value_for(prop: Mapping[str, Any]) -> Any:
    if "const" in prop:
        return prop["const"]
    if "enum" in prop:
        return prop["enum"][0]
    for option in prop.get("oneOf", []):
        if "const" in option:
            return option["const"]
    if prop.get("default") is not None:
        return prop["default"]
    kind = prop.get("type", "string")
    if kind == "boolean":
        return True
    if kind in ("integer", "number"):
        return prop.get("minimum", 1)
    if kind == "array":
        return []
    pattern = prop.get("pattern")
    for candidate in CANDIDATES:
        if pattern is None or re.search(pattern, candidate):
            return candidate
    return "demo"


def fill(schema: Mapping[str, Any], *, required_only: bool) -> dict[str, Any]:
    """Plausible values for a flat object schema: enough to walk a sample tool's rounds."""
    properties = schema.get("properties", {})
    names = schema.get("required", []) if required_only else list(properties)
    return {name: value_for(properties[name]) for name in names}


def answer(request: Mapping[str, Any]) -> dict[str, Any]:
    method, params = request["method"], request.get("params", {})
    if method == "elicitation/create":
        if params.get("mode") == "url":
            return {"action": "accept"}
        schema = params.get("requestedSchema", {})
        return {"action": "accept", "content": fill(schema, required_only=False)}
    if method == "sampling/createMessage":
        return {
            "role": "assistant",
            "content": {"type": "text", "text": "42"},
            "model": "test-model",
            "stopReason": "endTurn",
        }
    if method == "roots/list":
        return {"roots": [{"uri": "file:///tmp", "name": "tmp"}]}
    raise AssertionError(f"unexpected input request {method}")


def meta() -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": ALL_CAPABILITIES,
        "io.modelcontextprotocol/clientInfo": {"name": "host-config-test", "version": "0"},
    }


class LiveServer:
    """A server process kept running (cwd ``/``), spoken to one request at a time over its pipes.

    Each ``request`` writes one line and reads lines until the response with that id (skipping
    notifications such as progress); ``kill`` ends it the way a host that crashes would.
    """

    def __init__(self, argv: Sequence[str], env: Mapping[str, str]) -> None:
        self.process = subprocess.Popen(
            list(argv),
            cwd="/",
            env=dict(env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )
        self.next_id = 1

    def request(self, method: str, params: Mapping[str, Any]) -> Any:
        assert self.process.stdin is not None and self.process.stdout is not None
        request_id = self.next_id
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": dict(params)}
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()
        while True:
            line = self.process.stdout.readline()
            assert line, f"the server exited ({self.process.wait()}): {self.stderr()}"
            response = json.loads(line)
            if response.get("id") == request_id:
                assert "error" not in response, response
                return response["result"]

    def kill(self) -> str:
        """Kill it (no clean shutdown) and return everything it wrote to stderr."""
        self.process.kill()
        return self.stderr()

    def close(self) -> str:
        """End of input: the server must exit 0. Returns its stderr."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        assert self.process.wait(timeout=60) == 0, self.stderr()
        return self.stderr()

    def stderr(self) -> str:
        self.process.wait(timeout=60)
        assert self.process.stderr is not None and self.process.stdout is not None
        self.process.stdout.close()
        text = self.process.stderr.read()
        self.process.stderr.close()
        return text
