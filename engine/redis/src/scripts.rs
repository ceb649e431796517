//! The Lua scripts (`src/lua/`), each prefixed with the shared prelude.

use redis::Script;

const LIB: &str = include_str!("lua/lib.lua");

fn script(body: &str) -> Script {
    Script::new(&format!("{LIB}\n{body}"))
}

/// One compiled handle per script (EVALSHA, loaded on first use).
pub(crate) struct Scripts {
    pub(crate) create: Script,
    pub(crate) lookup: Script,
    pub(crate) open_stream: Script,
    pub(crate) append: Script,
    pub(crate) end_stream: Script,
    pub(crate) deliver: Script,
    pub(crate) delete: Script,
    pub(crate) facts: Script,
    pub(crate) tail: Script,
    pub(crate) attach: Script,
    pub(crate) set_version: Script,
    pub(crate) set_value: Script,
    pub(crate) get_value: Script,
    pub(crate) marks: Script,
    pub(crate) orphan: Script,
    pub(crate) issue_ticket: Script,
    pub(crate) redeem_ticket: Script,
    pub(crate) pin: Script,
    pub(crate) hold: Script,
    pub(crate) probe: Script,
}

impl Scripts {
    pub(crate) fn new() -> Self {
        Scripts {
            create: script(include_str!("lua/create.lua")),
            lookup: script(include_str!("lua/lookup.lua")),
            open_stream: script(include_str!("lua/open_stream.lua")),
            append: script(include_str!("lua/append.lua")),
            end_stream: script(include_str!("lua/end_stream.lua")),
            deliver: script(include_str!("lua/deliver.lua")),
            delete: script(include_str!("lua/delete.lua")),
            facts: script(include_str!("lua/facts.lua")),
            tail: script(include_str!("lua/tail.lua")),
            attach: script(include_str!("lua/attach.lua")),
            set_version: script(include_str!("lua/set_version.lua")),
            set_value: script(include_str!("lua/set_value.lua")),
            get_value: script(include_str!("lua/get_value.lua")),
            marks: script(include_str!("lua/marks.lua")),
            orphan: script(include_str!("lua/orphan.lua")),
            issue_ticket: script(include_str!("lua/issue_ticket.lua")),
            redeem_ticket: script(include_str!("lua/redeem_ticket.lua")),
            pin: script(include_str!("lua/pin.lua")),
            hold: script(include_str!("lua/hold.lua")),
            probe: script(include_str!("lua/probe.lua")),
        }
    }

    /// Every script, to load them all at start-up (so that a Redis that
    /// refuses scripts is found then, not on the first request).
    pub(crate) fn all(&self) -> [&Script; 20] {
        [
            &self.create,
            &self.lookup,
            &self.open_stream,
            &self.append,
            &self.end_stream,
            &self.deliver,
            &self.delete,
            &self.facts,
            &self.tail,
            &self.attach,
            &self.set_version,
            &self.set_value,
            &self.get_value,
            &self.marks,
            &self.orphan,
            &self.issue_ticket,
            &self.redeem_ticket,
            &self.pin,
            &self.hold,
            &self.probe,
        ]
    }
}

/// Takes a place in a bounded set (one key): drops the expired members,
/// then adds `id` unless the set is full. ARGV: now ms, max, id, expiry ms.
const RESERVE: &str = "redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZSCORE', KEYS[1], ARGV[3]) then return 1 end
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[4], ARGV[3])
local ttl = tonumber(ARGV[4]) - tonumber(ARGV[1])
if ttl > 0 and redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
return 1";

/// Replaces a record if it is still `old` (ARGV[1]) with `new` (ARGV[2]),
/// keeping its expiry, and announces it on the task's channel (the one its
/// event stream's writes are announced on, `keys::task_channel`: what
/// listen streams watching the task wait for). Idempotent: a record that
/// is `new` already (this write, retried) is done too. 1: replaced; 0: it
/// changed meanwhile; -1: gone.
const REPLACE: &str = "local v = redis.call('GET', KEYS[1])
if v == false then return -1 end
if v == ARGV[2] then return 1 end
if v ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
redis.call('PUBLISH', KEYS[1] .. ':n', 'status')
return 1";

/// A task event stream's scripts (`task_events.rs`): the append and the
/// read, each with the shared trim.
pub(crate) struct TaskEventScripts {
    pub(crate) append: Script,
    pub(crate) read: Script,
}

impl TaskEventScripts {
    pub(crate) fn new() -> Self {
        let lib = include_str!("lua/task_events_lib.lua");
        TaskEventScripts {
            append: Script::new(&format!("{lib}\n{}", include_str!("lua/task_events_append.lua"))),
            read: Script::new(&format!("{lib}\n{}", include_str!("lua/task_events_read.lua"))),
        }
    }
}

/// The task records' scripts (`tasks.rs`).
pub(crate) struct TaskScripts {
    pub(crate) reserve: Script,
    pub(crate) replace: Script,
}

impl TaskScripts {
    pub(crate) fn new() -> Self {
        TaskScripts { reserve: Script::new(RESERVE), replace: Script::new(REPLACE) }
    }
}
