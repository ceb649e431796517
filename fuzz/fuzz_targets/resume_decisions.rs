//! Arbitrary session histories on a `gapless::Hub` (sessions created,
//! re-created under the same id, deleted; events published on several
//! streams including the standalone one; deliveries marked), interleaved
//! with resume and migration requests built from real event ids (exact,
//! mutated, of other sessions or older incarnations, ahead of head) and from
//! garbage. Every `Hub::resume_stream` and `Hub::check_migration` is compared with the reference decision table
//! in `gapless_fuzz::decide`, computed from the full recorded history.
#![no_main]

use arbitrary::Arbitrary;
use bytes::Bytes;
use gapless::{
    Event, EventId, Hub, HubConfig, Refusal, Resume, ResumeRequest, RingConfig, Seq, Session,
    SessionId, SessionPublishError, StreamHandle, StreamId,
};
use gapless_fuzz::decide::{self, Expected, Outcome, RefSession, Target};
use gapless_fuzz::model_ring::{MPublishError, ModelRing};
use gapless_fuzz::wire;
use libfuzzer_sys::fuzz_target;
use std::sync::Arc;
use std::time::Duration;

#[derive(Arbitrary, Debug)]
enum HOp {
    Create {
        slot: u8,
        owner: u8,
    },
    CreateRandom {
        owner: u8,
    },
    Remove {
        inc: u8,
    },
    Open {
        inc: u8,
    },
    End {
        inc: u8,
        stream: u8,
    },
    Publish {
        inc: u8,
        stream: u8,
        n: u8,
        len: u8,
    },
    Deliver {
        inc: u8,
        stream: u8,
        pick: u8,
        via_handle: bool,
    },
    /// Marks every stream delivered up to `head - back`.
    DeliverUpTo {
        inc: u8,
        back: u8,
    },
    Decide(Req),
}

/// A resume request. The byte fields are biased selectors (see
/// `World::decide`), so that most requests name a live session with its own
/// owner and a cursor near something interesting.
#[derive(Arbitrary, Debug)]
struct Req {
    /// The incarnation the request is about: < 200 a live one, else any.
    inc: u8,
    /// < 200: an incarnation's id; < 220: its id uppercased; < 236: absent;
    /// else a garbage id.
    session: u8,
    /// < 200: the session's own owner; else one of `OWNERS`.
    owner: u8,
    /// < 150: an event of the named session; < 185: of another incarnation;
    /// < 205: ahead of the named session's head; < 230: canned string;
    /// else absent.
    cursor: u8,
    /// Which event: < 0x4000 near head; < 0x8000 near oldest; < 0xc000 a
    /// stream's delivered mark; else any.
    pick: u16,
    mutation: Mutation,
    migrate: bool,
}

/// How a real event id is bent before it is sent.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Mutation {
    Exact,
    Exact2,
    Exact3,
    SeqUp(u8),
    SeqDown(u8),
    StreamTo(u8),
    Seq0,
    SeqMax,
    NsXor(u64),
    LeadingZero,
    UpperNs,
    Truncate(u8),
    Append(u8),
}

#[derive(Arbitrary, Debug)]
struct Input {
    capacity: u8,
    chunk_log: u8,
    budget: u8,
    ops: Vec<HOp>,
}

const OWNERS: [Option<&str>; 3] = [None, Some("alice"), Some("bob")];
const POOL: [&str; 3] = [
    "000102030405060708090a0b0c0d0e0f",
    "abababababababababababababababab",
    "1234567890123456789012345678901a",
];
const MAX_INCS: usize = 10;
const MAX_STREAMS: usize = 24;

/// One incarnation of a session id, with its full history.
struct Inc {
    id: SessionId,
    id_str: String,
    owner: Option<&'static str>,
    session: Arc<Session>,
    ns: u64,
    live: bool,
    handles: Vec<StreamHandle>,
    model: ModelRing,
}

struct World {
    hub: Hub,
    incs: Vec<Inc>,
    capacity: usize,
    budget: usize,
    payloads: u64,
}

