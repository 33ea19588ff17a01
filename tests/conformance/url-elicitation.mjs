// URL mode elicitation (SEP-1036) against a server, checked the way the
// conformance suite's scenario `elicitation-sep1036-url-mode` checks it.
// Ours, not the suite's: that scenario is in the suite's repository but in
// no published release (README.md says which versions were looked at), so
// this runs the same checks, by the same ids, with the client the suite
// itself uses (the TypeScript SDK v1, `@modelcontextprotocol/sdk`, pinned
// in package.json). Run by tests/conformance/run, which copies it into
// .work/ beside the packages it imports:
//
//   node .work/url-elicitation.mjs --url URL --leg 2025-11-25|2026-07-28 --out DIR [--bridge-url URL2]
//
// Leg 2025-11-25 (a legacy session, the client declaring
// `capabilities.elicitation.url`):
//   test_elicitation_sep1036_url       elicitation/create in URL mode reaches the
//                                      client; its answer reaches the server
//   test_elicitation_sep1036_error     JSON-RPC error -32042 with data.elicitations
//   test_elicitation_sep1036_complete  notifications/elicitation/complete, with the
//                                      elicitation's id, reaches the client: waited
//                                      for itself, under a deadline
// Leg 2026-07-28 (ours alone; the era has no server-to-client requests, no
// -32042 and no completion notification): the TypeScript SDK v2 client
// (`@modelcontextprotocol/client`, versionNegotiation auto) is given the URL
// elicitation as an input request of an `input_required` result, answers it
// through its elicitation handler, and the retried call completes. With
// --bridge-url (run --via-sluice: sluice's namespace of a fixture that serves
// the 2025 revisions alone), the same again where the server sends
// `elicitation/create` mid-call and sluice's bridge makes it the input request.
//
// Writes DIR/checks.json (the suite's check shape), prints one line per
// check, then `url-elicitation: P passed, F failed`; exits 1 on any failure.

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, arg, i, all) => {
    if (arg.startsWith('--')) pairs.push([arg.slice(2), all[i + 1]]);
    return pairs;
  }, [])
);
if (!args.url || !args.leg || !args.out) {
  console.error('usage: node url-elicitation.mjs --url URL --leg 2025-11-25|2026-07-28 --out DIR');
  process.exit(2);
}

/** How long any one step may take (a call, the completion notification). */
const DEADLINE_MS = 10_000;
const SEP = [{ id: 'SEP-1036', url: 'https://github.com/modelcontextprotocol/modelcontextprotocol/pull/887' }];

const checks = [];
function check(id, name, description, errors, details = {}) {
  checks.push({
    id,
    name,
    description,
    status: errors.length === 0 ? 'SUCCESS' : 'FAILURE',
    timestamp: new Date().toISOString(),
    errorMessage: errors.length ? errors.join('; ') : undefined,
    specReferences: SEP,
    details,
  });
}

