//! Every error kind of the contract, spelled once.
//!
//! A refusal on the wire is an HTTP status and a JSON body
//! `{"error": "<kind>", "message": "...", ...}` (`docs/SPEC.md` §4.2 and §5).
//! [`ErrorKind`] is the only place where a kind's wire name and status are
//! written: the engine's refusals, the server's responses and the client
//! guard's classification all go through it.

use std::fmt;

macro_rules! kinds {
    ($( $(#[$doc:meta])* $variant:ident = ($name:literal, $status:literal), )*) => {
        /// An error kind of the contract, with its HTTP status and JSON name.
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
        #[non_exhaustive]
        pub enum ErrorKind {
            $( $(#[$doc])* $variant, )*
        }

        impl ErrorKind {
            /// Every kind, in the contract's table order.
            pub const ALL: &'static [ErrorKind] = &[$(ErrorKind::$variant),*];

            /// The JSON `error` string.
            pub const fn as_str(self) -> &'static str {
                match self { $(ErrorKind::$variant => $name,)* }
            }

            /// The HTTP status this kind is answered with.
            pub const fn http_status(self) -> u16 {
                match self { $(ErrorKind::$variant => $status,)* }
            }
        }
    };
}

kinds! {
    /// A cursor without a session id: never create a session implicitly.
    ResumeRequiresSession = ("resume_requires_session", 400),
    /// The session is unknown, expired, deleted, or bound to another caller.
    UnknownSession = ("unknown_session", 404),
    /// The cursor is not an event id (empty, over 128 bytes, bad grammar).
    MalformedCursor = ("malformed_cursor", 400),
    /// The cursor is of another session, an older incarnation, or a stream
    /// its event does not belong to.
    NamespaceMismatch = ("namespace_mismatch", 409),
    /// The cursor names an event that was never emitted.
    CursorAhead = ("cursor_ahead", 409),
    /// The cursor claims an event that was never delivered.
    CursorNotDelivered = ("cursor_not_delivered", 409),
    /// Events after the cursor were evicted.
    GapNotCovered = ("gap_not_covered", 409),
    /// The event the cursor names is not the one the client saw: the store
    /// lost it in a failover (asynchronous replication can lose an
    /// acknowledged suffix) and may have reused its seq for another event.
    HistoryRewritten = ("history_rewritten", 409),
    /// The session store (e.g. Redis) cannot be reached; nothing was
    /// decided, and nothing was created.
    StoreUnavailable = ("store_unavailable", 503),
    /// A request other than `initialize` without a session id.
    MissingSession = ("missing_session", 400),
    /// An `MCP-Protocol-Version` header naming a version not served.
    UnsupportedProtocolVersion = ("unsupported_protocol_version", 400),
    /// `Accept` allows nothing the route can answer with.
    NotAcceptable = ("not_acceptable", 406),
    /// A body that is not JSON, or an upgrade body without `cursor`.
    MalformedRequest = ("malformed_request", 400),
    /// A body whose content type is not JSON.
    UnsupportedMediaType = ("unsupported_media_type", 415),
    /// A method the route does not serve.
    MethodNotAllowed = ("method_not_allowed", 405),
    /// A body over the limit.
    PayloadTooLarge = ("payload_too_large", 413),
    /// Request headers over the limit.
    HeadersTooLarge = ("headers_too_large", 431),
    /// `Origin` or `Host` not allowed (DNS-rebinding protection).
    OriginNotAllowed = ("origin_not_allowed", 403),
    /// The session limit is reached.
    TooManySessions = ("too_many_sessions", 503),
    /// The server's memory budget is spent, and evicting the oldest events
    /// of other sessions could not make room for another session.
    MemoryExhausted = ("memory_exhausted", 503),
    /// The server holds its maximum of open connections (in all, or from
    /// this peer's address); answered before any request is read.
    TooManyConnections = ("too_many_connections", 503),
    /// Request bodies being received hold the server's budget for them (in
    /// all, or this client's share); `Retry-After` says when to try again.
    TooManyBodyBytes = ("too_many_body_bytes", 503),
    /// The request body did not arrive within the body read timeout.
    RequestTimeout = ("request_timeout", 408),
    /// This client sent more `initialize` requests than its rate allows;
    /// `Retry-After` says when to try again.
    RateLimited = ("rate_limited", 429),
    /// This client (identity, else peer address) holds its maximum of live
    /// sessions.
    ClientSessionLimit = ("client_session_limit", 429),
    /// The standalone stream is already open on another connection.
    StreamBusy = ("stream_busy", 409),
    /// The session lives on a WebSocket now.
    SessionMigrated = ("session_migrated", 409),
    /// A bad, used, expired or foreign migration ticket.
    TicketInvalid = ("ticket_invalid", 403),
    /// The session already holds its maximum of outstanding tickets.
    TooManyTickets = ("too_many_tickets", 429),
    /// No such route (the bundled binary's fallback).
    NotFound = ("not_found", 404),
}

impl ErrorKind {
    /// The kind whose JSON name is `error`, if any.
    pub fn from_wire(error: &str) -> Option<ErrorKind> {
        ErrorKind::ALL.iter().copied().find(|k| k.as_str() == error)
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::ErrorKind;
    use std::collections::HashSet;

    #[test]
    fn names_are_unique_and_round_trip() {
        let mut seen = HashSet::new();
        for &k in ErrorKind::ALL {
            assert!(seen.insert(k.as_str()), "{k} spelled twice");
            assert_eq!(ErrorKind::from_wire(k.as_str()), Some(k));
            assert!((400..600).contains(&k.http_status()), "{k}: {}", k.http_status());
        }
        assert_eq!(ErrorKind::ALL.len(), 30);
        assert_eq!(ErrorKind::from_wire("no_such_kind"), None);
    }

    #[test]
    fn statuses_follow_the_contract() {
        use ErrorKind as K;
        let table = [
            (K::ResumeRequiresSession, 400),
            (K::UnknownSession, 404),
            (K::MalformedCursor, 400),
            (K::NamespaceMismatch, 409),
            (K::CursorAhead, 409),
            (K::CursorNotDelivered, 409),
            (K::GapNotCovered, 409),
            (K::TooManySessions, 503),
            (K::TooManyTickets, 429),
            (K::TicketInvalid, 403),
            (K::HeadersTooLarge, 431),
            (K::TooManyBodyBytes, 503),
        ];
        for (k, status) in table {
            assert_eq!(k.http_status(), status, "{k}");
        }
    }
}
