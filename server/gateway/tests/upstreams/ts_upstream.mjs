// An upstream MCP server on the official TypeScript SDK (McpServer), for
// gapless-gateway's tests. One tool, `emit_events`, sends `count` log
// notifications either on the tool call's own stream ("request") or on the
// session's standalone GET stream ("standalone"), then returns
// "emitted <count>".
//
//   node ts_upstream.mjs --port N [--event-store | --forget-events] [--json]
//       Streamable HTTP, stateful, on http://127.0.0.1:N/mcp (N may be 0: a
//       free port). Prints "listening <port>" on stdout once it listens.
//       --event-store: each session's transport gets the SDK's
//         InMemoryEventStore (SSE event ids, Last-Event-ID replay).
//       --json: enableJsonResponse (POSTs answer with plain JSON, no SSE).
//       --stateless: no sessions (sessionIdGenerator undefined): a server
//         and transport per POST, no standalone stream (GET and DELETE 405).
//       --tls CERT KEY: https with this PEM certificate and key.
//       --token T: an OAuth 2.1 resource server (MCP authorization): every
//         request to /mcp without "Authorization: Bearer T" gets 401 with
//         WWW-Authenticate naming its protected-resource metadata, served
//         at /.well-known/oauth-protected-resource[/mcp].
//       --forget-events: an event store that gives ids but has kept nothing
//         when asked to replay (an evicting or restarted store): a resume is
//         answered 200 with an empty stream, the SDK's answer to a cursor it
//         cannot serve. Implies --event-store.
//       --replaying-store: an event store that replays the standalone
//         stream too. The SDK's example InMemoryEventStore cannot: its ids
//         are "<stream>_<ms>_<random>", and it takes the stream as the text
//         before the first "_", which for the standalone stream
//         "_GET_stream" is "", so a standalone resume is answered with an
//         empty stream. This store reads the stream up to the last two
//         "_", and replays in the order the events were stored (the
//         example sorts ids as strings, which reorders events of one
//         millisecond). Implies --event-store.
//   node ts_upstream.mjs --stdio
//       The same server over stdio; logs go to stderr only.
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import fs from 'node:fs';
import * as z from 'zod/v4';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { InMemoryEventStore } from '@modelcontextprotocol/sdk/examples/shared/inMemoryEventStore.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';

// An event store that has forgotten everything by the time it is asked to
// replay: the stream it names is a new one, and nothing is sent on it.
class ForgetfulEventStore extends InMemoryEventStore {
  async replayEventsAfter(_lastEventId, _sender) {
    return `forgotten-${randomUUID()}`;
  }
}

// The example store with a standalone stream that resumes (--replaying-store).
class ReplayingEventStore extends InMemoryEventStore {
  getStreamIdFromEventId(eventId) {
    const last = eventId.lastIndexOf('_');
    return eventId.slice(0, eventId.lastIndexOf('_', last - 1));
  }
  async replayEventsAfter(lastEventId, { send }) {
    if (!lastEventId || !this.events.has(lastEventId)) {
      return '';
    }
    const streamId = this.getStreamIdFromEventId(lastEventId);
    let after = false;
    for (const [eventId, { streamId: s, message }] of this.events) {
      if (s !== streamId) continue;
      if (after) await send(eventId, message);
      if (eventId === lastEventId) after = true;
    }
    return streamId;
  }
}

function log(...args) {
  // stdout belongs to the protocol in --stdio mode, and to the "listening"
  // line in HTTP mode: everything else goes to stderr.
  console.error('[ts_upstream]', ...args);
}

