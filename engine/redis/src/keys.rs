//! Key names: `<prefix>{<session id>}:<part>`. The braces are Redis
//! Cluster's hash tag, so every key of a session lands in one slot and one
//! script may touch them all.

use gapless::SessionId;

/// The five keys of one session, in the order every script takes them.
pub(crate) fn session_keys(prefix: &str, id: &SessionId) -> [String; 5] {
    let base = format!("{prefix}{{{id}}}");
    [format!("{base}:m"), format!("{base}:l"), format!("{base}:s"), format!("{base}:t"), format!("{base}:o")]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_share_one_hash_tag() {
        let id = SessionId::parse("0123456789abcdef0123456789abcdef").unwrap();
        let keys = session_keys("gapless:", &id);
        assert_eq!(keys[0], "gapless:{0123456789abcdef0123456789abcdef}:m");
        for k in &keys {
            // Redis Cluster hashes only what is between the first braces.
            let tag = &k[k.find('{').unwrap() + 1..k.find('}').unwrap()];
            assert_eq!(tag, id.to_string());
        }
    }
}
