#!/usr/bin/env python3
"""Writes the seed corpora in fuzz/corpus/<target>/.

The targets decode their input with `arbitrary` 1.x derives, whose layout is
simple enough to write by hand: integers are little-endian and exactly their
size, a bool is one byte (odd = true), an `Option` is a bool then the value,
an enum is a `u32` whose variant is `(tag * variants) >> 32` followed by the
variant's fields, and the last field of the top-level struct (the op list)
is "byte 1 then an element" repeated, ended by a 0 byte or the end of input.

The variant lists below must follow the enum declarations in
fuzz_targets/*.rs. Check a seed with `cargo +nightly fuzz fmt <target> <file>`.
Run from anywhere: `python3 fuzz/gen_seeds.py`.
"""

import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def tag(idx, count):
    """The smallest u32 that decodes to variant `idx` of `count`."""
    return struct.pack("<I", (idx * (1 << 32) + count - 1) // count)


def u8(v):
    return bytes([v & 0xFF])


def u16(v):
    return struct.pack("<H", v)


def u64(v):
    return struct.pack("<Q", v)


def boolean(v):
    return b"\x01" if v else b"\x00"


def ops(items):
    return b"".join(b"\x01" + op for op in items) + b"\x00"


# ---------------------------------------------------------------- ring_ops

RING_OPS = [
    "Publish", "PublishMany", "OpenStream", "EndStream", "PublishForeign", "EndForeign",
    "NewCursor", "Next", "Seek", "Coverage", "Snapshot", "SnapshotStream", "CheckPinned",
    "DropPinned", "MarkDelivered", "MarkOtherStream", "Info", "StreamOf", "Close",
]
POS = ["FromHead", "NearOldest", "Abs", "Zero", "Max"]


def rop(name, *fields):
    return tag(RING_OPS.index(name), len(RING_OPS)) + b"".join(fields)


def pos(name, k=0):
    p = tag(POS.index(name), len(POS))
    return p + u8(k) if name in ("FromHead", "NearOldest", "Abs") else p


def ring_input(capacity, chunk_log, budget, items):
    # capacity = capacity % 16 + 1; chunk = 1 << (chunk_log % 4); budget = budget + 1
    return u8(capacity - 1) + u8(chunk_log) + u8(budget - 1) + ops(items)


RING_SEEDS = {
    # One stream laps a 4-event ring; a snapshot taken before the lap still
    # yields its events (pinning); coverage at the edges.
    "pinned_snapshot_survives_laps": ring_input(4, 2, 256, [
        rop("OpenStream"),
        rop("PublishMany", u8(0), u8(6), u8(8)),
        rop("Snapshot", pos("Abs", 3), boolean(True)),
        rop("PublishMany", u8(0), u8(10), u8(3)),
        rop("CheckPinned"),
        rop("Coverage", pos("NearOldest", 3)),
        rop("Coverage", pos("NearOldest", 2)),
        rop("Coverage", pos("Max")),
        rop("Snapshot", pos("Zero"), boolean(False)),
    ]),
    # Two interleaved streams, a delivery mark, then per-stream snapshots at
    # and below the mark after eviction (exact and lower-bound `missing`).
    "stream_snapshots_around_the_delivered_mark": ring_input(6, 1, 256, [
        rop("OpenStream"), rop("OpenStream"),
        rop("Publish", u8(0), u8(4), u8(1)), rop("Publish", u8(1), u8(4), u8(2)),
        rop("Publish", u8(0), u8(4), u8(3)), rop("Publish", u8(1), u8(4), u8(4)),
        rop("MarkDelivered", u8(1), u8(1), boolean(True)),
        rop("SnapshotStream", u8(1), pos("Abs", 3), boolean(True)),
        rop("PublishMany", u8(1), u8(8), u8(5)),
        rop("SnapshotStream", u8(1), pos("Abs", 3), boolean(False)),
        rop("SnapshotStream", u8(1), pos("Abs", 1), boolean(False)),
        rop("SnapshotStream", u8(2), pos("Abs", 2), boolean(False)),
        rop("CheckPinned"),
        rop("Info", u8(1)), rop("Info", u8(2)),
    ]),
    # Whole-ring and stream cursors: follow, fall behind eviction (Lagged),
    # seek to the oldest retained seq, read on.
    "cursors_lag_and_seek": ring_input(4, 2, 256, [
        rop("OpenStream"), rop("OpenStream"),
        rop("NewCursor", u8(0), boolean(False), pos("Zero")),
        rop("NewCursor", u8(1), boolean(True), u8(2), pos("Zero")),
        rop("Publish", u8(0), u8(2), u8(0)), rop("Publish", u8(1), u8(2), u8(0)),
        rop("Next", u8(0), u8(3)), rop("Next", u8(1), u8(3)),
        rop("PublishMany", u8(1), u8(9), u8(1)),
        rop("Next", u8(0), u8(0)), rop("Next", u8(1), u8(0)),
        rop("Seek", u8(0), pos("NearOldest", 4)), rop("Seek", u8(1), pos("NearOldest", 4)),
        rop("Next", u8(0), u8(7)), rop("Next", u8(1), u8(7)),
    ]),
    # A stream ends (its cursor reports End after its last event), publishing
    # on it is refused, then the producer closes (whole-ring cursor ends).
    "end_stream_then_close": ring_input(8, 3, 256, [
        rop("OpenStream"), rop("OpenStream"),
        rop("NewCursor", u8(0), boolean(True), u8(1), pos("Zero")),
        rop("NewCursor", u8(1), boolean(False), pos("Zero")),
        rop("Publish", u8(0), u8(1), u8(9)), rop("Publish", u8(1), u8(1), u8(9)),
        rop("EndStream", u8(1)),
        rop("Publish", u8(0), u8(1), u8(9)),
        rop("Next", u8(0), u8(3)),
        rop("Close"),
        rop("Next", u8(1), u8(4)),
        rop("PublishForeign", u8(3)), rop("EndForeign"),
    ]),
    # A small byte budget: a payload over it is refused, one of exactly the
    # budget evicts everything else, priming (empty) events cost nothing.
    "byte_budget": ring_input(16, 0, 20, [
        rop("OpenStream"),
        rop("Publish", u8(0), u8(10), u8(0)), rop("Publish", u8(0), u8(10), u8(0)),
        rop("Publish", u8(0), u8(21), u8(0)),
        rop("Publish", u8(0), u8(20), u8(0)),
        rop("Publish", u8(0), u8(0), u8(0)), rop("Publish", u8(0), u8(0), u8(0)),
        rop("Snapshot", pos("NearOldest", 3), boolean(False)),
        rop("StreamOf", pos("NearOldest", 4)), rop("StreamOf", pos("NearOldest", 3)),
    ]),
    # Capacity 1 with one-event chunks: every publish evicts its predecessor.
    "capacity_one_chunk_one": ring_input(1, 0, 256, [
        rop("OpenStream"),
        rop("PublishMany", u8(0), u8(5), u8(3)),
        rop("Snapshot", pos("FromHead", 1), boolean(True)),
        rop("Snapshot", pos("FromHead", 2), boolean(False)),
        rop("PublishMany", u8(0), u8(3), u8(3)),
        rop("CheckPinned"),
    ]),
    # Many short streams, delivered, that end and leave the ring, so that
    # opening more reclaims their records; stream cursors and snapshots on them.
    "ended_streams_are_reclaimed": ring_input(4, 1, 256, [
        # The directory is swept when it reaches 16 records.
        *[rop("OpenStream") for _ in range(15)],
        *[rop("Publish", u8(i), u8(1), u8(0)) for i in range(15)],
        # Delivered first: records of streams not fully delivered are kept.
        *[rop("MarkDelivered", u8(i + 1), u8(0), boolean(True)) for i in range(14)],
        *[rop("EndStream", u8(i + 1)) for i in range(14)],
        rop("PublishMany", u8(14), u8(8), u8(1)),
        rop("OpenStream"), rop("OpenStream"), rop("OpenStream"),
        rop("Info", u8(1)), rop("SnapshotStream", u8(1), pos("Zero"), boolean(False)),
        rop("NewCursor", u8(0), boolean(True), u8(1), pos("Zero")),
        rop("MarkDelivered", u8(2), u8(0), boolean(True)),
    ]),
}

# -------------------------------------------------------- resume_decisions

HOPS = ["Create", "CreateRandom", "Remove", "Open", "End", "Publish", "Deliver", "DeliverUpTo", "Decide"]
MUTATIONS = ["Exact", "Exact2", "Exact3", "SeqUp", "SeqDown", "StreamTo", "Seq0", "SeqMax", "NsXor",
             "LeadingZero", "UpperNs", "Truncate", "Append"]


def hop(name, *fields):
    return tag(HOPS.index(name), len(HOPS)) + b"".join(fields)


def mutation(name, arg=0):
    m = tag(MUTATIONS.index(name), len(MUTATIONS))
    if name == "NsXor":
        return m + u64(arg)
    if name in ("SeqUp", "SeqDown", "StreamTo", "Truncate", "Append"):
        return m + u8(arg)
    return m


# Req selectors (see `Req` in resume_decisions.rs).
OWN_CURSOR, OTHER_CURSOR, AHEAD, CANNED, NO_CURSOR = 0, 150, 185, 205, 240
NEAR_HEAD, NEAR_OLDEST, DELIVERED_MARK, ANY = 0x0000, 0x4000, 0x8000, 0xC000


def decide(inc=0, session=0, owner=0, cursor=OWN_CURSOR, pick=NEAR_HEAD, m=None, migrate=False):
    return hop("Decide", u8(inc), u8(session), u8(owner), u8(cursor), u16(pick),
               m if m is not None else mutation("Exact"), boolean(migrate))


def resume_input(capacity, chunk_log, budget, items):
    return u8(capacity - 1) + u8(chunk_log) + u8(budget - 1) + ops(items)


# Sessions 0 (pool id 0, no owner) and 1 (pool id 1, owner "alice") exist
# before the first op.
RESUME_SEEDS = {
    # Delivered events on the standalone stream: a stream resume and a
    # migration from the newest one replay nothing; from an older one, the rest.
    "covered_resumes": resume_input(8, 2, 256, [
        hop("Publish", u8(0), u8(0), u8(4), u8(3)),
        hop("DeliverUpTo", u8(0), u8(0)),
        decide(),
        decide(migrate=True),
        decide(pick=NEAR_HEAD + 3),
        decide(pick=NEAR_HEAD + 3, migrate=True),
        decide(cursor=NO_CURSOR, migrate=True),
    ]),
    # The ring laps: resumes from before the window are refused with numbers.
    "gap_not_covered": resume_input(4, 1, 256, [
        hop("Open", u8(0)),
        hop("Publish", u8(0), u8(1), u8(3), u8(2)),
        hop("DeliverUpTo", u8(0), u8(0)),
        hop("Publish", u8(0), u8(1), u8(8), u8(2)),
        hop("DeliverUpTo", u8(0), u8(0)),
        decide(pick=ANY + 1),
        decide(pick=ANY + 1, migrate=True),
        decide(cursor=NO_CURSOR, migrate=True),
        decide(pick=NEAR_OLDEST + 2),
        decide(pick=NEAR_OLDEST + 2, migrate=True),
    ]),
    # Nothing delivered: cursors naming real events are not delivered.
    "cursor_not_delivered": resume_input(16, 3, 256, [
        hop("Open", u8(0)),
        hop("Publish", u8(0), u8(0), u8(2), u8(1)),
        hop("Publish", u8(0), u8(1), u8(2), u8(1)),
        hop("Deliver", u8(0), u8(0), u8(0), boolean(False)),
        decide(pick=NEAR_HEAD),
        decide(pick=NEAR_HEAD, migrate=True),
        decide(pick=DELIVERED_MARK, migrate=True),
    ]),
    # Re-create session 0 under the same id: the old incarnation's cursors
    # are foreign; deleting it makes the id unknown.
    "incarnations_and_deletion": resume_input(8, 2, 256, [
        hop("Publish", u8(0), u8(0), u8(3), u8(1)),
        hop("DeliverUpTo", u8(0), u8(0)),
        hop("Create", u8(0), u8(0)),
        hop("Publish", u8(2), u8(0), u8(3), u8(1)),
        hop("DeliverUpTo", u8(2), u8(0)),
        # Session 2 (the new incarnation) with a cursor of session 0 (the old one).
        decide(inc=1, session=1, cursor=OTHER_CURSOR),
        decide(inc=1, session=1, cursor=OTHER_CURSOR, migrate=True),
        # Session 1 with a cursor of session 2.
        decide(inc=0, session=1, cursor=OTHER_CURSOR),
        hop("Remove", u8(2)),
        decide(inc=200, session=0),
        decide(inc=1, session=210),
    ]),
    # Mutated and malformed cursors, ahead of head, missing session id, a
    # stranger's owner.
    "bad_cursors": resume_input(8, 2, 256, [
        hop("Publish", u8(1), u8(0), u8(3), u8(1)),
        hop("DeliverUpTo", u8(1), u8(0)),
        decide(inc=1, m=mutation("SeqUp", 1)),
        decide(inc=1, m=mutation("StreamTo", 2)),
        decide(inc=1, m=mutation("Seq0")),
        decide(inc=1, m=mutation("SeqMax"), migrate=True),
        decide(inc=1, m=mutation("NsXor", 1)),
        decide(inc=1, m=mutation("LeadingZero")),
        decide(inc=1, m=mutation("UpperNs")),
        decide(inc=1, m=mutation("Truncate", 0)),
        decide(inc=1, cursor=AHEAD),
        decide(inc=1, cursor=CANNED + 6),
        decide(inc=1, session=230),
        decide(inc=1, session=230, cursor=NO_CURSOR),
        decide(inc=1, owner=202),
        decide(inc=1, session=250),
    ]),
    # Ended streams whose events all left the ring lose their records when
    # more streams open; resumes of them are refused (allowance A2).
    "reclaimed_streams": resume_input(4, 1, 256, [
        # Standalone + 14 request streams; the 17th record triggers a sweep.
        *[hop("Open", u8(0)) for _ in range(14)],
        *[hop("Publish", u8(0), u8(i), u8(0), u8(1)) for i in range(1, 15)],
        hop("DeliverUpTo", u8(0), u8(0)),
        *[hop("End", u8(0), u8(i)) for i in range(1, 15)],
        hop("Publish", u8(0), u8(0), u8(6), u8(1)),
        hop("Open", u8(0)), hop("Open", u8(0)),
        decide(pick=ANY + 3),
        decide(pick=ANY + 3, m=mutation("StreamTo", 4)),
        decide(pick=ANY + 3, migrate=True),
    ]),
}


# ------------------------------------------------------------ http_router

HTTP_OPS = ["Initialize", "Call", "Cancel", "Notify", "Respond", "Resume", "Standalone", "Upgrade",
            "Socket", "Delete", "Raw", "ReadHeld", "DropHeld"]
READS = ["All", "Some", "Hold", "Drop"]
CALLS = ["Emit", "Hold", "Ask", "Ping", "SetLevel", "Reinit", "UnknownMethod", "UnknownTool"]
HMUTATIONS = ["Exact", "Exact2", "Exact3", "SeqUp", "SeqDown", "StreamTo", "Seq0", "NsXor", "LeadingZero",
              "UpperNs", "Truncate", "NotUtf8"]
UPGRADE_BODIES = ["Cursor", "Null", "Number", "Empty", "Extra", "Array", "NotJson"]


def hop_(name, *fields):
    return tag(HTTP_OPS.index(name), len(HTTP_OPS)) + b"".join(fields)


def who(session=0, owner=0, sid=0):
    """`sid`: < 170 the session's id, < 185 uppercased, < 200 absent, < 215
    a dead session's, < 230 not UTF-8, else garbage."""
    return u8(session) + u8(owner) + u8(sid)


def noise(level=0, a=(0, 0), b=(0, 0)):
    """`level` >= 150 bends header `a` (which % 8: accept, content type,
    protocol version, origin, host, size, content length, method)."""
    return u8(level) + u8(a[0]) + u8(a[1]) + u8(b[0]) + u8(b[1])


def read(name="All", n=0):
    r = tag(READS.index(name), len(READS))
    return r + u8(n) if name == "Some" else r


def call(name, n=0, flag=False):
    c = tag(CALLS.index(name), len(CALLS))
    if name == "Emit":
        return c + u8(n) + boolean(flag)
    if name == "Hold":
        return c + u8(n)
    if name == "SetLevel":
        return c + boolean(flag)
    return c


def hmut(name="Exact", arg=0):
    m = tag(HMUTATIONS.index(name), len(HMUTATIONS))
    if name == "NsXor":
        return m + u64(arg)
    if name in ("SeqUp", "SeqDown", "StreamTo", "Truncate"):
        return m + u8(arg)
    return m


def cursor(kind=0, pick=NEAR_HEAD, m=None):
    """`kind`: < 150 an event of the named session, < 180 of another, < 200
    ahead, < 235 canned, else absent."""
    return u8(kind) + u16(pick) + (m if m is not None else hmut())


def init(owner=0, version=0, json_only=False, n=None, r=None):
    return hop_("Initialize", u8(owner), u8(version), boolean(json_only), n or noise(), r or read())


def hcall(c, w=None, string_id=False, json_only=False, n=None, r=None):
    return hop_("Call", w or who(), c, boolean(string_id), boolean(json_only), n or noise(), r or read())


def resume(c=None, w=None, n=None, r=None):
    return hop_("Resume", w or who(), c or cursor(), n or noise(), r or read())


def standalone(w=None, n=None, r=None):
    return hop_("Standalone", w or who(), n or noise(), r or read())


def upgrade(body, w=None, n=None):
    return hop_("Upgrade", w or who(), body, n or noise())


def ubody(name, c=None):
    b = tag(UPGRADE_BODIES.index(name), len(UPGRADE_BODIES))
    return b + (c or cursor()) if name == "Cursor" else b


def http_input(capacity, items):
    # capacity = capacity % 16 + 1
    return u8(capacity - 1) + ops(items)


HTTP_SEEDS = {
    # A request stream read one chunk at a time, then resumed from its
    # newest and an older event; the held body sees its takeover.
    "resume_a_request_stream": http_input(16, [
        init(),
        hcall(call("Emit", 3), r=read("Some", 0)),
        resume(cursor(pick=NEAR_HEAD + 2)),
        hop_("ReadHeld", u8(0), u8(3)),
        resume(cursor(pick=NEAR_HEAD)),
        resume(cursor(pick=DELIVERED_MARK + 2)),
    ]),
    # Standalone events kept while no GET is open, then a GET (held), more
    # events live, a resume of the standalone stream taking it over, and a
    # second GET while one is open (stream_busy).
    "standalone_backlog_and_takeover": http_input(16, [
        init(),
        hcall(call("Emit", 4, True), json_only=True),
        standalone(r=read("Hold")),
        standalone(),
        hcall(call("Emit", 2, True)),
        hop_("ReadHeld", u8(0), u8(3)),
        resume(cursor(pick=DELIVERED_MARK)),
        hop_("ReadHeld", u8(0), u8(1)),
        standalone(r=read("Some", 1)),
    ]),
    # A small ring laps: resumes from before the window are refused with the
    # numbers; one inside it replays the rest; a lagging body ends.
    "eviction_gap": http_input(4, [
        init(),
        hcall(call("Emit", 10), r=read("Hold")),
        hop_("ReadHeld", u8(0), u8(2)),
        resume(cursor(pick=NEAR_OLDEST + 1)),
        resume(cursor(pick=NEAR_OLDEST + 3)),
        resume(cursor(pick=NEAR_HEAD)),
        upgrade(ubody("Null")),
        upgrade(ubody("Cursor", cursor(pick=NEAR_OLDEST + 3))),
    ]),
    # Held requests and a server -> client request: answered, cancelled,
    # over the in-flight cap; resumes of streams still open.
    "hold_ask_cancel": http_input(16, [
        init(),
        hcall(call("Hold", 2), r=read("Hold")),
        hcall(call("Ask"), r=read("Some", 1)),
        hcall(call("Ping")),
        hop_("Respond", who(), u8(0), boolean(False), noise()),
        hcall(call("Ask"), r=read("Hold")),
        hop_("Respond", who(), u8(0), boolean(True), noise()),
        hop_("Cancel", who(), u8(0), noise()),
        hop_("ReadHeld", u8(0), u8(3)),
        hop_("ReadHeld", u8(1), u8(3)),
        hcall(call("SetLevel", flag=True), string_id=True),
        hcall(call("SetLevel")),
        hcall(call("Reinit")),
        hcall(call("UnknownMethod")),
        hcall(call("UnknownTool")),
    ]),
    # Upgrades: every body shape, null and real cursors, five tickets (the
    # fifth over the limit), the held body ended; socket handshakes.
    "upgrade_tickets": http_input(16, [
        init(),
        hcall(call("Emit", 2), r=read("Hold")),
        upgrade(ubody("Null")),
        hop_("ReadHeld", u8(0), u8(2)),
        upgrade(ubody("Cursor", cursor(pick=NEAR_HEAD))),
        upgrade(ubody("Cursor", cursor(pick=NEAR_HEAD + 1))),
        upgrade(ubody("Cursor", cursor(kind=185))),
        upgrade(ubody("Null")),
        upgrade(ubody("Null")),
        upgrade(ubody("Number")), upgrade(ubody("Empty")), upgrade(ubody("Extra")),
        upgrade(ubody("Array")), upgrade(ubody("NotJson")),
        upgrade(ubody("Null"), w=who(sid=240)),
        hop_("Socket", who(), u8(0), noise()),
        hop_("Socket", who(), u8(230), noise()),
    ]),
    # Each header bent once, on a POST and a GET, in the guard's order.
    "guard_refusals": http_input(16, [
        init(),
        *[hcall(call("Ping"), n=noise(200, (w, v))) for w in range(8) for v in range(3)],
        *[standalone(n=noise(200, (w, v))) for w in (0, 2, 3, 4, 5, 7) for v in range(2)],
        hcall(call("Ping"), n=noise(240, (3, 7), (4, 5))),
    ]),
    # DELETE ends open bodies; the id is then stale everywhere.
    "delete_then_stale": http_input(16, [
        init(owner=1),
        init(owner=2),
        standalone(r=read("Hold")),
        hcall(call("Emit", 2), w=who(1), r=read("Hold")),
        hop_("Delete", who(), noise()),
        hop_("ReadHeld", u8(0), u8(1)),
        hcall(call("Ping"), w=who(sid=205)),
        resume(cursor(), w=who(sid=205)),
        hop_("Delete", who(sid=205), noise()),
        hcall(call("Ping"), w=who(owner=200)),
        hcall(call("Ping"), w=who(sid=175)),
        hcall(call("Ping"), w=who(sid=220)),
        resume(cursor(), w=who(sid=190)),
    ]),
    # JSON-only clients: their events count as delivered, so resumes from
    # them are granted; an undelivered cursor (dropped SSE body) is not.
    "json_only_and_undelivered": http_input(16, [
        init(json_only=True),
        hcall(call("Emit", 3), json_only=True),
        resume(cursor(pick=NEAR_HEAD + 1)),
        hcall(call("Emit", 3), r=read("Drop")),
        resume(cursor(pick=NEAR_HEAD)),
        upgrade(ubody("Cursor", cursor(pick=NEAR_HEAD))),
        resume(cursor(kind=160)),
        resume(cursor(kind=210, pick=3)),
        resume(cursor(m=hmut("StreamTo", 1))),
        resume(cursor(m=hmut("NotUtf8"))),
        resume(cursor(m=hmut("NsXor", 1))),
    ]),
    # The session limit (5), then one more.
    "too_many_sessions": http_input(16, [init(version=v) for v in range(6)] + [
        hop_("Delete", who(), noise()), init(json_only=True),
    ]),
}


# Hand-written regressions (fuzz/regressions/<target>/<bug-id>-N), replayed
# strictly by `scripts/fuzz.sh replay`.
REGRESSIONS = {
    "http_router": {
        # A one-event ring: initialize's response evicts its priming event
        # before the SSE body subscribes; the server answered 404
        # unknown_session for the session it had just created.
        "initialize-one-event-ring-1": http_input(1, [init()]),
    },
    "resume_decisions": {
        # Request stream 2 gets seq 1, never delivered, and ends; the
        # standalone stream gets 2..=8, all delivered; capacity 4 evicts 1..=4;
        # opening the 17th stream reclaims stream 2's record. A migration to
        # cursor 8 (inside the window: oldest is 5) must be refused as
        # CursorNotDelivered (seq 1 <= 8 was never delivered); the engine
        # grants it (Resume, empty replay).
        "migration-reclaimed-undelivered-1": resume_input(4, 1, 256, [
            *[hop("Open", u8(0)) for _ in range(14)],
            hop("Publish", u8(0), u8(1), u8(0), u8(1)),
            *[hop("End", u8(0), u8(i)) for i in range(1, 15)],
            hop("Publish", u8(0), u8(0), u8(6), u8(1)),
            hop("Deliver", u8(0), u8(0), u8(6), boolean(False)),
            hop("Open", u8(0)), hop("Open", u8(0)),
            decide(pick=NEAR_HEAD, migrate=True),
        ]),
        # As above, but the transport reports seq 1 delivered (through the
        # stream's handle) after the record was reclaimed: every event up to
        # 8 was delivered, so the migration must be granted (empty replay);
        # the engine still refuses it as CursorNotDelivered { undelivered: 1 }.
        "late-delivery-after-reclaim-1": resume_input(4, 1, 256, [
            *[hop("Open", u8(0)) for _ in range(14)],
            hop("Publish", u8(0), u8(1), u8(0), u8(1)),
            *[hop("End", u8(0), u8(i)) for i in range(1, 15)],
            hop("Publish", u8(0), u8(0), u8(6), u8(1)),
            hop("Deliver", u8(0), u8(0), u8(6), boolean(False)),
            hop("Open", u8(0)), hop("Open", u8(0)),
            hop("Deliver", u8(0), u8(1), u8(0), boolean(True)),
            decide(pick=NEAR_HEAD, migrate=True),
        ]),
    },
}


def write(target, seeds, kind="corpus"):
    d = os.path.join(HERE, kind, target)
    os.makedirs(d, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)


WIRE_SEEDS = {
    "our_id": b"00ab34ff9c01de77_3-42",
    "max_numbers": b"ffffffffffffffff_18446744073709551615-18446744073709551615",
    "seq_zero": b"0000000000000000_1-0",
    "foreign_numeric": b"1-5",
    "foreign_upper_ns": b"00AB34FF9C01DE77_3-42",
    "stream_zero": b"00ab34ff9c01de77_0-42",
    "leading_zero": b"00ab34ff9c01de77_3-042",
    "overflow": b"00ab34ff9c01de77_3-18446744073709551616",
    "two_dashes": b"00ab34ff9c01de77_3--42",
    "tag_41": b"a" * 41 + b"-1",
    "len_129": b"a" * 40 + b"-" + b"9" * 88,
    "unicode": "\u00e9-5".encode(),
    "invalid_utf8": b"ab\xff-5",
    "session_id": b"000102030405060708090a0b0c0d0e0f",
    "session_id_upper": b"000102030405060708090A0B0C0D0E0F",
    "error_kind": b"gap_not_covered",
    "empty": b"",
}

if __name__ == "__main__":
    write("ring_ops", RING_SEEDS)
    write("resume_decisions", RESUME_SEEDS)
    write("wire_parsing", WIRE_SEEDS)
    write("http_router", HTTP_SEEDS)
    for target, seeds in REGRESSIONS.items():
        write(target, seeds, kind="regressions")
    print("wrote", len(RING_SEEDS), "+", len(RESUME_SEEDS), "+", len(WIRE_SEEDS), "+", len(HTTP_SEEDS), "seeds")
