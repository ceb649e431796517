//! What the gateway's test files share: reading a call's stream.
#![allow(unreachable_pub)]

use crate::common::SseReader;
use serde_json::Value;

/// Reads a call's stream to its end: the seqs of its notifications, its
/// response, and the id of each event.
pub async fn drain(
    sse: &mut SseReader,
    upto: Option<usize>,
) -> (Vec<u64>, Option<Value>, Vec<Option<String>>) {
    let (mut seqs, mut ids) = (vec![], vec![]);
    while let Some(e) = sse.next().await {
        ids.push(e.id.clone());
        if let Some(s) = e.emit_seq() {
            seqs.push(s);
        } else if let Some(m) = e.json().filter(|m| m.get("id").is_some()) {
            return (seqs, Some(m), ids);
        }
        if upto.is_some_and(|n| seqs.len() >= n) {
            break;
        }
    }
    (seqs, None, ids)
}
