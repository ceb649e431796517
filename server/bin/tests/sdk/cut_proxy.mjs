// The TCP proxy the TypeScript SDK tests put in front of the server: it can
// cut every live connection at once (RST on both sides). With several
// upstreams (cluster nodes) each new connection goes to the next one in turn
// (round robin), and the proxy records which upstream each connection went to
// and which HTTP requests the client sent on it, so a test can tell on which
// node a stream ran and on which node it was resumed.

import net from 'node:net';

/**
 * A TCP proxy on 127.0.0.1 (ephemeral port) that can cut every live connection.
 * `upstreams` is a non-empty list of `{ host, port }`; connection k (from 0) goes to
 * `upstreams[(start + k) % n]`, where a cut may move `start` (see `cutAll`).
 */
export async function startCutProxy(upstreams) {
  if (!Array.isArray(upstreams) || upstreams.length === 0) throw new Error('startCutProxy: no upstream');
  const pairs = new Set();
  /** One record per accepted connection: `{ n, upstream, requests }` (n counts from 1). */
  const connections = [];
  let next = 0; // index of the upstream the next accepted connection goes to
  const server = net.createServer((down) => {
    const upstream = next;
    next = (next + 1) % upstreams.length;
    const conn = { n: connections.length + 1, upstream, requests: [] };
    connections.push(conn);
    const up = net.connect({ host: upstreams[upstream].host, port: upstreams[upstream].port });
    const pair = { down, up };
    pairs.add(pair);
    const drop = () => {
      pairs.delete(pair);
      down.destroy();
      up.destroy();
    };
    down.on('error', drop);
    up.on('error', drop);
    down.on('close', drop);
    up.on('close', drop);
    down.pipe(up);
    up.pipe(down);
    // A second reader of the client's bytes, for the record only; forwarding is the pipe's.
    const peek = requestPeek((req) => conn.requests.push(req));
    down.on('data', peek);
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  return {
    port: server.address().port,
    get accepted() {
      return connections.length;
    },
    /** The record of every accepted connection, in accept order (live objects). */
    connections,
    /**
     * Abruptly ends every live connection (RST towards the client). Returns how many.
     * With `resumeAfter` (an upstream index) the rotation continues with the upstream
     * after it, so that the next connections go to the others first.
     */
    cutAll(resumeAfter) {
      const n = pairs.size;
      for (const pair of [...pairs]) {
        pairs.delete(pair);
        pair.down.resetAndDestroy();
        pair.up.resetAndDestroy();
      }
      if (resumeAfter !== undefined) next = (resumeAfter + 1) % upstreams.length;
      return n;
    },
    close() {
      this.cutAll();
      return new Promise((resolve) => server.close(resolve));
    },
  };
}

/**
 * A reader of the bytes a client sends on one HTTP/1.1 connection. For each request
 * it calls `onRequest({ method, path, lastEventId, rpc })`, where `rpc` is the
 * JSON-RPC `method` of a JSON body (or null). Bodies are framed by Content-Length;
 * at a chunked body (which neither SDK sends) or anything it cannot parse it stops
 * reading and records `{ method: '?' }` once. It never throws.
 */
function requestPeek(onRequest) {
  let buf = Buffer.alloc(0);
  let head = null; // the parsed head of the request whose body is being read
  let bodyLeft = 0;
  let stopped = false;
  const stop = () => {
    stopped = true;
    buf = Buffer.alloc(0);
    onRequest({ method: '?', path: '', lastEventId: null, rpc: null });
  };
  const parseHead = (text) => {
    const lines = text.split('\r\n');
    const [method, path] = lines[0].split(' ');
    const headers = new Map();
    for (const line of lines.slice(1)) {
      const i = line.indexOf(':');
      if (i > 0) headers.set(line.slice(0, i).trim().toLowerCase(), line.slice(i + 1).trim());
    }
    return { method, path, headers };
  };
  return (chunk) => {
    if (stopped) return;
    try {
      buf = Buffer.concat([buf, chunk]);
      for (;;) {
        if (head === null) {
          const end = buf.indexOf('\r\n\r\n');
          if (end < 0) {
            if (buf.length > 65536) stop();
            return;
          }
          head = parseHead(buf.subarray(0, end).toString('latin1'));
          buf = buf.subarray(end + 4);
          if (/chunked/i.test(head.headers.get('transfer-encoding') ?? '')) return stop();
          bodyLeft = Number(head.headers.get('content-length') ?? 0);
          if (!Number.isInteger(bodyLeft) || bodyLeft < 0) return stop();
        }
        if (buf.length < bodyLeft) return;
        let rpc = null;
        try {
          rpc = JSON.parse(buf.subarray(0, bodyLeft).toString('utf8')).method ?? null;
        } catch {
          rpc = null;
        }
        buf = buf.subarray(bodyLeft);
        onRequest({ method: head.method, path: head.path, lastEventId: head.headers.get('last-event-id') ?? null, rpc });
        head = null;
        bodyLeft = 0;
      }
    } catch {
      stop();
    }
  };
}
