//! The SSE event-id wire codec (`docs/SPEC.md` §4.1).
//!
//! An event id travels as the SSE `id:` field, comes back as a `Last-Event-ID`
//! header or an upgrade cursor, and is then the only thing that tells the
//! server which session incarnation, stream and seq a client claims. Seed 003
//! is the reason it names all three: a cursor that cannot be tied to the
//! buffer the session id selects is how a `200 OK` turns into a silent gap.
//!
//! ```text
//!   00ab34ff9c01de77_3-42
//!   \______________/ ^ ^^
//!      namespace     | seq (decimal u64, no leading zeros)
//!   (16 lowercase    stream (decimal, >= 1, no leading zeros)
//!    hex digits)
//!   \________________/
//!          tag
//!
//!   00ab34ff9c01de77_3_5be0cd19137e2179-42
//!                     \______________/
//!                       check (16 lowercase hex digits; stores that keep
//!                       a nonce per event, e.g. the Redis store)
//! ```
//!
//! The check is the event's own nonce as its store keeps it. A store whose
//! history can be rewritten (an asynchronously replicated one that fails
//! over) compares it with the entry now at the cursor's seq: a different
//! nonce means the event the client saw is no longer the store's
//! (`docs/SPEC.md` §8.4). The in-process engine mints ids without it.
//!
//! Parsing has two layers, because the resume decision table treats their
//! failures differently:
//!
//! * [`parse_wire`] checks the generic grammar `<tag>-<seq>` (what any
//!   server's id could look like). A violation is a [`MalformedReason`]; the
//!   HTTP layer answers `malformed_cursor`.
//! * [`EventId::parse`] also requires our tag layout `<ns>_<stream>`. A
//!   well-formed id in any other layout is [`ParseError::ForeignTag`]: it was
//!   not minted by gapless, so it belongs to another server or an older
//!   format, and the HTTP layer answers `namespace_mismatch`.
//!
//! Both are strict and total: they never panic, never allocate, and look at
//! no more than [`MAX_LEN`] bytes. Everything [`EventId::parse`] accepts
//! re-encodes (via `Display`) to exactly the input string.

use crate::{Seq, StreamId};
use std::fmt;
use std::str::FromStr;

/// The longest accepted event id, in bytes.
pub const MAX_LEN: usize = 128;

/// The longest accepted tag (the part before the `-`), in bytes.
pub const MAX_TAG_LEN: usize = 56;

/// Hex digits of a namespace (and of a check) in a tag.
const NS_DIGITS: usize = 16;

/// The longest id [`EventId::encode`] writes: namespace, stream, check and
/// seq at their longest (16 + 20 + 16 + 20 digits) and three separators.
pub const ENCODED_MAX: usize = 2 * NS_DIGITS + 2 * 20 + 3;

/// Writes `v` as 16 lowercase hex digits into `out` (16 bytes).
fn hex16(out: &mut [u8], v: u64) {
    // Each nibble in a byte of its own, most significant first, then all
    // sixteen turned into ASCII at once: no table, no loop.
    let hex = |half: u32| -> [u8; 8] {
        let mut x = u64::from(half);
        x = (x | x << 16) & 0x0000_ffff_0000_ffff;
        x = (x | x << 8) & 0x00ff_00ff_00ff_00ff;
        x = (x | x << 4) & 0x0f0f_0f0f_0f0f_0f0f;
        // 1 in each byte whose nibble is 10 or more (it carries into bit 4).
        let letters = ((x + 0x0606_0606_0606_0606) >> 4) & 0x0101_0101_0101_0101;
        (x + 0x3030_3030_3030_3030 + letters * (b'a' - b'0' - 10) as u64).to_be_bytes()
    };
    out[..8].copy_from_slice(&hex((v >> 32) as u32));
    out[8..16].copy_from_slice(&hex(v as u32));
}

