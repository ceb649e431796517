//! The request headers the transport reads by name (`docs/SPEC.md` §5).

/// The session id of a 2025-era request.
pub(crate) const SESSION_HEADER: &str = "mcp-session-id";

/// The cursor of a resume.
pub(crate) const LAST_EVENT_ID: &str = "last-event-id";

/// The protocol version a request is of.
pub(crate) const PROTOCOL_VERSION: &str = "mcp-protocol-version";
