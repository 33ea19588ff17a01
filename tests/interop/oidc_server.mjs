// An authorization server that is not ours, for the authorization code
// flow with the gateway as the OAuth client (issue 50): the `oidc-provider`
// npm package (pinned in package.json), on 127.0.0.1, configured with
//   - the authorization code flow with PKCE (S256) required,
//   - refresh tokens for every client allowed the refresh_token grant,
//   - resource indicators (RFC 8707): a JWT access token whose `aud` is the
//     resource asked for, with scope `mcp:tools`, living ACCESS_TTL seconds,
//   - dynamic client registration (RFC 7591), revocation (RFC 7009) and
//     introspection,
//   - its development login and consent pages (devInteractions): any login
//     name is accepted as the account, and becomes the tokens' `sub`.
// Its metadata is served at RFC 8414's well-known URL and as OpenID
// Connect discovery. With OIDC_CLIENT_METADATA=1 in its environment it
// takes Client ID Metadata Documents (draft-02, https client ids) in place
// of registration, fetching them from loopback too (its default refuses
// special-use addresses; the gateway under test is on 127.0.0.1) and
// trusting NODE_EXTRA_CA_CERTS as Node does.
//
//     node tests/interop/oidc_server.mjs [ACCESS_TTL_S] [MAX_LIFETIME_S]
//
// With OIDC_TOKEN_LOG=FILE, every access and refresh token the token
// endpoint issues is appended to FILE, one a line: a test can then look
// for them where they must not be (in clear in the gateway's Redis).
//
// Prints `oidc_server listening on 127.0.0.1:PORT` once it listens. Exits
// when its stdin closes, or after MAX_LIFETIME_S (default 300).
import { createServer } from 'node:http';
import { generateKeyPair, exportJWK } from 'jose';
import Provider from 'oidc-provider';

const accessTtl = Number(process.argv[2] ?? 60);
const maxLifetimeS = Number(process.argv[3] ?? 300);

const { privateKey } = await generateKeyPair('RS256', { extractable: true });
const jwk = { ...(await exportJWK(privateKey)), kid: 'k1', use: 'sig', alg: 'RS256' };

const server = createServer();
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const { port } = server.address();
const issuer = `http://127.0.0.1:${port}`;

const clientMetadata = process.env.OIDC_CLIENT_METADATA === '1';

const provider = new Provider(issuer, {
  jwks: { keys: [jwk] },
  clients: [],
  scopes: ['openid', 'offline_access', 'mcp:tools'],
  claims: { openid: ['sub'] },
  findAccount: async (_ctx, id) => ({ accountId: id, claims: async () => ({ sub: id }) }),
  pkce: { required: () => true },
  ttl: { AccessToken: accessTtl, AuthorizationCode: 60, Grant: 3600, Interaction: 600, Session: 3600, RefreshToken: 3600 },
  issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
  // Loopback allowed: the options' SSRF dispatcher dropped, Node's own fetch.
  fetch: (url, options) => {
    const { dispatcher: _, ...rest } = options;
    return globalThis.fetch(url, rest);
  },
  features: {
    devInteractions: { enabled: true },
    registration: { enabled: !clientMetadata },
    clientIdMetadataDocument: { enabled: clientMetadata, ack: 'draft-02' },
    revocation: { enabled: true },
    introspection: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => undefined,
      useGrantedResource: () => true,
      getResourceServerInfo: async (_ctx, resource) => ({
        scope: 'mcp:tools',
        audience: resource,
        accessTokenTTL: accessTtl,
        accessTokenFormat: 'jwt',
      }),
    },
  },
});
// Plain http on loopback: no proxy in front, cookies not `Secure`.
provider.proxy = false;
if (process.env.OIDC_TOKEN_LOG) {
  const { appendFileSync } = await import('node:fs');
  provider.on('grant.success', (ctx) => {
    for (const k of ['access_token', 'refresh_token']) {
      if (ctx.body?.[k]) appendFileSync(process.env.OIDC_TOKEN_LOG, `${ctx.body[k]}\n`);
    }
  });
}
provider.on('server_error', (_ctx, err) => process.stderr.write(`oidc_server error: ${err.stack}\n`));

server.on('request', provider.callback());
process.stdout.write(`oidc_server listening on 127.0.0.1:${port}\n`);

const stop = () => process.exit(0);
process.stdin.on('end', stop);
process.stdin.on('close', stop);
process.stdin.resume();
setTimeout(stop, maxLifetimeS * 1000).unref();
