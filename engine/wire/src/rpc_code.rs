//! Every JSON-RPC error code gapless sends or surfaces, in one table, and
//! MCP's policy for them.
//!
//! MCP 2026-07-28 ("Error Codes" in its basic protocol) partitions
//! JSON-RPC's server-error range:
//!
//! | codes | whose | rule |
//! |---|---|---|
//! | `-32700`, `-32600..=-32603` | JSON-RPC 2.0 | general protocol failures |
//! | `-32000..=-32019` | legacy | new implementations SHOULD NOT use them; never `-32002` on 2026-07-28 |
//! | `-32020..=-32099` | the MCP specification alone | only the codes it defines, with their meanings; never `-32042` on 2026-07-28 |
//! | the rest of `-32768..=-32000` | JSON-RPC 2.0 | reserved |
//! | everything else | applications | where an implementation's own codes go |
//!
//! gapless's own codes ([`Authority::Gapless`]) are therefore outside
//! `-32768..=-32000`, in the block `-31000..=-31099`. The one legacy code
//! gapless sends is the draft SEP-2694's `-32010` (`events_gone`), the
//! draft's own choice, kept with its meaning until the draft changes it.
//!
//! ```
//! use gapless_wire::rpc_code::{self, code, Generation};
//!
//! let lost = rpc_code::lookup(code::REQUEST_LOST).unwrap();
//! assert_eq!(lost.name, "request_lost");
//! assert!(rpc_code::policy(code::REQUEST_LOST, Generation::Mcp2026).is_ok());
//! // 2026-07-28 replaced -32002 (resource not found) with -32602.
//! assert!(rpc_code::policy(-32002, Generation::Mcp2026).is_err());
//! ```

use std::fmt;

/// Who gives a code its meaning.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Authority {
    /// JSON-RPC 2.0 itself.
    JsonRpc,
    /// An MCP revision (2025 or 2026-07-28).
    Mcp,
    /// A draft SEP that chose the code (SEP-2694's `events_gone`).
    McpDraft,
    /// gapless: outside JSON-RPC's reserved range, by MCP's policy.
    Gapless,
}

/// Where a code comes from.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Source {
    /// A server sends it in a JSON-RPC response.
    Server,
    /// A client raises it itself, in JSON-RPC shape, and never receives
    /// it from a gapless server (its `data` names gapless too), so it
    /// cannot be mistaken for the peer's.
    LocalClient,
}

/// An MCP protocol generation gapless serves.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Generation {
    /// 2024-11-05 to 2025-11-25: sessions, `Last-Event-ID`.
    Mcp2025,
    /// 2026-07-28: no session.
    Mcp2026,
}

/// One row of the table.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct RpcCode {
    /// A short name (the spec's, where it has one).
    pub name: &'static str,
    /// The code.
    pub code: i64,
    /// Who gives it its meaning.
    pub authority: Authority,
    /// What it means.
    pub meaning: &'static str,
    /// When gapless uses it.
    pub when: &'static str,
    /// Who emits it.
    pub source: Source,
    /// On a 2025-era request (a session's).
    pub on_2025: bool,
    /// On a 2026-07-28 request.
    pub on_2026: bool,
}

impl RpcCode {
    /// Whether gapless uses it on requests of `generation`.
    pub const fn used_on(&self, generation: Generation) -> bool {
        match generation {
            Generation::Mcp2025 => self.on_2025,
            Generation::Mcp2026 => self.on_2026,
        }
    }
}

/// The codes, by name (each is a row of [`CODES`]).
pub mod code {
    /// Not a valid request object.
    pub const INVALID_REQUEST: i64 = -32600;
    /// Unknown method.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Bad parameters (on 2026-07-28 also a resource not found).
    pub const INVALID_PARAMS: i64 = -32602;
    /// Server error.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// MCP 2025: a resource not found (2026-07-28 uses -32602).
    pub const RESOURCE_NOT_FOUND: i64 = -32002;
    /// MCP 2025-11-25: URL elicitation required (not on 2026-07-28).
    pub const URL_ELICITATION_REQUIRED: i64 = -32042;
    /// The draft SEP-2694's `events_gone` (a legacy-range code: the draft's
    /// own choice).
    pub const EVENTS_GONE: i64 = -32010;
    /// MCP 2026-07-28 `HeaderMismatch`.
    pub const HEADER_MISMATCH: i64 = -32020;
    /// MCP 2026-07-28 `MissingRequiredClientCapability`.
    pub const MISSING_CLIENT_CAPABILITY: i64 = -32021;
    /// MCP 2026-07-28 `UnsupportedProtocolVersion`.
    pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
    /// gapless: too many requests in flight.
    pub const TOO_MANY_IN_FLIGHT: i64 = -31001;
    /// gapless: the node running the request stopped before it answered.
    pub const REQUEST_LOST: i64 = -31002;
    /// gapless (raised by a gapless client, never sent): the server refused
    /// to resume the stream that was to answer this request.
    pub const RESUME_REFUSED: i64 = -31003;
    /// gapless-gateway: the upstream refused the request with an HTTP
    /// status (`401`, `403`, another `4xx`); it did not run.
    pub const UPSTREAM_REFUSED: i64 = -31004;
}

