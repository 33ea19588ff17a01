// A driver for the official TypeScript SDK v2 client (@modelcontextprotocol/client,
// pinned in package.json), run by real_clients.py (Ts2Driver) as a subprocess:
//
//     node tests/interop/ts2_client.mjs
//
// Same line protocol as ts_client.mjs (the v1 SDK's driver): one JSON command
// per line on stdin, one JSON line per command on stdout ({"id", "ok": true,
// "result"} or {"id", "ok": false, "error"}); nothing else goes to stdout. It
// exits when stdin closes (after closing its client).
//
// Commands (one client at a time):
//   {"op": "connect", "target": {"url": U} | {"command", "args", "env"}, "negotiation": "legacy" | "auto",
//    "capabilities": {...}, "sampling": {"text", "model"} | null,
//    "elicitation": {"action", "content"} | null, "roots": [{uri, name}] | null,
//    "headers": {name: value} | absent, "openUrl": [argv...] | absent}
//        -> {"protocolVersion", "era", "serverVersion", "serverCapabilities"}
//      negotiation "legacy" (the SDK's default) speaks the 2025 protocol
//      (initialize); "auto" probes server/discover and speaks 2026-07-28 when
//      the server answers it (falling back to initialize otherwise).
//   {"op": "request", "method": M, "params": P, "timeoutMs": N}
//        -> the result as the SDK returns it (listTools, callTool, ...)
//   {"op": "events"}   -> {"logs", "sampling", "elicitation", "roots"} seen
//                         since the last "events"; each entry {at, params, requestId}
//                         where requestId is the id the SDK handed the handler: a
//                         JSON-RPC request id for a server-to-client request, the
//                         inputRequests key when the SDK fulfils an input_required
//                         result through the same handler (2026-07-28)
//   {"op": "close"}
//
// The handlers answer like a real host would: sampling with the fixed text given
// at connect, elicitation with the given action/content (URL mode: the action
// only), roots/list with the given roots. With "openUrl", a URL-mode elicitation
// is also opened the way a host opens a browser: argv with the URL appended is
// started and not waited for, and the action is returned at once. The SDK uses the same handlers to fulfil
// `input_required` results on a 2026-07-28 connection (its default auto-fulfilment).

import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

let client = null;
let events = { logs: [], sampling: [], elicitation: [], roots: [] };
const now = () => Date.now() / 1000;

function reply(obj) {
  process.stdout.write(JSON.stringify(obj) + "\n");
}

function requestIdOf(ctx) {
  return ctx?.mcpReq?.id ?? null;
}

async function connect(cmd) {
  if (client) {
    await client.close();
  }
  client = new Client(
    { name: "sluice-interop-ts2", version: "0.0.0" },
    {
      capabilities: cmd.capabilities ?? {},
      versionNegotiation: { mode: cmd.negotiation ?? "legacy" },
    },
  );
  if (cmd.sampling) {
    client.setRequestHandler("sampling/createMessage", async (req, ctx) => {
      events.sampling.push({ at: now(), params: req.params, requestId: requestIdOf(ctx) });
      return {
        role: "assistant",
        content: { type: "text", text: cmd.sampling.text },
        model: cmd.sampling.model ?? "interop-fake-model",
        stopReason: "endTurn",
      };
    });
  }
  if (cmd.elicitation) {
    client.setRequestHandler("elicitation/create", async (req, ctx) => {
      events.elicitation.push({ at: now(), params: req.params, requestId: requestIdOf(ctx) });
      const mode = req.params.mode ?? "form";
      if (mode === "url" && cmd.openUrl && cmd.elicitation.action === "accept") {
        const [program, ...args] = cmd.openUrl;
        const opened = spawn(program, [...args, req.params.url], { stdio: "ignore" });
        opened.on("error", () => {});
      }
      const answer = { action: cmd.elicitation.action };
      if (cmd.elicitation.action === "accept" && mode === "form") {
        answer.content = cmd.elicitation.content;
      }
      return answer;
    });
  }
  if (cmd.roots) {
    client.setRequestHandler("roots/list", async (req, ctx) => {
      events.roots.push({ at: now(), params: req.params ?? {}, requestId: requestIdOf(ctx) });
      return { roots: cmd.roots };
    });
  }
  client.setNotificationHandler("notifications/message", async (n) => {
    events.logs.push({ at: now(), params: n.params });
  });

  const transport = cmd.target.url
    ? new StreamableHTTPClientTransport(new URL(cmd.target.url), {
        requestInit: cmd.headers ? { headers: cmd.headers } : undefined,
      })
    : new StdioClientTransport({
        command: cmd.target.command,
        args: cmd.target.args ?? [],
        env: cmd.target.env ?? undefined,
        stderr: "ignore",
      });
  await client.connect(transport, { timeout: cmd.timeoutMs ?? 30000 });
  return {
    protocolVersion: client.getNegotiatedProtocolVersion() ?? null,
    era: client.getProtocolEra() ?? null,
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
  // Lists: one page per call, fresh (no response cache), as the other drivers do.
  const listOptions = { ...options, cacheMode: "bypass" };
  switch (cmd.method) {
    case "tools/list":
      return client.listTools(params, listOptions);
    case "prompts/list":
      return client.listPrompts(params, listOptions);
    case "resources/list":
      return client.listResources(params, listOptions);
    case "resources/templates/list":
      return client.listResourceTemplates(params, listOptions);
    case "tools/call":
      return client.callTool(params, options);
    case "resources/read":
      return client.readResource(params, listOptions);
    case "prompts/get":
      return client.getPrompt(params, options);
    default:
      throw new Error(`ts2_client.mjs has no method for ${cmd.method}`);
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
        error: {
          message: String(err?.message ?? err),
          code: err?.code ?? null,
          data: err?.data ?? null,
          name: err?.name ?? null,
        },
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
