//! The tools' mirrored parameters (`x-mcp-header`, SEP-2243): which
//! argument of a `tools/call` each `Mcp-Param-*` header must carry, read
//! from a `tools/list` result, and the cache of them.

use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// A tool parameter mirrored into a request header (`x-mcp-header`,
/// SEP-2243): `Mcp-Param-{name}` carries the value at `path` of the
/// call's arguments.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Mirror {
    /// The header's name, lower case (`mcp-param-region`).
    pub(crate) header: String,
    /// The property path inside `arguments`.
    pub(crate) path: Vec<String>,
}

/// Every `x-mcp-header` annotation of a `tools/list` result's tools, by
/// tool name: on properties reached through `properties` chains from the
/// input schema's root. An annotation whose name is not a header token is
/// left out (a client rejects such a tool).
pub(crate) fn mirrors_of(tools: &Value) -> HashMap<String, Vec<Mirror>> {
    fn walk(schema: &Value, path: &mut Vec<String>, out: &mut Vec<Mirror>) {
        let Some(props) = schema.get("properties").and_then(Value::as_object) else { return };
        for (k, def) in props {
            path.push(k.clone());
            if let Some(name) = def.get("x-mcp-header").and_then(Value::as_str) {
                let token = !name.is_empty()
                    && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
                if token {
                    out.push(Mirror {
                        header: format!("mcp-param-{}", name.to_ascii_lowercase()),
                        path: path.clone(),
                    });
                }
            }
            walk(def, path, out);
            path.pop();
        }
    }
    let mut map = HashMap::new();
    for t in tools.as_array().into_iter().flatten() {
        let Some(name) = t.get("name").and_then(Value::as_str) else { continue };
        let mut out = vec![];
        if let Some(schema) = t.get("inputSchema") {
            walk(schema, &mut vec![], &mut out);
        }
        map.insert(name.to_owned(), out);
    }
    map
}

/// Each tool's mirrored parameters, by tool name.
pub(crate) type Mirrors = Arc<HashMap<String, Vec<Mirror>>>;

/// What the mirrored-parameter cache holds: the tools as last listed, at
/// which count of tool-list announcements, and when.
#[derive(Debug, Default)]
pub(crate) struct MirrorCache {
    /// The count of tool-list announcements, when, and the tools' mirrors.
    pub(crate) tools: Option<(u64, std::time::Instant, Mirrors)>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn mirrored_parameters_are_read_from_the_tools_schemas() {
        let tools = json!([
            {"name": "a", "inputSchema": {"type": "object", "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "opts": {"type": "object", "properties": {"n": {"type": "integer", "x-mcp-header": "N"}}},
                "bad": {"type": "string", "x-mcp-header": "no spaces"},
                "plain": {"type": "string"}}}},
            {"name": "b", "inputSchema": {"type": "object"}}
        ]);
        let m = mirrors_of(&tools);
        assert_eq!(
            m["a"],
            [
                Mirror { header: "mcp-param-n".into(), path: vec!["opts".into(), "n".into()] },
                Mirror { header: "mcp-param-region".into(), path: vec!["region".into()] },
            ]
        );
        assert!(m["b"].is_empty());
    }
}
