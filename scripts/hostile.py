#!/usr/bin/env python3
"""Attack the 2026-07-28 paths of the real server over loopback, one attack
at a time, beside a canary that must lose nothing.

Run by scripts/hostile.sh (not in CI; a minute or two). The attacker is
127.0.0.1 (one client: the bundled server tells clients apart by address);
the canary is 127.0.0.2: a `task_events` task of CANARY events, 5 ms apart,
followed with `tasks/stream` and resumed with `after` until its stream ends,
which must give every seq from 0 once, in order.

Each attack prints what the server spent on it (CPU seconds from
/proc/PID/stat, the peak RSS over the RSS before it) and what the attacker
got, grouped (HTTP status and JSON-RPC error code). Exits 1 if the canary
lost anything, an attack was not refused as the limits table of docs/operations.md
says, or one grew the server by more than MAX_RSS_DELTA (64 MiB).
"""
import http.client
import json
import os
import random
import socket
import sys
import threading
import time

import loopback

PORT = int(os.environ["PORT"])
PID = int(os.environ["PID"])
CANARY = int(os.environ.get("CANARY", "4000"))
V = "2026-07-28"
EXT = "io.modelcontextprotocol/tasks"
TICKS = os.sysconf("SC_CLK_TCK")
# Most an attack may add to the server's resident memory (the 256 listen
# streams of one client take about 9 MiB).
MAX_RSS_DELTA = int(os.environ.get("MAX_RSS_DELTA", str(64 << 20)))


def rss():
    return loopback.rss(PID)


def cpu():
    with open(f"/proc/{PID}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def conn(source="127.0.0.1", timeout=30):
    return http.client.HTTPConnection("127.0.0.1", PORT, timeout=timeout, source_address=(source, 0))


def send(c, method, params, caps=None, accept="application/json", headers=None, meta=None):
    """Sends one 2026-07-28 request on `c`; returns the response (unread)."""
    m = {"io.modelcontextprotocol/protocolVersion": V,
         "io.modelcontextprotocol/clientCapabilities": caps if caps is not None else {"extensions": {EXT: {}}}}
    m.update(meta or {})
    params = dict(params, _meta=m)
    h = {"content-type": "application/json", "accept": accept, "mcp-protocol-version": V, "mcp-method": method}
    name = params.get("name") or params.get("taskId")
    if isinstance(name, str):
        h["mcp-name"] = name
    h.update(headers or {})
    c.request("POST", "/mcp", json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}), h)
    return c.getresponse()


def call(c, method, params, **kw):
    """`send`, read whole: (status, JSON body or None)."""
    r = send(c, method, params, **kw)
    body = r.read()
    try:
        return r.status, json.loads(body)
    except ValueError:
        return r.status, None


def outcome(status, body):
    """What a response says, for grouping: `200`, `200 -32602`, `429 -31001`."""
    err = body.get("error") if isinstance(body, dict) else None
    # A JSON-RPC error's code, or the HTTP error body's name.
    code = err.get("code") if isinstance(err, dict) else err
    return f"{status}" + (f" {code}" if code is not None else "")


def sse_messages(r):
    """The JSON messages of an SSE response, as they come."""
    return (json.loads(d) for d in loopback.sse_data(r))


