// The official TypeScript SDK's 2.x client (@modelcontextprotocol/client 2.4.0) with
// versionNegotiation mode 'auto' against gapless-server: it probes server/discover,
// must settle on MCP 2026-07-28 (no session), list the tools, call one, receive a
// tool's progress notifications on the request's stream, and complete an elicitation
// by input-required result (its elicitation/create handler answers; the client
// retries with the answer and the server's requestState).
//
// Usage: node ts_modern.mjs <endpoint url>. Exits non-zero, saying why, on any deviation.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const MODERN = '2026-07-28';
const url = new URL(process.argv[2]);

function fail(why) {
  console.error(`[ts-modern] FAIL: ${why}`);
  process.exit(1);
}

const client = new Client(
  { name: 'gapless-ts-modern', version: '1.0.0' },
  { capabilities: { elicitation: {} }, versionNegotiation: { mode: 'auto' } },
);
const asked = [];
client.setRequestHandler('elicitation/create', async (request) => {
  asked.push(request.params.message);
  return { action: 'accept', content: { name: 'Ts' } };
});
await client.connect(new StreamableHTTPClientTransport(url));

const version = client.getNegotiatedProtocolVersion();
if (version !== MODERN) fail(`mode 'auto' settled on ${version}, not ${MODERN}`);
const { tools } = await client.listTools();
const names = new Set(tools.map((t) => t.name));
for (const want of ['emit_events', 'test_simple_text', 'test_input_required_result_elicitation']) {
  if (!names.has(want)) fail(`tools/list lacks ${want}: ${[...names].sort()}`);
}
const simple = await client.callTool({ name: 'test_simple_text', arguments: {} });
if (simple.content?.[0]?.text !== 'This is a simple text response for testing.') {
  fail(`test_simple_text returned ${JSON.stringify(simple)}`);
}
const progress = [];
const withProgress = await client.callTool(
  { name: 'test_tool_with_progress', arguments: {} },
  { onprogress: (p) => progress.push(p.progress) },
);
if (withProgress.content?.[0]?.text !== 'Tool with progress executed successfully' || progress.join() !== '0,50,100') {
  fail(`progress: result ${JSON.stringify(withProgress)}, notifications ${progress}`);
}
const hello = await client.callTool({ name: 'test_input_required_result_elicitation', arguments: {} });
if (asked.join() !== 'What is your name?' || hello.content?.[0]?.text !== 'Hello, Ts!') {
  fail(`elicitation round trip: asked ${asked}, result ${JSON.stringify(hello)}`);
}
await client.close();
console.log(`[ts-modern] ok: ${version}, ${names.size} tools, progress ${progress}, elicitation answered`);