function parseArgs(argv) {
  const opts = { port: undefined, stdio: false, eventStore: false, json: false, forget: false, token: undefined, tls: undefined, stateless: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--port') {
      const v = argv[++i];
      if (v === undefined || !/^\d+$/.test(v) || Number(v) > 65535) {
        throw new Error(`--port needs a number 0..65535, got ${v}`);
      }
      opts.port = Number(v);
    } else if (a === '--stdio') {
      opts.stdio = true;
    } else if (a === '--event-store') {
      opts.eventStore = true;
    } else if (a === '--stateless') {
      opts.stateless = true;
    } else if (a === '--tls') {
      opts.tls = { cert: fs.readFileSync(argv[++i]), key: fs.readFileSync(argv[++i]) };
    } else if (a === '--token') {
      opts.token = argv[++i];
      if (!opts.token) throw new Error('--token needs a value');
    } else if (a === '--replaying-store') {
      opts.eventStore = true;
      opts.replaying = true;
    } else if (a === '--forget-events') {
      opts.eventStore = true;
      opts.forget = true;
    } else if (a === '--json') {
      opts.json = true;
    } else {
      throw new Error(`unknown argument ${a}`);
    }
  }
  if (opts.stdio === (opts.port !== undefined)) {
    throw new Error('usage: ts_upstream.mjs --port N [--event-store | --forget-events] [--json] | --stdio');
  }
  return opts;
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

// One McpServer per session: an McpServer connects to a single transport.
function createServer() {
  const server = new McpServer(
    { name: 'gapless-ts-upstream', version: '0.0.0' },
    { capabilities: { logging: {} } }
  );
  server.registerTool(
    'emit_events',
    {
      description:
        'Sends `count` notifications/message (level info, data {seq, pad}) `interval_ms` apart, ' +
        "on the call's own stream (target request) or on the standalone GET stream (target standalone), " +
        'then returns "emitted <count>".',
      inputSchema: {
        count: z.number().int().min(0),
        interval_ms: z.number().int().min(0).default(0),
        payload_bytes: z.number().int().min(0).default(0),
        target: z.enum(['request', 'standalone']).default('request'),
        // Each event's data gets `t`, the wall-clock time it was sent in
        // microseconds since the epoch (the gateway benchmark's latency).
        stamp: z.boolean().default(false)
      }
    },
    async ({ count, interval_ms, payload_bytes, target, stamp }, extra) => {
      const pad = 'x'.repeat(payload_bytes);
      for (let seq = 1; seq <= count; seq++) {
        if (seq > 1 && interval_ms > 0) {
          await sleep(interval_ms);
        }
        // A cancelled call (notifications/cancelled) stops emitting.
        if (extra.signal?.aborted) {
          log('emit_events cancelled at', seq);
          break;
        }
        const notification = {
          method: 'notifications/message',
          params: { level: 'info', data: { seq, pad } }
        };
        if (stamp) {
          notification.params.data.t = Math.round((performance.timeOrigin + performance.now()) * 1000);
        }
        if (target === 'request') {
          // Carries relatedRequestId: goes on this tools/call's POST stream.
          await extra.sendNotification(notification);
        } else {
          // No related request: goes on the session's standalone GET stream
          // (stored for replay when an event store is set, else dropped if no
          // GET stream is open).
          await server.server.notification(notification);
        }
      }
      return { content: [{ type: 'text', text: `emitted ${count}` }] };
    }
  );
  return server;
}

