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
    for s in
        ["a".repeat(10_240), "-".repeat(10_240), format!("{NS}_1-{}", "1".repeat(10_240)), "é".repeat(5_120)]
    {
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