impl World {
    fn pick(&self, k: u8) -> Option<usize> {
        (!self.incs.is_empty()).then(|| usize::from(k) % self.incs.len())
    }

    fn live_count(&self) -> usize {
        self.incs.iter().filter(|i| i.live).count()
    }

    /// Kills the live incarnation under `id_str`, as `Session::close` does:
    /// every stream with a record ends.
    fn kill(&mut self, id_str: &str) -> bool {
        let mut killed = false;
        for inc in self.incs.iter_mut().filter(|i| i.live && i.id_str == id_str) {
            inc.live = false;
            for st in &mut inc.model.streams {
                st.ended = true;
            }
            assert!(inc.session.is_closed(), "a replaced or deleted session is closed");
            killed = true;
        }
        killed
    }

    fn add(&mut self, session: Arc<Session>, owner: Option<&'static str>) {
        let id_str = session.id().to_string();
        assert!(wire::session_id(&id_str), "session id {id_str:?} is 32 lowercase hex digits");
        assert_eq!(SessionId::parse(&id_str), Some(session.id()));
        self.kill(&id_str);
        let mut model = ModelRing::new(self.capacity, self.budget);
        assert_eq!(model.open(), 1);
        let standalone = session.standalone().clone();
        assert_eq!(standalone.id(), StreamId(1), "the standalone stream is the first");
        let ns = session.namespace().0;
        assert!(
            self.incs.iter().all(|i| i.ns != ns),
            "a new incarnation reuses a namespace (64 random bits collided?)"
        );
        self.incs.push(Inc {
            id: session.id(),
            id_str,
            owner,
            session,
            ns,
            live: true,
            handles: vec![standalone],
            model,
        });
    }

    fn payload(&mut self, len: u8) -> Bytes {
        self.payloads += 1;
        let c = self.payloads as u8;
        Bytes::from((0..usize::from(len % 33)).map(|i| c ^ i as u8).collect::<Vec<u8>>())
    }

    fn publish(&mut self, i: usize, stream: u8, len: u8) {
        let payload = self.payload(len);
        let inc = &mut self.incs[i];
        let id = u64::from(stream) % inc.handles.len() as u64 + 1;
        let h = &inc.handles[(id - 1) as usize];
        let got = inc.session.publish(h, payload.clone());
        if !inc.live {
            assert_eq!(got, Err(SessionPublishError::Closed), "publish on a closed session");
            return;
        }
        let refusals = inc.model.refusals(id, payload.len());
        match got {
            Ok(seq) => {
                assert!(refusals.is_empty(), "publish accepted, model refuses: {refusals:?}");
                assert_eq!(seq, Seq(inc.model.publish(id, payload)), "published seq");
            }
            Err(SessionPublishError::Publish(e)) => {
                let ok = refusals.iter().any(|r| match (r, e) {
                    (MPublishError::Ended, gapless::ring::PublishError::StreamEnded { stream }) => {
                        stream == StreamId(id)
                    }
                    (MPublishError::TooLarge, gapless::ring::PublishError::PayloadTooLarge { .. }) => true,
                    _ => false,
                });
                assert!(ok, "publish refused with {e:?}, model: {refusals:?}");
            }
            Err(e) => panic!("publish on a live session: {e:?}"),
        }
        let r = inc.session.reader();
        assert_eq!((r.head(), r.oldest()), (Seq(inc.model.head()), Seq(inc.model.oldest())), "head, oldest");
    }

    fn deliver(&mut self, i: usize, seq: u64, via_handle: bool) {
        let inc = &mut self.incs[i];
        let e = inc.model.event(seq);
        let ev = Event {
            seq: Seq(seq),
            stream: StreamId(e.stream),
            index_in_stream: e.index,
            payload: Bytes::new(),
        };
        let reclaimed = inc.model.stream(e.stream).reclaimed;
        if via_handle {
            assert!(inc.handles[(e.stream - 1) as usize].mark_delivered(&ev));
            inc.model.deliver(seq);
        } else {
            assert_eq!(inc.session.reader().mark_delivered(&ev), !reclaimed, "Reader::mark_delivered");
            if !reclaimed {
                inc.model.deliver(seq);
            }
        }
    }

