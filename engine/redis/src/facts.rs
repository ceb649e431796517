//! The decision table's facts as one script call read them
//! ([`RedisFacts`], `lua/facts.lua`), and what a granted resume replays
//! ([`ReplayPlan`]).

use crate::error::StoreError;
use crate::reply::{hex, int, text};
use gapless::ring::gap::{self, FirstRetained, Pending, StreamMarks};
use gapless::ring::{SnapshotError, StreamInfo};
use gapless::session::{Entry, SessionFacts};
use gapless::{Namespace, Seq, StreamId};
use redis::Value;

/// A stream record as the store keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Record {
    first: u64,
    high: u64,
    published: u64,
    delivered: u64,
    delivered_index: u64,
    ended: bool,
}

impl Record {
    fn parse(s: &str) -> Result<Self, StoreError> {
        let f: Vec<u64> = s.split(' ').map(str::parse).collect::<Result<_, _>>().map_err(|_| bad(s))?;
        match f[..] {
            [first, high, published, delivered, delivered_index, ended] if ended <= 1 => {
                Ok(Record { first, high, published, delivered, delivered_index, ended: ended == 1 })
            }
            _ => Err(bad(s)),
        }
    }

    fn info(&self, id: StreamId) -> StreamInfo {
        StreamInfo {
            id,
            first: Seq(self.first),
            high: Seq(self.high),
            published: self.published,
            delivered: Seq(self.delivered),
            ended: self.ended,
        }
    }
}

fn bad(s: &str) -> StoreError {
    StoreError::Protocol(format!("malformed stream record {s:?}"))
}

/// The cursor's stream: its id, its record if kept, its tombstone if kept.
type CursorStream = (StreamId, Option<Record>, Option<(Seq, Seq)>);

/// One session's facts for one cursor, read in one atomic script call:
/// what `gapless::session::decide` asks of the cursor's seq, of the
/// window's oldest event, of the cursor's stream, and (for a migration)
/// of every stream record and the retained window's stream links.
#[derive(Clone, Debug)]
pub struct RedisFacts {
    ns: Namespace,
    head: u64,
    oldest: u64,
    opened: u64,
    reclaimed_undelivered: Option<Seq>,
    /// The retained events the table may ask about: the cursor's and the
    /// oldest.
    entries: Vec<(u64, Entry)>,
    /// The cursor's stream's record and tombstone.
    stream: Option<CursorStream>,
    first_retained: Option<FirstRetained>,
    /// Every stream record (migrations).
    records: Vec<(StreamId, Record)>,
    /// `(seq, stream, prev_in_stream)` of the window (migrations with
    /// undelivered streams).
    window: Vec<(u64, StreamId, u64)>,
    /// The highest seq a node saw that the store no longer has.
    lost_up_to: u64,
    /// The nonce of the event at the head, if retained.
    head_check: Option<u64>,
}

/// What a granted resume replays: the events after `after` up to `to`
/// (of `stream` only, if given), to be read with `RedisStore::replay`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplayPlan {
    /// The cursor's seq.
    pub after: Seq,
    /// The first seq to read: `after + 1`, or the window's oldest when the
    /// decision proved the seqs below it were of other streams.
    pub from: Seq,
    /// The last seq to read (the store's head when decided, or `after`
    /// for an empty replay).
    pub to: Seq,
    /// The store's head when decided: a node whose replica is ahead of it
    /// holds events the store lost (a failover).
    pub head: Seq,
    /// The stream, for a stream resume.
    pub stream: Option<StreamId>,
    /// The incarnation decided on: a replay that finds another one (the
    /// session deleted and created again meanwhile) reads nothing of it.
    pub ns: Namespace,
    /// The nonce of the event at `head` when decided: a replay, or a
    /// replica going live after `head`, that finds another event there
    /// follows a log a failover rewrote after the decision.
    pub head_check: Option<u64>,
}

fn array(v: &Value) -> Result<&[Value], StoreError> {
    match v {
        Value::Array(a) => Ok(a),
        other => Err(StoreError::Protocol(format!("expected an array, got {other:?}"))),
    }
}

fn opt_text(v: &Value) -> Result<Option<String>, StoreError> {
    let s = text(v)?;
    Ok((!s.is_empty()).then_some(s))
}

