// The status page in headless Chromium: usage `node status_check.mjs BASE CHROMIUM SCREENSHOT`.
// BASE is a gapless-server with a ring of 8 events and nothing else on it.
import { chromium } from "playwright-core";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const [base, executablePath, screenshot] = process.argv.slice(2);
const mcp = `${base}/mcp`;
const accept = "application/json, text/event-stream";

/** The SSE events of a response body: [{id, data}]. */
function events(text) {
  return text.split(/\r?\n\r?\n/).filter(Boolean).map(block => {
    const e = {};
    for (const line of block.split(/\r?\n/)) {
      const i = line.indexOf(":");
      if (i > 0) e[line.slice(0, i)] = line.slice(i + 1).trimStart();
    }
    return e;
  }).filter(e => e.id !== undefined || e.data !== undefined);
}

async function post(sid, body, headers = {}) {
  const h = { "content-type": "application/json", accept, ...headers };
  if (sid) h["mcp-session-id"] = sid;
  return fetch(mcp, { method: "POST", headers: h, body: JSON.stringify(body) });
}

// A session, two events of which the client keeps the first id.
let r = await post(null, { jsonrpc: "2.0", id: 0, method: "initialize", params: {
  protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "status-test", version: "1" } } });
assert.equal(r.status, 200);
const sid = r.headers.get("mcp-session-id");
await r.text();
await post(sid, { jsonrpc: "2.0", method: "notifications/initialized" }).then(r => r.text());
r = await post(sid, { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "emit_events", arguments: { count: 2 } } });
const first = events(await r.text()).find(e => e.id && e.data)?.id;
assert.ok(first, "an event id");
// 20 more events in a ring of 8: the first is evicted.
r = await post(sid, { jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "emit_events", arguments: { count: 20 } } });
await r.text();
// The resume is refused with its numbers.
r = await fetch(mcp, { headers: { accept: "text/event-stream", "mcp-session-id": sid, "last-event-id": first } });
assert.equal(r.status, 409);
const gap = await r.json();
assert.equal(gap.error, "gap_not_covered");
// A refusal whose reason carries what the client sent: markup.
const markup = `<script>window.__xss=1</script><img src=x onerror="window.__xss=2">`;
r = await post(sid, { jsonrpc: "2.0", id: 3, method: "ping" }, { "mcp-protocol-version": markup });
assert.equal(r.status, 400);
assert.equal((await r.json()).error, "unsupported_protocol_version");

const profile = mkdtempSync(join(tmpdir(), "gapless-status-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath,
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"],
  viewport: { width: 1200, height: 900 },
});
try {
  const page = context.pages()[0] ?? await context.newPage();
  const failures = [];
  page.on("pageerror", e => failures.push(String(e)));
  page.on("requestfailed", q => failures.push(`request failed: ${q.url()}`));
  const external = [];
  page.on("request", q => { if (!q.url().startsWith(base)) external.push(q.url()); });
  await page.goto(`${base}/status`);

  // The gap refusal, with its numbers.
  const gapRow = page.locator("#refusals tbody tr", { hasText: "gap_not_covered" });
  await gapRow.first().waitFor({ timeout: 15000 });
  assert.equal(await gapRow.count(), 1, "the refusal is listed once");
  const gapText = await gapRow.innerText();
  for (const part of [`cursor=${gap.cursor}`, `oldest=${gap.oldest}`, `missing=${gap.missing}`, "409"]) {
    assert.ok(gapText.includes(part), `the row shows ${part}: ${gapText}`);
  }

  // The session, in the fill-ratio table: a full ring of 8, its window the
  // one the refusal named.
  const rows = page.locator("#sessions tbody tr");
  assert.equal(await rows.count(), 1, "one session");
  const cells = await rows.first().locator("td").allInnerTexts();
  const oldestSeq = Number(gap.oldest.split("-").pop());
  assert.equal(cells[1], "1.000", `fill ratio: ${cells}`);
  assert.equal(Number(cells[2]), oldestSeq, `oldest: ${cells}`);
  assert.equal(Number(cells[3]) - Number(cells[2]) + 1, 8, `window of 8: ${cells}`);
  assert.equal(cells[0].length, 8, `the session's tag: ${cells}`);
  assert.ok(!sid.includes(cells[0]), "a tag, not a piece of the id");

  // The markup is text: shown, not run.
  const xssRow = page.locator("#refusals tbody tr", { hasText: "unsupported_protocol_version" });
  await xssRow.first().waitFor({ timeout: 15000 });
  // (The reason quotes the header with Rust's escapes: `\"` for `"`.)
  const shown = await xssRow.innerText();
  for (const part of ["<script>window.__xss=1</script>", "<img src=x onerror="]) {
    assert.ok(shown.includes(part), `the reason is shown as text (${part}): ${shown}`);
  }
  assert.equal(await page.evaluate(() => window.__xss), undefined, "no script from a refusal ran");
  assert.equal(await page.locator("#refusals img, #refusals script").count(), 0, "no element from a refusal");

  // Counters, and the page keeps refreshing.
  const refusals = page.locator('[data-counter="refusals"] .v');
  assert.equal(await refusals.innerText(), "2");
  r = await fetch(mcp, { headers: { accept: "text/event-stream", "mcp-session-id": sid, "last-event-id": first } });
  assert.equal(r.status, 409);
  await page.waitForFunction(() => document.querySelector('[data-counter="refusals"] .v')?.textContent === "3", null, { timeout: 10000 });
  assert.equal(await page.locator("#refusals tbody tr", { hasText: "gap_not_covered" }).count(), 2);
  assert.ok(!(await page.locator("#state").innerText()).startsWith("cannot"), "the data loads");

  await page.screenshot({ path: screenshot, fullPage: true });
  assert.deepEqual(external, [], "the page loads nothing from elsewhere");
  assert.deepEqual(failures, [], "no script error or failed request");
  console.log("[status] the page shows the refusals with their numbers, the session's fill, and markup as text");
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