def canary(result):
    """Runs the canary task and follows its events to the end."""
    c = conn("127.0.0.2", timeout=120)
    status, created = call(c, "tools/call", {"name": "task_events", "arguments": {
        "count": CANARY, "interval_ms": 5, "payload_bytes": 64}})
    task = ((created or {}).get("result") or {}).get("taskId")
    if not task:
        result["canary"] = f"not created: {outcome(status, created)}"
        return
    seen, after, streams = [], None, 0
    deadline = time.time() + 600
    while time.time() < deadline:
        params = {"taskId": task} if after is None else {"taskId": task, "after": after}
        r = send(c, "tasks/stream", params, accept="application/json, text/event-stream")
        streams += 1
        if r.getheader("content-type", "").startswith("application/json"):
            body = json.loads(r.read())
            result["canary"] = f"refused: {body}"
            return
        ended = False
        for m in sse_messages(r):
            if "id" in m:  # the response: the stream ended
                ended = "result" in m and m["result"].get("resultType") == "complete"
                if not ended:
                    result["canary"] = f"refused mid-stream: {m}"
                    return
                break
            seen.append(m["params"]["seq"])
            after = m["params"]["seq"]
        r.read()  # the rest of the stream, which ends after the response
        # A stream ends normally once the task is terminal and everything
        # was sent; else (a cut) it is resumed after the last seq seen.
        _, got = call(c, "tasks/get", {"taskId": task})
        if ended and got["result"]["status"] in ("completed", "failed", "cancelled"):
            break
    result["canary"] = (len(seen), seen == list(range(CANARY)), streams)


class Attack:
    """Runs `fn`, measuring the server's CPU and peak RSS meanwhile."""

    def __init__(self, name):
        self.name, self.outcomes, self.ok, self.why = name, {}, True, ""

    def count(self, status, body):
        k = outcome(status, body)
        self.outcomes[k] = self.outcomes.get(k, 0) + 1

    def expect(self, good, why):
        if not good:
            self.ok, self.why = False, why

    def run(self, fn):
        stop = threading.Event()
        base, peak = rss(), [0]

        def watch():
            while not stop.is_set():
                peak[0] = max(peak[0], rss())
                time.sleep(0.05)

        w = threading.Thread(target=watch, daemon=True)
        w.start()
        c0, t0 = cpu(), time.time()
        try:
            fn(self)
        except Exception as e:  # a crash of the attack is a failure of the suite
            self.expect(False, f"attack raised {e!r}")
        stop.set()
        w.join()
        n = sum(self.outcomes.values())
        spent = cpu() - c0
        self.expect(peak[0] - base <= MAX_RSS_DELTA, f"the server grew by {(peak[0] - base) >> 20} MiB")
        per = f", {spent / n * 1e6:.0f} us per request" if n else ""
        got = ", ".join(f"{k}: {v}" for k, v in sorted(self.outcomes.items()))
        print(f"{self.name:<22} {n:>6} requests in {time.time() - t0:5.1f} s; server CPU {spent:5.2f} s{per}; "
              f"peak RSS +{max(0, peak[0] - base) >> 20} MiB; got {got}"
              + ("" if self.ok else f"  FAILED: {self.why}"))
        return self.ok


def listen_flood(a):
    """300 listen streams at once, each watching 64 guessed task ids."""
    held = []
    for i in range(300):
        c = conn()
        ids = [f"{random.getrandbits(128):032x}" for _ in range(64)]
        try:
            r = send(c, "subscriptions/listen", {"notifications": {"taskIds": ids, "toolsListChanged": True}},
                     accept="application/json, text/event-stream")
        except ConnectionError:  # refused and closed before the request was sent whole
            a.count("closed", None)
            continue
        if r.getheader("content-type", "").startswith("text/event-stream"):
            a.count(r.status, None)
            held.append((c, r))
        else:
            a.count(r.status, json.loads(r.read()))
            c.close()
    refused = sum(a.outcomes.get(k, 0) for k in ("429 -31001", "503 too_many_connections", "closed"))
    a.expect(refused > 0, "nothing refused past the per-client caps (requests in flight, connections)")
    a.expect(len(held) <= 256, f"{len(held)} streams held open")
    for c, _ in held:
        c.close()


