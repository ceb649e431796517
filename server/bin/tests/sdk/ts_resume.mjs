// Resume test of gapless-server with the official MCP TypeScript SDK client
// (@modelcontextprotocol/sdk, pinned in package.json).
//
// It starts no server. It takes the server's MCP endpoint URL, puts a small TCP
// proxy in front of it (127.0.0.1, ephemeral port) that can cut every live
// connection, connects the SDK's Client + StreamableHTTPClientTransport through
// that proxy, calls `emit_events`, cuts all connections when given fractions of
// the notifications have arrived, and lets the SDK reconnect on its own (GET with
// `Last-Event-ID`). It then checks that every `data.seq` 1..count arrived exactly
// once and that the tool result arrived.
//
// With `--also-url` (repeatable: more nodes of one cluster, the same path) the
// proxy sends each new TCP connection to the next of the URLs in turn (round
// robin), and the script also checks that the connections went to more than one
// node and that, at every cut, the resume (the request with `Last-Event-ID` after
// the cut) reached another node than the one that carried the stream before it.
//
// Usage:
//   node ts_resume.mjs --url http://127.0.0.1:PORT/mcp [--also-url http://127.0.0.1:PORT2/mcp ...]
//       [--count 2000] [--interval-ms 1] [--payload-bytes 16]
//       [--target request|standalone|both] [--cuts 0.5] [--timeout-ms 60000]
//
// Exit code 0 when every variant passed, 1 otherwise (with a message on stderr).

import { parseArgs } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { startCutProxy } from './cut_proxy.mjs';
import { clusterReport } from './cluster_check.mjs';

const { values: opts } = parseArgs({
  options: {
    url: { type: 'string' },
    'also-url': { type: 'string', multiple: true, default: [] },
    count: { type: 'string', default: '2000' },
    'interval-ms': { type: 'string', default: '1' },
    'payload-bytes': { type: 'string', default: '16' },
    target: { type: 'string', default: 'both' },
    cuts: { type: 'string', default: '0.5' },
    'timeout-ms': { type: 'string', default: '60000' },
  },
});

if (!opts.url) {
  console.error('ts_resume: --url http://127.0.0.1:PORT/mcp is required');
  process.exit(2);
}

const log = (...a) => console.log('[ts]', ...a);

