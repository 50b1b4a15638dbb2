// Drives a stdio MCP server through an official TypeScript SDK client and prints what came back.
//
//     node ts_clients.cjs PATH/TO/node_modules '{"client": "v2" | "v1", "server": {...}, ...}'
//
// The JSON names the client (`v2`: @modelcontextprotocol/client, which speaks 2026-07-28 when
// pinned to it; `v1`: @modelcontextprotocol/sdk, which speaks 2025-11-25 and older), the server
// to spawn (`command`, `args`, `env`, `cwd`; the SDK's stdio transport adds only its default
// environment), `capabilities` to declare, and `calls`: `{"tool", "arguments", "stream"}`, where
// `stream` (v1 only) calls through `client.experimental.tasks.callToolStream`, the v1 SDK's
// task-following API. One JSON object goes to stdout: the negotiated protocol version and, per
// call, either `{"result": ...}`, `{"messages": [...]}` (a stream) or `{"error": ...}`.
"use strict";

const modules = process.argv[2];
const plan = JSON.parse(process.argv[3]);

function load(name) {
  return require(require.resolve(name, { paths: [modules] }));
}

function described(error) {
  return {
    name: error?.constructor?.name ?? typeof error,
    code: error?.code ?? null,
    message: String(error?.message ?? error),
    data: error?.data ?? null,
  };
}

async function connect() {
  const info = { name: "mrtr-ts-peer", version: "1.0.0" };
  const server = {
    command: plan.server.command,
    args: plan.server.args,
    env: plan.server.env,
    cwd: plan.server.cwd,
    stderr: "inherit",
  };
  if (plan.client === "v2") {
    const { Client } = load("@modelcontextprotocol/client");
    const { StdioClientTransport } = load("@modelcontextprotocol/client/stdio");
    const client = new Client(info, {
      capabilities: plan.capabilities ?? {},
      versionNegotiation: { mode: { pin: "2026-07-28" } },
    });
    await client.connect(new StdioClientTransport(server));
    return client;
  }
  if (plan.client === "v1") {
    const { Client } = load("@modelcontextprotocol/sdk/client/index.js");
    const { StdioClientTransport } = load("@modelcontextprotocol/sdk/client/stdio.js");
    const { LATEST_PROTOCOL_VERSION } = load("@modelcontextprotocol/sdk/types.js");
    const client = new Client(info, { capabilities: plan.capabilities ?? {} });
    await client.connect(new StdioClientTransport(server));
    // v1 has no getter for the negotiated version; it offers this one and accepts no newer.
    client.getNegotiatedProtocolVersion = () => LATEST_PROTOCOL_VERSION;
    return client;
  }
  throw new Error(`unknown client ${plan.client}`);
}

async function call(client, { tool, arguments: args, stream }) {
  const params = { name: tool, arguments: args ?? {} };
  try {
    if (!stream) {
      return { result: await client.callTool(params) };
    }
    const messages = [];
    for await (const message of client.experimental.tasks.callToolStream(params)) {
      messages.push(message.type === "error" ? { type: "error", error: described(message.error) } : message);
    }
    return { messages };
  } catch (error) {
    return { error: described(error) };
  }
}

(async () => {
  const client = await connect();
  const report = { protocolVersion: client.getNegotiatedProtocolVersion(), calls: [] };
  try {
    await client.listTools();
    for (const one of plan.calls) {
      report.calls.push(await call(client, one));
    }
  } finally {
    await client.close();
  }
  process.stdout.write(JSON.stringify(report) + "\n");
})().catch((error) => {
  process.stderr.write(`${error?.stack ?? error}\n`);
  process.exitCode = 1;
});