def listen_to_tasks(a):
    """200 listen streams, each watching the same 64 running tasks of the
    attacker's (each polled every 500 ms until terminal): 12 800 watched
    tasks for 5 s, which must cost less than one core (the release build
    spends about 0.3 s of CPU, the debug build about 1.3 s)."""
    c = conn()
    ids = []
    for _ in range(64):
        status, body = call(c, "tools/call", {"name": "task_events", "arguments": {"count": 100, "interval_ms": 100}})
        a.count(status, body)
        ids.append(body["result"]["taskId"])
    held = []
    for _ in range(200):
        s = conn()
        r = send(s, "subscriptions/listen", {"notifications": {"taskIds": ids}},
                 accept="application/json, text/event-stream")
        a.count(r.status, None if r.getheader("content-type", "").startswith("text/event-stream") else r.read())
        held.append(s)
    c0 = cpu()
    time.sleep(5)
    spent = cpu() - c0
    a.expect(spent < 5, f"{spent:.2f} s of server CPU in 5 s")
    for s in held:
        s.close()


def stalled_task_streams(a):
    """100 tasks/stream of one task whose kept events (1 MiB of 60 KB
    events) are replayed into connections that never read (4 KiB receive
    buffers): each holds at most its queue (256 KiB), one event and the
    connection's buffer."""
    c = conn()
    status, created = call(c, "tools/call", {"name": "task_events", "arguments": {
        "count": 40, "payload_bytes": 60000}})
    a.count(status, created)
    task = created["result"]["taskId"]
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tasks/stream", "params": {"taskId": task, "_meta": {
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {EXT: {}}}}}}).encode()
    head = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Accept: application/json, text/event-stream\r\nMcp-Protocol-Version: {V}\r\n"
            f"Mcp-Method: tasks/stream\r\nMcp-Name: {task}\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    socks = []
    for _ in range(100):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", PORT))
        sock.sendall(head + body)
        socks.append(sock)
        a.count("stalled", None)
    time.sleep(2)
    for sock in socks:
        sock.close()


def count_http_reply(a, reply):
    """Counts a raw HTTP/1.1 reply by its status and its JSON body."""
    a.count(int(reply.split(" ", 2)[1]), json.loads(reply.split("\r\n\r\n", 1)[1] or "null"))


def read_reply(sock):
    """What the server sent within 0.2 s: "" for nothing, "reset" when it
    closed the connection hard."""
    sock.settimeout(0.2)
    try:
        return sock.recv(4096).decode("latin-1")
    except socket.timeout:
        return ""
    except OSError:
        return "reset"


def counted(a, sock, reply):
    """Counts a reply, if there is one, and closes its connection."""
    if not reply:
        return False
    if reply.startswith("HTTP/1.1 "):
        count_http_reply(a, reply)
    else:
        a.count(reply, None)
    sock.close()
    return True


def half_sent_bodies(a):
    """200 connections that each declare a 3.9 MiB body and send all of it
    but its last byte: bodies being received hold at most this client's
    share of their budget (a quarter of the default 64 MiB); the rest are
    refused 503 `too_many_body_bytes`, as soon as their head arrives once
    the share is held (or at the chunk that does not fit, for a body let in
    while the bytes of the ones before it were still on their way)."""
    size = (4 << 20) - (100 << 10)
    body = b"{" + b" " * (size - 1)
    head = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Accept: application/json, text/event-stream\r\nMcp-Protocol-Version: {V}\r\n"
            f"Mcp-Method: tools/list\r\nContent-Length: {size}\r\n\r\n").encode()
    held = []
    for _ in range(200):
        sock = socket.create_connection(("127.0.0.1", PORT), 5)
        sock.sendall(head)
        if counted(a, sock, read_reply(sock)):
            continue
        sock.settimeout(5)
        try:
            sock.sendall(body[:-1])
        except OSError:  # refused mid-body: the server answered and closed
            pass
        if counted(a, sock, read_reply(sock)):
            continue
        held.append(sock)
        a.count("held", None)
    time.sleep(1)
    for sock in held:
        sock.close()
    a.expect(a.outcomes.get("503 too_many_body_bytes", 0) >= 190,
             f"only {a.outcomes.get('503 too_many_body_bytes', 0)} of 200 were refused")


