"""The other pick: FastMCP 4.x (fastmcp==4.2.3) serving the benchmark's tools.

Runs in its own virtual environment (`bench/run.py` makes it under `.cache/bench/fastmcp`). The
tools are the same as `bench_tools.py`, `sdk_server.py` and `floor_server.py`:

- `echo(text)` returns the text.
- `deploy(stack, region)` asks two questions at once and "deploys" with both answers. FastMCP
  4.x has one way to ask per protocol era, and a tool serving both branches on the era, as its
  elicitation guide says ("branch on `ctx.request_context.protocol_version`"):
  - on 2026-07-28 the tool is a *guard* (SEP-2322): round 1 returns an `InputRequiredResult`
    with both elicitations and a `request_state`, which FastMCP seals (the SDK's
    `RequestStateBoundary`, AES-256-GCM under a per-process key, bound to the tool and its
    arguments); round 2 reads `ctx.input_responses` and `ctx.request_state`, already unsealed
    and verified (`fastmcp/server/context.py`, `input_responses` / `request_state`);
  - on 2025-11-25 `ctx.elicit()` sends each question as a real `elicitation/create` request
    mid-call (on 2026-07-28 it refuses: `_ELICIT_MODERN_ERROR` in the same file).
  The state says which questions round 1 asked, so round 2 acts only on answers to questions
  this server asked (an `inputResponses` without it is a first round, and asks). Both eras use
  FastMCP's own schema and answer handling (`parse_elicit_response_type`,
  `handle_elicit_accept`), so they send the same forms and read the answers the same way.

Nothing here is tuned: this is what a user of FastMCP writes.
"""

from __future__ import annotations

from fastmcp import Context, FastMCP
from fastmcp.server.elicitation import (
    AcceptedElicitation,
    ElicitConfig,
    handle_elicit_accept,
    parse_elicit_response_type,
)
from mcp.types import ElicitRequest, ElicitRequestFormParams, ElicitResult, InputRequiredResult
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, Field

server = FastMCP("fastmcp-bench", version="0")


class Confirm(BaseModel):
    confirmed: bool = Field(description="Deploy now?")


class RoleArn(BaseModel):
    arn: str = Field(description="IAM role ARN, arn:aws:iam::<account>:role/<name>")


CONFIRM = parse_elicit_response_type(Confirm)
ROLE = parse_elicit_response_type(RoleArn)
ROLE_QUESTION = "Which IAM role should the deploy assume?"
ASKED = "confirm,role-arn"  # the request_state of round 1: what it asked


def _form(message: str, schema: dict[str, object]) -> ElicitRequest:
    params = ElicitRequestFormParams(message=message, requested_schema=schema)
    return ElicitRequest(method="elicitation/create", params=params)


def _answer(ctx: Context, key: str, config: ElicitConfig) -> object:
    """The typed answer to one question of round 1 (`AcceptedElicitation` when accepted)."""
    response = (ctx.input_responses or {}).get(key)
    if not isinstance(response, ElicitResult) or response.action != "accept":
        return response
    return handle_elicit_accept(config, response.content)


@server.tool
async def echo(text: str) -> str:
    """Echo the text back."""
    return text


@server.tool
async def deploy(ctx: Context, stack: str, region: str = "us-east-1") -> str | InputRequiredResult:
    """Deploy a stack after the user confirms and names the role (no AWS: a benchmark)."""
    request = ctx.request_context
    if request is not None and request.protocol_version in MODERN_PROTOCOL_VERSIONS:
        if ctx.request_state != ASKED or ctx.input_responses is None:
            return InputRequiredResult(
                input_requests={
                    "confirm": _form(f"Deploy {stack} to {region}?", CONFIRM.schema),
                    "role-arn": _form(ROLE_QUESTION, ROLE.schema),
                },
                request_state=ASKED,
            )
        confirm = _answer(ctx, "confirm", CONFIRM)
        role = _answer(ctx, "role-arn", ROLE)
    else:
        confirm = await ctx.elicit(f"Deploy {stack} to {region}?", Confirm)
        role = await ctx.elicit(ROLE_QUESTION, RoleArn)
    match confirm, role:
        case AcceptedElicitation(data=Confirm(confirmed=True)), AcceptedElicitation(
            data=RoleArn(arn=arn)
        ):
            return f"Deployed {stack} to {region} as {arn}"
        case _:
            return "Deploy cancelled by user."


if __name__ == "__main__":
    server.run("stdio")
