// A driver for the official TypeScript SDK client (@modelcontextprotocol/sdk,
// pinned in package.json), run by test_real_clients.py as a subprocess:
//
//     node tests/interop/ts_client.mjs
//
// It reads one JSON command per line on stdin and writes one JSON line per
// command on stdout ({"id", "ok": true, "result"} or {"id", "ok": false,
// "error"}); nothing else is ever written to stdout. It exits when stdin
// closes (after closing its client), so the test bounds its life by closing
// the pipe or by its PID.
//
// Commands (one client at a time):
//   {"op": "connect", "target": {"url": U} | {"command", "args", "env", "cwd"},
//    "transport": "sse" (a URL spoken to over the deprecated HTTP+SSE
//    transport, SSEClientTransport) | absent (Streamable HTTP),
//    "capabilities": {...}, "sampling": {"text", "model"} | null,
//    "elicitation": {"action", "content"} | null, "roots": [{uri, name}] | null}
//        -> {"protocolVersion", "serverVersion", "serverCapabilities"}
//   {"op": "request", "method": M, "params": P, "timeoutMs": N}
//        -> the result as the SDK returns it (its own methods: listTools,
//           callTool, readResource, setLoggingLevel, ...; one call, no
//           cursor following)
//   {"op": "events"}   -> {"logs", "sampling", "elicitation", "roots"} seen
//                         since the last "events" (each with `at`, epoch s; the
//                         requests with `requestId`, the JSON-RPC id of the
//                         server's request)
//   {"op": "close"}
//
// The callbacks answer like a real host would: sampling with the fixed text
// given at connect, elicitation with the given action/content, roots/list
// with the given roots. Each request is recorded.

import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
  ResultSchema,
} from "@modelcontextprotocol/sdk/types.js";

let client = null;
let events = { logs: [], sampling: [], elicitation: [], roots: [] };
const now = () => Date.now() / 1000;

function reply(obj) {
  process.stdout.write(JSON.stringify(obj) + "\n");
}

async function connect(cmd) {
  if (client) {
    await client.close();
  }
  client = new Client(
    { name: "sluice-interop-ts", version: "0.0.0" },
    { capabilities: cmd.capabilities ?? {} },
  );
  if (cmd.sampling) {
    client.setRequestHandler(CreateMessageRequestSchema, async (req, extra) => {
      events.sampling.push({ at: now(), params: req.params, requestId: extra?.requestId ?? null });
      return {
        role: "assistant",
        content: { type: "text", text: cmd.sampling.text },
        model: cmd.sampling.model ?? "interop-fake-model",
        stopReason: "endTurn",
      };
    });
  }
  if (cmd.elicitation) {
    client.setRequestHandler(ElicitRequestSchema, async (req, extra) => {
      events.elicitation.push({ at: now(), params: req.params, requestId: extra?.requestId ?? null });
      const mode = req.params.mode ?? "form";
      const answer = { action: cmd.elicitation.action };
      if (cmd.elicitation.action === "accept" && mode === "form") {
        answer.content = cmd.elicitation.content;
      }
      return answer;
    });
  }
  if (cmd.roots) {
    client.setRequestHandler(ListRootsRequestSchema, async (req, extra) => {
      events.roots.push({ at: now(), params: req.params ?? {}, requestId: extra?.requestId ?? null });
      return { roots: cmd.roots };
    });
  }
  client.setNotificationHandler(LoggingMessageNotificationSchema, async (n) => {
    events.logs.push({ at: now(), params: n.params });
  });

  let transport;
  if (cmd.target.url && cmd.transport === "sse") {
    transport = new SSEClientTransport(new URL(cmd.target.url));
  } else if (cmd.target.url) {
    transport = new StreamableHTTPClientTransport(new URL(cmd.target.url));
  } else {
    transport = new StdioClientTransport({
      command: cmd.target.command,
      args: cmd.target.args ?? [],
      env: cmd.target.env ?? undefined,
      cwd: cmd.target.cwd ?? undefined,
      stderr: "ignore",
    });
  }
  await client.connect(transport, { timeout: cmd.timeoutMs ?? 30000 });
  return {
    protocolVersion: transport.protocolVersion ?? null,
    serverVersion: client.getServerVersion() ?? null,
    serverCapabilities: client.getServerCapabilities() ?? null,
  };
}

async function request(cmd) {
  if (!client) {
    throw new Error("not connected");
  }
  const params = cmd.params ?? {};
  const options = { timeout: cmd.timeoutMs ?? 30000 };
  switch (cmd.method) {
    case "tools/list":
      return client.listTools(params, options);
    case "prompts/list":
      return client.listPrompts(params, options);
    case "resources/list":
      return client.listResources(params, options);
    case "resources/templates/list":
      return client.listResourceTemplates(params, options);
    case "tools/call":
      return client.callTool(params, undefined, options);
    case "resources/read":
      return client.readResource(params, options);
    case "prompts/get":
      return client.getPrompt(params, options);
    case "logging/setLevel":
      return client.setLoggingLevel(params.level, options);
    case "resources/subscribe":
      return client.subscribeResource(params, options);
    case "resources/unsubscribe":
      return client.unsubscribeResource(params, options);
    default:
      return client.request({ method: cmd.method, params }, ResultSchema, options);
  }
}

async function handle(cmd) {
  switch (cmd.op) {
    case "connect":
      return connect(cmd);
    case "request":
      return request(cmd);
    case "events": {
      const seen = events;
      events = { logs: [], sampling: [], elicitation: [], roots: [] };
      return seen;
    }
    case "close":
      if (client) {
        await client.close();
        client = null;
      }
      return {};
    default:
      throw new Error(`unknown op ${cmd.op}`);
  }
}

const lines = createInterface({ input: process.stdin });
// Commands run one after another, in order.
let chain = Promise.resolve();
lines.on("line", (line) => {
  if (!line.trim()) {
    return;
  }
  chain = chain.then(async () => {
    let cmd;
    try {
      cmd = JSON.parse(line);
      const result = await handle(cmd);
      reply({ id: cmd.id, ok: true, result });
    } catch (err) {
      reply({
        id: cmd?.id ?? null,
        ok: false,
        error: { message: String(err?.message ?? err), code: err?.code ?? null, data: err?.data ?? null },
      });
    }
  });
});
lines.on("close", () => {
  chain
    .then(async () => {
      if (client) {
        await client.close();
      }
    })
    .finally(() => process.exit(0));
});