def task_flood(a):
    """Tasks until refused: the per-client cap."""
    c = conn()
    for _ in range(300):
        status, body = call(c, "tools/call", {"name": "failing_job", "arguments": {}})
        a.count(status, body)
    a.expect(a.outcomes.get("200 -31001", 0) >= 300 - 256, "tasks past the per-client cap were created")


def request_state_abuse(a):
    """requestState replayed, tampered with, taken to another address (it
    is bound to the caller's identity: the bundled server has none, so the
    state is the credential there, as SPEC §5.4 says), and presented past
    its TTL."""
    caps = {"elicitation": {}, "sampling": {}, "roots": {}}
    tool = "test_input_required_result_multi_round"
    c, other = conn(), conn("127.0.0.3")
    _, first = call(c, "tools/call", {"name": tool, "arguments": {}}, caps=caps)
    issued = time.time()
    state = first["result"]["requestState"]
    answer = {"step1": {"action": "accept", "content": {"name": "Ada"}}}
    for i in range(500):
        if i % 3 == 0:  # one bit flipped somewhere
            j = random.randrange(len(state))
            forged = state[:j] + ("A" if state[j] != "A" else "B") + state[j + 1:]
            status, body = call(c, "tools/call", {"name": tool, "arguments": {}, "requestState": forged,
                                                  "inputResponses": answer}, caps=caps)
            a.expect("error" in (body or {}), "a tampered requestState was taken")
        elif i % 3 == 1:  # another address: the same caller to a server without identities
            status, body = call(other, "tools/call", {"name": tool, "arguments": {}, "requestState": state,
                                                      "inputResponses": answer}, caps=caps)
        else:  # the caller's own, replayed: it is a retry, served again
            status, body = call(c, "tools/call", {"name": tool, "arguments": {}, "requestState": state,
                                                  "inputResponses": answer}, caps=caps)
        a.count(status, body)
    # Past its TTL (the suite's server: 3 s): refused, saying so.
    time.sleep(max(0, 3.2 - (time.time() - issued)))
    status, body = call(c, "tools/call", {"name": tool, "arguments": {}, "requestState": state,
                                          "inputResponses": answer}, caps=caps)
    a.count(status, body)
    a.expect("expired" in str((body or {}).get("error", {}).get("message")), f"a state past its TTL: {body}")


def large_input_responses(a):
    """inputResponses of 3 MiB where one short answer was asked for."""
    caps = {"elicitation": {}, "sampling": {}, "roots": {}}
    tool = "test_input_required_result_multi_round"
    c = conn()
    _, first = call(c, "tools/call", {"name": tool, "arguments": {}}, caps=caps)
    junk = {f"k{i}": {"action": "accept", "content": {"name": "x" * 1000}} for i in range(3000)}
    junk["step1"] = {"action": "accept", "content": {"name": "Ada"}}
    for _ in range(20):
        status, body = call(c, "tools/call", {"name": tool, "arguments": {}, "inputResponses": junk,
                                              "requestState": first["result"]["requestState"]}, caps=caps)
        a.count(status, body)


def big_params(a):
    """Mcp-Param-* headers and _meta of every size, each on a connection of
    its own (a refusal before the body is read may close its connection,
    and whether the next request on it sees the close first is a race)."""
    for size in (100, 4000, 15000, 17000, 60000):
        c = conn()
        try:
            status, body = call(c, "tools/call", {"name": "emit_events", "arguments": {"count": 1, "note": "x"}},
                                headers={"mcp-param-note": "x" * size})
        except (ConnectionError, http.client.HTTPException):
            status, body = 0, None
        a.count(status, body)
        a.expect(size <= 16000 or status == 431, f"{size}-byte header: {status}")
        a.expect(size > 16000 or status == 200, f"{size}-byte header: {status}")
        c.close()
    for size in (1000, 1 << 20, 3 << 20, 5 << 20):
        c = conn()
        try:
            status, body = call(c, "server/discover", {}, meta={"x": "y" * size})
        except (ConnectionError, http.client.HTTPException):
            status, body = 0, None
        a.count(status, body)
        # Over the body limit: 413, or closed before the client finished.
        a.expect(size <= 4 << 20 or status in (413, 0), f"{size}-byte _meta: {status}")
        a.expect(size > 4 << 20 or status == 200, f"{size}-byte _meta: {status}")
        c.close()


