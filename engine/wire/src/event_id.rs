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
mod tests {
    use super::*;
    use MalformedReason as M;

    const NS: &str = "00ab34ff9c01de77";

    fn id(ns: u64, stream: u64, seq: u64) -> EventId {
        EventId::new(Namespace(ns), StreamId(stream), Seq(seq))
    }

    /// `encode` writes exactly what `Display` prints, at the edges of every
    /// field and for pseudo-random ones.
    #[test]
    fn encode_is_display() {
        let mut edges = vec![0u64, 1, 9, 10, 11, 99, 100, 101, u64::MAX, u64::MAX - 1, 1 << 63, 0xf];
        for p in 1..20 {
            let t = 10u64.pow(p);
            edges.extend([t - 1, t, t + 1]);
        }
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..200 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            edges.push(x >> (x % 64));
        }
        let mut buf = [0u8; ENCODED_MAX];
        for (i, &a) in edges.iter().enumerate() {
            let b = edges[(i * 7 + 3) % edges.len()];
            let c = edges[(i * 13 + 5) % edges.len()];
            for e in [id(a, b, c), id(c, a, b).with_check(b), id(b, c, a).with_check(a)] {
                assert_eq!(std::str::from_utf8(e.encode(&mut buf)).unwrap(), e.to_string());
                let mut joined = e.encode_prefix(&mut buf).to_vec();
                joined.extend_from_slice(encode_seq(e.seq, &mut [0; SEQ_MAX_LEN]));
                assert_eq!(std::str::from_utf8(&joined).unwrap(), e.to_string());
            }
        }
        let longest = id(u64::MAX, u64::MAX, u64::MAX).with_check(u64::MAX);
        assert_eq!(longest.encode(&mut buf).len(), ENCODED_MAX);
    }

    fn malformed(s: &str) -> MalformedReason {
        match EventId::parse(s) {
            Err(ParseError::Malformed(r)) => {
                assert_eq!(parse_wire(s), Err(r), "layers disagree on {s:?}");
                r
            }
            other => panic!("{s:?}: expected malformed, got {other:?}"),
        }
    }

    fn foreign(s: &str) {
        assert!(parse_wire(s).is_ok(), "{s:?} should be well-formed");
        assert_eq!(EventId::parse(s), Err(ParseError::ForeignTag), "{s:?}");
    }

    #[test]
    fn good_ids_parse_and_round_trip() {
        let cases = [
            (format!("{NS}_3-42"), id(0x00ab_34ff_9c01_de77, 3, 42)),
            ("0000000000000000_1-0".to_owned(), id(0, 1, 0)),
            (
                "ffffffffffffffff_18446744073709551615-18446744073709551615".to_owned(),
                id(u64::MAX, u64::MAX, u64::MAX),
            ),
        ];
        for (s, want) in cases {
            assert_eq!(EventId::parse(&s), Ok(want), "{s}");
            assert_eq!(s.parse::<EventId>(), Ok(want));
            assert_eq!(want.to_string(), s);
        }
        assert_eq!(id(0x00ab_34ff_9c01_de77, 3, 42).to_string(), "00ab34ff9c01de77_3-42");
        assert_eq!(Namespace(1).to_string(), "0000000000000001");
    }

    #[test]
    fn ids_with_a_check_parse_and_round_trip() {
        let checked = id(0x00ab_34ff_9c01_de77, 3, 42).with_check(0x5be0_cd19_137e_2179);
        let s = format!("{NS}_3_5be0cd19137e2179-42");
        assert_eq!(checked.to_string(), s);
        assert_eq!(EventId::parse(&s), Ok(checked));
        assert_eq!(EventId::parse(&format!("{NS}_3_0000000000000000-42")).unwrap().check, Some(0));
        // The longest tag of the layout fits the generic grammar.
        let widest = id(u64::MAX, u64::MAX, u64::MAX).with_check(u64::MAX).to_string();
        assert_eq!(EventId::parse(&widest).unwrap().check, Some(u64::MAX));
        assert!(widest.split('-').next().unwrap().len() <= MAX_TAG_LEN);
        // Without a check the id is another id: equality includes it.
        assert_ne!(checked, id(0x00ab_34ff_9c01_de77, 3, 42));
    }

    #[test]
    fn generic_grammar_accepts_other_layouts() {
        assert_eq!(parse_wire("abc-0"), Ok(("abc", 0)));
        assert_eq!(parse_wire("A_z9-7"), Ok(("A_z9", 7)));
        assert_eq!(parse_wire("_-1"), Ok(("_", 1)));
        let tag40 = "t".repeat(MAX_TAG_LEN);
        assert_eq!(parse_wire(&format!("{tag40}-1")), Ok((tag40.as_str(), 1)));
    }

    #[test]
    fn each_malformed_reason() {
        assert_eq!(malformed(""), M::Empty);
        assert_eq!(malformed(&"1".repeat(MAX_LEN + 1)), M::TooLong { len: MAX_LEN + 1 });
        assert_eq!(malformed("abc"), M::MissingDash);
        assert_eq!(malformed("a-b-5"), M::MultipleDashes { at: 3 });
        assert_eq!(malformed("-5"), M::EmptyTag);
        assert_eq!(
            malformed(&format!("{}-1", "t".repeat(MAX_TAG_LEN + 1))),
            M::TagTooLong { len: MAX_TAG_LEN + 1 }
        );
        assert_eq!(malformed("ab.c-5"), M::BadTagChar { at: 2 });
        assert_eq!(malformed("abc-"), M::EmptySeq);
        assert_eq!(malformed("abc-12x"), M::BadSeqChar { at: 6 });
        assert_eq!(malformed("abc-007"), M::LeadingZero);
        assert_eq!(malformed("abc-18446744073709551616"), M::SeqOverflow);
    }

    #[test]
    fn length_limit_is_exact() {
        let tag = "t".repeat(MAX_TAG_LEN);
        let at_limit = format!("{tag}-{}", "9".repeat(MAX_LEN - MAX_TAG_LEN - 1));
        assert_eq!(at_limit.len(), MAX_LEN);
        // 87 nines overflow a u64, but only after the length check passed.
        assert_eq!(malformed(&at_limit), M::SeqOverflow);
        assert_eq!(malformed(&format!("{at_limit}9")), M::TooLong { len: MAX_LEN + 1 });
    }

    #[test]
    fn ten_kilobyte_inputs_are_refused_by_length() {
        for s in [
            "a".repeat(10_240),
            "-".repeat(10_240),
            format!("{NS}_1-{}", "1".repeat(10_240)),
            "é".repeat(5_120),
        ] {
            assert_eq!(malformed(&s), M::TooLong { len: s.len() });
        }
    }

    #[test]
    fn seq_bounds() {
        assert_eq!(EventId::parse(&format!("{NS}_1-{}", u64::MAX)).map(|i| i.seq), Ok(Seq(u64::MAX)));
        assert_eq!(malformed(&format!("{NS}_1-18446744073709551616")), M::SeqOverflow);
        assert_eq!(malformed(&format!("{NS}_1-99999999999999999999")), M::SeqOverflow);
        assert_eq!(malformed(&format!("{NS}_1-0{}", u64::MAX)), M::LeadingZero);
    }

    #[test]
    fn signs_and_negative_numbers() {
        assert_eq!(malformed("-5"), M::EmptyTag);
        assert_eq!(malformed(&format!("{NS}_1--5")), M::MultipleDashes { at: 19 });
        assert_eq!(malformed(&format!("{NS}_1-+5")), M::BadSeqChar { at: 19 });
        assert_eq!(malformed(&format!("{NS}_1- 5")), M::BadSeqChar { at: 19 });
        assert_eq!(malformed(&format!("{NS}_1-5 ")), M::BadSeqChar { at: 20 });
        assert_eq!(malformed("--"), M::MultipleDashes { at: 1 });
        assert_eq!(malformed("-"), M::EmptyTag);
    }

    #[test]
    fn leading_zeros() {
        assert_eq!(malformed("abc-00"), M::LeadingZero);
        assert_eq!(malformed("abc-01"), M::LeadingZero);
        assert!(parse_wire("abc-0").is_ok());
        assert!(parse_wire("0abc-10").is_ok(), "tags may start with 0");
        foreign(&format!("{NS}_01-5"));
        foreign(&format!("{NS}_00-5"));
    }

    #[test]
    fn unicode_is_malformed_and_never_splits_a_char() {
        assert_eq!(malformed("é-5"), M::BadTagChar { at: 0 });
        assert_eq!(malformed("ab\u{00e9}-5"), M::BadTagChar { at: 2 });
        assert_eq!(malformed("abc-5\u{0665}"), M::BadSeqChar { at: 5 });
        assert_eq!(malformed("abc-\u{0665}"), M::BadSeqChar { at: 4 }, "Arabic-Indic digit five");
        assert_eq!(malformed("abc-\u{ff15}"), M::BadSeqChar { at: 4 }, "fullwidth digit five");
        assert_eq!(malformed("a\u{2010}5"), M::MissingDash, "a Unicode hyphen is not '-'");
        assert_eq!(malformed("ab\0-5"), M::BadTagChar { at: 2 });
    }

    #[test]
    fn foreign_tags() {
        foreign("abc-5");
        foreign("1-5"); // a bare numeric id (most SDKs)
        foreign(&format!("{}_3-42", NS.to_uppercase())); // uppercase hex
        foreign("00ab34ff9c01de7_3-42"); // 15 digits
        foreign("00ab34ff9c01de770_3-42"); // 17 digits
        foreign(&format!("{NS}-42")); // no stream
        foreign(&format!("{NS}_0-42")); // stream 0
        foreign(&format!("{NS}_18446744073709551616-42")); // stream overflow
        foreign(&format!("{NS}_3_4-42")); // a check of 1 digit
        foreign(&format!("{NS}_3_5be0cd19137e217-42")); // of 15
        foreign(&format!("{NS}_3_5be0cd19137e21790-42")); // of 17
        foreign(&format!("{NS}_3_5BE0CD19137E2179-42")); // uppercase
        foreign(&format!("{NS}_3_5be0cd19137e2179_1-42")); // a fourth part
        foreign(&format!("{NS}_3_-42")); // an empty check
        foreign(&format!("{NS}__5be0cd19137e2179-42")); // no stream
        foreign(&format!("{NS}__3-42"));
        foreign("00ab34ff9c01de7g_3-42"); // not hex
        foreign(&format!("x{NS}_3-42"));
        foreign(&format!("{NS}3-42")); // separator missing
    }

    #[test]
    fn errors_display() {
        assert_eq!(ParseError::ForeignTag.to_string(), "event id tag is not a gapless namespace and stream");
        assert_eq!(
            ParseError::Malformed(M::TooLong { len: 200 }).to_string(),
            "malformed event id: 200 bytes, more than 128"
        );
        // The reason is the error's source, so an error chain names it.
        use std::error::Error;
        let e = ParseError::Malformed(M::TooLong { len: 200 });
        assert_eq!(e.source().map(|r| r.to_string()).as_deref(), Some("200 bytes, more than 128"));
        assert!(ParseError::ForeignTag.source().is_none());
    }

    /// xorshift64*: a tiny deterministic generator for property tests.
    struct XorShift(u64);

    impl XorShift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        /// A value with a random bit width, so small and large numbers both occur.
        fn wide(&mut self) -> u64 {
            let bits = self.next() % 65;
            if bits == 64 {
                self.next()
            } else {
                self.next() & ((1u64 << bits) - 1)
            }
        }
    }

    #[test]
    fn round_trip_property() {
        let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
        for _ in 0..20_000 {
            let mut want = id(rng.next(), rng.wide().max(1), rng.wide());
            if rng.next().is_multiple_of(2) {
                want = want.with_check(rng.next());
            }
            let s = want.to_string();
            assert!(s.len() <= MAX_LEN);
            assert_eq!(EventId::parse(&s), Ok(want), "{s}");
            let (tag, seq) = parse_wire(&s).unwrap();
            assert_eq!((tag.len() + 1 + seq.to_string().len(), seq), (s.len(), want.seq.0));
        }
    }

    #[test]
    fn whatever_parses_re_encodes_exactly() {
        // Mutate valid ids byte by byte: anything still accepted must print back unchanged.
        let alphabet = b"0123456789abcdefABCDEF_-+ x\xff";
        let mut rng = XorShift(42);
        let mut accepted = 0;
        for _ in 0..20_000 {
            let mut base = id(rng.next(), rng.wide().max(1), rng.wide());
            if rng.next().is_multiple_of(2) {
                base = base.with_check(rng.next());
            }
            let mut bytes = base.to_string().into_bytes();
            for _ in 0..=rng.next() % 3 {
                let i = (rng.next() % bytes.len() as u64) as usize;
                let c = alphabet[(rng.next() % alphabet.len() as u64) as usize];
                match rng.next() % 3 {
                    0 => bytes[i] = c,
                    1 => bytes.insert(i, c),
                    _ => {
                        bytes.remove(i);
                    }
                }
                if bytes.is_empty() {
                    break;
                }
            }
            let s = String::from_utf8_lossy(&bytes);
            let _ = parse_wire(&s); // total: must not panic
            if let Ok(got) = EventId::parse(&s) {
                accepted += 1;
                assert_eq!(got.to_string(), s, "accepted a non-canonical id");
            }
        }
        assert!(accepted > 1_000, "mutations too destructive to test anything ({accepted})");
    }
}
