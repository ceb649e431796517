//! Handling secrets: a session id is a bearer secret, so logs name a
//! session by its [`SessionTag`]; tokens and seals are compared with
//! [`constant_time_eq`].

/// A short, opaque name of a session for logs and spans: 8 hex digits of
/// a keyed hash of its id (the key is random per process). The id itself
/// is a bearer secret and never appears in a log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SessionTag(u32);

impl SessionTag {
    /// The tag of the session id `id` (as sent; need not be valid).
    pub(crate) fn of(id: &str) -> Self {
        use std::hash::BuildHasher;
        static KEY: std::sync::OnceLock<std::collections::hash_map::RandomState> = std::sync::OnceLock::new();
        SessionTag(KEY.get_or_init(Default::default).hash_one(id) as u32)
    }

    /// The tag of `id`.
    pub(crate) fn of_id(id: &gapless::SessionId) -> Self {
        Self::of(&id.to_string())
    }
}

impl std::fmt::Display for SessionTag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:08x}", self.0)
    }
}

/// Equal without an early exit on the first differing byte (how long a
/// comparison takes reveals nothing of where a guess went wrong).
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_tags_are_stable_short_and_not_the_id() {
        let id = gapless::SessionId::random();
        let (a, b) = (SessionTag::of_id(&id), SessionTag::of(&id.to_string()));
        assert_eq!(a, b);
        let shown = a.to_string();
        assert_eq!(shown.len(), 8);
        assert!(!id.to_string().contains(&shown), "the tag is no part of the id");
        assert_ne!(SessionTag::of("a"), SessionTag::of("b"));
    }

    #[test]
    fn equal_bytes_only() {
        assert!(constant_time_eq(b"s3cret", b"s3cret"));
        for other in [&b"s3cre"[..], b"s3cret2", b"S3CRET", b""] {
            assert!(!constant_time_eq(b"s3cret", other));
        }
    }
}
