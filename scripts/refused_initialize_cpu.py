#!/usr/bin/env python3
"""CPU the server spends per refused initialize, with its session table full.

Usage: refused_initialize_cpu.py BINARY [SESSIONS] [REFUSALS]. Starts BINARY
on a free loopback port with --max-sessions SESSIONS (default 10000),
fills the table, then sends REFUSALS (default 2000) more initialize
requests over keep-alive connections and reads the server's user+system
CPU time from /proc/<pid>/stat around them. Prints microseconds per
refused initialize. (Issue 12: each one cost about 1.3 ms, a sweep of the
whole full table; a full hub now sweeps at most once a second.)
"""
import http.client, json, os, socket, subprocess, sys, time

binary = sys.argv[1]
sessions = int(sys.argv[2]) if len(sys.argv) > 2 else 10000
refusals = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
args = [binary, "--bind", f"127.0.0.1:{port}", "--max-sessions", str(sessions)]
help_text = subprocess.run([binary, "--help"], capture_output=True, text=True).stdout
if "--initialize-burst" in help_text:  # the per-client limits would refuse first
    args += ["--initialize-burst", "1000000", "--max-sessions-per-client", "1000000"]
p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), 1).close(); break
        except OSError:
            time.sleep(0.1)
    INIT = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "cpu", "version": "1"}}})
    h = {"content-type": "application/json", "accept": "application/json"}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    def init():
        conn.request("POST", "/mcp", INIT, h); r = conn.getresponse(); r.read(); return r.status
    for i in range(sessions):
        assert init() == 200, f"fill stopped at {i}"
    def cpu():
        f = open(f"/proc/{p.pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    c0, t0 = cpu(), time.time()
    statuses = [init() for _ in range(refusals)]
    c1, t1 = cpu(), time.time()
    assert all(st == 503 for st in statuses), set(statuses)
    print(f"{binary}: {refusals} refused initializes with {sessions} sessions: "
          f"{(c1 - c0) / refusals * 1e6:.0f} us CPU each, {(t1 - t0) / refusals * 1e6:.0f} us wall each")
finally:
    p.kill()
