//! Key names: `<prefix>{<session id>}:<part>`. The braces are Redis
//! Cluster's hash tag, so every key of a session lands in one slot and one
//! script may touch them all.

use gapless::SessionId;

/// The seven keys of one session, in the order every script takes them.
pub(crate) fn session_keys(prefix: &str, id: &SessionId) -> [String; 7] {
    let base = format!("{prefix}{{{id}}}");
    ["m", "l", "s", "t", "o", "k", "b"].map(|part| format!("{base}:{part}"))
}

/// The number of the last batch append queue `queue` of the session
/// wrote (`appender.rs`; in the session's hash slot, expiring with it).
pub(crate) fn append_guard(prefix: &str, id: &SessionId, queue: &str) -> String {
    format!("{prefix}{{{id}}}:q:{queue}")
}

/// The key of the marker write after a session's durable write
/// (`durable.rs`; in the session's hash slot, expiring on its own).
pub(crate) fn marker(prefix: &str, id: &SessionId) -> String {
    format!("{prefix}{{{id}}}:w")
}

/// A migration ticket's index entry: the session it belongs to.
pub(crate) fn ticket(prefix: &str, ticket: &str) -> String {
    format!("{prefix}ticket:{ticket}")
}

/// The sorted set of nodes (score: when each one's lease runs out, ms by
/// its clock, as its last heartbeat set it).
pub(crate) fn nodes(prefix: &str) -> String {
    format!("{prefix}nodes")
}

/// A node's lease: present while the node is alive.
pub(crate) fn node_alive(prefix: &str, node: &str) -> String {
    format!("{prefix}node:{node}:alive")
}

/// A node's open requests: `<session id>|<stream>` (and `|<token>` on a
/// shared stream, `RequestAt::field`) -> the request's JSON-RPC id.
pub(crate) fn node_requests(prefix: &str, node: &str) -> String {
    format!("{prefix}node:{node}:requests")
}

/// The sessions a node pins (`pin.lua`): the reaper of a dead node lets go
/// of its pins.
pub(crate) fn node_pinned(prefix: &str, node: &str) -> String {
    format!("{prefix}node:{node}:pinned")
}

/// The lock a reaper holds while it answers a dead node's requests.
pub(crate) fn reap_lock(prefix: &str, node: &str) -> String {
    format!("{prefix}reap:{node}")
}

/// The cluster-wide bus: responses to server → client requests and
/// cancellations, for whichever node runs the request.
pub(crate) fn bus(prefix: &str) -> String {
    format!("{prefix}bus")
}

/// The channel a session's changes are announced on (`lua/lib.lua`).
pub(crate) fn channel(prefix: &str, id: &SessionId) -> String {
    format!("{prefix}{{{id}}}:n")
}

/// The session a channel of [`channel`]'s form names.
pub(crate) fn session_of_channel(prefix: &str, channel: &str) -> Option<SessionId> {
    let rest = channel.strip_prefix(prefix)?.strip_prefix('{')?.strip_suffix("}:n")?;
    SessionId::parse(rest)
}

/// The channel a task's event stream announces its writes on
/// (`lua/task_events_append.lua`), and its record its replacements
/// (`scripts.rs`, REPLACE: the record's key with `:n`).
pub(crate) fn task_channel(prefix: &str, task: &str) -> String {
    format!("{prefix}task:{{{task}}}:n")
}

/// The task a channel of [`task_channel`]'s form names.
pub(crate) fn task_of_channel<'a>(prefix: &str, channel: &'a str) -> Option<&'a str> {
    channel.strip_prefix(prefix)?.strip_prefix("task:{")?.strip_suffix("}:n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_share_one_hash_tag() {
        let id = SessionId::parse("0123456789abcdef0123456789abcdef").unwrap();
        let keys = session_keys("gapless:", &id);
        assert_eq!(keys[0], "gapless:{0123456789abcdef0123456789abcdef}:m");
        for k in &keys {
            // Redis Cluster hashes only what is between the first braces.
            let tag = &k[k.find('{').unwrap() + 1..k.find('}').unwrap()];
            assert_eq!(tag, id.to_string());
        }
        assert_eq!(session_of_channel("gapless:", &channel("gapless:", &id)), Some(id));
        assert_eq!(session_of_channel("other:", &channel("gapless:", &id)), None);
        assert_eq!(task_of_channel("gapless:", &task_channel("gapless:", "t-1")), Some("t-1"));
        assert_eq!(task_of_channel("gapless:", &channel("gapless:", &id)), None);
        assert_eq!(session_of_channel("gapless:", &task_channel("gapless:", "t-1")), None);
    }
}
