// The TCP proxy the TypeScript SDK tests put in front of the server: it can
// cut every live connection at once (RST on both sides).

import net from 'node:net';

/** A TCP proxy on 127.0.0.1 (ephemeral port) that can cut every live connection. */
export async function startCutProxy(upstreamHost, upstreamPort) {
  const pairs = new Set();
  let accepted = 0;
  const server = net.createServer((down) => {
    accepted += 1;
    const up = net.connect({ host: upstreamHost, port: upstreamPort });
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
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  return {
    port: server.address().port,
    get accepted() {
      return accepted;
    },
    /** Abruptly ends every live connection (RST towards the client). Returns how many. */
    cutAll() {
      const n = pairs.size;
      for (const pair of [...pairs]) {
        pairs.delete(pair);
        pair.down.resetAndDestroy();
        pair.up.resetAndDestroy();
      }
      return n;
    },
    close() {
      this.cutAll();
      return new Promise((resolve) => server.close(resolve));
    },
  };
}
