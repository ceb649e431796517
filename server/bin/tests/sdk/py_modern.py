"""The official Python SDK's client (mcp 2.3.0) in its default mode='auto' against
gapless-server: it probes server/discover, must settle on MCP 2026-07-28 (no session),
list the tools, call one, receive a tool's notifications on the request's stream, and
complete an elicitation by input-required result (its elicitation callback answers;
the client retries with the answer and the server's requestState).

Usage: py_modern.py <endpoint url>. Exits non-zero, saying why, on any deviation.
"""

import asyncio
import sys

import mcp.types as types
from mcp.client.client import Client

MODERN = "2026-07-28"


def fail(why: str) -> None:
    print(f"[py-modern] FAIL: {why}", file=sys.stderr)
    sys.exit(1)


async def main(url: str) -> None:
    asked: list[str] = []
    logs: list[int] = []

    async def on_elicit(_ctx, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Py"})

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        data = params.data
        if isinstance(data, dict) and "seq" in data:
            logs.append(data["seq"])

    async with Client(url, elicitation_callback=on_elicit, logging_callback=on_log, log_level="info") as client:
        version = client.session.protocol_version
        if version != MODERN:
            fail(f"mode='auto' settled on {version!r}, not {MODERN}")
        tools = await client.list_tools()
        names = {t.name for t in tools.tools}
        for want in ("emit_events", "test_simple_text", "test_input_required_result_elicitation"):
            if want not in names:
                fail(f"tools/list lacks {want}: {sorted(names)}")
        r = await client.call_tool("test_simple_text", {})
        text = r.content[0].text if r.content else None
        if text != "This is a simple text response for testing.":
            fail(f"test_simple_text returned {r!r}")
        r = await client.call_tool("emit_events", {"count": 50})
        if r.content[0].text != "emitted 50" or logs != list(range(1, 51)):
            fail(f"emit_events: result {r!r}, notifications {logs}")
        r = await client.call_tool("test_input_required_result_elicitation", {})
        text = r.content[0].text if r.content else None
        if asked != ["What is your name?"] or text != "Hello, Py!":
            fail(f"elicitation round trip: asked {asked}, result {r!r}")
    print(f"[py-modern] ok: {version}, {len(names)} tools, 50 notifications, elicitation answered")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
