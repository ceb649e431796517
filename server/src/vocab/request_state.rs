//! `requestState` of MCP 2026-07-28's input-required results (SEP-2322,
//! `docs/SPEC.md` §5.4): what a request's earlier rounds were answered,
//! sealed so that a client can carry it but not alter it, nor present it on
//! another request, as another caller, or late.
//!
//! A token is `base64url(payload) "." base64url(HMAC-SHA-256(key, base64url(payload)))`;
//! the payload names the caller, the method, a digest of the request's
//! params (without `_meta`, `inputResponses` and `requestState`), an expiry
//! and the answers. The key is the server's (random per process unless
//! configured: the nodes of a cluster need the same one).
//!
//! Also here: the shape an answer to an input request must have
//! ([`check_answer`]), for input-required results and for the tasks
//! extension's `tasks/update` alike.

use super::secret::constant_time_eq;
use super::time::now_ms;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine as _;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

/// The secret the tokens are sealed with.
#[derive(Clone)]
pub(crate) struct StateKey([u8; 32]);

impl std::fmt::Debug for StateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateKey(..)")
    }
}

impl StateKey {
    /// From configured secret bytes (any length), or 32 random bytes.
    pub(crate) fn new(secret: Option<&[u8]>) -> Self {
        match secret {
            Some(s) => StateKey(Sha256::digest(s).into()),
            None => {
                let mut k = [0u8; 32];
                getrandom::getrandom(&mut k).expect("the OS random source");
                StateKey(k)
            }
        }
    }
}

/// HMAC-SHA-256 (RFC 2104).
fn hmac(key: &[u8; 32], message: &[u8]) -> [u8; 32] {
    let mut block = [0u8; 64];
    block[..32].copy_from_slice(key);
    let pad = |b: u8| block.map(|k| k ^ b);
    let inner = Sha256::new().chain_update(pad(0x36)).chain_update(message).finalize();
    Sha256::new().chain_update(pad(0x5c)).chain_update(inner).finalize().into()
}

/// JSON with object keys sorted, at every depth: the same value always
/// gives the same bytes, whatever order the client sent its keys in.
fn canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => canonical_object(m, &[], out),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(x, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// [`canonical`] of an object without its keys in `skip` (at its own
/// level only).
fn canonical_object(m: &Map<String, Value>, skip: &[&str], out: &mut String) {
    let mut keys: Vec<&String> = m.keys().filter(|k| !skip.contains(&k.as_str())).collect();
    keys.sort();
    out.push('{');
    for (i, k) in keys.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&Value::String(k.clone()).to_string());
        out.push(':');
        canonical(&m[k], out);
    }
    out.push('}');
}

/// What a retry may change in a request's params: left out of the digest.
pub(crate) const RETRY_KEYS: [&str; 3] = ["_meta", "inputResponses", "requestState"];

