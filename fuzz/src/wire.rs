//! The event-id grammar of `docs/SPEC.md` §4.1, re-derived from the spec text.
//!
//! Generic wire form `<tag>-<seq>`: at most 128 bytes in all; `tag` is 1–56
//! bytes of `[A-Za-z0-9_]`; `seq` is a decimal `u64` without leading zeros.
//! gapless' own tags are `<ns>_<stream>`: 16 lowercase hex digits, `_`, a
//! decimal stream id >= 1 without leading zeros, optionally `_` and a check
//! of 16 lowercase hex digits.

/// Longest event id in bytes (`docs/SPEC.md` §4.2: "over 128 bytes" is malformed).
pub const MAX_LEN: usize = 128;
/// Longest tag in bytes (`docs/SPEC.md` §4.1).
pub const MAX_TAG_LEN: usize = 56;

/// How a string fails to be one of our event ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bad {
    /// Not `<tag>-<seq>` at all (HTTP `malformed_cursor`).
    Malformed,
    /// Well-formed, but the tag is not `<16 lowercase hex>_<stream >= 1>`
    /// (HTTP `namespace_mismatch`).
    ForeignTag,
}

/// An event id of ours, as plain numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Id {
    /// Namespace.
    pub ns: u64,
    /// Stream id (>= 1).
    pub stream: u64,
    /// Seq (any `u64`, 0 included: judging it is the decision table's job).
    pub seq: u64,
    /// The check, if the tag has one.
    pub check: Option<u64>,
}

/// A canonical decimal `u64`: digits only, no leading zero unless it is
/// `"0"`, no overflow.
pub fn decimal(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    if s.len() > 1 && s.starts_with('0') {
        return None;
    }
    let mut v: u64 = 0;
    for c in s.bytes() {
        v = v.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    Some(v)
}

fn tag_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The generic grammar: `Some((tag, seq))` iff `s` is a well-formed
/// `<tag>-<seq>`.
pub fn wire(s: &str) -> Option<(&str, u64)> {
    if s.is_empty() || s.len() > MAX_LEN {
        return None;
    }
    let mut parts = s.split('-');
    let tag = parts.next()?;
    let seq = parts.next()?;
    if parts.next().is_some() {
        return None;
    }
    if tag.is_empty() || tag.len() > MAX_TAG_LEN || !tag.bytes().all(tag_char) {
        return None;
    }
    Some((tag, decimal(seq)?))
}

fn hex16(s: &str) -> Option<u64> {
    if s.len() != 16 || !s.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    u64::from_str_radix(s, 16).ok()
}

/// Our tag layout: `Some((ns, stream, check))` iff `tag` is
/// `<16 lowercase hex>_<stream>` or `<16 lowercase hex>_<stream>_<16 lowercase hex>`.
pub fn layout(tag: &str) -> Option<(u64, u64, Option<u64>)> {
    let mut parts = tag.split('_');
    let ns = hex16(parts.next()?)?;
    let stream = decimal(parts.next()?)?;
    let check = match parts.next() {
        None => None,
        Some(c) => Some(hex16(c)?),
    };
    if parts.next().is_some() || stream == 0 {
        return None;
    }
    Some((ns, stream, check))
}

/// Parses one of our event ids.
pub fn parse(s: &str) -> Result<Id, Bad> {
    let (tag, seq) = wire(s).ok_or(Bad::Malformed)?;
    let (ns, stream, check) = layout(tag).ok_or(Bad::ForeignTag)?;
    Ok(Id { ns, stream, seq, check })
}

/// The wire form of one of our ids.
pub fn format(ns: u64, stream: u64, seq: u64) -> String {
    format!("{ns:016x}_{stream}-{seq}")
}

/// A session id as the hub issues it: 32 lowercase hex digits.
pub fn session_id(s: &str) -> bool {
    s.len() == 32 && s.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}