    /// Learns which stream records the engine reclaimed, checking that each
    /// was allowed to go (ended, every event evicted) and none came back.
    fn sync_records(&mut self) {
        for inc in &mut self.incs {
            let r = inc.session.reader();
            let oldest = inc.model.oldest();
            for id in 1..=inc.handles.len() as u64 {
                let st = inc.model.stream_mut(id);
                match r.stream(StreamId(id)) {
                    Some(info) => {
                        assert!(!st.reclaimed, "stream {id}'s record came back");
                        assert_eq!(
                            (info.first, info.high, info.published, info.delivered, info.ended),
                            (
                                Seq(st.first()),
                                Seq(st.high()),
                                st.seqs.len() as u64,
                                Seq(st.delivered),
                                st.ended
                            ),
                            "stream {id} record"
                        );
                    }
                    None => {
                        assert!(st.reclaimable(oldest), "stream {id} reclaimed too early: {st:?}");
                        // Fewer than 256 streams: records of streams not
                        // fully delivered are kept (producer.rs open_stream).
                        assert!(
                            st.reclaimed || st.delivered >= st.high(),
                            "stream {id} reclaimed undelivered: {st:?}"
                        );
                        if !st.reclaimed {
                            st.reclaimed = true;
                            st.delivered_at_reclaim = st.delivered;
                        }
                    }
                }
            }
        }
        assert_eq!(self.hub.len(), self.live_count(), "live sessions");
    }

    /// A seq of incarnation `i` picked by `pick` (see `Req::pick`).
    fn pick_seq(&self, i: usize, pick: u16) -> u64 {
        let m = &self.incs[i].model;
        let (head, oldest) = (m.head(), m.oldest());
        if head == 0 {
            return 1;
        }
        let k = u64::from(pick & 0x3fff);
        let seq = match pick >> 14 {
            0 => head.saturating_sub(k % 8),
            1 => (oldest + k % 6).saturating_sub(3),
            2 => m.streams[(k % m.streams.len() as u64) as usize].delivered,
            _ => k % head + 1,
        };
        seq.clamp(1, head)
    }

    fn cursor_string(&self, req: &Req, named: Option<usize>) -> Option<String> {
        let canned = |k: u16| {
            let canned = [
                String::new(),
                "abc-5".into(),
                "1-5".into(),
                "-".into(),
                "0000000000000000_1-0".into(),
                "0000000000000000_1-1".into(),
                "a".repeat(129),
                format!("{}-1", "a".repeat(41)),
                " 0000000000000000_1-1".into(),
                "0000000000000000_0-1".into(),
                "0000000000000000_01-1".into(),
                "0000000000000000_1-01".into(),
                "0000000000000000_1--1".into(),
                "0000000000000000_1-18446744073709551616".into(),
                "0000000000000000_1-1\n".into(),
                "\u{e9}-1".into(),
            ];
            canned[usize::from(k) % canned.len()].clone()
        };
        let other = || self.pick(req.inc.wrapping_add(req.session).wrapping_add(1));
        let i = match req.cursor {
            0..=149 => named.or_else(other)?,
            150..=184 => other()?,
            185..=204 => {
                let i = named.or_else(other)?;
                let inc = &self.incs[i];
                let sid = u64::from(req.pick) % inc.handles.len() as u64 + 1;
                return Some(wire::format(inc.ns, sid, inc.model.head() + 1 + u64::from(req.pick >> 14)));
            }
            205..=229 => return Some(canned(req.pick)),
            _ => return None,
        };
        let inc = &self.incs[i];
        let seq = self.pick_seq(i, req.pick);
        let stream = if inc.model.head() == 0 { 1 } else { inc.model.event(seq).stream };
        let mut ns = inc.ns;
        let (mut stream, mut seq) = (stream, seq);
        let m = req.mutation;
        match m {
            Mutation::SeqUp(d) => seq += u64::from(d % 6) + 1,
            Mutation::SeqDown(d) => seq = seq.saturating_sub(u64::from(d % 6) + 1),
            Mutation::StreamTo(s) => stream = u64::from(s % 30),
            Mutation::Seq0 => seq = 0,
            Mutation::SeqMax => seq = u64::MAX,
            Mutation::NsXor(x) => ns ^= x,
            _ => {}
        }
        let s = wire::format(ns, stream, seq);
        Some(match m {
            Mutation::LeadingZero => format!("{ns:016x}_{stream}-0{seq}"),
            Mutation::UpperNs => format!("{ns:016X}_{stream}-{seq}"),
            Mutation::Truncate(n) => s[..s.len().saturating_sub(usize::from(n % 4) + 1)].to_owned(),
            Mutation::Append(b) => format!("{s}{}", char::from(b'!' + b % 90)),
            _ => s,
        })
    }

