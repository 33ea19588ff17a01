// A protected MCP backend for the authorization code flow (issue 50): the
// official TypeScript SDK's server (@modelcontextprotocol/sdk, McpServer
// over Streamable HTTP, stateless) behind the SDK's own bearer-token
// middleware, as an MCP server that follows the authorization spec is:
//   - POST /mcp without a valid token: 401 with
//     `WWW-Authenticate: Bearer ..., resource_metadata="{base}/.well-known/oauth-protected-resource/mcp"`;
//   - that URL serves RFC 9728 metadata: resource `{base}/mcp`, the
//     authorization server ISSUER, scope `mcp:tools`;
//   - a token is accepted when it is a JWT signed by ISSUER (its JWKS), for
//     audience `{base}/mcp`, with scope `mcp:tools`, unexpired.
// Tool `whoami {}` answers `sub: SUBJECT` from the token that called it.
//
//     node tests/interop/protected_backend.mjs ISSUER [MAX_LIFETIME_S]
//
// Prints `protected_backend listening on 127.0.0.1:PORT`; exits when its
// stdin closes, or after MAX_LIFETIME_S (default 300).
import express from 'express';
import { createRemoteJWKSet, jwtVerify } from 'jose';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { requireBearerAuth } from '@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js';
import {
  getOAuthProtectedResourceMetadataUrl,
  mcpAuthMetadataRouter,
} from '@modelcontextprotocol/sdk/server/auth/router.js';

const issuer = process.argv[2];
if (!issuer) {
  process.stderr.write('usage: protected_backend.mjs ISSUER [MAX_LIFETIME_S]\n');
  process.exit(2);
}
const maxLifetimeS = Number(process.argv[3] ?? 300);
const SCOPE = 'mcp:tools';

const discovery = await (await fetch(`${issuer}/.well-known/openid-configuration`)).json();
const jwks = createRemoteJWKSet(new URL(discovery.jwks_uri));

const app = express();
const listener = await new Promise((resolve) => {
  const s = app.listen(0, '127.0.0.1', () => resolve(s));
});
const { port } = listener.address();
const resource = new URL(`http://127.0.0.1:${port}/mcp`);

const verifier = {
  async verifyAccessToken(token) {
    try {
      const { payload } = await jwtVerify(token, jwks, { issuer, audience: resource.href });
      return {
        token,
        clientId: String(payload.client_id ?? ''),
        scopes: String(payload.scope ?? '').split(' ').filter(Boolean),
        expiresAt: payload.exp,
        resource,
        extra: { sub: payload.sub },
      };
    } catch (e) {
      const { InvalidTokenError } = await import('@modelcontextprotocol/sdk/server/auth/errors.js');
      throw new InvalidTokenError(`token refused: ${e.code ?? e.message}`);
    }
  },
};

app.use(
  mcpAuthMetadataRouter({
    oauthMetadata: discovery,
    resourceServerUrl: resource,
    scopesSupported: [SCOPE],
    resourceName: 'sluice interop protected backend',
  }),
);

const auth = requireBearerAuth({
  verifier,
  requiredScopes: [SCOPE],
  resourceMetadataUrl: getOAuthProtectedResourceMetadataUrl(resource),
  expectedResource: resource,
});

app.post('/mcp', auth, express.json(), async (req, res) => {
  const server = new McpServer({ name: 'sluice-interop-protected', version: '0.0.0' });
  server.registerTool('whoami', { description: "Names the token's subject" }, async (extra) => ({
    content: [{ type: 'text', text: `sub: ${extra.authInfo?.extra?.sub}` }],
  }));
  // The same subject as a prompt and as a resource: not only tools need a grant.
  server.registerPrompt('whoami', { description: "Names the token's subject" }, async (extra) => ({
    messages: [{ role: 'user', content: { type: 'text', text: `sub: ${extra.authInfo?.extra?.sub}` } }],
  }));
  server.registerResource('whoami', 'whoami://me', { mimeType: 'text/plain' }, async (uri, extra) => ({
    contents: [{ uri: uri.href, text: `sub: ${extra.authInfo?.extra?.sub}` }],
  }));
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  res.on('close', () => {
    transport.close();
    server.close();
  });
  await server.connect(transport);
  await transport.handleRequest(req, res, req.body);
});
for (const method of ['get', 'delete']) {
  app[method]('/mcp', auth, (_req, res) => res.status(405).set('Allow', 'POST').end());
}

process.stdout.write(`protected_backend listening on 127.0.0.1:${port}\n`);

const stop = () => process.exit(0);
process.stdin.on('end', stop);
process.stdin.on('close', stop);
process.stdin.resume();
setTimeout(stop, maxLifetimeS * 1000).unref();
