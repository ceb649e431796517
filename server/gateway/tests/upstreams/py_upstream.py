"""An upstream MCP server on the official Python SDK (mcp 2.3.0, low-level Server),
for gapless-gateway's tests.

One tool, `emit_events`, sends `count` notifications/message (level "info",
data {"seq": i, "pad": "x" * payload_bytes}) `interval_ms` apart, on the tool
call's own stream (target "request") or on the session's standalone GET stream
(target "standalone"), then returns "emitted <count>". The server declares the
`logging` capability (it registers a logging/setLevel handler).

    python py_upstream.py --port N [--json]
        Streamable HTTP, stateful, on http://127.0.0.1:N/mcp (N may be 0: a free
        port). Prints "listening <port>" on stdout once it accepts connections.
        --json: json_response=True (POSTs answer with plain JSON, no SSE).
    python py_upstream.py --stdio
        The same server over stdio (stdout is the protocol; logs go to stderr).

Run it with the SDK test venv: server/bin/tests/sdk/.venv/bin/python.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import socket
import sys
import warnings
from typing import Any

# `send_log_message` and `on_set_logging_level` are marked deprecated as of the
# 2026-07-28 protocol (SEP-2577); they are exactly what this server exercises.
from mcp.shared.exceptions import MCPDeprecationWarning

warnings.simplefilter("ignore", MCPDeprecationWarning)

import mcp.types as types  # noqa: E402
import uvicorn  # noqa: E402
from mcp.server import Server, ServerRequestContext  # noqa: E402

TOOL = types.Tool(
    name="emit_events",
    description=(
        "Sends `count` notifications/message (level info, data {seq, pad}) `interval_ms` apart, "
        "on the call's own stream (target request) or on the standalone GET stream (target standalone), "
        'then returns "emitted <count>".'
    ),
    input_schema={
        "type": "object",
        "properties": {
            "count": {"type": "integer", "minimum": 0},
            "interval_ms": {"type": "integer", "minimum": 0, "default": 0},
            "payload_bytes": {"type": "integer", "minimum": 0, "default": 0},
            "target": {"type": "string", "enum": ["request", "standalone"], "default": "request"},
        },
        "required": ["count"],
    },
)


def _int_arg(args: dict[str, Any], name: str, default: int | None) -> int:
    value = args.get(name, default)
    # bool is an int subclass in Python; JSON true is not an integer.
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return value


def _tool_error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True)


async def list_tools(ctx: ServerRequestContext, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[TOOL])


async def call_tool(ctx: ServerRequestContext, params: types.CallToolRequestParams) -> types.CallToolResult:
    if params.name != TOOL.name:
        return _tool_error(f"unknown tool {params.name!r}")
    args = params.arguments or {}
    try:
        count = _int_arg(args, "count", None)
        interval_ms = _int_arg(args, "interval_ms", 0)
        payload_bytes = _int_arg(args, "payload_bytes", 0)
        target = args.get("target", "request")
        if target not in ("request", "standalone"):
            raise ValueError(f"target must be 'request' or 'standalone', got {target!r}")
    except ValueError as e:
        return _tool_error(str(e))
    pad = "x" * payload_bytes
    for seq in range(1, count + 1):
        if seq > 1 and interval_ms > 0:
            await asyncio.sleep(interval_ms / 1000)
        data = {"seq": seq, "pad": pad}
        if target == "request":
            # related_request_id selects the request-scoped channel: on Streamable
            # HTTP the notification rides this tools/call's POST response stream.
            await ctx.session.send_log_message(level="info", data=data, related_request_id=ctx.request_id)
        else:
            # No related request: the connection's standalone channel (the GET
            # stream); dropped when no GET stream is open (no event store here).
            await ctx.session.send_log_message(level="info", data=data)
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"emitted {count}")])


async def set_logging_level(ctx: ServerRequestContext, params: types.SetLevelRequestParams) -> types.EmptyResult:
    # Accepted and ignored: emit_events always sends at level "info".
    return types.EmptyResult()


def build_server() -> Server:
    return Server(
        "gapless-py-upstream",
        version="0.0.0",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_set_logging_level=set_logging_level,
    )


async def run_http(port: int, json_response: bool) -> None:
    server = build_server()
    app = server.streamable_http_app(streamable_http_path="/mcp", json_response=json_response, host="127.0.0.1")
    # Bind the socket here so that --port 0 can report the port the OS picked.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    sock.set_inheritable(True)
    real_port = sock.getsockname()[1]
    # Open SSE streams must not hold a SIGTERM up for long.
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=2)
    uv = uvicorn.Server(config)
    serve = asyncio.create_task(uv.serve(sockets=[sock]))
    while not uv.started:
        if serve.done():
            await serve  # startup failed: raise its error
            sys.exit(1)
        await asyncio.sleep(0.01)
    print(f"listening {real_port}", flush=True)
    print(f"[py_upstream] http://127.0.0.1:{real_port}/mcp json={json_response}", file=sys.stderr, flush=True)
    await serve


async def run_stdio() -> None:
    from mcp.server.stdio import stdio_server

    server = build_server()
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--port", type=int, help="serve Streamable HTTP on 127.0.0.1:PORT/mcp (0: a free port)")
    mode.add_argument("--stdio", action="store_true", help="serve over stdin/stdout")
    parser.add_argument("--json", action="store_true", help="HTTP only: answer POSTs with JSON instead of SSE")
    opts = parser.parse_args()
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    try:
        if opts.stdio:
            asyncio.run(run_stdio())
        else:
            asyncio.run(run_http(opts.port, opts.json))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