    fn decide(&mut self, req: &Req) {
        self.sync_records();
        // Mostly a live incarnation; sometimes any (deleted, replaced).
        let live: Vec<usize> = (0..self.incs.len()).filter(|&i| self.incs[i].live).collect();
        let named = if req.inc < 200 && !live.is_empty() {
            Some(live[usize::from(req.inc) % live.len()])
        } else {
            self.pick(req.inc)
        };
        let session_id: Option<String> = match req.session {
            0..=199 => named.map(|i| self.incs[i].id_str.clone()),
            200..=219 => named.map(|i| self.incs[i].id_str.to_uppercase()),
            220..=235 => None,
            k => Some(
                ["", "x", "00", &"0".repeat(32), &"g".repeat(32), &"a".repeat(33)][usize::from(k) % 6]
                    .to_owned(),
            ),
        };
        let owner = match (req.owner, named) {
            (0..=199, Some(i)) => self.incs[i].owner,
            (k, _) => OWNERS[usize::from(k) % OWNERS.len()],
        };
        let cursor = self.cursor_string(req, named);
        let target = if req.migrate { Target::Session } else { Target::Stream };
        // The session the id names for this caller: exact string, same owner, alive.
        let found: Vec<&Inc> = match &session_id {
            Some(sid) => {
                self.incs.iter().filter(|i| i.live && &i.id_str == sid && i.owner == owner).collect()
            }
            None => Vec::new(),
        };
        assert!(found.len() <= 1, "two live incarnations under one id");
        let found = found.first().copied();
        let expected = decide::decide(
            session_id.as_deref(),
            found.map(|i| RefSession { ns: i.ns, ring: &i.model }),
            cursor.as_deref(),
            target,
        );
        let req = ResumeRequest { session_id: session_id.as_deref(), cursor: cursor.as_deref(), owner };
        let got = match target {
            Target::Session => self.hub.check_migration(req),
            Target::Stream => self.hub.resume_stream(req),
        };
        if !expected.any_of.iter().any(|o| matches(o, &got, found, cursor.as_deref())) {
            let history = found.map(|i| describe(&i.model));
            panic!(
                "decision diverges\n  session {session_id:?} (owner {owner:?}), cursor {cursor:?}, target {target:?}\n  \
                 expected one of {:?}\n  engine {}\n  history {}",
                expected.any_of,
                show(&got),
                history.unwrap_or_default()
            );
        }
        check_consistency(&expected);
        if std::env::var_os("GAPLESS_FUZZ_STATS").is_some() {
            // Which rows the corpus reaches (scripts/fuzz.sh stats).
            let allowance = if expected.any_of.len() > 1 { " (allowance)" } else { "" };
            eprintln!(
                "STAT {:?} {}{allowance}",
                target,
                show(&got).split([' ', '(', '{']).next().unwrap_or("")
            );
        }
    }

