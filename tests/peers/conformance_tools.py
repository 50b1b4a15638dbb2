"""The fixtures the MCP conformance suite calls, written with the runtime's public tool API only.

Test-only: `tests/test_conformance.py` copies this file into a baked project's
`src/<package>/tools/`; generated projects never contain it. Because it imports nothing but
`..mrtr_runtime`'s public face, it also proves that face can express every MRTR shape the
suite checks: one elicitation, sampling, roots, state that must round-trip, several requests at
once, several rounds, a tampered state, degrading to the client's declared capabilities, a
prompt that asks for input, and a tool that cannot run without a capability.

Names, keys and fields follow @modelcontextprotocol/conformance 0.2.0-alpha.12,
`src/scenarios/server/input-required-result.ts` and `src/scenarios/server/stateless.ts`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from ..mrtr_runtime import (
    Accepted,
    Cancelled,
    Context,
    Declined,
    InputRequest,
    InputRequired,
    RootsResult,
    SamplingResult,
    elicit_form,
    list_roots,
    sample,
)
from . import registry


class Name(BaseModel):
    name: str


class Color(BaseModel):
    color: str


class Confirm(BaseModel):
    ok: bool


class PromptContext(BaseModel):
    context: str


def _ask_name(message: str = "What is your name?") -> InputRequest:
    return elicit_form(message, Name)


def _ask_capital() -> InputRequest:
    return sample("What is the capital of France?", max_tokens=100)


def _ask_greeting() -> InputRequest:
    return sample("Generate a greeting", max_tokens=50)


def _accepted_name(answer: Accepted[Name] | Declined | Cancelled) -> str | None:
    return answer.content.name if isinstance(answer, Accepted) else None


def _action(answer: Accepted[Name] | Declined | Cancelled) -> str:
    return {Accepted: "accept", Declined: "decline", Cancelled: "cancel"}[type(answer)]


def _roots_text(answer: RootsResult) -> str:
    uris = ", ".join(root.uri for root in answer.roots) or "none"
    return f"{len(answer.roots)} root(s): {uris}"


# -- input-required-result-basic-elicitation, -missing-input-response, -result-type,
#    -ignore-extra-params, -validate-input --------------------------------------------------
# ignore-extra-params sends a correct `user_name` with the FIRST call, before any round asked
# for it, and expects a complete result: this fixture opts in to that key, visibly. An unasked
# answer proves nothing about what the user saw; the runtime ignores every other one.
@registry.tool(accept_unasked=("user_name",))
async def test_input_required_result_elicitation(ctx: Context) -> str | InputRequired:
    """Conformance: asks for the user's name (input key `user_name`), then greets them."""
    answer = ctx.form_answer("user_name", Name)
    if answer is None:  # first call, or the client answered other keys: ask (again)
        return ctx.request_input({"user_name": _ask_name()})
    name = _accepted_name(answer)
    return f"Hello, {name}!" if name else f"No name given ({_action(answer)})."


# -- input-required-result-basic-sampling ---------------------------------------------------
@registry.tool()
async def test_input_required_result_sampling(ctx: Context) -> str | InputRequired:
    """Conformance: asks the client's model a question (key `capital_question`)."""
    answer = ctx.input_response_as("capital_question", SamplingResult)
    if answer is None:
        return ctx.request_input({"capital_question": _ask_capital()})
    return f"The model answered: {answer.text}"


# -- input-required-result-basic-list-roots -------------------------------------------------
@registry.tool()
async def test_input_required_result_list_roots(ctx: Context) -> str | InputRequired:
    """Conformance: asks for the client's roots (key `client_roots`) and lists them."""
    answer = ctx.input_response_as("client_roots", RootsResult)
    if answer is None:
        return ctx.request_input({"client_roots": list_roots()})
    return f"Found {_roots_text(answer)}"


# -- input-required-result-request-state ----------------------------------------------------
@registry.tool()
async def test_input_required_result_request_state(ctx: Context) -> str | InputRequired:
    """Conformance: asks to confirm (key `confirm`); completes only with the echoed state."""
    answer = ctx.form_answer("confirm", Confirm)
    # An answer without requestState was never asked for by this server: ask for it properly.
    if answer is None or ctx.request_state is None:
        return ctx.request_input({"confirm": elicit_form("Please confirm", Confirm)})
    confirmed = isinstance(answer, Accepted) and answer.content.ok
    # The runtime verified the signature and binding before this handler ran.
    return f"state-ok: requestState verified; confirmed={confirmed}"


