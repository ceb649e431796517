//! Writes a failover must not lose (`docs/SPEC.md` §8.5): a request's
//! registration, its answer and the reaper's error for an orphaned
//! request. Redis replicates asynchronously, so a write the primary
//! acknowledged can be missing from the replica promoted in its place. For
//! an event that is a refusal the client can act on (its cursor's check
//! fails: `history_rewritten`); for these three writes nothing would ever
//! notice: the request's stream would stay open with nobody left to end it
//! (the protocol model's finding 2, `docs/model/README.md`).
//!
//! [`RedisStore::durably`] therefore counts such a write as done only once
//! a replica has it (Redis `WAIT 1`), and writes it again until then (each
//! of the three is idempotent). The first try sends the write with
//! `INFO replication` in one pipeline: a primary that has no replica, and
//! whose replication history (`master_replid`) never had one in this
//! store's sight, has nothing a failover could lose, and the write is done
//! (`WAIT` on it would only wait out its timeout). Otherwise each try sends
//! the write, a marker write after it and `WAIT 1` in one pipeline, so that
//! they travel on one connection and `WAIT` covers the write even if the
//! connection was re-established meanwhile. A primary that had a replica
//! and now has none (its link is down; the replica may still be promoted)
//! is waited for like one whose replica lags, until the store's timeout;
//! then the write fails with [`StoreError::Unavailable`] and the caller
//! tries again later (the write is on the primary, but not yet safe). A
//! primary whose every connected replica is in its first sync (a former
//! primary rejoining after a failover) is not waited for: no replica can
//! take the write before that sync ends, which takes seconds, and waiting
//! would stall every request meanwhile.

use super::RedisStore;
use crate::error::StoreError;
use crate::reply::text;
use redis::{Pipeline, Script, Value};

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

/// The replication histories (`master_replid`) seen with a replica: a
/// primary of one of them that has no replica now lost its replica's link,
/// and a write to it is not safe until the link is back.
#[derive(Debug, Default)]
pub(crate) struct Replicated(Mutex<HashSet<String>>);

impl Replicated {
    fn note(&self, replid: &str) {
        if !replid.is_empty() {
            self.0.lock().unwrap_or_else(|e| e.into_inner()).insert(replid.to_owned());
        }
    }

    fn had_replica(&self, replid: &str) -> bool {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).contains(replid)
    }
}

/// What `INFO replication` says of a primary: its connected replicas and
/// its replication id.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Replication {
    pub(crate) replicas: u64,
    /// Of those, how many are in their first sync (any `state` but
    /// `online`): they acknowledge nothing until it completes.
    pub(crate) syncing: u64,
    pub(crate) replid: String,
}

/// Reads an `INFO replication` answer.
pub(crate) fn replication(info: &str) -> Replication {
    let field = |name: &str| {
        info.lines().find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(':'))).map(str::trim)
    };
    let syncing = info
        .lines()
        .filter(|l| l.starts_with("slave") && l.contains("state=") && !l.contains("state=online"))
        .count() as u64;
    Replication {
        replicas: field("connected_slaves").and_then(|n| n.parse().ok()).unwrap_or(0),
        syncing,
        replid: field("master_replid").unwrap_or("").to_owned(),
    }
}

fn info_text(v: &Value) -> Result<String, StoreError> {
    match v {
        Value::VerbatimString { text, .. } => Ok(text.clone()),
        other => text(other),
    }
}

/// One write [`RedisStore::durably`] makes safe: a script call or a plain
/// command, on one key's slot.
pub(crate) struct Write<'a> {
    /// Adds the write, as one command, to a pipeline.
    pub(crate) add: &'a (dyn Fn(&mut Pipeline) + Sync),
    /// The script the command calls (`EVALSHA`), loaded again when a
    /// primary answers `NOSCRIPT`.
    pub(crate) script: Option<&'a Script>,
    /// A key in the write's hash slot for a marker write after it (it
    /// expires on its own), or `None` for a write that Redis replicates
    /// even when it changes nothing (`HSET`): what `WAIT` waits for is the
    /// connection's last write, and a script that finds its work done
    /// writes nothing.
    pub(crate) marker: Option<String>,
}

/// How long the marker key lives.
const MARKER_TTL_MS: u64 = 60_000;