    fn apply(&mut self, op: HOp) {
        match op {
            HOp::Create { slot, owner } => {
                if self.incs.len() >= MAX_INCS {
                    return;
                }
                let id = SessionId::parse(POOL[usize::from(slot) % POOL.len()]).unwrap();
                let owner = OWNERS[usize::from(owner) % OWNERS.len()];
                let s = self.hub.create_with_id(id, owner).expect("below the session limit");
                assert_eq!(s.id(), id);
                self.add(s, owner);
            }
            HOp::CreateRandom { owner } => {
                if self.incs.len() >= MAX_INCS {
                    return;
                }
                let owner = OWNERS[usize::from(owner) % OWNERS.len()];
                let s = self.hub.create(owner).expect("below the session limit");
                self.add(s, owner);
            }
            HOp::Remove { inc } => {
                let Some(i) = self.pick(inc) else { return };
                let (id, id_str) = (self.incs[i].id, self.incs[i].id_str.clone());
                let removed = self.hub.remove(&id);
                let live =
                    self.incs.iter().find(|x| x.live && x.id_str == id_str).map(|x| Arc::clone(&x.session));
                match (removed, live) {
                    (Some(r), Some(l)) => assert!(Arc::ptr_eq(&r, &l), "removed another incarnation"),
                    (None, None) => {}
                    (r, l) => panic!("remove: engine {:?}, model {:?}", r.is_some(), l.is_some()),
                }
                self.kill(&id_str);
            }
            HOp::Open { inc } => {
                let Some(i) = self.pick(inc) else { return };
                let inc = &mut self.incs[i];
                if inc.handles.len() >= MAX_STREAMS {
                    return;
                }
                match inc.session.open_stream() {
                    Ok(h) => {
                        assert!(inc.live, "opened a stream on a closed session");
                        assert_eq!(h.id(), StreamId(inc.model.open()), "stream ids are dense");
                        inc.handles.push(h);
                    }
                    Err(e) => {
                        assert!(!inc.live, "open_stream on a live session: {e:?}");
                        assert_eq!(e, SessionPublishError::Closed);
                    }
                }
            }
            HOp::End { inc, stream } => {
                let Some(i) = self.pick(inc) else { return };
                let inc = &mut self.incs[i];
                let id = u64::from(stream) % inc.handles.len() as u64 + 1;
                let got = inc.session.end_stream(&inc.handles[(id - 1) as usize]);
                if inc.live {
                    assert_eq!(got, Ok(()));
                    inc.model.stream_mut(id).ended = true;
                } else {
                    assert_eq!(got, Err(SessionPublishError::Closed));
                }
            }
            HOp::Publish { inc, stream, n, len } => {
                let Some(i) = self.pick(inc) else { return };
                for k in 0..=(n % 12) {
                    self.publish(i, stream, len.wrapping_add(k.wrapping_mul(5)));
                }
            }
            HOp::Deliver { inc, stream, pick, via_handle } => {
                let Some(i) = self.pick(inc) else { return };
                let m = &self.incs[i].model;
                let id = u64::from(stream) % m.streams.len() as u64 + 1;
                let seqs = &m.stream(id).seqs;
                if seqs.is_empty() {
                    return;
                }
                let seq = seqs[usize::from(pick) % seqs.len()];
                self.deliver(i, seq, via_handle);
            }
            HOp::DeliverUpTo { inc, back } => {
                let Some(i) = self.pick(inc) else { return };
                let m = &self.incs[i].model;
                let upto = m.head().saturating_sub(u64::from(back % 8));
                let last: Vec<u64> = (1..=m.streams.len() as u64)
                    .filter_map(|s| m.stream(s).seqs.iter().copied().rfind(|&q| q <= upto))
                    .collect();
                for seq in last {
                    self.deliver(i, seq, false);
                }
            }
            HOp::Decide(req) => self.decide(&req),
        }
    }
}

/// What the engine answered.
type Decision = Result<Resume, Refusal>;