/// Shorthand for the table's rows.
const fn row(
    name: &'static str,
    code: i64,
    authority: Authority,
    meaning: &'static str,
    when: &'static str,
    (on_2025, on_2026): (bool, bool),
) -> RpcCode {
    RpcCode { name, code, authority, meaning, when, source: Source::Server, on_2025, on_2026 }
}

const BOTH: (bool, bool) = (true, true);

/// Every code gapless sends or surfaces.
pub const CODES: &[RpcCode] = &[
    row("invalid_request", code::INVALID_REQUEST, Authority::JsonRpc, "not a valid JSON-RPC request",
        "no `jsonrpc: \"2.0\"`, a bad `id`, a batch, a second `initialize`", BOTH),
    row("method_not_found", code::METHOD_NOT_FOUND, Authority::JsonRpc, "the method is not served",
        "a method neither the transport nor the application serves (HTTP 404 on 2026-07-28)", BOTH),
    row("invalid_params", code::INVALID_PARAMS, Authority::JsonRpc, "bad parameters",
        "parameters the method cannot take; on 2026-07-28 also a resource not found (the application's -32002 is sent as -32602)", BOTH),
    row("internal_error", code::INTERNAL_ERROR, Authority::JsonRpc, "the server failed",
        "a store that cannot be reached, a task result over its limit, or an application error that 2026-07-28 forbids (its code kept in `data.applicationCode`)", BOTH),
    row("resource_not_found", code::RESOURCE_NOT_FOUND, Authority::Mcp, "no such resource (MCP 2025)",
        "only when the application answers with it on a 2025-era request", (true, false)),
    row("url_elicitation_required", code::URL_ELICITATION_REQUIRED, Authority::Mcp,
        "the client must visit a URL (MCP 2025-11-25)",
        "only when the application answers with it on a 2025-era request", (true, false)),
    row("events_gone", code::EVENTS_GONE, Authority::McpDraft,
        "a `tasks/stream` cursor whose next event is no longer kept (`data`: `reason`, `taskId`, `earliestSeq`)",
        "a task stream resumed past what the task's ring keeps (SEP-2694, a draft: its code, in the legacy range, is the draft's choice)",
        (false, true)),
    row("header_mismatch", code::HEADER_MISMATCH, Authority::Mcp,
        "`MCP-Protocol-Version`, `Mcp-Method` or `Mcp-Name` missing, malformed or unlike the body",
        "a 2026-07-28 POST whose headers disagree with its body (HTTP 400)", (false, true)),
    row("missing_required_client_capability", code::MISSING_CLIENT_CAPABILITY, Authority::Mcp,
        "serving the request needs a capability the client did not declare (`data.requiredCapabilities`)",
        "sampling, elicitation or roots asked of a client that did not declare them; a task-only tool without the tasks extension", BOTH),
    row("unsupported_protocol_version", code::UNSUPPORTED_PROTOCOL_VERSION, Authority::Mcp,
        "the protocol version is not served (`data.supported`, `data.requested`)",
        "a 2026-07-28 POST naming a version gapless does not serve (HTTP 400)", (false, true)),
    row("too_many_in_flight", code::TOO_MANY_IN_FLIGHT, Authority::Gapless,
        "the request was not run: too many are in flight; retry when one has finished",
        "a session's `max_inflight_requests`, or 2026-07-28's process and per-client caps, are reached (HTTP 429 on 2026-07-28); also a task refused for the same reason", BOTH),
    row("request_lost", code::REQUEST_LOST, Authority::Gapless,
        "the node running the request stopped before it answered; whether it took effect is unknown",
        "cluster mode: another node answers a dead node's open requests and fails its tasks once its lease expired (SPEC §8.6)", BOTH),
    row("upstream_refused", code::UPSTREAM_REFUSED, Authority::Gapless,
        "the gateway's upstream refused the request with an HTTP status, so it did not run (`data`: `status`, and `wwwAuthenticate` where the upstream sent one, as the gateway serves it)",
        "gapless-gateway: the upstream answered a forwarded request `4xx` without a JSON-RPC response (an expired token's `401`)", BOTH),
    RpcCode {
        name: "resume_refused",
        code: code::RESUME_REFUSED,
        authority: Authority::Gapless,
        meaning: "the server refused to resume the stream that was to answer this request (`data.gapless_refusal`: the status, the refusal body and the cursor)",
        when: "raised by gapless-rmcp's client in place of the stream; no server sends it",
        source: Source::LocalClient,
        on_2025: true,
        on_2026: false,
    },
];