/// "00" to "99".
const PAIRS: &[u8; 200] = b"\
0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// Writes `v` in decimal, no leading zeros, at the start of `out`; returns
/// how many bytes. Two digits at a time into the end of a 20-byte array,
/// then one copy of the digits.
fn decimal(out: &mut [u8], mut v: u64) -> usize {
    let mut tmp = [0u8; SEQ_MAX_LEN];
    let mut i = tmp.len();
    while v >= 100 {
        let r = 2 * (v % 100) as usize;
        v /= 100;
        i -= 2;
        tmp[i] = PAIRS[r];
        tmp[i + 1] = PAIRS[r + 1];
    }
    if v >= 10 {
        let r = 2 * v as usize;
        i -= 2;
        tmp[i] = PAIRS[r];
        tmp[i + 1] = PAIRS[r + 1];
    } else {
        i -= 1;
        tmp[i] = b'0' + v as u8;
    }
    let n = tmp.len() - i;
    out[..n].copy_from_slice(&tmp[i..]);
    n
}

/// The longest seq [`encode_seq`] writes (`u64::MAX` in decimal).
pub const SEQ_MAX_LEN: usize = 20;

/// Writes `seq` as an id's seq field (decimal, no leading zeros): what
/// [`EventId::encode`] writes after [`EventId::encode_prefix`].
pub fn encode_seq(seq: crate::Seq, buf: &mut [u8; SEQ_MAX_LEN]) -> &[u8] {
    let n = decimal(buf, seq.0);
    &buf[..n]
}

/// A 64-bit token naming one session incarnation on the wire.
///
/// The engine draws it at random (`gapless::session`), so it reveals
/// nothing about the session id, and a new incarnation of the same session
/// key gets a new one, which makes the cursors of the older incarnation
/// foreign. `Display` prints exactly 16 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Namespace(pub u64);

impl fmt::Display for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// One event id of our layout: namespace, stream and session-global seq.
///
/// `Display` is the wire form `<ns>_<stream>-<seq>`, or
/// `<ns>_<stream>_<check>-<seq>` with a check. Seq 0 names no event (seqs
/// start at 1) but is syntactically valid; judging it is the resume logic's
/// job, not the codec's.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct EventId {
    /// The session incarnation the event was published in.
    pub ns: Namespace,
    /// The stream the event belongs to (>= 1 on the wire).
    pub stream: StreamId,
    /// The event's session-global sequence number.
    pub seq: Seq,
    /// The event's nonce in a store that keeps one (see the module docs);
    /// `None` for ids minted by the in-process engine.
    pub check: Option<u64>,
}

impl EventId {
    /// Builds an id from its parts, without a check.
    pub const fn new(ns: Namespace, stream: StreamId, seq: Seq) -> EventId {
        EventId { ns, stream, seq, check: None }
    }

    /// The same id carrying `check` (an event's nonce in its store).
    pub const fn with_check(self, check: u64) -> EventId {
        EventId { check: Some(check), ..self }
    }

    /// Writes the wire form (exactly what `Display` prints) into `buf` and
    /// returns the bytes written, without the formatting machinery: the SSE
    /// path writes one id per event.
    pub fn encode<'b>(&self, buf: &'b mut [u8; ENCODED_MAX]) -> &'b [u8] {
        let n = self.prefix_into(buf);
        let end = n + decimal(&mut buf[n..], self.seq.0);
        &buf[..end]
    }

    /// What [`EventId::encode`] writes before the seq: the tag and the `-`.
    /// Ids without a check that share a namespace and a stream share it, so
    /// a transport writing many ids of one stream can keep it and append
    /// each seq with [`encode_seq`].
    pub fn encode_prefix<'b>(&self, buf: &'b mut [u8; ENCODED_MAX]) -> &'b [u8] {
        let n = self.prefix_into(buf);
        &buf[..n]
    }

    /// Writes the tag and the `-` at the start of `buf`; returns how many
    /// bytes (at most `ENCODED_MAX - 20`, room left for any seq).
    fn prefix_into(&self, buf: &mut [u8; ENCODED_MAX]) -> usize {
        hex16(&mut buf[..NS_DIGITS], self.ns.0);
        let mut n = NS_DIGITS;
        buf[n] = b'_';
        n += 1;
        n += decimal(&mut buf[n..], self.stream.0);
        if let Some(c) = self.check {
            buf[n] = b'_';
            hex16(&mut buf[n + 1..n + 1 + NS_DIGITS], c);
            n += 1 + NS_DIGITS;
        }
        buf[n] = b'-';
        n + 1
    }

    /// Parses the wire form strictly (see the module docs).
    ///
    /// A stream id of 0 is [`ParseError::ForeignTag`]: gapless assigns
    /// stream ids from 1, so no gapless server minted such a tag.
    pub fn parse(s: &str) -> Result<EventId, ParseError> {
        let (tag, seq) = parse_wire(s).map_err(ParseError::Malformed)?;
        let (ns, stream, check) = parse_tag(tag).ok_or(ParseError::ForeignTag)?;
        Ok(EventId { ns: Namespace(ns), stream: StreamId(stream), seq: Seq(seq), check })
    }
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.check {
            None => write!(f, "{}_{}-{}", self.ns, self.stream.0, self.seq.0),
            Some(c) => write!(f, "{}_{}_{:016x}-{}", self.ns, self.stream.0, c, self.seq.0),
        }
    }
}

