"""The cluster checks of py_resume.py, read from the cut proxy's records (cut_proxy.py).

The twin of cluster_check.mjs; both say the same in the same words.
"""

from __future__ import annotations

from cut_proxy import Connection, CutProxy, Request


class ClusterReport:
    """The cluster checks, read from the proxy's records (the same as cluster_check.mjs).

    The stream before the first cut is carried by the connection of the request that opened
    it: the `tools/call` POST (target `request`) or the GET without `Last-Event-ID` (target
    `standalone`). Its resume is the request with `Last-Event-ID` on a connection accepted
    after the cut whose cursor has the highest seq: the session's other stream is cut too and
    resumes from an earlier event (its priming event), since the notifications all go to one
    stream. Before a later cut, the stream is carried by the previous resume.

    At a cut the rotation continues with the upstream after the carrier's, so the connections
    the SDK opens next (the resumes of its two streams) go to the other nodes first. Plain
    rotation would put the resume on the carrier's own node whenever the SDK opened a multiple
    of three connections in between: the Python SDK's standalone GET is its 3rd connection
    and the GET's resume its 6th.
    """

    def __init__(self, proxy: CutProxy, labels: list[str], target: str) -> None:
        """`labels` has one entry per upstream, its `host:port`: upstreams are told apart by
        label, so a URL given twice counts as one node."""
        self.proxy = proxy
        self.labels = labels
        self.target = target
        self.cuts: list[tuple[int, tuple[Connection, Request] | None]] = []  # (accepted before, carrier)

    def _at(self, conn: Connection) -> str:
        return f"#{conn.n}->{self._node(conn)}"

    def _node(self, conn: Connection) -> str:
        return self.labels[conn.upstream]

    def _resume_of(self, i: int) -> tuple[Connection, Request] | None:
        lo = self.cuts[i][0]
        hi = self.cuts[i + 1][0] if i + 1 < len(self.cuts) else float("inf")
        best = None
        for conn in self.proxy.connections:
            if not lo < conn.n <= hi:
                continue
            for req in conn.requests:
                if req.last_event_id and (best is None or _seq_of(req.last_event_id) > _seq_of(best[1].last_event_id)):
                    best = (conn, req)
        return best

    def _opener(self) -> tuple[Connection, Request] | None:
        found = None
        for conn in self.proxy.connections:
            for req in conn.requests:
                if self.target == "request":
                    opens = req.method == "POST" and req.rpc == "tools/call"
                else:
                    opens = req.method == "GET" and not req.last_event_id
                if opens:
                    found = (conn, req)
        return found

    def cut(self) -> int:
        """Cut every connection (proxy.cut_all), steering the rotation past the stream's node."""
        if len(self.labels) == 1:
            self.cuts.append((self.proxy.accepted, None))
            return self.proxy.cut_all()
        carrier = self._opener() if not self.cuts else self._resume_of(len(self.cuts) - 1)
        self.cuts.append((self.proxy.accepted, carrier))
        return self.proxy.cut_all(carrier[0].upstream if carrier else None)

    def failures(self) -> list[str]:
        """What failed: connections all on one upstream, a resume on the stream's own node."""
        out = []
        used = {self._node(c) for c in self.proxy.connections}
        if len(used) < 2:
            out.append(f"all {len(self.proxy.connections)} connections went to one upstream ({' '.join(used)})")
        for i, (_, carrier) in enumerate(self.cuts):
            resume = self._resume_of(i)
            if carrier is None:
                out.append(f"cut {i + 1}: could not tell which connection carried the stream")
            elif resume is None:
                out.append(f"cut {i + 1}: no request with Last-Event-ID after the cut")
            elif self._node(resume[0]) == self._node(carrier[0]):
                out.append(
                    f"cut {i + 1}: the resume {self._at(resume[0])} reached the node that carried the stream"
                    f" ({self._at(carrier[0])})"
                )
        return out

    def lines(self) -> list[str]:
        """The report: every connection with its upstream and requests, each cut's carrier and resume."""
        conns = " | ".join(
            f"{self._at(c)} {' '.join(map(str, c.requests)) or '(no request)'}" for c in self.proxy.connections
        )
        out = [f"connections (round robin over {' '.join(self.labels)}): {conns}"]
        for i, (_, carrier) in enumerate(self.cuts):
            resume = self._resume_of(i)
            on = f"{self._at(carrier[0])} {carrier[1]}" if carrier else "?"
            re_on = f"{self._at(resume[0])} {resume[1]}" if resume else "?"
            out.append(f"cut {i + 1}: stream on {on}; resumed on {re_on}")
        return out


def _seq_of(event_id: str | None) -> int:
    try:
        return int(str(event_id).rsplit("-", 1)[-1])
    except ValueError:
        return -1


def _seq_of(event_id: str | None) -> int:
    try:
        return int(str(event_id).rsplit("-", 1)[-1])
    except ValueError:
        return -1
