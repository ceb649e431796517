"""What the loopback abuse scripts share (scripts/stress.py, scripts/hostile.py):
the server's resident memory, and the data of an SSE response's events."""


def rss(pid):
    """Resident bytes of process `pid` (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except FileNotFoundError:
        pass
    return 0


def sse_data(resp):
    """Yields the data of each SSE event of an http.client response."""
    buf = b""
    while True:
        chunk = resp.read1(65536)
        if not chunk:
            return
        buf += chunk
        while b"\n\n" in buf:
            block, buf = buf.split(b"\n\n", 1)
            data = b"".join(l[5:].lstrip() for l in block.split(b"\n") if l.startswith(b"data:"))
            if data:
                yield data