/// Whether the engine's decision is the reference outcome `o`.
fn matches(o: &Outcome, got: &Decision, found: Option<&Inc>, cursor: Option<&str>) -> bool {
    let cursor_id = |c: &EventId| Some(c.to_string().as_str()) == cursor;
    match (o, got) {
        (Outcome::RequiresSession, Err(Refusal::ResumeRequiresSession)) => true,
        (Outcome::Unknown, Err(Refusal::UnknownSession)) => true,
        (Outcome::Malformed, Err(Refusal::MalformedCursor { .. })) => true,
        (Outcome::Mismatch, Err(Refusal::NamespaceMismatch { cursor: c })) => {
            Some(c.as_str()) == cursor
        }
        (Outcome::Ahead { head }, Err(Refusal::CursorAhead { cursor: c, head: h })) => {
            *h == Seq(*head) && cursor_id(c)
        }
        (
            Outcome::NotDelivered { witnesses },
            Err(Refusal::CursorNotDelivered { cursor: c, undelivered }),
        ) => cursor_id(c) && undelivered.is_none_or(|u| witnesses.contains(&u.0)),
        (
            Outcome::Gap { oldest, missing },
            Err(Refusal::GapNotCovered { cursor: c, oldest: o, oldest_id, missing: m }),
        ) => {
            let Some(inc) = found else { return false };
            let want_oldest_id = inc.model.retained(*oldest).then(|| {
                EventId::new(
                    gapless::Namespace(inc.ns),
                    StreamId(inc.model.event(*oldest).stream),
                    Seq(*oldest),
                )
            });
            *o == Seq(*oldest)
                && missing.accepts(*m)
                && c.as_ref().map(|c| c.to_string()).as_deref() == cursor
                && *oldest_id == want_oldest_id
        }
        (Outcome::Resume { after, stream, seqs }, Ok(r)) => {
            let Some(inc) = found else { return false };
            let got: Vec<u64> = r.snapshot.iter().map(|e| e.seq.0).collect();
            let events_ok = r.snapshot.iter().all(|e| {
                let m = inc.model.event(e.seq.0);
                e.stream == StreamId(m.stream) && *e.payload == m.payload && e.index_in_stream == m.index
            });
            Arc::ptr_eq(&r.session, &inc.session)
                && r.after == Seq(*after)
                && r.stream == stream.map(StreamId)
                && r.cursor.as_ref().map(|c| c.to_string()).as_deref() == cursor
                && got == *seqs
                && events_ok
                && r.snapshot.len() == seqs.len()
                && r.snapshot.first() == seqs.first().map(|&s| Seq(s))
                && r.snapshot.last() == seqs.last().map(|&s| Seq(s))
        }
        _ => false,
    }
}

/// The reference never offers two different resumes: where it grants one,
/// the replay is fully determined.
fn check_consistency(e: &Expected) {
    let resumes = e.any_of.iter().filter(|o| matches!(o, Outcome::Resume { .. })).count();
    assert!(resumes <= 1, "reference offers two resumes: {:?}", e.any_of);
}

fn show(d: &Decision) -> String {
    match d {
        Err(r) => format!("{r:?}"),
        Ok(r) => format!(
            "Resume {{ after: {:?}, stream: {:?}, seqs: {:?} }}",
            r.after,
            r.stream,
            r.snapshot.iter().map(|e| e.seq.0).collect::<Vec<_>>()
        ),
    }
}

fn describe(m: &ModelRing) -> String {
    let mut s = format!("oldest {} head {}; events:", m.oldest(), m.head());
    for e in &m.hist {
        s += &format!(" {}@{}", e.seq, e.stream);
    }
    s += "; streams:";
    for (i, st) in m.streams.iter().enumerate() {
        s += &format!(
            " [{}: delivered {} ended {} reclaimed {}]",
            i + 1,
            st.delivered,
            st.ended,
            st.reclaimed
        );
    }
    s
}

fuzz_target!(|input: Input| {
    let capacity = usize::from(input.capacity % 16) + 1;
    let chunk_events = 1usize << (input.chunk_log % 4);
    let byte_budget = usize::from(input.budget) + 1;
    let config = HubConfig {
        ring: RingConfig { capacity, byte_budget, chunk_events },
        max_sessions: 64,
        idle_timeout: Duration::from_secs(24 * 3600),
        ..HubConfig::default()
    };
    let mut w = World {
        hub: Hub::new(config).unwrap(),
        incs: Vec::new(),
        capacity,
        budget: byte_budget,
        payloads: 0,
    };
    // Two sessions to start with, so that short inputs reach the deep rows.
    w.apply(HOp::Create { slot: 0, owner: 0 });
    w.apply(HOp::Create { slot: 1, owner: 1 });
    for op in input.ops {
        w.apply(op);
        w.sync_records();
    }
    w.sync_records();
});