impl FromStr for EventId {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<EventId, ParseError> {
        EventId::parse(s)
    }
}

/// Why a string is not an event id of ours ([`EventId::parse`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ParseError {
    /// Not even the generic `<tag>-<seq>` grammar (HTTP: `malformed_cursor`).
    Malformed(MalformedReason),
    /// A well-formed `<tag>-<seq>` whose tag is not in our
    /// `<16 lowercase hex>_<stream>[_<16 lowercase hex>]` layout (HTTP:
    /// `namespace_mismatch`).
    ForeignTag,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::Malformed(r) => write!(f, "malformed event id: {r}"),
            ParseError::ForeignTag => f.write_str("event id tag is not a gapless namespace and stream"),
        }
    }
}

impl std::error::Error for ParseError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ParseError::Malformed(r) => Some(r),
            ParseError::ForeignTag => None,
        }
    }
}

/// How a string violates the generic `<tag>-<seq>` grammar. Offsets are
/// byte offsets into the whole input.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum MalformedReason {
    /// The empty string.
    Empty,
    /// Longer than [`MAX_LEN`] bytes.
    TooLong {
        /// The input's length in bytes.
        len: usize,
    },
    /// No `-` separator.
    MissingDash,
    /// More than one `-` (so also any signed seq such as `t--5`).
    MultipleDashes {
        /// Offset of the second `-`.
        at: usize,
    },
    /// Nothing before the `-`.
    EmptyTag,
    /// The tag is longer than [`MAX_TAG_LEN`] bytes.
    TagTooLong {
        /// The tag's length in bytes.
        len: usize,
    },
    /// A tag byte outside `[A-Za-z0-9_]` (any non-ASCII character included).
    BadTagChar {
        /// Offset of the first offending byte.
        at: usize,
    },
    /// Nothing after the `-`.
    EmptySeq,
    /// A seq byte that is not an ASCII digit (a sign, a space, ...).
    BadSeqChar {
        /// Offset of the first offending byte.
        at: usize,
    },
    /// The seq has a leading zero (`"0"` itself is fine).
    LeadingZero,
    /// The seq does not fit in a `u64`.
    SeqOverflow,
}

impl fmt::Display for MalformedReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            MalformedReason::Empty => f.write_str("empty"),
            MalformedReason::TooLong { len } => write!(f, "{len} bytes, more than {MAX_LEN}"),
            MalformedReason::MissingDash => f.write_str("no '-' between tag and seq"),
            MalformedReason::MultipleDashes { at } => write!(f, "second '-' at byte {at}"),
            MalformedReason::EmptyTag => f.write_str("empty tag"),
            MalformedReason::TagTooLong { len } => write!(f, "tag of {len} bytes, more than {MAX_TAG_LEN}"),
            MalformedReason::BadTagChar { at } => write!(f, "tag byte {at} is not [A-Za-z0-9_]"),
            MalformedReason::EmptySeq => f.write_str("empty seq"),
            MalformedReason::BadSeqChar { at } => write!(f, "seq byte {at} is not a decimal digit"),
            MalformedReason::LeadingZero => f.write_str("seq has a leading zero"),
            MalformedReason::SeqOverflow => f.write_str("seq does not fit in 64 bits"),
        }
    }
}

