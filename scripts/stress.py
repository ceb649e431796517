#!/usr/bin/env python3
"""Abuse the real server over loopback and report what it held.

Run by scripts/stress.sh (not in CI). Two phases, each bounded in time:

flood      SESSIONS anonymous clients each initialize and run emit_events
           (4096 events of 4 KiB on the standalone stream, no GET open),
           as in issue 12's finding 1, while a canary session reads its own
           standalone stream and checks that every data.seq arrives once.
           With STALL=1 each flooding session first opens its standalone
           stream (a GET with a 4 KiB receive buffer) and never reads it:
           readers that stall, pinning what they have not sent.
slowloris  CONNS sockets from 127.0.0.1 send half a request head and a
           byte now and then (those over the per-address cap are refused at
           once); a fresh client from 127.0.0.2 must still be served, and the
           server must close the half-open ones after its header timeout.

Prints the server's peak RSS, its open file descriptors, and the canary's
completeness; exits 1 if the canary lost anything, RSS went over
MAX_MEMORY + SLACK, or a fresh client was not served.
"""
import http.client
import json
import os
import socket
import sys
import threading
import time

import loopback

PORT = int(os.environ["PORT"])
PID = int(os.environ["PID"])
SESSIONS = int(os.environ.get("SESSIONS", "320"))
# Each flood event's pad (the event is about 80 bytes more).
PAD = int(os.environ.get("PAD", "4096"))
CONNS = int(os.environ.get("CONNS", "1100"))
STALL = os.environ.get("STALL", "0") == "1"
MAX_MEMORY = int(os.environ["MAX_MEMORY"])
SLACK = int(os.environ.get("SLACK", str(256 << 20)))
DEADLINE = time.time() + float(os.environ.get("SECONDS", "300"))


def rss():
    return loopback.rss(PID)


def fds():
    return len(os.listdir(f"/proc/{PID}/fd"))


def post(conn, sid, body, accept="application/json, text/event-stream"):
    h = {"content-type": "application/json", "accept": accept}
    if sid:
        h["mcp-session-id"] = sid
    conn.request("POST", "/mcp", json.dumps(body), h)
    return conn.getresponse()


INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "stress", "version": "1"}}}


def initialize(conn):
    r = post(conn, None, INIT)
    sid = r.getheader("mcp-session-id")
    r.read()
    if r.status != 200:
        raise RuntimeError(f"initialize: {r.status}")
    return sid


def sse_events(resp):
    """Yields the data of each SSE event of a response."""
    return loopback.sse_data(resp)


peak = [0]


def watch(stop):
    while not stop.is_set():
        peak[0] = max(peak[0], rss())
        time.sleep(0.2)


def canary(result, stop, count=2000):
    conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=60)
    sid = initialize(conn)
    reader = http.client.HTTPConnection("127.0.0.1", PORT, timeout=60)
    reader.request("GET", "/mcp", headers={"accept": "text/event-stream", "mcp-session-id": sid})
    resp = reader.getresponse()
    seen = []

    def read():
        for data in sse_events(resp):
            try:
                m = json.loads(data)
            except ValueError:
                continue
            s = m.get("params", {}).get("data", {}).get("seq")
            if s is not None:
                seen.append(s)
                if len(seen) >= count:
                    return

    t = threading.Thread(target=read, daemon=True)
    t.start()
    r = post(conn, sid, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "emit_events", "arguments": {
        "count": count, "interval_ms": 5, "target": "standalone", "payload_bytes": 256}}}, accept="application/json")
    r.read()
    t.join(max(0, DEADLINE - time.time()))
    result["canary"] = (len(seen), seen == list(range(1, count + 1)))


stalled = []


def stall(sid, source):
    """Opens the session's standalone stream and never reads from it."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.bind((source, 0))
    s.connect(("127.0.0.1", PORT))
    s.sendall(f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
              f"Mcp-Session-Id: {sid}\r\n\r\n".encode())
    stalled.append(s)


def flood_one(i, refused):
    try:
        # With STALL, from an address of its own: two connections a session
        # would reach the per-address cap (256) before the memory budget.
        source = f"127.0.{1 + i // 250}.{1 + i % 250}" if STALL else "127.0.0.1"
        conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=120, source_address=(source, 0))
        sid = initialize(conn)
        if STALL:
            stall(sid, source)
            # The tool's paced publish waits for the stalled reader once it
            # lags by half a ring: the call does not end, and its connection
            # stays open (closing it would cancel the call).
            conn.sock.settimeout(2)
            stalled.append(conn)
        r = post(conn, sid, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "emit_events", "arguments": {
            "count": 4096, "payload_bytes": PAD, "target": "standalone"}}}, accept="application/json")
        r.read()
    except TimeoutError:
        pass  # STALL: the call paced, as it should
    except Exception as e:  # refusals (503, 429) are the server working
        refused.append(str(e))


def flood():
    stop = threading.Event()
    threading.Thread(target=watch, args=(stop,), daemon=True).start()
    result = {}
    c = threading.Thread(target=canary, args=(result, stop))
    c.start()
    refused = []
    workers = []
    for i in range(SESSIONS):
        if time.time() > DEADLINE:
            break
        t = threading.Thread(target=flood_one, args=(i, refused), daemon=True)
        t.start()
        workers.append(t)
        if len(workers) % 8 == 0:
            for w in workers[-8:]:
                w.join(max(0, DEADLINE - time.time()))
    for w in workers:
        w.join(max(0, DEADLINE - time.time()))
    c.join(max(0, DEADLINE - time.time()))
    stop.set()
    got, dense = result.get("canary", (0, False))
    for s in stalled:
        s.close()
    print(f"flood: {SESSIONS} sessions x 4096 x {PAD} B{', readers stalled' if STALL else ''}; peak RSS {peak[0] >> 20} MiB "
          f"(budget {MAX_MEMORY >> 20} MiB); refused {len(refused)}; canary {got} events, "
          f"{'complete and in order' if dense else 'INCOMPLETE'}")
    return dense and peak[0] <= MAX_MEMORY + SLACK


def slowloris():
    socks = []
    for _ in range(CONNS):
        try:
            s = socket.create_connection(("127.0.0.1", PORT), timeout=5)
            s.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nx: ")
            socks.append(s)
        except OSError:
            break
    time.sleep(1)
    t0 = time.time()
    ok = False
    try:
        # Another address (the attacker's is capped at its per-IP share).
        conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=10, source_address=("127.0.0.2", 0))
        initialize(conn)
        ok = True
    except Exception as e:
        print(f"slowloris: a fresh client was not served: {e}")
    served_in = time.time() - t0
    open_fds = fds()
    # Dribble for longer than the header timeout, then count who is still open.
    end = time.time() + 15
    while time.time() < end:
        for s in socks:
            try:
                s.send(b"a")
            except OSError:
                pass
        time.sleep(2)
    still = refused = 0
    for s in socks:
        s.setblocking(False)
        got = b""
        try:
            while True:
                d = s.recv(65536)
                if not d:
                    break  # closed by the server
                got += d
        except BlockingIOError:
            still += 1  # nothing more, and not closed
        except OSError:
            pass
        refused += got.startswith(b"HTTP/1.1 503")
        s.close()
    print(f"slowloris: {len(socks)} half-open connections; fresh client served in {served_in:.2f} s "
          f"({'ok' if ok else 'FAILED'}); {refused} refused at once (503 too_many_connections); server fds {open_fds}; "
          f"still open after 15 s: {still}")
    return ok and still == 0


if __name__ == "__main__":
    good = flood()
    good = slowloris() and good
    sys.exit(0 if good else 1)