# -- input-required-result-multiple-input-requests ------------------------------------------
@registry.tool()
async def test_input_required_result_multiple_inputs(ctx: Context) -> str | InputRequired:
    """Conformance: asks for a name, a model-written greeting and the roots in one round."""
    name = ctx.form_answer("user_name", Name)
    greeting = ctx.input_response_as("greeting", SamplingResult)
    roots = ctx.input_response_as("client_roots", RootsResult)
    if name is None or greeting is None or roots is None:
        # Ask for everything still missing; answers already given travel in requestState.
        wanted = {
            "user_name": _ask_name(),
            "greeting": _ask_greeting(),
            "client_roots": list_roots(),
        }
        return ctx.request_input(
            {key: req for key, req in wanted.items() if ctx.input_response(key) is None}
        )
    return f"{greeting.text} {_accepted_name(name) or 'stranger'} ({_roots_text(roots)})"


# -- input-required-result-multi-round ------------------------------------------------------
@registry.tool()
async def test_input_required_result_multi_round(ctx: Context) -> str | InputRequired:
    """Conformance: three rounds: name (`step1`), then favourite colour (`step2`), then done."""
    step1 = ctx.form_answer("step1", Name)
    if step1 is None:
        return ctx.request_input({"step1": _ask_name("Step 1: What is your name?")})
    step2 = ctx.form_answer("step2", Color)
    if step2 is None:
        return ctx.request_input(
            {"step2": elicit_form("Step 2: What is your favorite color?", Color)}
        )
    color = step2.content.color if isinstance(step2, Accepted) else "no colour"
    return f"{_accepted_name(step1) or 'Someone'} likes {color}"


# -- input-required-result-tampered-state ---------------------------------------------------
@registry.tool()
async def test_input_required_result_tampered_state(ctx: Context) -> str | InputRequired:
    """Conformance: its requestState is HMAC-signed; a tampered one never reaches this code."""
    answer = ctx.form_answer("confirm", Confirm)
    if answer is None or ctx.request_state is None:
        return ctx.request_input({"confirm": elicit_form("Please confirm", Confirm)})
    return "Confirmed with an intact requestState."


# -- input-required-result-capability-check -------------------------------------------------
@registry.tool()
async def test_input_required_result_capabilities(ctx: Context) -> str | InputRequired:
    """Conformance: asks only for what the client declared (elicitation, sampling, roots)."""
    candidates = {
        "user_name": _ask_name(),
        "capital_question": _ask_capital(),
        "client_roots": list_roots(),
    }
    askable = {key: request for key, request in candidates.items() if ctx.can_request(request)}
    if not askable:
        return "The client declared none of elicitation, sampling or roots; nothing to ask."
    missing = {key: request for key, request in askable.items() if ctx.input_response(key) is None}
    if missing:
        return ctx.request_input(missing)
    got: list[str] = []
    if "user_name" in askable:
        name = ctx.form_answer("user_name", Name)
        got.append(f"name={_accepted_name(name) if name else None}")
    if "capital_question" in askable:
        capital = ctx.input_response_as("capital_question", SamplingResult)
        got.append(f"model={capital.text if capital else None}")
    if "client_roots" in askable:
        roots = ctx.input_response_as("client_roots", RootsResult)
        got.append(f"roots={_roots_text(roots) if roots else None}")
    return "Asked only for declared capabilities: " + "; ".join(got)


# -- input-required-result-non-tool-request -------------------------------------------------
@registry.prompt()
async def test_input_required_result_prompt(ctx: Context) -> list[dict[str, Any]] | InputRequired:
    """Conformance: a prompt that asks what context to use (key `user_context`) first."""
    answer = ctx.form_answer("user_context", PromptContext)
    if answer is None:
        return ctx.request_input(
            {"user_context": elicit_form("What context should the prompt use?", PromptContext)}
        )
    context = answer.content.context if isinstance(answer, Accepted) else "none"
    return [{"role": "user", "content": {"type": "text", "text": f"Context: {context}"}}]


# -- server-stateless ------------------------------------------------------------------------
@registry.tool()
async def test_missing_capability(ctx: Context) -> str | InputRequired:
    """Conformance: cannot run without sampling; a client that did not declare it gets -32021."""
    answer = ctx.input_response_as("completion", SamplingResult)
    if answer is None:
        # No can_request() fallback on purpose: the runtime refuses with
        # MissingRequiredClientCapabilityError and data.requiredCapabilities = {"sampling": {}}.
        return ctx.request_input({"completion": sample("Say hello", max_tokens=20)})
    return answer.text


@registry.tool()
async def test_streaming_elicitation(ctx: Context) -> str | InputRequired:
    """Conformance: elicits; the answer must be an InputRequiredResult, never a server request.

    2026-07-28 basic/transports/stdio: "The server MUST NOT write JSON-RPC requests to stdout";
    the HTTP adapter counts any it sees as a failure.
    """
    answer = ctx.form_answer("user_name", Name)
    if answer is None:
        return ctx.request_input({"user_name": _ask_name()})
    return f"Hello, {_accepted_name(answer) or 'stranger'}!"


@registry.tool()
async def test_logging_tool(ctx: Context) -> str:
    """Conformance: logs while running; without `_meta` logLevel the log goes to stderr only."""
    ctx.log.info("test_logging_tool ran")
    return "Logged to stderr."
