// The official tasks requester library (`@modelcontextprotocol/ext-tasks`) driving a server.
//
//     node ext_tasks_driver.mjs PATH/TO/node_modules '{"server": {...}, "scenario": ..., ...}'
//
// ext-tasks sits on the TypeScript SDK's v2 `Client`; for a 2026-07-28 tasks server the host
// supplies the raw request path (`rawDispatch`, with `v2RequestFraming`), since the SDK's codecs
// do not carry the extension's wire shapes. Here that path is this file's own: one POST per
// request over Streamable HTTP (`{"url"}`), with the request metadata headers the transport
// asks for (MCP-Protocol-Version, Mcp-Method, Mcp-Name), or lines on the stdin/stdout of the
// stdio server (`{"command", "args", "env", "cwd"}`) that the SDK `Client` shares through a
// small Transport of this file. Every answer ext-tasks reads is validated by it against the
// extension's published schema. Scenarios: `deploy` (a tool call through the session, MRTR
// questions answered by the application input handler, the task followed to its outcome),
// `cancel` (a long task, `execution.cancel()`), `question_in_task` (answered with
// `tasks/update`). One JSON object goes to stdout: what came back, and each question asked.
import { createRequire } from "node:module";
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const modules = process.argv[2];
const plan = JSON.parse(process.argv[3]);
const PROTOCOL = "2026-07-28";
const INFO = { name: "mrtr-ext-tasks-peer", version: "1.0.0" };
const CAPABILITIES = {
  elicitation: { form: {} },
  extensions: { "io.modelcontextprotocol/tasks": {} },
};
const ANSWERS = { confirmed: true, arn: "arn:aws:iam::123456789012:role/deployer", confirm: true };
const asked = [];

// An ESM package by its `import` export (ext-tasks has no other; the SDK's own import of the
// client must meet the same module instance as ours).
async function esm(name, subpath = ".") {
  const root = join(modules, name);
  const manifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
  let entry = manifest.exports?.[subpath] ?? manifest.exports;
  while (entry && typeof entry === "object") entry = entry.import ?? entry.default;
  return import(pathToFileURL(join(root, entry ?? manifest.module ?? manifest.main)).href);
}

function described(error) {
  return { name: error?.constructor?.name ?? typeof error, message: String(error?.message ?? error) };
}

// -- the raw request path, and a Transport the SDK Client shares it through ------------------

class Wire {
  constructor() {
    this.next = 0;
    this.pending = new Map();
    this.onForeign = null; // messages that are not answers to our own ids (the SDK's)
  }
  settle(message) {
    const waiter = this.pending.get(message.id);
    if (waiter === undefined) return false;
    this.pending.delete(message.id);
    waiter(message);
    return true;
  }
  async raw(request) {
    const id = `raw-${++this.next}`;
    const message = await this.exchange({ jsonrpc: "2.0", id, ...request });
    if (message.error) return { kind: "error", error: message.error };
    return { kind: "result", result: message.result };
  }
}

class StdioWire extends Wire {
  constructor(server) {
    super();
    this.child = spawn(server.command, server.args, {
      env: server.env,
      cwd: server.cwd,
      stdio: ["pipe", "pipe", "inherit"],
    });
    let buffered = "";
    this.child.stdout.setEncoding("utf8");
    this.child.stdout.on("data", (chunk) => {
      buffered += chunk;
      let newline;
      while ((newline = buffered.indexOf("\n")) >= 0) {
        const line = buffered.slice(0, newline);
        buffered = buffered.slice(newline + 1);
        if (!line.trim()) continue;
        const message = JSON.parse(line);
        if (!this.settle(message)) this.onForeign?.(message);
      }
    });
  }
  send(message) {
    this.child.stdin.write(JSON.stringify(message) + "\n");
  }
  exchange(message) {
    return new Promise((resolve) => {
      this.pending.set(message.id, resolve);
      this.send(message);
    });
  }
  close() {
    this.child.stdin.end();
  }
}

class HttpWire extends Wire {
  constructor(url) {
    super();
    this.url = url;
  }
  async exchange(message) {
    const params = message.params ?? {};
    const headers = {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": PROTOCOL,
      "mcp-method": message.method,
    };
    const name = params.taskId ?? params.name ?? params.uri;
    if (typeof name === "string") headers["mcp-name"] = name;
    const response = await fetch(this.url, { method: "POST", headers, body: JSON.stringify(message) });
    const text = await response.text();
    if ((response.headers.get("content-type") ?? "").includes("text/event-stream")) {
      const data = text.split("\n").filter((line) => line.startsWith("data:"));
      return JSON.parse(data[data.length - 1].slice(5));
    }
    return JSON.parse(text);
  }
  close() {}
}

// The SDK Client's transport over a StdioWire: its messages go out on the same pipe, and what
// comes back for its ids goes to it.
class SharedStdioTransport {
  constructor(wire) {
    this.wire = wire;
    wire.onForeign = (message) => this.onmessage?.(message);
  }
  async start() {}
  async send(message) {
    this.wire.send(message);
  }
  async close() {
    this.wire.close();
    this.onclose?.();
  }
}

async function main() {
  const clientModule = await esm("@modelcontextprotocol/client");
  const tasks = await esm("@modelcontextprotocol/ext-tasks", "./client");
  const { Client, StreamableHTTPClientTransport } = clientModule;
  const wire = plan.server.url ? new HttpWire(plan.server.url) : new StdioWire(plan.server);
  const transport = plan.server.url
    ? new StreamableHTTPClientTransport(new URL(plan.server.url))
    : new SharedStdioTransport(wire);
  const client = new Client(INFO, {
    capabilities: CAPABILITIES,
    versionNegotiation: { mode: { pin: PROTOCOL } },
  });
  await client.connect(transport);
  const session = tasks.createTaskSessionFromClient(client, {
    endpointId: "mrtr-ext-tasks-peer",
    rawDispatch: (request) => wire.raw(request),
    v2RequestFraming: { protocolVersion: PROTOCOL, clientInfo: INFO, clientCapabilities: CAPABILITIES },
    onInputRequest: async (request) => {
      if (request.kind !== "elicitation") throw new Error(`unexpected ${request.kind}`);
      const message = String(request.params?.message ?? "");
      asked.push(message.split("\n")[0]);
      const properties = Object.keys(request.params?.requestedSchema?.properties ?? {});
      const content = {};
      for (const key of properties) if (key in ANSWERS) content[key] = ANSWERS[key];
      return { action: "accept", content };
    },
  });
  const out = { scenario: plan.scenario };
  try {
    const execution = await session.callTool(plan.tool, plan.arguments ?? {});
    out.kind = execution.kind;
    out.taskId = execution.handle?.taskId ?? null;
    if (plan.scenario === "cancel") {
      await execution.cancel();
      const settled = await execution.settle();
      out.outcome = settled.outcome?.status ?? settled.outcome?.kind ?? null;
      out.settled = settled.outcome ?? null;
    } else {
      const settled = await execution.settle();
      out.settled = settled.outcome ?? null;
      const result = tasks.resultFromTaskOutcome(settled.outcome);
      out.result = result;
    }
  } catch (error) {
    out.error = described(error);
  }
  out.asked = asked;
  process.stdout.write(JSON.stringify(out) + "\n");
  await session.close().catch(() => {});
  await client.close().catch(() => {});
  wire.close();
}

main().catch((error) => {
  process.stdout.write(JSON.stringify({ fatal: described(error), asked }) + "\n");
  process.exit(1);
});
