"""Resume test of gapless-server with the official MCP Python SDK client (`mcp`, pinned in requirements.txt).

It starts no server. It takes the server's MCP endpoint URL, puts a small TCP proxy in
front of it (127.0.0.1, ephemeral port, in this process) that can cut every live
connection, connects `mcp.Client` over `streamable_http_client` through that proxy, calls
`emit_events`, cuts all connections when given fractions of the notifications have
arrived, and lets the SDK's streamable HTTP transport reconnect on its own (a GET with
`Last-Event-ID`: `_handle_reconnection` for a request's stream, `handle_get_stream` for
the standalone stream). It then checks that every `data.seq` 1..count arrived exactly once
and that the tool result arrived.

With `--also-url` (repeatable: more nodes of one cluster, the same path) the proxy sends
each new TCP connection to the next of the URLs in turn (round robin), and the script also
checks that the connections went to more than one node and that, at every cut, the resume
(the request with `Last-Event-ID` after the cut) reached another node than the one that
carried the stream before it (cluster_check.py, the twin of cluster_check.mjs).

Usage:
    python py_resume.py --url http://127.0.0.1:PORT/mcp [--also-url http://127.0.0.1:PORT2/mcp ...]
        [--count 2000] [--interval-ms 1] [--payload-bytes 16]
        [--target request|standalone|both] [--cuts 0.5] [--timeout 60] [--mode auto|legacy]

Exit code 0 when every variant passed, 1 otherwise (with a message on stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections import Counter
from urllib.parse import urlsplit, urlunsplit

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from cluster_check import ClusterReport
from cut_proxy import CutProxy


def log(*a: object) -> None:
    print("[py]", *a, flush=True)


async def run_variant(args: argparse.Namespace, target: str) -> list[str]:
    count = args.count
    cut_at = [max(1, int(float(f) * count)) for f in args.cuts.split(",") if f.strip()]

    up = urlsplit(args.url)
    ups = [up] + [urlsplit(u) for u in args.also_url]
    proxy = CutProxy([(u.hostname or "127.0.0.1", u.port or 80) for u in ups])
    await proxy.start()
    cluster = ClusterReport(proxy, [f"{u.hostname}:{u.port or 80}" for u in ups], target)
    via_proxy = urlunsplit((up.scheme, f"127.0.0.1:{proxy.port}", up.path, up.query, ""))

    # Instrumentation only: record what the SDK sends (method, Last-Event-ID), so the report
    # can say how it resumed. The SDK's own reconnection logic is untouched.
    requests: list[tuple[str, str | None]] = []
    resume_headers: list[str] = []

    async def on_request(request: httpx2.Request) -> None:
        method = request.method
        if method == "POST":
            try:
                rpc = json.loads(request.content).get("method")
            except (ValueError, AttributeError, httpx2.RequestNotRead):
                rpc = None
            if rpc:
                method += f"({rpc})"
        requests.append((method, request.headers.get("last-event-id")))
        if method == "GET" and "last-event-id" in request.headers and not resume_headers:
            resume_headers.extend(
                f"{k}: {'<session>' if k.lower() == 'mcp-session-id' else v}" for k, v in request.headers.items()
            )

    http_client = create_mcp_http_client()
    http_client.event_hooks = {"request": [on_request], "response": []}

    seen: Counter[int] = Counter()
    received = 0
    cuts_done: list[dict[str, int]] = []
    all_arrived = anyio.Event()
    transport_errors: list[str] = []

    async def on_log(params) -> None:  # mcp.types.LoggingMessageNotificationParams
        nonlocal received
        data = params.data
        seq = data.get("seq") if isinstance(data, dict) else None
        if not isinstance(seq, int):
            return
        seen[seq] += 1
        received += 1
        if len(cuts_done) < len(cut_at) and received >= cut_at[len(cuts_done)]:
            n = cluster.cut()
            cuts_done.append({"afterNotifications": received, "lastSeq": seq, "connectionsCut": n})
        if len(seen) == count:
            all_arrived.set()

    async def on_message(message) -> None:
        if isinstance(message, Exception):
            transport_errors.append(repr(message))

    failures: list[str] = []
    result = None
    started = time.monotonic()
    try:
        with anyio.fail_after(args.timeout):
            async with http_client:
                async with Client(
                    streamable_http_client(via_proxy, http_client=http_client),
                    mode=args.mode,
                    logging_callback=on_log,
                    message_handler=on_message,
                    read_timeout_seconds=args.timeout,
                ) as client:
                    log(f"{target}: connected via proxy :{proxy.port}, protocol {client.protocol_version}")
                    result = await client.call_tool(
                        "emit_events",
                        {
                            "count": count,
                            "interval_ms": args.interval_ms,
                            "payload_bytes": args.payload_bytes,
                            "target": target,
                        },
                    )
                    # Standalone notifications may still be in flight after the result.
                    await all_arrived.wait()
                    # Linger briefly so a late duplicate would still be counted.
                    await anyio.sleep(0.3)
    except TimeoutError:
        failures.append(f"timed out after {args.timeout} s")
    except Exception as exc:  # noqa: BLE001 - reported as a test failure
        failures.append(f"error: {exc!r}")
    elapsed_ms = int((time.monotonic() - started) * 1000)

    expected_text = f"emitted {count}"
    text = None
    if result is not None:
        content = getattr(result, "content", None) or []
        text = getattr(content[0], "text", None) if content else None
        if text != expected_text or getattr(result, "is_error", False):
            failures.append(f"tool result: expected text {expected_text!r}, got {result!r}")
    elif not failures:
        failures.append("tool result never arrived")
    missing = [s for s in range(1, count + 1) if seen[s] == 0]
    dups = [f"{s}x{k}" for s, k in sorted(seen.items()) if k > 1]
    extra = [s for s in seen if not 1 <= s <= count]
    if missing:
        failures.append(f"{len(missing)} seq missing (first: {missing[:10]})")
    if dups:
        failures.append(f"{len(dups)} seq duplicated (first: {dups[:10]})")
    if extra:
        failures.append(f"unexpected seq values: {extra[:10]}")
    if len(cuts_done) != len(cut_at):
        failures.append(f"only {len(cuts_done)} of {len(cut_at)} planned cuts happened (cut points {cut_at})")
    resumes = [r for r in requests if r[0] == "GET" and r[1]]
    if cuts_done and not resumes:
        failures.append("connection was cut but the SDK never sent a GET with Last-Event-ID")
    if len(ups) > 1:
        failures.extend(cluster.failures())

    log(
        f"{target}: {received} notifications ({len(seen)} distinct of {count}) in {elapsed_ms} ms; "
        f"result {text!r}"
    )
    log(f"{target}: cuts {cuts_done}; proxy accepted {proxy.accepted} connections")
    log(
        f"{target}: HTTP requests sent by the SDK: "
        + " ".join(m + (f"[Last-Event-ID: {lei}]" if lei else "") for m, lei in requests)
    )
    if resume_headers:
        log(f"{target}: headers of the first resume GET: {', '.join(resume_headers)}")
    if len(ups) > 1:
        for line in cluster.lines():
            log(f"{target}: {line}")
    if transport_errors:
        log(f"{target}: transport exceptions surfaced to message_handler: {sorted(set(transport_errors))}")
    await proxy.close()
    return failures


async def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True)
    p.add_argument(
        "--also-url",
        action="append",
        default=[],
        help="another node of the cluster (repeatable); the proxy sends connections to each URL in turn",
    )
    p.add_argument("--count", type=int, default=2000)
    p.add_argument("--interval-ms", type=int, default=1)
    p.add_argument("--payload-bytes", type=int, default=16)
    p.add_argument("--target", choices=["request", "standalone", "both"], default="both")
    p.add_argument("--cuts", default="0.5", help="comma-separated fractions of count after which to cut")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per variant")
    p.add_argument("--mode", default="auto", help="mcp.Client mode: auto (default) or legacy")
    args = p.parse_args()

    targets = ["request", "standalone"] if args.target == "both" else [args.target]
    failed = False
    for target in targets:
        failures = await run_variant(args, target)
        if failures:
            failed = True
            print(f"[py] FAIL {target}: {'; '.join(failures)}", file=sys.stderr, flush=True)
        else:
            log(f"PASS {target}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
