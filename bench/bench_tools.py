"""Benchmark tools, dropped into a baked project's `tools/` package by `bench/run.py`.

Written only against the public tool API (the runtime's `__init__`), like any project tool, so
the benchmark measures what a tool author gets. The same two tools exist in `sdk_server.py`
(official SDK) and `floor_server.py` (stdlib floor):

- `echo(text)`: returns the text; the cost of one plain call.
- `deploy(stack, region)`: the minimal deploy flow without AWS. Round 1 asks two questions at
  once (`confirm`, `role-arn`); round 2, with both answers, "deploys" and says so.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from ..mrtr_runtime import Accepted, Context, InputRequired, elicit_form
from . import registry


class Confirm(BaseModel):
    confirmed: bool = Field(description="Deploy now?")


class RoleArn(BaseModel):
    arn: str = Field(description="IAM role ARN, arn:aws:iam::<account>:role/<name>")


@registry.tool()
async def echo(text: str) -> str:
    """Echo the text back."""
    return text


@registry.tool()
async def deploy(stack: str, region: str = "us-east-1", *, ctx: Context) -> str | InputRequired:
    """Deploy a stack after the user confirms and names the role (no AWS: a benchmark)."""
    confirm = ctx.form_answer("confirm", Confirm)
    role = ctx.form_answer("role-arn", RoleArn)
    if confirm is None or role is None:
        return ctx.request_input(
            {
                "confirm": elicit_form(f"Deploy {stack} to {region}?", Confirm),
                "role-arn": elicit_form("Which IAM role should the deploy assume?", RoleArn),
            }
        )
    match confirm, role:
        case Accepted(content=Confirm(confirmed=True)), Accepted(content=RoleArn(arn=arn)):
            return f"Deployed {stack} to {region} as {arn}"
        case _:
            return "Deploy cancelled by user."
