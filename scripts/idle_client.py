"""N sessions held idle for the cluster's cost and sizing scripts
(scripts/cluster_idle_cost.sh, scripts/cluster_sizing.sh).

    python3 scripts/idle_client.py PORT N

Initializes N sessions on the gapless-server at 127.0.0.1:PORT, prints
"initialized" and waits for a line on stdin; then opens each session's
standalone GET stream, prints "streams open" and waits for a line again.
"""
import asyncio, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
INIT = ('{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
        '"capabilities":{},"clientInfo":{"name":"idle","version":"1"}}}').encode()

async def initialize(sem):
    async with sem:
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
                b"accept: application/json, text/event-stream\r\nconnection: close\r\n"
                b"content-length: %d\r\n\r\n%s" % (len(INIT), INIT))
        head = (await r.readuntil(b"\r\n\r\n")).decode()
        await r.read()
        w.close()
        return next(l.split(":", 1)[1].strip() for l in head.split("\r\n") if l.lower().startswith("mcp-session-id:"))

async def standalone(sem, sid, held):
    async with sem:
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(b"GET /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\naccept: text/event-stream\r\nmcp-session-id: %s\r\n\r\n" % sid.encode())
        head = await r.readuntil(b"\r\n\r\n")
        assert b" 200 " in head.split(b"\r\n")[0], head
        held.append((r, w))

async def main():
    sem = asyncio.Semaphore(64)
    sids = await asyncio.gather(*(initialize(sem) for _ in range(n)))
    print("initialized", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    held = []
    await asyncio.gather(*(standalone(sem, s, held) for s in sids))
    print("streams open", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)

asyncio.run(main())