/// The row of `code`, if gapless uses it.
pub fn lookup(code: i64) -> Option<&'static RpcCode> {
    CODES.iter().find(|r| r.code == code)
}

/// Why a code may not be sent.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Violation {
    /// In `-32020..=-32099` but not defined by MCP 2026-07-28.
    ReservedForMcp(i64),
    /// A code 2026-07-28 names as not to be emitted (`-32002`, `-32042`).
    RemovedIn2026(i64),
    /// In the legacy `-32000..=-32019`, which new implementations should
    /// not use (the draft SEP-2694's `-32010` excepted).
    Legacy(i64),
    /// gapless's own code inside JSON-RPC's reserved `-32768..=-32000`.
    OwnCodeInReservedRange(i64),
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Violation::ReservedForMcp(c) => {
                write!(f, "{c} is reserved for the MCP specification, which does not define it")
            }
            Violation::RemovedIn2026(c) => write!(f, "{c} must not be emitted on MCP 2026-07-28"),
            Violation::Legacy(c) => {
                write!(f, "{c} is in the legacy range new implementations should not use")
            }
            Violation::OwnCodeInReservedRange(c) => {
                write!(f, "{c} is gapless's own but inside JSON-RPC's reserved -32768..=-32000")
            }
        }
    }
}

impl std::error::Error for Violation {}

/// The codes MCP 2026-07-28 defines in its reserved `-32020..=-32099`.
pub const MCP_2026_DEFINED: [i64; 3] =
    [code::HEADER_MISMATCH, code::MISSING_CLIENT_CAPABILITY, code::UNSUPPORTED_PROTOCOL_VERSION];

/// Whether gapless may send `code` on a request of `generation`, by MCP
/// 2026-07-28's policy (the 2025 revisions left `-32000..=-32099` to
/// implementations; gapless keeps its own codes out of it on both).
pub fn policy(code: i64, generation: Generation) -> Result<(), Violation> {
    if lookup(code).is_some_and(|r| r.authority == Authority::Gapless) && (-32768..=-32000).contains(&code) {
        return Err(Violation::OwnCodeInReservedRange(code));
    }
    if generation == Generation::Mcp2025 {
        return Ok(());
    }
    match code {
        code::RESOURCE_NOT_FOUND | code::URL_ELICITATION_REQUIRED => Err(Violation::RemovedIn2026(code)),
        -32099..=-32020 if !MCP_2026_DEFINED.contains(&code) => Err(Violation::ReservedForMcp(code)),
        code::EVENTS_GONE => Ok(()),
        -32019..=-32000 => Err(Violation::Legacy(code)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_keeps_the_policy_on_the_generations_it_is_used_on() {
        for r in CODES {
            for g in [Generation::Mcp2025, Generation::Mcp2026] {
                if r.used_on(g) {
                    assert_eq!(policy(r.code, g), Ok(()), "{} on {g:?}", r.name);
                }
            }
        }
    }

    #[test]
    fn codes_and_names_are_unique() {
        for (i, a) in CODES.iter().enumerate() {
            for b in &CODES[i + 1..] {
                assert!(a.code != b.code && a.name != b.name, "{a:?} / {b:?}");
            }
        }
    }

    #[test]
    fn gaplesss_own_codes_are_outside_the_reserved_range() {
        let own: Vec<_> = CODES.iter().filter(|r| r.authority == Authority::Gapless).collect();
        assert_eq!(own.len(), 4);
        for r in own {
            assert!((-31099..=-31000).contains(&r.code), "{r:?}");
        }
    }

    #[test]
    fn the_policy_refuses_what_2026_forbids() {
        use Generation::*;
        assert_eq!(policy(-32002, Mcp2026), Err(Violation::RemovedIn2026(-32002)));
        assert_eq!(policy(-32042, Mcp2026), Err(Violation::RemovedIn2026(-32042)));
        assert_eq!(policy(-32090, Mcp2026), Err(Violation::ReservedForMcp(-32090)));
        assert_eq!(policy(-32009, Mcp2026), Err(Violation::Legacy(-32009)));
        assert_eq!(policy(-32010, Mcp2026), Ok(()));
        assert_eq!(policy(-32021, Mcp2026), Ok(()));
        assert_eq!(policy(-32002, Mcp2025), Ok(()));
        assert_eq!(policy(-31002, Mcp2026), Ok(()));
        assert_eq!(policy(7, Mcp2026), Ok(()));
    }
}
