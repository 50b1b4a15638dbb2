"""Token micro-benchmark: mint and verify cost (µs) and size for 0, 1, 5 and 20 answers.

Run by `run.py` inside each server's own interpreter, printing one JSON object:

    <baked venv python> tokens.py baked <package>   # <package>.mrtr_runtime._tokens (HMAC-SHA256)
    <sdk venv python>   tokens.py sdk                # mcp 2.3.0: resolver state + AES-256-GCM seal
    <fastmcp venv py>   tokens.py fastmcp            # fastmcp 4.2.3: the SDK's boundary, sealing
                                                     # what a guard tool carries in request_state
    <any python>        tokens.py floor              # floor_server.mint/verify (HMAC-SHA256)

The token for N answers carries N elicitation-shaped answers and asks one more question, the
shape of a round-N+1 token. The SDK figures redo what its `RequestStateBoundary` and resolver
state do per round (mcp/server/request_state.py, mcpserver/resolve.py) with its own private
functions, so they are close to, not exactly, its per-round cost. FastMCP installs that same
`RequestStateBoundary` (fastmcp/server/low_level.py), and a guard tool puts its own plaintext in
`request_state` (the answers so far and what it asks next, as JSON); its figures are the
boundary's own `_seal` and `_unseal` on that plaintext, so they are its per-round cost.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import statistics
import sys
import time
import timeit
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

ANSWER_COUNTS = (0, 1, 5, 20)
ARGUMENTS = {"stack": "prod-api", "region": "eu-west-1"}


def answers_for(n: int) -> dict[str, dict[str, Any]]:
    return {
        f"question-{i}": {
            "action": "accept",
            "content": {"value": f"answer number {i}", "ok": True},
        }
        for i in range(n)
    }


def _check(ok: bool) -> None:
    if not ok:
        raise RuntimeError("a token did not verify back to what was minted")


def per_call_us(fn: Callable[[], object], *, run_seconds: float = 0.04, runs: int = 7) -> float:
    """Median over `runs` timed runs of about `run_seconds` each, per call, in microseconds."""
    timer = timeit.Timer(fn)
    number = 1
    while timer.timeit(number) < run_seconds / 4:
        number *= 2
    number *= 4
    return statistics.median(timer.repeat(repeat=runs, number=number)) / number * 1e6


def bench_baked(package: str) -> dict[str, Any]:
    state = importlib.import_module(f"{package}.mrtr_runtime._tokens")
    keys = importlib.import_module(f"{package}.mrtr_runtime._config")
    codec = keys.codec_from_environment(
        {"MRTR_SIGNING_KEY": os.urandom(32).hex()}, default_key_file=None
    )
    binding = state.Binding(
        method="tools/call", target="deploy", arguments_digest=state.digest_arguments(ARGUMENTS)
    )
    out: dict[str, Any] = {}
    for n in ANSWER_COUNTS:
        answers = answers_for(n)
        asked = {"next": "elicitation/create"}
        token = codec.mint(binding, answers, asked)
        _check(dict(codec.verify(token, binding).answers) == answers)
        out[str(n)] = {
            "mint_us": per_call_us(functools.partial(codec.mint, binding, answers, asked)),
            "verify_us": per_call_us(functools.partial(codec.verify, token, binding)),
            "bytes": len(token),
        }
    return out


def bench_floor() -> dict[str, Any]:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    floor = importlib.import_module("floor_server")
    binding = floor.binding_digest("deploy", ARGUMENTS)
    out: dict[str, Any] = {}
    for n in ANSWER_COUNTS:
        answers = answers_for(n)
        token = floor.mint(binding, answers)
        _check(floor.verify(token, binding) == answers)
        out[str(n)] = {
            "mint_us": per_call_us(functools.partial(floor.mint, binding, answers)),
            "verify_us": per_call_us(functools.partial(floor.verify, token, binding)),
            "bytes": len(token),
        }
    return out


def bench_sdk() -> dict[str, Any]:
    # Imported by name: this file is type-checked where the SDK is not installed.
    rs = importlib.import_module("mcp.server.request_state")
    resolve = importlib.import_module("mcp.server.mcpserver.resolve")

    security = rs.RequestStateSecurity.ephemeral()
    params = {"name": "deploy", "arguments": ARGUMENTS}

    def mint(answers: dict[str, dict[str, Any]]) -> str:
        # resolve_arguments -> _encode_state; RequestStateBoundary._seal -> claims -> seal
        outcomes = {
            k: resolve._StateEntry(action="accept", data=v["content"], q="x" * 22)
            for k, v in answers.items()
        }
        inner = resolve._encode_state(outcomes, {"next": "y" * 22})
        target, digest = rs._request_identity("tools/call", params)
        now = time.time()
        claims = {
            "v": 1,
            "iat": now,
            "exp": now + security.ttl,
            "m": "tools/call",
            "t": target,
            "a": digest,
            "s": inner,
            "aud": "sdk-bench",
        }
        return str(security.codec.seal(rs.compact_json(claims).encode()))

    def verify(token: str) -> object:
        # RequestStateBoundary._unseal -> claims checks; resolve._decode_state
        claims = json.loads(security.codec.unseal(token))
        target, digest = rs._request_identity("tools/call", params)
        if claims["t"] != target or claims["a"] != digest or not time.time() < claims["exp"]:
            raise ValueError("binding")
        return resolve._decode_state(claims["s"])

    out: dict[str, Any] = {}
    for n in ANSWER_COUNTS:
        answers = answers_for(n)
        token = mint(answers)
        decoded = verify(token)
        _check(len(decoded.outcomes) == n)  # type: ignore[attr-defined]
        out[str(n)] = {
            "mint_us": per_call_us(functools.partial(mint, answers)),
            "verify_us": per_call_us(functools.partial(verify, token)),
            "bytes": len(token),
        }
    return out


def bench_fastmcp() -> dict[str, Any]:
    # Imported by name, like the SDK's: FastMCP is installed only in its own venv.
    rs = importlib.import_module("mcp.server.request_state")
    boundary = rs.RequestStateBoundary(
        rs.RequestStateSecurity.ephemeral(), default_audience="fastmcp-bench"
    )
    params = {"name": "deploy", "arguments": ARGUMENTS}
    # What `_seal` and `_unseal` read of the request context: its method and params (no
    # authenticated principal on stdio or unauthenticated HTTP).
    sealing = types.SimpleNamespace(method="tools/call", params=params)

    def mint(answers: dict[str, dict[str, Any]]) -> str:
        state = json.dumps({"answers": answers, "asked": ["next"]}, separators=(",", ":"))
        return str(boundary._seal(sealing, state))

    def verify(token: str) -> object:
        echoed = types.SimpleNamespace(
            method="tools/call", params={**params, "requestState": token}
        )
        plaintext, _binding = boundary._unseal(echoed)
        return json.loads(plaintext)

    out: dict[str, Any] = {}
    for n in ANSWER_COUNTS:
        answers = answers_for(n)
        token = mint(answers)
        _check(verify(token) == {"answers": answers, "asked": ["next"]})
        out[str(n)] = {
            "mint_us": per_call_us(functools.partial(mint, answers)),
            "verify_us": per_call_us(functools.partial(verify, token)),
            "bytes": len(token),
        }
    return out


def main(argv: list[str]) -> int:
    kind = argv[1] if len(argv) > 1 else ""
    if kind == "baked" and len(argv) == 3:
        result = bench_baked(argv[2])
    elif kind == "floor":
        result = bench_floor()
    elif kind == "sdk":
        result = bench_sdk()
    elif kind == "fastmcp":
        result = bench_fastmcp()
    else:
        sys.stderr.write("usage: tokens.py baked <package> | sdk | fastmcp | floor\n")
        return 2
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
