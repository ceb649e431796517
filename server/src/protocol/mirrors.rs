//! The tools' mirrored parameters (`x-mcp-header`, SEP-2243), from the
//! application's own `tools/list` (every page), cached until a tool-list
//! change is announced.

use super::Protocol;
use crate::host::{RequestContext, Via};
use crate::sessionless::exchange::{Exchange, Origin};
use crate::sessionless::mirror::{mirrors_of, Mirror};
use crate::sessionless::Declared;
use crate::vocab::config::MODERN_VERSIONS;
use crate::vocab::sync::lock;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The mirrored parameters of `tool`, from the application's own
/// `tools/list` (every page), cached until a tool-list change is announced
/// or a tool not in it is called (listed again at most once a second).
pub(crate) async fn mirrors(p: &Protocol, tool: &str) -> Vec<Mirror> {
    let now = std::time::Instant::now();
    let gen = p.changes.tool_changes();
    if let Some((g, at, map)) = lock(&p.mirrors).tools.clone() {
        let fresh = g == gen
            && (map.contains_key(tool) || now.duration_since(at) < std::time::Duration::from_secs(1));
        if fresh {
            return map.get(tool).cloned().unwrap_or_default();
        }
    }
    let mut tools = vec![];
    let mut cursor: Option<Value> = None;
    for _ in 0..100 {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let Ok(page) = p.host.handle("tools/list".into(), params, internal_context(p)).await else {
            // Not listed: nothing to check against, nothing cached.
            return vec![];
        };
        tools.extend(page.get("tools").and_then(Value::as_array).cloned().unwrap_or_default());
        cursor = page.get("nextCursor").filter(|c| !c.is_null()).cloned();
        if cursor.is_none() {
            break;
        }
    }
    let map = Arc::new(mirrors_of(&Value::Array(tools)));
    let found = map.get(tool).cloned().unwrap_or_default();
    lock(&p.mirrors).tools = Some((gen, now, map));
    found
}

/// A context for the transport's own calls into the application (its tool
/// list): a 2026-07-28 request of no client, whose notifications go nowhere.
fn internal_context(p: &Protocol) -> RequestContext {
    let declared =
        Declared { version: MODERN_VERSIONS[0].to_owned(), capabilities: json!({}), log_level: None };
    let origin = Origin { caller: None, client: None, work: CancellationToken::new() };
    // Its notifications and early end go nowhere: their receivers drop.
    let (exchange, _, _) =
        Exchange::open(declared, "tools/list", Map::new(), origin, p.changes.clone(), Arc::clone(&p.tasks));
    RequestContext {
        headers: None,
        progress_token: None,
        via: Via::Exchange(exchange),
        request_id: json!("gapless:mirrored-parameters"),
        cancel: CancellationToken::new(),
    }
}