async function runVariant(target) {
  const count = Number(opts.count);
  const intervalMs = Number(opts['interval-ms']);
  const payloadBytes = Number(opts['payload-bytes']);
  const timeoutMs = Number(opts['timeout-ms']);
  const cutAt = opts.cuts
    .split(',')
    .filter((s) => s.trim() !== '')
    .map((f) => Math.max(1, Math.floor(Number(f) * count)));

  const upstream = new URL(opts.url);
  const upstreams = [upstream, ...opts['also-url'].map((u) => new URL(u))];
  const proxy = await startCutProxy(upstreams.map((u) => ({ host: u.hostname, port: Number(u.port) })));
  const cluster = clusterReport(proxy, upstreams.map((u) => u.host), target);
  const viaProxy = new URL(upstream);
  viaProxy.host = `127.0.0.1:${proxy.port}`;

  // Instrumentation only: record what the SDK sends (method, Last-Event-ID), so the
  // report can say how it resumed. The SDK's own reconnection logic is untouched.
  const requests = [];
  const recordingFetch = (input, init) => {
    const headers = new Headers(init?.headers);
    let rpc;
    try {
      rpc = typeof init?.body === 'string' ? JSON.parse(init.body).method : undefined;
    } catch {
      rpc = undefined;
    }
    requests.push({
      method: (init?.method ?? 'GET') + (rpc ? `(${rpc})` : ''),
      lastEventId: headers.get('last-event-id'),
      at: Date.now(),
      headers: [...headers.entries()].map(([k, v]) => `${k}: ${k === 'mcp-session-id' ? '<session>' : v}`),
    });
    return fetch(input, init);
  };

  const transport = new StreamableHTTPClientTransport(viaProxy, { fetch: recordingFetch });
  const client = new Client({ name: 'gapless-ts-resume', version: '0.0.0' });

  const seen = new Map(); // seq -> times seen
  let received = 0;
  const cutsDone = [];
  const transportErrors = [];
  let allArrived;
  const allArrivedP = new Promise((resolve) => (allArrived = resolve));

  client.onerror = (err) => transportErrors.push(String(err?.message ?? err));
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
    const seq = n.params?.data?.seq;
    if (typeof seq !== 'number') return;
    seen.set(seq, (seen.get(seq) ?? 0) + 1);
    received += 1;
    if (cutsDone.length < cutAt.length && received >= cutAt[cutsDone.length]) {
      const n2 = cluster.cut();
      cutsDone.push({ afterNotifications: received, lastSeq: seq, connectionsCut: n2 });
    }
    if (seen.size === count) allArrived();
  });

  const failures = [];
  let result;
  const started = Date.now();
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    await Promise.race([client.connect(transport), timeout]);
    log(`${target}: connected via proxy :${proxy.port}, session ${transport.sessionId ? 'set' : 'missing'}, protocol ${transport.protocolVersion}`);
    result = await Promise.race([
      client.callTool(
        { name: 'emit_events', arguments: { count, interval_ms: intervalMs, payload_bytes: payloadBytes, target } },
        undefined,
        { timeout: timeoutMs },
      ),
      timeout,
    ]);
    // Standalone notifications may still be in flight after the result.
    await Promise.race([allArrivedP, timeout]);
    // Linger briefly so a late duplicate would still be counted.
    await new Promise((r) => setTimeout(r, 300));
  } catch (err) {
    failures.push(`error: ${err?.message ?? err}`);
  } finally {
    clearTimeout(timer);
  }
  const elapsed = Date.now() - started;

  const expectedText = `emitted ${count}`;
  const text = result?.content?.[0]?.text;
  if (result && text !== expectedText) {
    failures.push(`tool result: expected text ${JSON.stringify(expectedText)}, got ${JSON.stringify(result)}`);
  } else if (!result && !failures.length) {
    failures.push('tool result never arrived');
  }
  const missing = [];
  const dups = [];
  for (let s = 1; s <= count; s++) {
    const k = seen.get(s) ?? 0;
    if (k === 0) missing.push(s);
    else if (k > 1) dups.push(`${s}x${k}`);
  }
  const extra = [...seen.keys()].filter((s) => s < 1 || s > count);
  if (missing.length) failures.push(`${missing.length} seq missing (first: ${missing.slice(0, 10).join(',')})`);
  if (dups.length) failures.push(`${dups.length} seq duplicated (first: ${dups.slice(0, 10).join(',')})`);
  if (extra.length) failures.push(`unexpected seq values: ${extra.slice(0, 10).join(',')}`);
  if (cutsDone.length !== cutAt.length) {
    failures.push(`only ${cutsDone.length} of ${cutAt.length} planned cuts happened (cut points ${cutAt.join(',')})`);
  }
  const resumes = requests.filter((r) => r.method === 'GET' && r.lastEventId);
  if (cutsDone.length && !resumes.length) failures.push('connection was cut but the SDK never sent a GET with Last-Event-ID');
  if (upstreams.length > 1) failures.push(...cluster.failures());

  log(`${target}: ${received} notifications (${seen.size} distinct of ${count}) in ${elapsed} ms; result ${JSON.stringify(text)}`);
  log(`${target}: cuts ${JSON.stringify(cutsDone)}; proxy accepted ${proxy.accepted} connections`);
  log(`${target}: HTTP requests sent by the SDK: ${requests.map((r) => r.method + (r.lastEventId ? `[Last-Event-ID: ${r.lastEventId}]` : '')).join(' ')}`);
  if (resumes.length) log(`${target}: headers of the first resume GET: ${resumes[0].headers.join(', ')}`);
  if (upstreams.length > 1) for (const line of cluster.lines()) log(`${target}: ${line}`);
  if (transportErrors.length) log(`${target}: transport onerror (expected after a cut): ${[...new Set(transportErrors)].join(' | ')}`);

  try {
    // Be a polite client: DELETE the session, then close.
    await Promise.race([transport.terminateSession(), new Promise((r) => setTimeout(r, 2000))]);
  } catch {
    /* best effort */
  }
  try {
    await Promise.race([client.close(), new Promise((r) => setTimeout(r, 2000))]);
  } catch {
    /* closing is best effort */
  }
  await proxy.close();
  return failures;
}

const targets = opts.target === 'both' ? ['request', 'standalone'] : [opts.target];
let failed = false;
for (const target of targets) {
  const failures = await runVariant(target);
  if (failures.length) {
    failed = true;
    console.error(`[ts] FAIL ${target}: ${failures.join('; ')}`);
  } else {
    log(`PASS ${target}`);
  }
}
process.exit(failed ? 1 : 0);
