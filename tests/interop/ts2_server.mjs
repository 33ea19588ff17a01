// An MCP server built on the official TypeScript SDK v2 (@modelcontextprotocol/server,
// pinned in package.json), served over Streamable HTTP by the SDK's own entry
// (`createMcpHandler`, wrapped for node:http by @modelcontextprotocol/node's
// `toNodeHandler`), for test_ts_v2.py:
//
//     node tests/interop/ts2_server.mjs modern|dual [MAX_LIFETIME_S]
//
// The mode is the entry's `legacy` option, its two ways of serving:
//   modern  `legacy: 'reject'`: 2026-07-28 only (2025-era requests are refused
//           with the unsupported-protocol-version error naming 2026-07-28);
//   dual    `legacy: 'stateless'` (the SDK's default): 2026-07-28 requests
//           served per request, and 2025-era traffic by a fresh server per
//           request (no sessions; GET and DELETE answer 405).
//
// It listens on 127.0.0.1 only (port 0), prints one line to stdout:
//
//     ts2_server listening on 127.0.0.1:PORT
//
// serves MCP on /mcp, and exits on stdin EOF or after MAX_LIFETIME_S (default 300).
//
// Tools (one server instance per request, from one factory; each result names
// the era of the instance that served it, `[era]` at the end of its text):
//   echo {message}   -> "echo: MESSAGE"
//   add {a, b}       -> "SUM", structuredContent {sum}
//   ask_name         -> input_required: a form elicitation for `name` (key
//                       `who`, requestState "ts2-ask-name"); the retry carrying
//                       the answer -> "Hello, NAME!" (`bad state: ...` when the
//                       state did not come back unchanged)
//   ask_sampling     -> input_required: sampling/createMessage; the retry ->
//                       "sampled: TEXT"
//   ask_roots        -> input_required: roots/list; the retry -> "roots: URI,URI"

import { createServer } from "node:http";
import { toNodeHandler } from "@modelcontextprotocol/node";
import {
  McpServer,
  acceptedContent,
  createMcpHandler,
  inputRequired,
  inputResponse,
} from "@modelcontextprotocol/server";
import { z } from "zod";

const mode = process.argv[2];
if (mode !== "modern" && mode !== "dual") {
  process.stderr.write("usage: ts2_server.mjs modern|dual [MAX_LIFETIME_S]\n");
  process.exit(2);
}
const maxLifetimeS = Number(process.argv[3] ?? 300);

const text = (t, extra = {}) => ({ content: [{ type: "text", text: t }], ...extra });

function factory(ctx) {
  const era = ctx.era;
  const server = new McpServer({ name: "sluice-interop-ts2-server", version: "0.0.0" });
  server.registerTool(
    "echo",
    { description: "Echoes its message", inputSchema: z.object({ message: z.string() }) },
    async ({ message }) => text(`echo: ${message} [${era}]`),
  );
  server.registerTool(
    "add",
    {
      description: "Adds two numbers",
      inputSchema: z.object({ a: z.number(), b: z.number() }),
      outputSchema: z.object({ sum: z.number() }),
    },
    async ({ a, b }) => text(`${a + b} [${era}]`, { structuredContent: { sum: a + b } }),
  );
  // Multi-round-trip tools: the same handler asks (first round) and answers (the
  // retry carrying inputResponses), whatever the era (on a 2025-era request the
  // SDK's legacy shim asks the client itself, if it can).
  const stateOk = (c, want) => c.mcpReq.requestState() === want;
  server.registerTool("ask_name", { description: "Asks your name (form elicitation)" }, async (c) => {
    const got = acceptedContent(c.mcpReq.inputResponses, "who");
    if (got !== undefined) {
      if (!stateOk(c, "ts2-ask-name")) {
        return text(`bad state: ${JSON.stringify(c.mcpReq.requestState())}`);
      }
      return text(`Hello, ${got.name}! [${era}]`);
    }
    return inputRequired({
      inputRequests: {
        who: inputRequired.elicit({
          message: "Your name?",
          requestedSchema: {
            type: "object",
            properties: { name: { type: "string" } },
            required: ["name"],
          },
        }),
      },
      requestState: "ts2-ask-name",
    });
  });
  server.registerTool("ask_sampling", { description: "Asks the client's model" }, async (c) => {
    const got = inputResponse(c.mcpReq.inputResponses, "llm");
    if (c.mcpReq.inputResponses?.llm !== undefined) {
      const answer = c.mcpReq.inputResponses.llm;
      return text(`sampled: ${answer?.content?.text ?? JSON.stringify(got)} [${era}]`);
    }
    return inputRequired({
      inputRequests: {
        llm: inputRequired.createMessage({
          messages: [{ role: "user", content: { type: "text", text: "Capital of France?" } }],
          maxTokens: 16,
        }),
      },
      requestState: "ts2-ask-sampling",
    });
  });
  server.registerTool("ask_roots", { description: "Asks the client's roots" }, async (c) => {
    const answer = c.mcpReq.inputResponses?.roots;
    if (answer !== undefined) {
      return text(`roots: ${(answer.roots ?? []).map((r) => r.uri).join(",")} [${era}]`);
    }
    return inputRequired({
      inputRequests: { roots: inputRequired.listRoots() },
      requestState: "ts2-ask-roots",
    });
  });
  return server;
}

const handler = createMcpHandler(factory, {
  legacy: mode === "modern" ? "reject" : "stateless",
  onerror: (e) => process.stderr.write(`ts2_server: ${e?.stack ?? e}\n`),
});
const serve = toNodeHandler(handler);
const http = createServer((req, res) => {
  const path = (req.url ?? "").split("?")[0];
  if (path !== "/mcp") {
    res.writeHead(404).end();
    return;
  }
  serve(req, res).catch((e) => {
    process.stderr.write(`ts2_server: ${e?.stack ?? e}\n`);
    if (!res.headersSent) res.writeHead(500);
    res.end();
  });
});

function stop(code) {
  http.close();
  handler.close().finally(() => process.exit(code));
  setTimeout(() => process.exit(code), 2000).unref();
}

http.listen(0, "127.0.0.1", () => {
  const { address, port } = http.address();
  process.stdout.write(`ts2_server listening on ${address}:${port}\n`);
});
process.stdin.on("end", () => stop(0));
process.stdin.on("data", () => {});
process.stdin.resume();
setTimeout(() => stop(0), maxLifetimeS * 1000).unref();
