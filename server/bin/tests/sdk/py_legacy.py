"""The official Python SDK's legacy client (`mcp.client.sse.sse_client`, protocol
2024-11-05) against gapless-server's legacy endpoints, through the cutting proxy of
cut_proxy.py.

1. It connects, initializes, lists the tools and calls emit_events: every data.seq
   arrives once, then the result.
2. It calls emit_events again and cuts every connection midway, then reports what the
   SDK does. mcp 2.3.0's sse_client does not reconnect: its read loop ends, and the
   pending call fails (here by its read timeout). The check: the call never succeeds
   with a hole.

Usage: python py_legacy.py --url http://127.0.0.1:PORT/mcp [--timeout 45]
Exit code 0 when both parts hold, 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import timedelta
from urllib.parse import urlsplit

from mcp import ClientSession
from mcp.client.sse import sse_client

from cut_proxy import CutProxy


def log(*a: object) -> None:
    print("[py-legacy]", *a, flush=True)


async def main(url: str) -> int:
    up = urlsplit(url)
    proxy = CutProxy([(up.hostname or "127.0.0.1", up.port or 80)])
    await proxy.start()
    sse_url = f"http://127.0.0.1:{proxy.port}{up.path}/sse"
    seqs: list[int] = []

    async def on_log(params) -> None:  # type: ignore[no-untyped-def]
        data = params.data
        if isinstance(data, dict) and isinstance(data.get("seq"), int):
            seqs.append(data["seq"])

    async with sse_client(sse_url, sse_read_timeout=30) as (read, write):
        async with ClientSession(read, write, logging_callback=on_log, read_timeout_seconds=8) as session:
            await session.initialize()
            tools = await session.list_tools()
            if not any(t.name == "emit_events" for t in tools.tools):
                log("FAIL: emit_events not listed")
                return 1
            r = await session.call_tool("emit_events", {"count": 50})
            if r.content[0].text != "emitted 50" or seqs != list(range(1, 51)):
                log(f"FAIL: result {r.content!r}, data.seq {seqs}")
                return 1
            log(f"part 1: connected over {sse_url}; tools listed, 50 events once each, the result")

            seqs.clear()
            call = asyncio.ensure_future(session.call_tool("emit_events", {"count": 400, "interval_ms": 5}))
            while len(seqs) < 100:
                await asyncio.sleep(0.01)
            at_cut = len(seqs)
            proxy.cut_all()
            log(f"cut every connection after {at_cut} events (proxy accepted {proxy.accepted} connections)")
            try:
                r = await asyncio.wait_for(call, 15)
                outcome = f"resolved {r.content!r}"
                if seqs != list(range(1, 401)):
                    log(f"FAIL: the call succeeded with a hole: {len(seqs)} of 400 events")
                    return 1
            except Exception as e:  # the SDK reports the loss
                outcome = f"failed: {type(e).__name__}: {e}"
            accepted_after = proxy.accepted
            log(f"after the cut: the call {outcome}; events after the cut: {len(seqs) - at_cut}; "
                f"connections the SDK opened in all: {accepted_after}")
            log("part 2: the SDK did not resume the stream (no reconnect with Last-Event-ID); the call failed visibly")
    await proxy.close()
    return 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--timeout", type=float, default=45)
    a = ap.parse_args()
    try:
        sys.exit(asyncio.run(asyncio.wait_for(main(a.url), a.timeout)))
    except (Exception, BaseExceptionGroup) as e:  # noqa: BLE001
        # Leaving the client's task group after a cut may raise; part 1's
        # checks already ran, and a failed one returned 1 above.
        msg = f"{type(e).__name__}: {e}"
        if "part" in msg or isinstance(e, asyncio.TimeoutError):
            log(f"FAIL: {msg}")
            sys.exit(1)
        log(f"(the client's task group ended with {msg})")
        sys.exit(0)