/// The digest a token binds: the request's params but what a retry may
/// change ([`RETRY_KEYS`]), without copying them (an `inputResponses` may
/// be megabytes).
fn digest(params: &Value) -> String {
    let mut s = String::new();
    match params {
        Value::Object(m) => canonical_object(m, &RETRY_KEYS, &mut s),
        other => canonical(other, &mut s),
    }
    Sha256::digest(s.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// What a request is: who asks, what, with which params.
pub(crate) struct Binding<'a> {
    pub(crate) caller: Option<&'a str>,
    pub(crate) method: &'a str,
    pub(crate) params: &'a Value,
}

/// Seals `answers` for the retry of the request `b`, valid for `ttl_ms`.
pub(crate) fn seal(key: &StateKey, b: &Binding<'_>, answers: &Map<String, Value>, ttl_ms: u64) -> String {
    let payload = json!({
        "v": 1,
        "p": b.caller,
        "m": b.method,
        "d": digest(b.params),
        "x": now_ms().saturating_add(ttl_ms),
        "a": answers,
    });
    let body = B64.encode(payload.to_string());
    let tag = B64.encode(hmac(&key.0, body.as_bytes()));
    format!("{body}.{tag}")
}

/// The answers a token carries, if it is whole, this server's, unexpired,
/// and of this request and caller; else why not (for the -32602 message).
pub(crate) fn open(key: &StateKey, b: &Binding<'_>, token: &str) -> Result<Map<String, Value>, &'static str> {
    let (body, tag) = token.split_once('.').ok_or("it is not a sealed state")?;
    let tag = B64.decode(tag).map_err(|_| "its seal is not Base64")?;
    if !constant_time_eq(&tag, &hmac(&key.0, body.as_bytes())) {
        return Err("its seal does not verify (altered, or sealed by another server)");
    }
    let payload: Value = B64
        .decode(body)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or("its payload is not JSON")?;
    if payload["v"] != 1 {
        return Err("it is of another format");
    }
    if payload["x"].as_u64().is_none_or(|x| x < now_ms()) {
        return Err("it has expired");
    }
    if payload["p"].as_str() != b.caller {
        return Err("it was issued to another caller");
    }
    if payload["m"].as_str() != Some(b.method) || payload["d"].as_str() != Some(digest(b.params).as_str()) {
        return Err("it was issued for another request");
    }
    match payload.get("a") {
        Some(Value::Object(a)) => Ok(a.clone()),
        _ => Err("it carries no answers"),
    }
}

/// The shape of a client's result for an input request of `method`: what
/// its handler will read.
pub(crate) fn check_answer(method: &str, a: &Value) -> Result<(), &'static str> {
    match method {
        "elicitation/create" => match a.get("action").and_then(Value::as_str) {
            Some("accept" | "decline" | "cancel") => Ok(()),
            _ => Err("its action must be accept, decline or cancel"),
        },
        "sampling/createMessage" => {
            if a.get("role").is_some_and(Value::is_string)
                && a.get("content").is_some_and(|c| c.is_object() || c.is_array())
            {
                Ok(())
            } else {
                Err("it needs a role and a content")
            }
        }
        _ => match a.get("roots") {
            Some(Value::Array(_)) => Ok(()),
            _ => Err("its roots must be an array"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231_case_2() {
        // Key "Jefe" (zero-padded to 32 bytes gives the same HMAC: keys
        // shorter than the block are padded with zeros anyway).
        let mut key = [0u8; 32];
        key[..4].copy_from_slice(b"Jefe");
        let tag = hmac(&key, b"what do ya want for nothing?");
        let hex: String = tag.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    }

    #[test]
    fn a_token_opens_only_for_its_request_caller_and_key() {
        let key = StateKey::new(Some(b"secret"));
        let params = json!({"name": "t", "arguments": {"a": 1, "b": [1, {"y": 2, "x": 1}]}});
        let b = Binding { caller: Some("alice"), method: "tools/call", params: &params };
        let answers = Map::from_iter([("k".to_owned(), json!({"action": "accept"}))]);
        let t = seal(&key, &b, &answers, 60_000);
        assert_eq!(open(&key, &b, &t), Ok(answers.clone()));
        // The same params with keys in another order, and with what a retry
        // adds: the same request.
        let retry = json!({"arguments": {"b": [1, {"x": 1, "y": 2}], "a": 1}, "name": "t",
                           "inputResponses": {"k": {}}, "requestState": t, "_meta": {"x": 1}});
        assert!(open(&key, &Binding { params: &retry, ..b }, &t).is_ok());
        let other = json!({"name": "t", "arguments": {"a": 2}});
        assert_eq!(
            open(&key, &Binding { params: &other, ..b }, &t),
            Err("it was issued for another request")
        );
        assert_eq!(
            open(&key, &Binding { method: "prompts/get", ..b }, &t),
            Err("it was issued for another request")
        );
        assert_eq!(open(&key, &Binding { caller: None, ..b }, &t), Err("it was issued to another caller"));
        assert!(open(&StateKey::new(Some(b"other")), &b, &t).unwrap_err().contains("does not verify"));
        // Any change to the payload or the seal.
        let (body, tag) = t.split_once('.').unwrap();
        let mut flipped = body.as_bytes().to_vec();
        flipped[3] = if flipped[3] == b'A' { b'B' } else { b'A' };
        let altered = format!("{}.{tag}", String::from_utf8(flipped).unwrap());
        assert!(open(&key, &b, &altered).unwrap_err().contains("does not verify"));
        assert!(open(&key, &b, &format!("{t}-TAMPERED")).is_err());
        assert!(open(&key, &b, "garbage").is_err());
        // Expired.
        let old = seal(&key, &b, &answers, 0);
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert_eq!(open(&key, &b, &old), Err("it has expired"));
    }
}
