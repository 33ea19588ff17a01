'use strict';
// Preload for Node peers in sluice's interop tests:
//
//     node --require ./tests/interop/loopback-preload.cjs server.js ...
//
// Every TCP listen (net, http, https, express: they all go through
// net.Server.prototype.listen) is forced onto 127.0.0.1, whatever host the
// program asked for (none, "0.0.0.0", "::", "localhost", ...), so a peer such
// as server-everything in streamableHttp mode never listens on a routable
// address. Unix-socket paths and inherited handles/fds are left alone.
//
// Once a server is listening, one line goes to stderr:
//
//     loopback-preload listening on 127.0.0.1:PORT
//
// so a harness can start a peer with PORT=0 and read the real port from that
// line (a readiness signal; no port polling needed).
//
// SLUICE_LOOPBACK_HOST overrides the address (only loopback addresses are
// accepted: 127.0.0.0/8 or ::1).

const net = require('node:net');

const HOST = process.env.SLUICE_LOOPBACK_HOST || '127.0.0.1';
if (!(/^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(HOST) || HOST === '::1')) {
  throw new Error(`loopback-preload: SLUICE_LOOPBACK_HOST=${HOST} is not a loopback address`);
}

const originalListen = net.Server.prototype.listen;

function isPipePath(value) {
  return typeof value === 'string' && value !== '' && !/^\d+$/.test(value);
}

function isHandle(value) {
  // listen(handle) / listen({ fd }) / listen({ handle }) / listen(server or socket)
  return (
    value !== null &&
    typeof value === 'object' &&
    (value._handle !== undefined || value.fd !== undefined || value.handle !== undefined)
  );
}

function announce(server) {
  server.prependOnceListener('listening', () => {
    const addr = server.address();
    if (addr && typeof addr === 'object') {
      const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
      process.stderr.write(`loopback-preload listening on ${host}:${addr.port}\n`);
    }
  });
}

function loopbackListen(...args) {
  const callback = typeof args[args.length - 1] === 'function' ? args.pop() : undefined;
  const first = args[0];
  let options;

  if (first === undefined || first === null) {
    // listen() / listen(cb): a random port on every interface -> loopback
    options = { port: 0 };
  } else if (typeof first === 'object') {
    if (isHandle(first) || first.path !== undefined) {
      return originalListen.apply(this, callback ? [...args, callback] : args);
    }
    options = { ...first };
  } else if (isPipePath(first)) {
    return originalListen.apply(this, callback ? [...args, callback] : args);
  } else {
    // listen(port[, host][, backlog])
    options = { port: first === '' ? 0 : Number(first) };
    let i = 1;
    if (typeof args[i] === 'string' || args[i] === undefined || args[i] === null) {
      i += 1; // the requested host is replaced below
    }
    if (typeof args[i] === 'number') {
      options.backlog = args[i];
    }
  }

  options.host = HOST;
  delete options.ipv6Only;
  announce(this);
  return callback ? originalListen.call(this, options, callback) : originalListen.call(this, options);
}

net.Server.prototype.listen = loopbackListen;
