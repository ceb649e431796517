"""The TCP proxy the Python SDK tests put in front of the server (the twin of cut_proxy.mjs).

It can cut every live connection at once (abort: RST, no FIN). With several upstreams
(cluster nodes) each new connection goes to the next one in turn (round robin), and the
proxy records which upstream each connection went to and which HTTP requests the client
sent on it, so a test can tell on which node a stream ran and on which node it was resumed.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field


@dataclass
class Request:
    """One HTTP request a client sent on a proxied connection."""

    method: str
    path: str
    last_event_id: str | None
    rpc: str | None  # the JSON-RPC method of a JSON body

    def __str__(self) -> str:
        return (
            self.method
            + (f"({self.rpc})" if self.rpc else "")
            + (f"[Last-Event-ID: {self.last_event_id}]" if self.last_event_id else "")
        )


@dataclass
class Connection:
    """An accepted connection: its number (from 1), its upstream's index, its requests."""

    n: int
    upstream: int
    requests: list[Request] = field(default_factory=list)


class RequestPeek:
    """Reads the bytes a client sends on one HTTP/1.1 connection and records each request.

    Bodies are framed by Content-Length; at a chunked body (which the SDK does not send) or
    anything it cannot parse it stops reading and records a request `?` once. It never raises.
    """

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.buf = b""
        self.head: tuple[str, str, dict[str, str]] | None = None
        self.body_left = 0
        self.stopped = False

    def _stop(self) -> None:
        self.stopped = True
        self.buf = b""
        self.conn.requests.append(Request("?", "", None, None))

    def feed(self, data: bytes) -> None:
        if self.stopped:
            return
        try:
            self.buf += data
            while True:
                if self.head is None:
                    end = self.buf.find(b"\r\n\r\n")
                    if end < 0:
                        if len(self.buf) > 65536:
                            self._stop()
                        return
                    lines = self.buf[:end].decode("latin-1").split("\r\n")
                    self.buf = self.buf[end + 4 :]
                    method, path = (lines[0].split(" ") + ["", ""])[:2]
                    headers = {}
                    for line in lines[1:]:
                        k, sep, v = line.partition(":")
                        if sep:
                            headers[k.strip().lower()] = v.strip()
                    if "chunked" in headers.get("transfer-encoding", "").lower():
                        self._stop()
                        return
                    self.head = (method, path, headers)
                    self.body_left = int(headers.get("content-length", "0"))
                    if self.body_left < 0:
                        self._stop()
                        return
                if len(self.buf) < self.body_left:
                    return
                body, self.buf = self.buf[: self.body_left], self.buf[self.body_left :]
                try:
                    rpc = json.loads(body).get("method") if body else None
                except (ValueError, AttributeError):
                    rpc = None
                method, path, headers = self.head
                self.conn.requests.append(Request(method, path, headers.get("last-event-id"), rpc))
                self.head = None
                self.body_left = 0
        except Exception:  # noqa: BLE001 - the record is best effort, forwarding goes on
            self._stop()


class CutProxy:
    """A TCP proxy on 127.0.0.1 (ephemeral port) that can cut every live connection.

    `upstreams` is a non-empty list of (host, port); connection k (from 0) goes to
    `upstreams[(start + k) % n]`, where a cut may move `start` (see `cut_all`). Each
    accepted connection is recorded in `connections` with its upstream and its requests.
    """

    def __init__(self, upstreams: list[tuple[str, int]]) -> None:
        if not upstreams:
            raise ValueError("CutProxy: no upstream")
        self.upstreams = upstreams
        self.next = 0  # index of the upstream the next accepted connection goes to
        self.connections: list[Connection] = []
        self.pairs: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self.accepted = 0
        self.handlers: set[asyncio.Task[None]] = set()
        self.server: asyncio.base_events.Server | None = None
        self.port = 0

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._on_client, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _on_client(self, down_r: asyncio.StreamReader, down_w: asyncio.StreamWriter) -> None:
        self.accepted += 1
        conn = Connection(self.accepted, self.next)
        self.next = (self.next + 1) % len(self.upstreams)
        self.connections.append(conn)
        task = asyncio.current_task()
        assert task is not None
        self.handlers.add(task)
        try:
            await self._forward(down_r, down_w, conn)
        except asyncio.CancelledError:
            down_w.transport.abort()
        finally:
            self.handlers.discard(task)

    async def _forward(self, down_r: asyncio.StreamReader, down_w: asyncio.StreamWriter, conn: Connection) -> None:
        try:
            up_r, up_w = await asyncio.open_connection(*self.upstreams[conn.upstream])
        except OSError:
            down_w.transport.abort()
            return
        pair = (down_w, up_w)
        self.pairs.add(pair)

        async def pump(r: asyncio.StreamReader, w: asyncio.StreamWriter, peek: RequestPeek | None) -> None:
            try:
                while data := await r.read(65536):
                    if peek is not None:
                        peek.feed(data)
                    w.write(data)
                    await w.drain()
            except OSError:
                pass
            finally:
                self.pairs.discard(pair)
                down_w.transport.abort()
                up_w.transport.abort()

        await asyncio.gather(pump(down_r, up_w, RequestPeek(conn)), pump(up_r, down_w, None))

    def cut_all(self, resume_after: int | None = None) -> int:
        """Abruptly end every live connection (abort: RST, no FIN). Returns how many.

        With `resume_after` (an upstream index) the rotation continues with the upstream after
        it, so that the next connections go to the others first.
        """
        n = len(self.pairs)
        for down_w, up_w in list(self.pairs):
            self.pairs.discard((down_w, up_w))
            down_w.transport.abort()
            up_w.transport.abort()
        if resume_after is not None:
            self.next = (resume_after + 1) % len(self.upstreams)
        return n

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
        self.cut_all()
        for task in list(self.handlers):
            task.cancel()
        if self.handlers:
            await asyncio.wait(list(self.handlers), timeout=5)
        if self.server is not None:
            await self.server.wait_closed()
