"""The reference point: the official SDK's `MCPServer` (mcp==2.3.0) serving the benchmark's tools.

Runs in its own virtual environment (`bench/run.py` makes it under `.cache/bench/sdk`). The
tools are the same as `bench_tools.py` and `floor_server.py`:

- `echo(text)` returns the text.
- `deploy(stack, region)` asks two questions through the SDK's own MRTR machinery,
  `Annotated[T, Resolve(fn)]` with resolvers that return `Elicit[...]`
  (mcp/server/mcpserver/resolve.py): on 2026-07-28 both questions are batched into one
  `InputRequiredResult` whose `requestState` the SDK seals with AES-256-GCM; on 2025-11-25 it
  sends each as a real `elicitation/create` request mid-call. Round 2 answers like the others.

Nothing here is tuned: this is what a user of the SDK writes.
"""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import (
    AcceptedElicitation,
    Elicit,
    ElicitationResult,
    MCPServer,
    Resolve,
)
from pydantic import BaseModel, Field

server = MCPServer("sdk-bench", version="0")


class Confirm(BaseModel):
    confirmed: bool = Field(description="Deploy now?")


class RoleArn(BaseModel):
    arn: str = Field(description="IAM role ARN, arn:aws:iam::<account>:role/<name>")


def ask_confirm(stack: str) -> Elicit[Confirm]:
    return Elicit("Deploy this stack?", Confirm)


def ask_role(stack: str) -> Elicit[RoleArn]:
    return Elicit("Which IAM role should the deploy assume?", RoleArn)


@server.tool()
async def echo(text: str) -> str:
    """Echo the text back."""
    return text


@server.tool()
async def deploy(
    stack: str,
    confirm: Annotated[ElicitationResult[Confirm], Resolve(ask_confirm)],
    role: Annotated[ElicitationResult[RoleArn], Resolve(ask_role)],
    region: str = "us-east-1",
) -> str:
    """Deploy a stack after the user confirms and names the role (no AWS: a benchmark)."""
    if not isinstance(confirm, AcceptedElicitation) or not confirm.data.confirmed:
        return "Deploy cancelled by user."
    if not isinstance(role, AcceptedElicitation):
        return "Deploy cancelled by user."
    return f"Deployed {stack} to {region} as {role.data.arn}"


if __name__ == "__main__":
    server.run("stdio")