def discover_flood(a):
    """server/discover and tools/list, 3000 of each on one connection."""
    c = conn()
    for i in range(6000):
        status, body = call(c, "server/discover" if i % 2 else "tools/list", {})
        a.count(status, body)


def unknown_tools(a):
    """tools/call of 2 000 tools that do not exist, 32 at a time, with an
    Mcp-Param-* header: each is checked against the application's tool list
    (listed again for a tool not in it at most once a second)."""
    lock = threading.Lock()

    def worker():
        c = conn()
        for _ in range(2000 // 32):
            name = f"t{random.getrandbits(64):x}"
            status, body = call(c, "tools/call", {"name": name, "arguments": {"q": "x"}},
                                headers={"mcp-param-q": "x"})
            with lock:
                a.count(status, body)

    threads = [threading.Thread(target=worker) for _ in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    a.expect(set(a.outcomes) == {"200 -32602"}, "an unknown tool's call was not refused -32602")


def task_stream_guesses(a, foreign):
    """tasks/stream of 3000 guessed task ids, and of the canary's own."""
    c = conn()
    for _ in range(3000):
        status, body = call(c, "tasks/stream", {"taskId": f"{random.getrandbits(128):032x}"},
                            accept="application/json, text/event-stream")
        a.count(status, body)
    a.expect(a.outcomes.get("200 -32602", 0) == 3000, "a guessed task id was served")
    if foreign:
        # Without identities (the bundled server) a task's id is its
        # credential (SPEC §5.5): a leaked one is served; with identities,
        # server/bin/tests/tasks.rs shows it refused.
        for _ in range(100):
            r = send(c, "tasks/stream", {"taskId": foreign}, accept="application/json, text/event-stream")
            r.read()
            a.count(r.status, None)


def main():
    result = {}
    t = threading.Thread(target=canary, args=(result,), daemon=True)
    t.start()
    good = True
    good &= Attack("listen flood").run(listen_flood)
    good &= Attack("stalled task streams").run(stalled_task_streams)
    good &= Attack("listen to 64 tasks").run(listen_to_tasks)
    good &= Attack("task flood").run(task_flood)
    good &= Attack("half-sent bodies").run(half_sent_bodies)
    good &= Attack("requestState abuse").run(request_state_abuse)
    good &= Attack("large inputResponses").run(large_input_responses)
    good &= Attack("headers and _meta").run(big_params)
    good &= Attack("discover/list flood").run(discover_flood)
    good &= Attack("unknown tools").run(unknown_tools)
    foreign = find_canary_task()
    good &= Attack("tasks/stream guesses").run(lambda a: task_stream_guesses(a, foreign))
    t.join(600)
    got = result.get("canary")
    if isinstance(got, tuple):
        n, dense, streams = got
        print(f"canary: {n} of {CANARY} task events over {streams} streams, "
              f"{'complete and in order' if dense else 'INCOMPLETE'}")
        good &= dense
    else:
        print(f"canary: FAILED: {got}")
        good = False
    sys.exit(0 if good else 1)


def find_canary_task():
    """The canary's task id, as an attacker who learnt it would send it."""
    c = conn("127.0.0.2")
    # The canary client's own listing is not an API of the revision; ask
    # for a new task of the canary's client and take that id instead.
    status, body = call(c, "tools/call", {"name": "failing_job", "arguments": {}})
    return ((body or {}).get("result") or {}).get("taskId")


if __name__ == "__main__":
    main()
