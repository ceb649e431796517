// The official TypeScript SDK's legacy client (SSEClientTransport, protocol
// 2024-11-05) against gapless-server's legacy endpoints, through a TCP proxy
// that can cut every live connection.
//
// 1. It connects, lists the tools and calls emit_events: every data.seq
//    arrives once, then the result.
// 2. It calls emit_events again, cuts every connection midway and
//    records what the SDK does. SDK 1.32.2's EventSource reconnects to the
//    URL it was given (`P/sse`, which names no session) but without
//    `Last-Event-ID`: the transport's fetch wrapper replaces the headers
//    the EventSource sets. To the server that is a new client, which gets a
//    new session; the interrupted call fails by its timeout. The checks:
//    a reconnect that does carry a cursor without a session id is refused
//    400 (never a fresh, empty session), and the call never succeeds with a
//    hole.
//
// Usage: node ts_legacy.mjs --url http://127.0.0.1:PORT/mcp [--timeout-ms 45000]
// Exit code 0 when both parts hold, 1 otherwise.

import { parseArgs } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { startCutProxy } from './cut_proxy.mjs';

const { values: opts } = parseArgs({
  options: { url: { type: 'string' }, 'timeout-ms': { type: 'string', default: '45000' } },
});
if (!opts.url) {
  console.error('ts_legacy: --url is required');
  process.exit(2);
}
const log = (...a) => console.log('[ts-legacy]', ...a);
const fail = (m) => {
  console.error('[ts-legacy] FAIL:', m);
  process.exit(1);
};
setTimeout(() => fail('timed out'), Number(opts['timeout-ms'])).unref();

const upstream = new URL(opts.url);
const proxy = await startCutProxy([{ host: upstream.hostname, port: Number(upstream.port) }]);

// Instrumentation only: what the EventSource asks for, and what it gets.
const gets = [];
const recording = async (url, init) => {
  const headers = new Headers(init?.headers);
  const r = await fetch(url, init);
  gets.push({ url: String(url), lastEventId: headers.get('last-event-id'), status: r.status });
  return r;
};

const sseUrl = `http://127.0.0.1:${proxy.port}${upstream.pathname}/sse`;
const transport = new SSEClientTransport(new URL(sseUrl), { eventSourceInit: { fetch: recording } });
const errors = [];
transport.onerror = (e) => errors.push(String(e?.message ?? e));
const client = new Client({ name: 'ts-legacy', version: '1' });
const seqs = [];
client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
  const s = n.params?.data?.seq;
  if (typeof s === 'number') seqs.push(s);
});
await client.connect(transport);
log(`connected over ${sseUrl}; server ${JSON.stringify(client.getServerVersion())}`);
const tools = await client.listTools();
if (!tools.tools.some((t) => t.name === 'emit_events')) fail('emit_events not listed');
const r = await client.callTool({ name: 'emit_events', arguments: { count: 50 } });
if (r.content?.[0]?.text !== 'emitted 50') fail(`unexpected result ${JSON.stringify(r)}`);
const want = Array.from({ length: 50 }, (_, i) => i + 1);
if (JSON.stringify(seqs) !== JSON.stringify(want)) fail(`data.seq ${JSON.stringify(seqs)}`);
log('part 1: tools listed, 50 events once each, the result');

// Part 2: a cut in the middle of a call.
seqs.length = 0;
let outcome = 'pending';
const call = client.callTool({ name: 'emit_events', arguments: { count: 400, interval_ms: 5 } }, undefined, { timeout: 8000 });
call.then((r) => (outcome = `resolved ${JSON.stringify(r.content)}`), (e) => (outcome = `rejected: ${e.message}`));
while (seqs.length < 100) await new Promise((res) => setTimeout(res, 10));
const before = gets.length;
const seenAtCut = seqs.length;
proxy.cutAll();
log(`cut every connection after ${seenAtCut} events`);
await new Promise((res) => setTimeout(res, 9000));
const after = gets.slice(before);
log(`after the cut the SDK sent ${after.length} GET(s) to P/sse: ${JSON.stringify(after)}`);
log(`transport errors: ${JSON.stringify(errors.slice(-3))}; the call: ${outcome}; events after the cut: ${seqs.length - seenAtCut}`);
for (const g of after) {
  if (g.lastEventId && g.status !== 400) fail(`a cursor without a session id was answered ${g.status}: ${JSON.stringify(g)}`);
}
// Whatever the SDK does, the call never succeeds with a hole.
if (outcome.startsWith('resolved')) {
  const want400 = Array.from({ length: 400 }, (_, i) => i + 1);
  if (JSON.stringify(seqs) !== JSON.stringify(want400)) fail(`the call succeeded with a hole: ${seqs.length} of 400 events`);
}
if (after.some((g) => g.lastEventId)) {
  log('part 2: the SDK reconnected with Last-Event-ID and no session id: refused 400 resume_requires_session');
} else if (after.length > 0) {
  log('part 2: the SDK reconnected WITHOUT Last-Event-ID (its EventSource fetch wrapper replaces the headers the');
  log('        EventSource sets), so the server saw a new client and opened a new session; the old call failed visibly');
} else {
  log('part 2: the SDK did not reconnect after the cut');
}
await transport.close().catch(() => {});
await proxy.close();
process.exit(0);
