//! Nodes, their leases and their open requests (`docs/SPEC.md` §8.5): a
//! node refreshes its lease while it runs and registers each request it is
//! running; when a lease expires, a surviving node answers every request the
//! dead node left open with an explicit error (and ends the request's own
//! stream), once, in one script per request ([`RedisStore::reap`]).

use crate::client::durable::Write;
use crate::client::{random_u64, RedisStore};
use crate::error::StoreError;
use crate::keys::{bus, node_alive, node_requests, nodes, reap_lock, session_keys};
use crate::model::{Orphaned, RequestAt};
use gapless::{SessionId, StreamId};
use redis::AsyncCommands as _;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

impl RequestAt {
    /// A place on shared stream `stream`, with a fresh random token.
    pub fn shared(stream: StreamId) -> Self {
        RequestAt::Shared(stream, random_u64())
    }
}

impl RedisStore {
    /// Renews node `node`'s lease for `ttl` (call it several times per
    /// `ttl`): its key, and its score in the node set (when the lease runs
    /// out, by this node's clock). The two are in different hash slots and
    /// both are written even when one fails ([`RedisStore::node_is_alive`]
    /// counts either); an error if either failed. `Ok(false)`: the node was
    /// not in the node set (its first beat, or a reaper took it for dead and
    /// removed it: what it held in the store was let go of).
    pub async fn heartbeat(&self, node: &str, ttl: Duration) -> Result<bool, StoreError> {
        let p = &self.config.prefix;
        let ms = (ttl.as_millis() as u64).max(1);
        let key = self.cmd::<()>(redis::cmd("SET").arg(node_alive(p, node)).arg(1).arg("PX").arg(ms)).await;
        let added: Result<i64, StoreError> =
            self.cmd(redis::cmd("ZADD").arg(nodes(p)).arg(now_ms() + ms).arg(node)).await;
        key?;
        Ok(added? == 0)
    }

    /// Records that `node` runs request `request_id` (its JSON-RPC id, as
    /// JSON) of session `id`, answered `at` (its own stream: a
    /// [`StreamId`]; or a shared one, [`RequestAt::shared`]).
    pub async fn register_request(
        &self,
        node: &str,
        id: &SessionId,
        at: impl Into<RequestAt>,
        request_id: &str,
    ) -> Result<(), StoreError> {
        let mut cmd = redis::cmd("HSET");
        cmd.arg(node_requests(&self.config.prefix, node)).arg(at.into().field(id)).arg(request_id);
        let add = |p: &mut redis::Pipeline| {
            p.add_command(cmd.clone());
        };
        // HSET is replicated even when it changes nothing: no marker.
        self.durably(&Write { add: &add, script: None, marker: None }).await.map(drop)
    }

    /// Forgets a request registered with [`RedisStore::register_request`]
    /// (its stream has its answer, or its mark: [`RedisStore::mark_answered`]).
    /// The registration's removal is durable (`durable.rs`): a failover
    /// cannot bring it back for a reaper to answer. Only then is a shared
    /// stream's answered mark deleted, and only if no reaper is at work on
    /// `node` (its lock): a reaper that read the registration before its
    /// removal took its lock before that, so the mark stays for it, and a
    /// node taken for dead never adds a second answer to the reaper's.
    pub async fn finish_request(
        &self,
        node: &str,
        id: &SessionId,
        at: impl Into<RequestAt>,
    ) -> Result<(), StoreError> {
        let p = &self.config.prefix;
        let at = at.into();
        self.forget(&node_requests(p, node), id, at).await?;
        if let RequestAt::Shared(_, token) = at {
            // A mark left behind (a reaper at work, or this failed) costs a
            // field until the session ends, and answers nothing twice.
            if let Ok(false) = self.cmd::<bool>(redis::cmd("EXISTS").arg(reap_lock(p, node))).await {
                let meta = session_keys(p, id)[0].clone();
                let _ = self.cmd::<()>(redis::cmd("HDEL").arg(meta).arg(format!("a:{token:016x}"))).await;
            }
        }
        Ok(())
    }

    /// Deletes a registration, durably.
    async fn forget(&self, registrations: &str, id: &SessionId, at: RequestAt) -> Result<(), StoreError> {
        let mut cmd = redis::cmd("HDEL");
        cmd.arg(registrations).arg(at.field(id));
        let add = |p: &mut redis::Pipeline| {
            p.add_command(cmd.clone());
        };
        // An HDEL that deletes nothing is not replicated, and needs not be.
        self.durably(&Write { add: &add, script: None, marker: None }).await.map(drop)
    }

    /// Answers the open requests of every node whose lease expired (other
    /// than `me`): `answer(request_id)` is the JSON-RPC error each gets on
    /// its stream, which then ends if it is the request's own
    /// ([`RedisStore::answer`]: a request its node answered is not answered
    /// again). Returns how many were answered. One
    /// reaper per dead node at a time (a lock in the store); what a reaper
    /// that dies half-way left is answered by the next, never twice.
    pub async fn reap(&self, me: &str, answer: impl Fn(&str) -> bytes::Bytes) -> Result<usize, StoreError> {
        let p = self.config.prefix.clone();
        let members: Vec<String> = self.cmd(redis::cmd("ZRANGE").arg(nodes(&p)).arg(0).arg(-1)).await?;
        let mut answered = 0;
        for node in members.iter().filter(|n| n.as_str() != me) {
            if self.node_is_alive(node).await? {
                continue;
            }
            let locked: Option<String> = self
                .cmd(redis::cmd("SET").arg(reap_lock(&p, node)).arg(me).arg("NX").arg("PX").arg(10_000))
                .await?;
            if locked.is_none() {
                continue; // another node reaps it
            }
            let open: Vec<(String, String)> =
                self.cmd(redis::cmd("HGETALL").arg(node_requests(&p, node))).await?;
            for (field, request_id) in open {
                let Some((sid, at)) = RequestAt::parse_field(&field) else { continue };
                let payload = answer(&request_id);
                // Safe from a failover before the HDEL below (`durable.rs`).
                match self.orphan(&sid, at, Some(&payload)).await {
                    Ok(Orphaned::Wrote) => answered += 1,
                    Ok(Orphaned::Done | Orphaned::TooLarge) | Err(StoreError::UnknownSession) => {}
                    Err(e) => return Err(e),
                }
                // The mark stays (with the session): the node may be alive
                // after all, and answer later.
                self.forget(&node_requests(&p, node), &sid, at).await?;
            }
            // Its pins go: its connections did with it.
            self.unpin_all(node).await?;
            self.cmd::<()>(redis::cmd("ZREM").arg(nodes(&p)).arg(node)).await?;
            self.cmd::<()>(redis::cmd("DEL").arg(reap_lock(&p, node))).await?;
        }
        Ok(answered)
    }

    /// Publishes `msg` on the cluster-wide bus (every node's [`crate::Notifier`]
    /// hands it to its bus receivers).
    pub async fn publish_bus(&self, msg: &[u8]) -> Result<(), StoreError> {
        let mut c = self.conn.clone();
        let _: i64 = self.bounded(c.publish(bus(&self.config.prefix), msg)).await?;
        Ok(())
    }
}
