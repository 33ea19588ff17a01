// A real OAuth 2.1 authorization server for the tests: oauth2-mock-server
// (npm) on 127.0.0.1 with an RS256 key. Its access tokens carry `sub`
// and, as RFC 8707 asks, the `resource` the client requested as `aud`;
// an authorization code grants the scope asked for at /authorize; a
// client credentials token names its client and lives 6 s.
//
// Beside it, on another loopback port, a control endpoint for the tests:
//   POST /mint   {"claims": {...}, "expiresIn": 3600, "kid": "..."}
//                -> {"token": "..."}: a token signed by the issuer, its
//                   claims (iss, iat, exp, nbf) overridden by `claims`
//                   (a null value removes a claim)
//   POST /rotate -> {"kid": "..."}: a new key, served in the JWKS from now
//                   on and used by /token; the old one stays listed.
//   POST /token  the issuer's token endpoint with RFC 8693 token exchange,
//                which oauth2-mock-server lacks (it answers invalid_grant):
//                a subject token the issuer signed (verified with `jose`
//                against the issuer's JWKS) is exchanged for a token of the
//                same `sub`, `aud` the requested resource (or audience),
//                `act.sub` the client that asked; any other grant is passed
//                to the issuer's own /token unchanged.
//   GET /exchanges -> [{"sub", "aud", "client"}]: the exchanges made.
//
// Prints `oauth issuer URL control URL` once both listen. Exits when its
// stdin closes or after 300 s.
import http from 'node:http';
import { createLocalJWKSet, jwtVerify } from 'jose';
import { OAuth2Server } from 'oauth2-mock-server';

const server = new OAuth2Server();
let current = (await server.issuer.keys.generate('RS256')).kid;
await server.start(0, '127.0.0.1');

// The scope a client asked for at /authorize is granted with its code.
const granted = new Map();
server.service.on('beforeAuthorizeRedirect', (redirect, req) => {
  const scope = new URL(req.url, 'http://x').searchParams.get('scope');
  const code = redirect.url.searchParams.get('code');
  if (code && scope) granted.set(code, scope);
});
server.service.on('beforeTokenSigning', (token, req) => {
  const body = req.body || {};
  if (body.resource) token.payload.aud = body.resource;
  const scope = body.scope || granted.get(body.code);
  if (scope) token.payload.scope = scope;
  if (body.grant_type === 'client_credentials') {
    // The client's own token: its id (from client_secret_basic) as `sub`.
    const basic = (req.headers.authorization || '').replace(/^Basic /, '');
    const raw = Buffer.from(basic, 'base64').toString().split(':')[0];
    const id = decodeURIComponent(raw.replace(/\+/g, ' '));
    token.payload.sub = id;
    token.payload.client_id = id;
  } else {
    token.payload.sub = 'alice';
  }
});
// Client credentials tokens live 6 s, so that a test sees one refreshed.
server.service.on('beforeResponse', (response, req) => {
  if ((req.body || {}).grant_type === 'client_credentials') response.body.expires_in = 6;
});

async function mint(spec) {
  return server.issuer.buildToken({
    kid: spec.kid || current,
    expiresIn: spec.expiresIn ?? 3600,
    scopesOrTransform: (_header, payload) => {
      for (const [k, v] of Object.entries(spec.claims || {})) {
        if (v === null) delete payload[k];
        else payload[k] = v;
      }
    },
  });
}

const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN = 'urn:ietf:params:oauth:token-type:access_token';
const exchanges = [];

async function token(req, res, body) {
  const form = new URLSearchParams(body);
  if (form.get('grant_type') !== TOKEN_EXCHANGE) {
    const upstream = await fetch(`${server.issuer.url}/token`, {
      method: 'POST',
      headers: { 'content-type': req.headers['content-type'], authorization: req.headers.authorization || '' },
      body,
    });
    res.writeHead(upstream.status, { 'content-type': 'application/json' }).end(await upstream.text());
    return;
  }
  const refuse = (error) => res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error }));
  const basic = (req.headers.authorization || '').replace(/^Basic /, '');
  const client = decodeURIComponent(Buffer.from(basic, 'base64').toString().split(':')[0].replace(/\+/g, ' '));
  if (!client) return refuse('invalid_client');
  if (form.get('subject_token_type') !== ACCESS_TOKEN) return refuse('invalid_request');
  let subject;
  try {
    const keys = createLocalJWKSet({ keys: server.issuer.keys.toJSON() });
    subject = (await jwtVerify(form.get('subject_token') || '', keys, { issuer: server.issuer.url })).payload;
  } catch {
    return refuse('invalid_grant');
  }
  const aud = form.get('resource') || form.get('audience');
  const issued = await server.issuer.buildToken({
    kid: current,
    expiresIn: 60,
    scopesOrTransform: (_header, payload) => {
      payload.sub = subject.sub;
      payload.aud = aud;
      if (form.get('scope')) payload.scope = form.get('scope');
      payload.act = { sub: client };
    },
  });
  exchanges.push({ sub: subject.sub, aud, client });
  res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' }).end(
    JSON.stringify({ access_token: issued, issued_token_type: ACCESS_TOKEN, token_type: 'Bearer', expires_in: 60 }),
  );
}

const control = http.createServer((req, res) => {
  let body = '';
  req.on('data', (c) => (body += c));
  req.on('end', async () => {
    try {
      if (req.url === '/token') return await token(req, res, body);
      const spec = body && req.url !== '/exchanges' ? JSON.parse(body) : {};
      let out;
      if (req.url === '/mint') out = { token: await mint(spec) };
      else if (req.url === '/exchanges') out = exchanges;
      else if (req.url === '/rotate') {
        current = (await server.issuer.keys.generate('RS256')).kid;
        out = { kid: current };
      } else {
        res.writeHead(404).end();
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(out));
    } catch (e) {
      res.writeHead(500).end(String(e));
    }
  });
});
control.listen(0, '127.0.0.1', () => {
  const { port } = control.address();
  console.log(`oauth issuer ${server.issuer.url} control http://127.0.0.1:${port}`);
});

const stop = async () => {
  control.close();
  await server.stop();
  process.exit(0);
};
process.stdin.on('end', stop);
process.stdin.resume();
setTimeout(stop, 300_000).unref();
