//! The tasks extension's requests as the cluster tests make them (a module
//! of those tests only, beside `common`).
#![allow(dead_code, unreachable_pub)]

use super::common::SseReader;
use serde_json::{json, Value};
use std::time::Duration;

/// A 2026-07-28 request of the tasks extension to node `url`.
pub async fn task_call(url: &str, method: &str, params: Value) -> Value {
    task_request(url, method, params).await.json().await.unwrap()
}

/// A 2026-07-28 request of the tasks extension to node `url`, answered as
/// JSON or SSE.
pub async fn task_request(url: &str, method: &str, params: Value) -> reqwest::Response {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}},
    });
    let name =
        params.get("name").or(params.get("taskId")).and_then(Value::as_str).unwrap_or_default().to_owned();
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", super::common::ACCEPT_BOTH)
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method)
        .header("mcp-name", name)
        .body(json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string())
        .send()
        .await
        .unwrap()
}

/// "ended" for the empty result of a `tasks/stream` that ended normally,
/// else the response (or its absence) as text.
pub fn ended(response: Option<Value>) -> String {
    match response {
        Some(r) if r["result"]["resultType"] == "complete" => {
            let mut fields: Vec<&String> = r["result"].as_object().unwrap().keys().collect();
            fields.sort_unstable();
            if fields == ["_meta", "resultType"] {
                "ended".into()
            } else {
                r.to_string()
            }
        }
        other => format!("{other:?}"),
    }
}

/// What one `tasks/stream` gave: the events' seqs (each checked to be its
/// task's, with the demo's payload), then its response (`None`: cut after
/// `limit` events, or the stream ended without one).
pub async fn task_stream(url: &str, params: Value, limit: usize) -> (Vec<u64>, Option<Value>) {
    let task = params["taskId"].clone();
    let r = task_request(url, "tasks/stream", params).await;
    if super::common::header(r.headers(), "content-type").as_deref() == Some("application/json") {
        return (vec![], Some(r.json().await.unwrap()));
    }
    let mut sse = SseReader::new(r);
    let mut seqs = vec![];
    while seqs.len() < limit {
        let Some(e) = sse.next().await else { return (seqs, None) };
        let m = e.json().unwrap();
        if m["method"] != "notifications/tasks/event" {
            return (seqs, Some(m));
        }
        assert_eq!(m["params"]["taskId"], task, "{m}");
        assert_eq!(m["params"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], task, "{m}");
        seqs.push(m["params"]["seq"].as_u64().unwrap());
    }
    (seqs, None)
}

/// Follows task `id`'s stream on `url` to its end, resuming at its cursor
/// whenever the store is away (the failover): its seqs and its end.
pub async fn follow(url: String, id: String) -> (Vec<u64>, Value) {
    let mut seen: Vec<u64> = vec![];
    loop {
        let params = match seen.last() {
            Some(l) => json!({"taskId": id, "after": l}),
            None => json!({"taskId": id}),
        };
        let (more, end) = task_stream(&url, params, usize::MAX).await;
        seen.extend(more);
        match end {
            Some(e) if e.get("error").is_none() => return (seen, e),
            Some(e) if e["error"]["code"] == -32603 => {}
            Some(e) => panic!("a refusal: {e}"),
            None => {}
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
