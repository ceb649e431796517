//! Bearer secrets and random names: session ids, ticket secrets and
//! namespaces, all from the OS CSPRNG, and the one hex codec of the 128-bit
//! secrets.

use gapless_wire::Namespace;
use std::fmt;

/// 128 random bits written as 32 lowercase hex digits: the shape shared by
/// session ids and ticket secrets.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Secret([u8; 16]);

impl Secret {
    /// Fresh bits from the OS CSPRNG.
    ///
    /// # Panics
    /// If the OS has no entropy source (no secret can be made safely then).
    pub(crate) fn random() -> Self {
        let mut b = [0u8; 16];
        getrandom::getrandom(&mut b).expect("the OS CSPRNG is available");
        Secret(b)
    }

    /// Parses exactly 32 lowercase hex digits; anything else is `None`.
    pub(crate) fn parse(s: &str) -> Option<Self> {
        let s = s.as_bytes();
        if s.len() != 32 {
            return None;
        }
        let mut b = [0u8; 16];
        for (i, pair) in s.chunks_exact(2).enumerate() {
            b[i] = hex_val(pair[0])? << 4 | hex_val(pair[1])?;
        }
        Some(Secret(b))
    }

    /// The first byte (spreads ids over the hub's shards).
    pub(crate) fn first_byte(&self) -> u8 {
        self.0[0]
    }

    /// A short, non-secret prefix for `Debug` output: never print a secret
    /// whole.
    pub(crate) fn fmt_short(&self, name: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{name}({:02x}{:02x}…)", self.0[0], self.0[1])
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.fmt_short("Secret", f)
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

fn hex_val(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

/// A session id: 128 bits from the OS CSPRNG, written as 32 lowercase hex
/// digits (URL-safe, fits `Mcp-Session-Id`).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SessionId(pub(crate) Secret);

impl SessionId {
    /// A fresh random id.
    pub fn random() -> Self {
        SessionId(Secret::random())
    }

    /// Parses the 32-hex-digit form; anything else is `None` (an id we
    /// could never have issued).
    pub fn parse(s: &str) -> Option<Self> {
        Secret::parse(s).map(SessionId)
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Debug for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Session ids are bearer secrets.
        self.0.fmt_short("SessionId", f)
    }
}

/// A fresh namespace for a new session incarnation, from the OS CSPRNG: it
/// reveals nothing about the session id.
///
/// # Panics
/// If the OS has no entropy source.
pub(crate) fn random_namespace() -> Namespace {
    let mut bytes = [0u8; 8];
    getrandom::getrandom(&mut bytes).expect("the OS CSPRNG is available");
    Namespace(u64::from_le_bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_round_trip_and_refuse_other_shapes() {
        let s = Secret::random();
        assert_eq!(Secret::parse(&s.to_string()), Some(s));
        for bad in ["", "abc", &"A".repeat(32), &"0".repeat(31), &"0".repeat(33), &"g".repeat(32)] {
            assert_eq!(Secret::parse(bad), None, "{bad:?}");
        }
        assert_ne!(Secret::random(), Secret::random());
    }

    #[test]
    fn random_namespaces_differ() {
        let a = random_namespace();
        assert_ne!(a, random_namespace(), "two 64-bit draws collided");
        assert_eq!(a.to_string().len(), 16);
    }

    #[test]
    fn debug_never_prints_a_whole_secret() {
        let id = SessionId::random();
        let dbg = format!("{id:?}");
        assert!(!dbg.contains(&id.to_string()), "{dbg}");
    }
}
