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
  if (plan.caching) return runCachingPlan(); // the caching block below
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

// == caching plan (issue 22; tests/test_ts_sdk_clients.py, its caching block) =====================
// `{"caching": {"url": URL | null}, "server": {...}}`: the v2 client pinned to 2026-07-28, over
// Streamable HTTP to `url`, else over stdio (spawning `server`), with its default response cache
// (2026-07-28 server/utilities/caching: it serves a result again while its `ttlMs` lasts). It
// reads `caching://changing` and `caching://declared` twice each, lists the tools, calls
// `declare_tool`, lists them again (tests/peers/caching_tools.py). One JSON object to stdout:
// `{protocolVersion, reads: {uri: [{text, ttlMs, cacheScope}, ...]}, toolsBefore, toolsAfter,
// declared}`.
async function runCachingPlan() {
  const info = { name: "mrtr-ts-caching-peer", version: "1.0.0" };
  const { Client, StreamableHTTPClientTransport } = load("@modelcontextprotocol/client");
  const client = new Client(info, { versionNegotiation: { mode: { pin: "2026-07-28" } } });
  if (plan.caching.url) {
    await client.connect(new StreamableHTTPClientTransport(new URL(plan.caching.url)));
  } else {
    const { StdioClientTransport } = load("@modelcontextprotocol/client/stdio");
    const { command, args, env, cwd } = plan.server;
    await client.connect(new StdioClientTransport({ command, args, env, cwd, stderr: "inherit" }));
  }
  const report = { protocolVersion: client.getNegotiatedProtocolVersion(), reads: {} };
  try {
    for (const uri of ["caching://changing", "caching://declared"]) {
      report.reads[uri] = [];
      for (let read = 0; read < 2; read += 1) {
        const result = await client.readResource({ uri });
        const { text } = result.contents[0];
        report.reads[uri].push({ text, ttlMs: result.ttlMs, cacheScope: result.cacheScope });
      }
    }
    const names = (listed) => listed.tools.map((tool) => tool.name);
    const before = await client.listTools();
    report.toolsBefore = { names: names(before), ttlMs: before.ttlMs, cacheScope: before.cacheScope };
    report.declared = await client.callTool({ name: "declare_tool", arguments: { name: "late_tool" } });
    report.toolsAfter = { names: names(await client.listTools()) };
  } finally {
    await client.close();
  }
  process.stdout.write(JSON.stringify(report) + "\n");
}