/// Parses `lua/facts.lua`'s `ok` answer.
/// `cursor` is the seq and stream the call asked about.
pub(crate) fn parse(r: &[Value], cursor: Option<(Seq, StreamId)>) -> Result<RedisFacts, StoreError> {
    if r.len() != 20 {
        return Err(StoreError::Protocol(format!("facts answered {} items", r.len())));
    }
    let n = |i: usize| int(r.get(i));
    let ru = int(r.get(5)).ok();
    let mut entries = Vec::new();
    let mut entry = |stream: u64, nonce: &Value, seq: u64| -> Result<(), StoreError> {
        if stream > 0 {
            entries.push((seq, Entry { stream: StreamId(stream), check: Some(hex(Some(nonce))?) }));
        }
        Ok(())
    };
    let (head, oldest) = (n(2)?, n(3)?);
    // `q_stream` is 0 unless the cursor's seq is retained.
    entry(n(6)?, &r[7], cursor.map_or(0, |c| c.0 .0))?;
    entry(n(8)?, &r[9], oldest)?;
    let stream = match cursor.map(|c| c.1) {
        Some(s) => {
            let rec = opt_text(&r[10])?.map(|t| Record::parse(&t)).transpose()?;
            let tomb = match opt_text(&r[11])? {
                Some(t) => {
                    let (a, b) = t.split_once(' ').ok_or_else(|| bad(&t))?;
                    Some((Seq(a.parse().map_err(|_| bad(&t))?), Seq(b.parse().map_err(|_| bad(&t))?)))
                }
                None => None,
            };
            Some((s, rec, tomb))
        }
        None => None,
    };
    let fr = n(12)?;
    let first_retained = (fr > 0)
        .then(|| -> Result<_, StoreError> { Ok(FirstRetained { seq: fr, index: n(13)?, prev: n(14)? }) });
    let first_retained = first_retained.transpose()?;
    let mut records = Vec::new();
    for pair in array(&r[15])?.chunks(2) {
        let [id, rec] = pair else { return Err(StoreError::Protocol("odd record list".into())) };
        records.push((StreamId(int(Some(id))?), Record::parse(&text(rec)?)?));
    }
    let mut window = Vec::new();
    for t in array(&r[16])?.chunks(3) {
        let [seq, stream, prev] = t else { return Err(StoreError::Protocol("ragged window".into())) };
        window.push((int(Some(seq))?, StreamId(int(Some(stream))?), int(Some(prev))?));
    }
    Ok(RedisFacts {
        ns: Namespace(hex(r.get(1))?),
        head,
        oldest,
        opened: n(4)?,
        reclaimed_undelivered: ru.map(Seq),
        entries,
        stream,
        first_retained,
        records,
        window,
        lost_up_to: int(r.get(18))?,
        head_check: match r.get(19).map(text).transpose()? {
            Some(h) if !h.is_empty() => Some(hex(r.get(19))?),
            _ => None,
        },
    })
}

impl RedisFacts {
    fn record(&self, id: StreamId) -> Option<Record> {
        if let Some((s, rec, _)) = &self.stream {
            if *s == id {
                return *rec;
            }
        }
        self.records.iter().find(|(s, _)| *s == id).map(|(_, r)| *r)
    }
}

impl SessionFacts for RedisFacts {
    type Replay = ReplayPlan;

    fn namespace(&self) -> Namespace {
        self.ns
    }

    fn streams_opened(&self) -> u64 {
        self.opened
    }

    fn head(&self) -> Seq {
        Seq(self.head)
    }

    fn oldest(&self) -> Seq {
        Seq(self.oldest)
    }

    fn entry(&self, seq: Seq) -> Option<Entry> {
        self.entries.iter().find(|(s, _)| *s == seq.0).map(|(_, e)| *e)
    }

    fn stream(&self, id: StreamId) -> Option<StreamInfo> {
        self.record(id).map(|r| r.info(id))
    }

    fn tombstone(&self, id: StreamId) -> Option<(Seq, Seq)> {
        match &self.stream {
            Some((s, _, tomb)) if *s == id => *tomb,
            _ => None,
        }
    }

    fn first_undelivered_at_or_below(&self, c: Seq) -> Option<Seq> {
        let pending: Vec<Pending> = self
            .records
            .iter()
            .filter(|(_, r)| r.high > r.delivered)
            .map(|(id, r)| Pending { id: *id, delivered: r.delivered, high: r.high })
            .collect();
        gap::first_undelivered_at_or_below(
            c,
            &pending,
            self.oldest,
            self.reclaimed_undelivered,
            self.window.iter().copied(),
        )
    }

    fn replay_stream(&self, stream: StreamId, after: Seq) -> Result<ReplayPlan, SnapshotError> {
        let rec = self.record(stream).ok_or(SnapshotError::UnknownStream { stream })?;
        let to = self.head.max(rec.high);
        if after.0 > to {
            return Err(SnapshotError::Ahead { head: Seq(to) });
        }
        let marks = StreamMarks {
            high: rec.high,
            published: rec.published,
            delivered: rec.delivered,
            delivered_index: rec.delivered_index,
        };
        match gap::stream_gap(after.0, self.oldest, marks, self.first_retained) {
            Ok(()) => Ok(ReplayPlan {
                after,
                from: Seq((after.0 + 1).max(self.oldest)),
                to: Seq(to),
                head: Seq(self.head),
                stream: Some(stream),
                ns: self.ns,
                head_check: self.head_check,
            }),
            Err(missing) => {
                Err(SnapshotError::Evicted { wanted: Seq(after.0 + 1), oldest: Seq(self.oldest), missing })
            }
        }
    }

    fn replay_session(&self, after: Seq) -> Result<ReplayPlan, SnapshotError> {
        if after.0 > self.head {
            return Err(SnapshotError::Ahead { head: Seq(self.head) });
        }
        match gap::session_gap(after.0, self.oldest) {
            Ok(()) => Ok(ReplayPlan {
                after,
                from: Seq(after.0 + 1),
                to: Seq(self.head),
                head: Seq(self.head),
                stream: None,
                ns: self.ns,
                head_check: self.head_check,
            }),
            Err(missing) => {
                Err(SnapshotError::Evicted { wanted: Seq(after.0 + 1), oldest: Seq(self.oldest), missing })
            }
        }
    }

    fn replay_empty(&self, after: Seq, stream: StreamId) -> ReplayPlan {
        ReplayPlan {
            after,
            from: Seq(after.0 + 1),
            to: after,
            head: Seq(self.head),
            stream: Some(stream),
            ns: self.ns,
            head_check: self.head_check,
        }
    }

    fn nonces(&self) -> bool {
        true
    }

    fn lost_up_to(&self) -> Option<Seq> {
        (self.lost_up_to > self.head).then_some(Seq(self.lost_up_to))
    }
}