function sendJsonRpcError(res, status, code, message) {
  if (res.headersSent) {
    res.end();
    return;
  }
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on('data', c => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

async function runHttp(opts) {
  /** @type {Map<string, StreamableHTTPServerTransport>} */
  const transports = new Map();

  async function handle(req, res) {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const origin = `${opts.tls ? 'https' : 'http'}://127.0.0.1:${httpServer.address().port}`;
    if (opts.token && req.method === 'GET'
        && ['/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/mcp'].includes(url.pathname)) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({
        resource: `${origin}/mcp`,
        authorization_servers: ['https://auth.example.test'],
        bearer_methods_supported: ['header'],
      }));
      return;
    }
    if (opts.token && url.pathname === '/mcp' && req.headers.authorization !== `Bearer ${opts.token}`) {
      res.writeHead(401, {
        'content-type': 'application/json',
        'www-authenticate': `Bearer resource_metadata="${origin}/.well-known/oauth-protected-resource/mcp"`,
      });
      res.end(JSON.stringify({ error: 'invalid_token', error_description: 'a bearer token is required' }));
      return;
    }
    if (url.pathname !== '/mcp') {
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end('not found\n');
      return;
    }
    if (opts.stateless) {
      if (req.method !== 'POST') {
        res.setHeader('allow', 'POST');
        sendJsonRpcError(res, 405, -32000, 'Method not allowed: no sessions here.');
        return;
      }
      let body;
      try {
        body = JSON.parse(await readBody(req));
      } catch {
        sendJsonRpcError(res, 400, -32700, 'Parse error: Invalid JSON');
        return;
      }
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
      const server = createServer();
      res.on('close', () => { transport.close(); server.close(); });
      await server.connect(transport);
      await transport.handleRequest(req, res, body);
      return;
    }
    const sessionId = req.headers['mcp-session-id'];
    if (Array.isArray(sessionId)) {
      sendJsonRpcError(res, 400, -32000, 'Bad Request: more than one Mcp-Session-Id header');
      return;
    }
    if (req.method === 'POST') {
      let body;
      try {
        body = JSON.parse(await readBody(req));
      } catch {
        sendJsonRpcError(res, 400, -32700, 'Parse error: Invalid JSON');
        return;
      }
      if (sessionId !== undefined) {
        const transport = transports.get(sessionId);
        if (!transport) {
          sendJsonRpcError(res, 404, -32001, 'Session not found');
          return;
        }
        await transport.handleRequest(req, res, body);
        return;
      }
      if (!isInitializeRequest(body)) {
        sendJsonRpcError(res, 400, -32000, 'Bad Request: No valid session ID provided');
        return;
      }
      const transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        eventStore: opts.forget ? new ForgetfulEventStore() : opts.replaying ? new ReplayingEventStore() : opts.eventStore ? new InMemoryEventStore() : undefined,
        enableJsonResponse: opts.json,
        onsessioninitialized: id => {
          transports.set(id, transport);
          log('session initialized', id);
        }
      });
      transport.onerror = err => log('transport error', transport.sessionId ?? '-', err.message);
      transport.onclose = () => {
        const id = transport.sessionId;
        if (id !== undefined && transports.get(id) === transport) {
          transports.delete(id);
          log('session closed', id);
        }
      };
      const server = createServer();
      await server.connect(transport);
      await transport.handleRequest(req, res, body);
      return;
    }
    if (req.method === 'GET' || req.method === 'DELETE') {
      if (sessionId === undefined) {
        sendJsonRpcError(res, 400, -32000, 'Bad Request: Mcp-Session-Id header is required');
        return;
      }
      const transport = transports.get(sessionId);
      if (!transport) {
        sendJsonRpcError(res, 404, -32001, 'Session not found');
        return;
      }
      await transport.handleRequest(req, res);
      return;
    }
    res.setHeader('allow', 'GET, POST, DELETE');
    sendJsonRpcError(res, 405, -32000, 'Method not allowed.');
  }

  const serve = (req, res) => {
    handle(req, res).catch(err => {
      log('error handling request:', err);
      sendJsonRpcError(res, 500, -32603, 'Internal server error');
    });
  };
  const httpServer = opts.tls ? https.createServer(opts.tls, serve) : http.createServer(serve);
  await new Promise((resolve, reject) => {
    httpServer.once('error', reject);
    httpServer.listen(opts.port, '127.0.0.1', resolve);
  });
  const { port } = httpServer.address();
  process.stdout.write(`listening ${port}\n`);
  log(`http://127.0.0.1:${port}/mcp event-store=${opts.eventStore} json=${opts.json}`);

  const shutdown = async () => {
    for (const transport of [...transports.values()]) {
      await transport.close().catch(() => {});
    }
    httpServer.close();
    httpServer.closeAllConnections?.();
    process.exit(0);
  };
  process.on('SIGINT', shutdown);
  process.on('SIGTERM', shutdown);
}

async function runStdio() {
  const server = createServer();
  const transport = new StdioServerTransport();
  await server.connect(transport);
  // The process ends by itself once stdin ends (nothing else keeps it alive).
  log('stdio ready');
}

let opts;
try {
  opts = parseArgs(process.argv.slice(2));
} catch (err) {
  log(err.message);
  process.exit(2);
}
if (opts.stdio) {
  await runStdio();
} else {
  await runHttp(opts);
}
