// The cluster checks of ts_resume.mjs, read from the cut proxy's records
// (cut_proxy.mjs: which upstream each connection went to, which requests the
// client sent on it). cluster_check.py is its twin for py_resume.py.
//
// The stream before the first cut is carried by the connection of the request
// that opened it: the `tools/call` POST (target `request`) or the GET without
// `Last-Event-ID` (target `standalone`). Its resume is the request with
// `Last-Event-ID` on a connection accepted after the cut whose cursor has the
// highest seq: the other stream of the session is cut too and resumes from an
// earlier event (its priming event), since the notifications all go to one
// stream. Before a later cut, the stream is carried by the previous resume.
//
// At a cut the rotation continues with the upstream after the carrier's, so the
// connections the SDK opens next (the resumes of its two streams) go to the other
// nodes first. Plain rotation would put the resume on the carrier's own node
// whenever the SDK opened a multiple of three connections in between: the Python
// SDK's standalone GET is its 3rd connection and the GET's resume its 6th.

const seqOf = (id) => Number(String(id).split('-').pop());
const fmtReq = (r) => `${r.method}${r.rpc ? `(${r.rpc})` : ''}${r.lastEventId ? `[Last-Event-ID: ${r.lastEventId}]` : ''}`;

/**
 * Cluster bookkeeping over `proxy`. `labels` has one entry per upstream, its `host:port`:
 * upstreams are told apart by label, so a URL given twice counts as one node.
 */
export function clusterReport(proxy, labels, target) {
  const cuts = []; // { acceptedBefore, carrier: { conn, req } | null }
  const at = (conn) => `#${conn.n}->${labels[conn.upstream]}`;
  const node = (conn) => labels[conn.upstream];

  /** The request with the highest cursor seq on connections accepted after cut i (and before cut i+1). */
  const resumeOf = (i) => {
    const from = cuts[i].acceptedBefore;
    const to = i + 1 < cuts.length ? cuts[i + 1].acceptedBefore : Infinity;
    let best = null;
    for (const conn of proxy.connections) {
      if (conn.n <= from || conn.n > to) continue;
      for (const req of conn.requests) {
        if (req.lastEventId && (!best || seqOf(req.lastEventId) > seqOf(best.req.lastEventId))) best = { conn, req };
      }
    }
    return best;
  };

  /** The request that opened the notification stream, before the first cut. */
  const opener = () => {
    let found = null;
    for (const conn of proxy.connections) {
      for (const req of conn.requests) {
        const opens = target === 'request' ? req.method === 'POST' && req.rpc === 'tools/call' : req.method === 'GET' && !req.lastEventId;
        if (opens) found = { conn, req };
      }
    }
    return found;
  };

  return {
    /** Cuts every connection (proxy.cutAll), steering the rotation past the stream's node. */
    cut() {
      if (labels.length === 1) {
        cuts.push({ acceptedBefore: proxy.accepted, carrier: null });
        return proxy.cutAll();
      }
      const carrier = cuts.length === 0 ? opener() : resumeOf(cuts.length - 1);
      cuts.push({ acceptedBefore: proxy.accepted, carrier });
      return proxy.cutAll(carrier?.conn.upstream);
    },

    /** What failed: connections all on one upstream, a resume on the stream's own node. */
    failures() {
      const out = [];
      const used = new Set(proxy.connections.map(node));
      if (used.size < 2) out.push(`all ${proxy.connections.length} connections went to one upstream (${[...used].join(' ')})`);
      cuts.forEach((cut, i) => {
        const resume = resumeOf(i);
        if (!cut.carrier) out.push(`cut ${i + 1}: could not tell which connection carried the stream`);
        else if (!resume) out.push(`cut ${i + 1}: no request with Last-Event-ID after the cut`);
        else if (node(resume.conn) === node(cut.carrier.conn)) {
          out.push(`cut ${i + 1}: the resume ${at(resume.conn)} reached the node that carried the stream (${at(cut.carrier.conn)})`);
        }
      });
      return out;
    },

    /** The report: every connection with its upstream and requests, and each cut's carrier and resume. */
    lines() {
      const out = [
        `connections (round robin over ${labels.join(' ')}): ` +
          proxy.connections.map((c) => `${at(c)} ${c.requests.map(fmtReq).join(' ') || '(no request)'}`).join(' | '),
      ];
      cuts.forEach((cut, i) => {
        const resume = resumeOf(i);
        out.push(
          `cut ${i + 1}: stream on ${cut.carrier ? `${at(cut.carrier.conn)} ${fmtReq(cut.carrier.req)}` : '?'}; ` +
            `resumed on ${resume ? `${at(resume.conn)} ${fmtReq(resume.req)}` : '?'}`,
        );
      });
      return out;
    },
  };
}
