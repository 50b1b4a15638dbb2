"""FastMCP's client (`fastmcp` with `fastmcp-tasks`, test-only) driving a baked server.

Run with the Python of the FastMCP peer's venv (`tests/peers/fastmcp_peer.py` makes it), never
the template's: FastMCP pins its own `mcp`. One JSON argument says how to reach the server
(`stdio`: command, args, env, cwd; `http`: url, and `name_header`: whether the client's HTTP
requests get the `Mcp-Name` header on `tasks/*`, which FastMCP 4.1.4 leaves out) and which
scenario to run; one JSON object on stdout says what happened, for the test to check:

- `deploy`: `deploy_to_aws` through `Client.call_tool`, which answers the MRTR questions with
  the elicitation handler and follows the task the server makes of the call, transparently;
- `deploy_task`: the same through `call_tool_task` (the explicit handle): the task id, every
  status polled, the result;
- `cancel`: a long task tool started with `call_tool_task`, then `ToolTask.cancel()`;
- `question_in_task`: a tool that asks inside its task (answered with `tasks/update`).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import httpx2
from fastmcp import Client
from fastmcp.client.transports import StdioTransport, StreamableHttpTransport
from fastmcp_tasks.client import call_tool_task

ROLE_ARN = "arn:aws:iam::123456789012:role/deployer"
ANSWERS: dict[str, Any] = {"confirmed": True, "arn": ROLE_ARN, "confirm": True, "ok": True}
TASK_METHODS = ("tasks/get", "tasks/update", "tasks/cancel")


class User:
    """Answers every form as a person who says yes would; remembers what it was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def elicit(self, message: str, response_type: Any, params: Any, context: Any) -> Any:
        self.asked.append(message.splitlines()[0])
        schema = getattr(params, "requested_schema", None) or {}
        return {key: ANSWERS[key] for key in schema.get("properties", {}) if key in ANSWERS}


def _with_name_header(**kwargs: Any) -> httpx2.AsyncClient:
    """An HTTP client that adds `Mcp-Name: <taskId>` to tasks/* requests, as the tasks
    extension asks of every client ("Streamable HTTP: Routing Headers")."""

    async def name_it(request: httpx2.Request) -> None:
        try:
            body = json.loads(request.content or b"{}")
        except ValueError:
            return
        if isinstance(body, dict) and body.get("method") in TASK_METHODS:
            task_id = (body.get("params") or {}).get("taskId")
            if isinstance(task_id, str) and "mcp-name" not in request.headers:
                request.headers["Mcp-Name"] = task_id

    return httpx2.AsyncClient(event_hooks={"request": [name_it]}, **kwargs)


def _transport(target: dict[str, Any]) -> Any:
    if target["kind"] == "stdio":
        return StdioTransport(
            command=target["command"], args=target["args"], env=target["env"], cwd=target["cwd"]
        )
    factory = _with_name_header if target.get("name_header") else None
    return StreamableHttpTransport(target["url"], httpx_client_factory=factory)


def _text(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content or [])


async def run(target: dict[str, Any], scenario: str, arguments: dict[str, Any]) -> dict[str, Any]:
    user = User()
    out: dict[str, Any] = {"scenario": scenario}
    async with Client(_transport(target), elicitation_handler=user.elicit) as client:
        if scenario == "deploy":
            result = await client.call_tool("deploy_to_aws", arguments)
            out.update(text=_text(result), structured=result.structured_content)
        elif scenario == "deploy_task" or scenario == "question_in_task":
            tool = "deploy_to_aws" if scenario == "deploy_task" else arguments.pop("tool")
            task = await call_tool_task(client, tool, arguments)
            out["task_id"] = task.task_id
            out["created"] = task.create_result.status
            statuses = []
            while True:
                status = await task.status()
                statuses.append(status.status)
                if status.status in ("completed", "failed", "cancelled"):
                    break
                if status.status == "input_required":
                    break  # the result below answers it (tasks/update) and polls on
                await asyncio.sleep(0.05)
            result = await task.result()
            out.update(statuses=statuses, text=_text(result))
        elif scenario == "cancel":
            task = await call_tool_task(client, arguments.pop("tool"), arguments)
            out["task_id"] = task.task_id
            await task.cancel()
            final = await task.wait(timeout=30)
            out.update(status=final.status)
        else:
            raise SystemExit(f"unknown scenario {scenario!r}")
    out["asked"] = user.asked
    return out


def main() -> None:
    config = json.loads(sys.argv[1])
    try:
        out = asyncio.run(run(config["target"], config["scenario"], config.get("arguments", {})))
    except Exception as error:  # the test reads what went wrong, whatever it was
        out = {"scenario": config["scenario"], "error": f"{type(error).__name__}: {error}"}
    sys.stdout.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
