//! Arbitrary strings through every string parser of the engine's public
//! API: `EventId::parse`, `event_id::parse_wire`, `SessionId::parse`,
//! `Ticket::parse` and `client::RefusalKind::from_error`. None may panic;
//! each must accept exactly what the grammar re-derived from `docs/SPEC.md` §4.1 in
//! `gapless_fuzz::wire` accepts; whatever parses re-encodes (Display) to
//! exactly the input. (The engine has no parser for the upgrade body or the
//! WebSocket frames; those live in the server.)
#![no_main]

use gapless::client::RefusalKind;
use gapless::event_id::{parse_wire, MalformedReason, ParseError, MAX_LEN, MAX_TAG_LEN};
use gapless::session::Ticket;
use gapless::{EventId, SessionId};
use gapless_fuzz::wire;
use libfuzzer_sys::fuzz_target;

fn check(s: &str) {
    // The generic `<tag>-<seq>` layer.
    let generic = parse_wire(s);
    match (&generic, wire::wire(s)) {
        (Ok((tag, seq)), Some((rtag, rseq))) => {
            assert_eq!((*tag, *seq), (rtag, rseq), "parse_wire({s:?})");
            assert_eq!(format!("{tag}-{seq}"), s, "parse_wire({s:?}) does not re-encode");
        }
        (Err(reason), None) => check_reason(s, *reason),
        (got, want) => panic!("parse_wire({s:?}) = {got:?}, grammar says {want:?}"),
    }

    // Our layout on top of it.
    match (EventId::parse(s), wire::parse(s)) {
        (Ok(id), Ok(r)) => {
            assert_eq!(
                (id.ns.0, id.stream.0, id.seq.0, id.check),
                (r.ns, r.stream, r.seq, r.check),
                "EventId::parse({s:?})"
            );
            assert_eq!(id.to_string(), s, "EventId::parse({s:?}) does not re-encode");
            assert_eq!(s.parse::<EventId>(), Ok(id));
        }
        (Err(ParseError::Malformed(reason)), Err(wire::Bad::Malformed)) => {
            assert_eq!(generic, Err(reason), "the two layers disagree on {s:?}");
        }
        (Err(ParseError::ForeignTag), Err(wire::Bad::ForeignTag)) => {
            assert!(generic.is_ok(), "a foreign tag is well-formed: {s:?}");
        }
        (got, want) => panic!("EventId::parse({s:?}) = {got:?}, grammar says {want:?}"),
    }

    // Session ids and tickets: 32 lowercase hex digits, nothing else.
    let sid = SessionId::parse(s);
    assert_eq!(sid.is_some(), wire::session_id(s), "SessionId::parse({s:?})");
    if let Some(id) = sid {
        assert_eq!(id.to_string(), s, "SessionId::parse({s:?}) does not re-encode");
        assert!(!format!("{id:?}").contains(s), "Debug prints a whole session id");
    }
    let ticket = Ticket::parse(s);
    assert_eq!(ticket.is_some(), wire::session_id(s), "Ticket::parse({s:?})");
    if let Some(t) = ticket {
        assert_eq!(t.to_string(), s, "Ticket::parse({s:?}) does not re-encode");
        assert!(!format!("{t:?}").contains(s), "Debug prints a whole ticket");
    }

    // Error kinds: every string maps to a kind that prints back to it.
    let kind = RefusalKind::from_error(s);
    assert_eq!(kind.as_str(), s, "RefusalKind::from_error({s:?})");
    assert_eq!(kind.to_string(), s);
    if let RefusalKind::Other(o) = &kind {
        assert_eq!(o, s);
    }
}

/// The reason must describe a real defect of `s` (offsets point at it).
fn check_reason(s: &str, reason: MalformedReason) {
    let b = s.as_bytes();
    let ok = match reason {
        MalformedReason::Empty => s.is_empty(),
        MalformedReason::TooLong { len } => len == b.len() && len > MAX_LEN,
        MalformedReason::MissingDash => !s.contains('-'),
        MalformedReason::MultipleDashes { at } => {
            b.get(at) == Some(&b'-') && b[..at].iter().filter(|&&c| c == b'-').count() == 1
        }
        MalformedReason::EmptyTag => s.starts_with('-'),
        MalformedReason::TagTooLong { len } => len > MAX_TAG_LEN && s.find('-') == Some(len),
        MalformedReason::BadTagChar { at } => {
            s.find('-').is_some_and(|d| at < d) && !(b[at].is_ascii_alphanumeric() || b[at] == b'_')
        }
        MalformedReason::EmptySeq => s.ends_with('-'),
        MalformedReason::BadSeqChar { at } => s.find('-').is_some_and(|d| at > d) && !b[at].is_ascii_digit(),
        MalformedReason::LeadingZero => {
            s.split_once('-').is_some_and(|(_, q)| q.len() > 1 && q.starts_with('0'))
        }
        MalformedReason::SeqOverflow => s.split_once('-').is_some_and(|(_, q)| q.parse::<u64>().is_err()),
    };
    assert!(ok, "parse_wire({s:?}) gives reason {reason:?}, which does not describe the input");
    // The message renders.
    let _ = ParseError::Malformed(reason).to_string();
}

fuzz_target!(|data: &[u8]| {
    // Both the exact bytes (when UTF-8) and a lossy decoding, so that
    // invalid UTF-8 still exercises non-ASCII handling.
    match std::str::from_utf8(data) {
        Ok(s) => check(s),
        Err(_) => check(&String::from_utf8_lossy(data)),
    }
});