impl std::error::Error for MalformedReason {}

/// Splits `s` by the generic grammar `<tag>-<seq>` and returns the tag and
/// the seq. Accepts any tag of 1..=[`MAX_TAG_LEN`] bytes of `[A-Za-z0-9_]`,
/// whatever its layout.
pub fn parse_wire(s: &str) -> Result<(&str, u64), MalformedReason> {
    let b = s.as_bytes();
    if b.is_empty() {
        return Err(MalformedReason::Empty);
    }
    if b.len() > MAX_LEN {
        return Err(MalformedReason::TooLong { len: b.len() });
    }
    let mut dash = None;
    for (i, &c) in b.iter().enumerate() {
        if c == b'-' {
            if dash.is_some() {
                return Err(MalformedReason::MultipleDashes { at: i });
            }
            dash = Some(i);
        }
    }
    let Some(d) = dash else { return Err(MalformedReason::MissingDash) };
    // `d` is the offset of an ASCII byte, so both halves are on char boundaries.
    let (tag, seq) = (&s[..d], &b[d + 1..]);
    if tag.is_empty() {
        return Err(MalformedReason::EmptyTag);
    }
    if tag.len() > MAX_TAG_LEN {
        return Err(MalformedReason::TagTooLong { len: tag.len() });
    }
    if let Some(at) = tag.bytes().position(|c| !(c.is_ascii_alphanumeric() || c == b'_')) {
        return Err(MalformedReason::BadTagChar { at });
    }
    let seq = parse_decimal(seq).map_err(|e| match e {
        DecimalError::Empty => MalformedReason::EmptySeq,
        DecimalError::BadChar(i) => MalformedReason::BadSeqChar { at: d + 1 + i },
        DecimalError::LeadingZero => MalformedReason::LeadingZero,
        DecimalError::Overflow => MalformedReason::SeqOverflow,
    })?;
    Ok((tag, seq))
}

/// Reads our tag layout `<16 lowercase hex>_<stream >= 1>`, optionally
/// followed by `_<16 lowercase hex>` (the check); `None` if the tag is in
/// any other layout.
fn parse_tag(tag: &str) -> Option<(u64, u64, Option<u64>)> {
    let b = tag.as_bytes();
    if b.len() < NS_DIGITS + 2 || b[NS_DIGITS] != b'_' {
        return None;
    }
    let ns = parse_hex16(&b[..NS_DIGITS])?;
    let rest = &b[NS_DIGITS + 1..];
    let (stream, check) = match rest.iter().position(|&c| c == b'_') {
        None => (rest, None),
        Some(i) => (&rest[..i], Some(parse_hex16(&rest[i + 1..])?)),
    };
    match parse_decimal(stream) {
        Ok(0) | Err(_) => None,
        Ok(stream) => Some((ns, stream, check)),
    }
}

/// Exactly 16 lowercase hex digits.
fn parse_hex16(b: &[u8]) -> Option<u64> {
    if b.len() != NS_DIGITS {
        return None;
    }
    let mut v = 0u64;
    for &c in b {
        let digit = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            _ => return None,
        };
        v = v << 4 | u64::from(digit);
    }
    Some(v)
}

enum DecimalError {
    Empty,
    BadChar(usize),
    LeadingZero,
    Overflow,
}

/// Canonical unsigned decimal: digits only, no leading zero unless the whole
/// number is `0`, fits in a `u64`.
fn parse_decimal(b: &[u8]) -> Result<u64, DecimalError> {
    if b.is_empty() {
        return Err(DecimalError::Empty);
    }
    if let Some(i) = b.iter().position(|c| !c.is_ascii_digit()) {
        return Err(DecimalError::BadChar(i));
    }
    if b.len() > 1 && b[0] == b'0' {
        return Err(DecimalError::LeadingZero);
    }
    b.iter().try_fold(0u64, |acc, &c| {
        acc.checked_mul(10).and_then(|v| v.checked_add(u64::from(c - b'0'))).ok_or(DecimalError::Overflow)
    })
}

#[cfg(test)]
mod tests;