/** `promise`, or a rejection naming `what` once DEADLINE_MS has passed. */
function within(promise, what) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: nothing within ${DEADLINE_MS} ms`)), DEADLINE_MS);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

const nonEmptyString = (value, field) =>
  typeof value !== 'string' ? [`${field}: expected a string, got ${typeof value}`]
    : value.trim() === '' ? [`${field} is empty`] : [];

function httpUrl(value) {
  if (typeof value !== 'string') return [`url: expected a string, got ${typeof value}`];
  try {
    const url = new URL(value);
    return url.protocol === 'https:' || url.protocol === 'http:' ? [] : [`url scheme ${url.protocol}`];
  } catch {
    return [`url is not a URL: ${value}`];
  }
}

const textOf = (result) => (result?.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join(' ');

async function legacy(url) {
  const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
  const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
  const { ElicitRequestSchema, ElicitationCompleteNotificationSchema, ErrorCode } = await import(
    '@modelcontextprotocol/sdk/types.js'
  );
  const client = new Client(
    { name: 'sluice-url-elicitation', version: '1.0.0' },
    { capabilities: { elicitation: { form: {}, url: {} } } }
  );
  await within(client.connect(new StreamableHTTPClientTransport(new URL(url))), 'connect');
  const call = (name) => within(client.callTool({ name, arguments: {} }), name);
  try {
    // Part 1: the request in URL mode, and the answer back.
    let asked = null;
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      asked = request.params;
      return { action: 'accept' };
    });
    const result = await call('test_elicitation_sep1036_url');
    if (!asked) {
      check('sep1036-url-general', 'URLElicitationSEP1036General', 'Server requests URL mode elicitation',
        ['no elicitation/create reached the client'], { result });
    } else {
      check('sep1036-url-mode', 'URLModeRequired', 'URL elicitation request specifies mode as "url"',
        asked.mode === 'url' ? [] : [`mode ${JSON.stringify(asked.mode)}`], { mode: asked.mode });
      check('sep1036-url-message', 'URLMessagePresent', 'URL elicitation request includes human-readable message',
        nonEmptyString(asked.message, 'message'), { message: asked.message });
      check('sep1036-url-field', 'URLFieldValid', 'URL elicitation request includes valid URL',
        httpUrl(asked.url), { url: asked.url });
      check('sep1036-url-elicitation-id', 'URLElicitationIdPresent', 'URL elicitation request includes unique elicitationId',
        nonEmptyString(asked.elicitationId, 'elicitationId'), { elicitationId: asked.elicitationId });
      // Ours is stricter than "the call returned": the server names the action it got.
      const text = textOf(result);
      check('sep1036-url-response-action', 'URLResponseAction', 'Client response has action field (and the server got it)',
        result.isError || !/accept/.test(text) ? [`the result does not name the action: ${text}`] : [], { text });
      check('sep1036-url-response-no-content', 'URLResponseNoContent', 'URL mode response omits content field',
        result.isError ? [`the server refused a response without content: ${text}`] : [], { response: { action: 'accept' } });
    }

    // Part 2: -32042, its data as the server wrote it.
    let error = null;
    try {
      const unexpected = await call('test_elicitation_sep1036_error');
      check('sep1036-url-error-code', 'URLErrorCode', 'Server returns URLElicitationRequiredError (code -32042)',
        ['the call succeeded'], { result: unexpected });
    } catch (e) {
      error = e;
    }
    if (error) {
      check('sep1036-url-error-code', 'URLErrorCode', 'Server returns URLElicitationRequiredError (code -32042)',
        error.code === ErrorCode.UrlElicitationRequired ? [] : [`code ${error.code}: ${error.message}`],
        { errorCode: error.code });
      const list = error.data?.elicitations;
      check('sep1036-url-error-elicitations', 'URLErrorElicitations', 'Error data contains elicitations array',
        !Array.isArray(list) ? ['error data has no elicitations array'] : list.length === 0 ? ['elicitations is empty'] : [],
        { elicitationsCount: Array.isArray(list) ? list.length : undefined });
      const structure = (Array.isArray(list) ? list : []).flatMap((e, i) => [
        ...(e?.mode === 'url' ? [] : [`elicitations[${i}].mode is not "url"`]),
        ...(typeof e?.url === 'string' && e.url ? [] : [`elicitations[${i}].url missing`]),
        ...(typeof e?.elicitationId === 'string' && e.elicitationId ? [] : [`elicitations[${i}].elicitationId missing`]),
        ...(typeof e?.message === 'string' && e.message ? [] : [`elicitations[${i}].message missing`]),
      ]);
      check('sep1036-url-error-structure', 'URLErrorStructure', 'Each elicitation has required URL mode fields',
        structure, { elicitations: list });
    }

    // Part 3: the completion notification, waited for itself.
    let askedId = null;
    let completed;
    const completion = new Promise((resolve) => {
      completed = resolve;
    });
    client.setNotificationHandler(ElicitationCompleteNotificationSchema, (n) => completed(n.params));
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      askedId = request.params.elicitationId;
      return { action: 'accept' };
    });
    let notified = null;
    const errors = [];
    try {
      await call('test_elicitation_sep1036_complete');
      notified = await within(completion, 'notifications/elicitation/complete');
    } catch (e) {
      errors.push(String(e?.message ?? e));
    }
    check('sep1036-url-completion-notification', 'URLCompletionNotification',
      'Server sends notifications/elicitation/complete after out-of-band completion', errors,
      { notificationReceived: notified !== null });
    check('sep1036-url-completion-id-match', 'URLCompletionIdMatch',
      'Completion notification elicitationId matches the original request',
      notified === null ? ['no completion notification']
        : notified.elicitationId !== askedId
          ? [`request had ${JSON.stringify(askedId)}, notification ${JSON.stringify(notified.elicitationId)}`] : [],
      { requestElicitationId: askedId, notificationElicitationId: notified?.elicitationId });
  } finally {
    await client.close().catch(() => {});
  }
}

async function modern(url, id = 'sluice-2026-url-input-request', how = 'the server\'s own input request', keyPrefix = '') {
  const { Client, StreamableHTTPClientTransport } = await import('@modelcontextprotocol/client');
  const client = new Client(
    { name: 'sluice-url-elicitation', version: '1.0.0' },
    { capabilities: { elicitation: { url: {} } }, versionNegotiation: { mode: 'auto' } }
  );
  const asked = [];
  client.setRequestHandler('elicitation/create', async (request, ctx) => {
    // The key of the input request it fulfils: the server's, or sluice's bridge's.
    asked.push({ ...request.params, inputKey: ctx?.mcpReq?.id ?? null });
    return { action: 'accept' };
  });
  await within(client.connect(new StreamableHTTPClientTransport(new URL(url))), 'connect');
  try {
    const errors = [];
    if (client.getNegotiatedProtocolVersion() !== '2026-07-28') {
      errors.push(`negotiated ${client.getNegotiatedProtocolVersion()}, not 2026-07-28`);
    }
    let result = null;
    try {
      result = await within(client.callTool({ name: 'test_elicitation_sep1036_url', arguments: {} }), 'tools/call');
    } catch (e) {
      errors.push(String(e?.message ?? e));
    }
    const request = asked[0];
    if (asked.length !== 1) errors.push(`${asked.length} elicitation requests reached the handler, not 1`);
    if (request) {
      if (request.mode !== 'url') errors.push(`mode ${JSON.stringify(request.mode)}`);
      errors.push(...nonEmptyString(request.message, 'message'), ...httpUrl(request.url));
      if (!String(request.inputKey).startsWith(keyPrefix)) errors.push(`input request ${request.inputKey} is not ${keyPrefix}…`);
    }
    const text = textOf(result);
    if (result && !/action=accept/.test(text)) errors.push(`the retried call's result does not name the action: ${text}`);
    check(id, 'URLElicitationInputRequest',
      `A 2026-07-28 client is given the URL elicitation as an input request (${how}), and its answer completes the call`,
      errors, { request, text });
  } finally {
    await client.close().catch(() => {});
  }
}

try {
  if (args.leg !== '2026-07-28') {
    await legacy(args.url);
  } else {
    await modern(args.url);
    if (args['bridge-url']) {
      await modern(args['bridge-url'], 'sluice-2026-url-bridge', 'sluice\'s bridge of a legacy server\'s elicitation/create', 'sluice:');
    }
  }
} catch (e) {
  check('sep1036-url-general', 'URLElicitationSEP1036General', 'Server requests URL mode elicitation',
    [`Failed: ${e?.stack ?? e}`]);
}
mkdirSync(args.out, { recursive: true });
writeFileSync(join(args.out, 'checks.json'), JSON.stringify(checks, null, 2));
let failed = 0;
for (const c of checks) {
  if (c.status !== 'SUCCESS') failed++;
  console.log(`  ${c.status === 'SUCCESS' ? 'ok  ' : 'FAIL'} ${c.id}${c.errorMessage ? `: ${c.errorMessage}` : ''}`);
}
console.log(`url-elicitation: ${checks.length - failed} passed, ${failed} failed`);
process.exit(failed === 0 && checks.length > 0 ? 0 : 1);