impl RedisStore {
    /// Runs `w` so that a failover cannot lose it (see the module's docs).
    /// Returns the write's answer of every try, first to last: the write
    /// is idempotent, and the caller tells from them what happened (a
    /// later try finds what an earlier one wrote).
    pub(crate) async fn durably(&self, w: &Write<'_>) -> Result<Vec<Value>, StoreError> {
        let r = self.durably_once(w).await;
        let outcome = match &r {
            Ok(_) => &self.stats.durable_acknowledged,
            Err(_) => &self.stats.durable_unavailable,
        };
        outcome.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        r
    }

    async fn durably_once(&self, w: &Write<'_>) -> Result<Vec<Value>, StoreError> {
        let deadline = tokio::time::Instant::now() + self.config.timeout;
        let wait_ms = (self.config.timeout / 4).max(Duration::from_millis(10)).as_millis() as u64;
        let mut answers = Vec::new();
        let mut first = true;
        loop {
            let mut p = redis::pipe();
            (w.add)(&mut p);
            if !first {
                if let Some(m) = &w.marker {
                    p.cmd("SET").arg(m).arg(1).arg("PX").arg(MARKER_TTL_MS).ignore();
                }
                p.cmd("WAIT").arg(1).arg(wait_ms);
            }
            p.cmd("INFO").arg("replication");
            let mut c = self.conn.clone();
            let start = std::time::Instant::now();
            let r = tokio::time::timeout(self.config.timeout, p.query_async::<Vec<Value>>(&mut c)).await;
            self.stats.request(
                match &r {
                    Err(_) => Err(None),
                    Ok(r) => r.as_ref().map_err(Some),
                },
                start.elapsed(),
            );
            let r: Vec<Value> = match r {
                Err(_) => {
                    return Err(StoreError::Unavailable(format!(
                        "no answer within {:?}",
                        self.config.timeout
                    )))
                }
                // A primary without the script (promoted, or flushed): load
                // it there and try again.
                Ok(Err(e)) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
                    if let Some(s) = w.script {
                        self.bounded(s.prepare_invoke().load_async(&mut c)).await?;
                        continue;
                    }
                    return Err(e.into());
                }
                Ok(r) => r?,
            };
            answers.push(r.first().cloned().unwrap_or(Value::Nil));
            let info = replication(&info_text(r.last().unwrap_or(&Value::Nil))?);
            let acked = if first {
                0
            } else {
                match r.get(1) {
                    Some(Value::Int(n)) => *n,
                    other => return Err(StoreError::Protocol(format!("WAIT answered {other:?}"))),
                }
            };
            if info.replicas > 0 || acked > 0 {
                self.replicated.note(&info.replid);
            }
            if acked > 0 || (info.replicas == 0 && !self.replicated.had_replica(&info.replid)) {
                return Ok(answers);
            }
            // Every replica is in its first sync (one that rejoined after a
            // failover): none could take this write before the sync ends
            // (seconds: `repl-diskless-sync-delay` alone is 5 s by
            // default), and a promotion of one now would lose all it lacks.
            // Waiting would stall every request meanwhile: the write is done.
            if info.replicas > 0 && info.syncing == info.replicas {
                return Ok(answers);
            }
            if !first && tokio::time::Instant::now() >= deadline {
                return Err(StoreError::Unavailable(format!(
                    "no replica acknowledged the write within {:?} (the primary has {} connected)",
                    self.config.timeout, info.replicas
                )));
            }
            first = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_info_replication() {
        let info = "# Replication\r\nrole:master\r\nconnected_slaves:2\r\nslave0:ip=127.0.0.1,port=1,state=online,offset=9,lag=0\r\nmaster_replid:abc123\r\nmaster_replid2:0000\r\n";
        assert_eq!(replication(info), Replication { replicas: 2, syncing: 0, replid: "abc123".into() });
        assert_eq!(
            replication("role:master\r\n"),
            Replication { replicas: 0, syncing: 0, replid: String::new() }
        );
        let syncing = "connected_slaves:2\r\nslave0:ip=127.0.0.1,port=1,state=wait_bgsave,offset=0,lag=0\r\nslave1:ip=127.0.0.1,port=2,state=online,offset=9,lag=0\r\nmaster_replid:abc\r\n";
        assert_eq!(replication(syncing), Replication { replicas: 2, syncing: 1, replid: "abc".into() });
    }

    #[test]
    fn remembers_histories_with_a_replica() {
        let r = Replicated::default();
        assert!(!r.had_replica("a"));
        r.note("a");
        r.note("");
        assert!(r.had_replica("a"));
        assert!(!r.had_replica("b"));
        assert!(!r.had_replica(""));
    }
}
