// The official TypeScript SDK client (@modelcontextprotocol/sdk, pinned in
// package.json) running its own OAuth flow against the gateway, for
// test_oauth.py:
//
//     node tests/interop/ts_oauth_client.mjs MCP_URL SCOPE
//
// Its first connect meets the 401; the SDK reads the protected resource
// metadata and the authorization server's, and sends the "user" to the
// authorization URL (PKCE, RFC 8707 `resource`). The mock authorization
// server approves at once, so the redirect is followed by hand and its code
// given to `finishAuth`; a second connect initializes with the token and
// calls `demo__add`. Prints one JSON line: {"text", "token", "steps",
// "authorizeParams"}. Exits by itself after 60 s at most.
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

setTimeout(() => {
  console.error("gave up after 60 s");
  process.exit(3);
}, 60_000).unref();

const [url, scope] = process.argv.slice(2);
const redirectUrl = "http://127.0.0.1:9/callback";
const state = { steps: [] };

// A client registered with the authorization server beforehand (the mock
// one has no registration endpoint), public, with PKCE.
const provider = {
  get redirectUrl() {
    return redirectUrl;
  },
  get clientMetadata() {
    return { client_name: "sluice-ts-test", redirect_uris: [redirectUrl], scope, token_endpoint_auth_method: "none" };
  },
  clientInformation() {
    return { client_id: "sluice-ts-client", redirect_uris: [redirectUrl], token_endpoint_auth_method: "none" };
  },
  tokens() {
    return state.tokens;
  },
  saveTokens(tokens) {
    state.steps.push("tokens");
    state.tokens = tokens;
  },
  async redirectToAuthorization(authorizationUrl) {
    state.steps.push("authorize");
    state.authorizeParams = Object.fromEntries(authorizationUrl.searchParams);
    const r = await fetch(authorizationUrl, { redirect: "manual" });
    state.code = new URL(r.headers.get("location")).searchParams.get("code");
  },
  saveCodeVerifier(verifier) {
    state.verifier = verifier;
  },
  codeVerifier() {
    return state.verifier;
  },
};

const connect = async () => {
  const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
  const client = new Client({ name: "sluice-ts-oauth", version: "0" });
  await client.connect(transport);
  return { client, transport };
};

let connected;
try {
  connected = await connect();
} catch (e) {
  if (!(e instanceof UnauthorizedError)) throw e;
  state.steps.push("unauthorized");
}
if (!connected) {
  const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
  await transport.finishAuth(state.code);
  connected = await connect();
}
const result = await connected.client.callTool({ name: "demo__add", arguments: { a: 2, b: 3 } });
console.log(
  JSON.stringify({
    text: result.content[0].text,
    token: state.tokens?.access_token,
    steps: state.steps,
    authorizeParams: state.authorizeParams,
  }),
);
await connected.client.close();
process.exit(0);
