//! What a `subscriptions/listen` stream asked for, as far as the
//! application serves it (`docs/SPEC.md` §5.4), and the notification each
//! announced change becomes on it.

use crate::vocab::change::Change;
use crate::vocab::jsonrpc::{self, RpcError};
use serde_json::{json, Map, Value};

/// What a listen stream asked for, as far as the application serves it.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Filter {
    pub(crate) tools: bool,
    pub(crate) prompts: bool,
    pub(crate) resources: bool,
    pub(crate) uris: Vec<String>,
    /// Tasks whose status changes to send (`notifications/tasks`), as
    /// asked; the acknowledgment names those found for the caller.
    pub(crate) task_ids: Vec<String>,
}

/// Most task ids one listen stream may watch.
const MAX_LISTEN_TASKS: usize = 64;

impl Filter {
    /// The request's `notifications`, less what `caps` (the application's)
    /// does not offer: list changes need `listChanged`, resource updates
    /// `resources.subscribe`.
    pub(crate) fn of(params: &Value, caps: &Value) -> Result<Filter, RpcError> {
        let n = match params.get("notifications") {
            None | Some(Value::Null) => return Ok(Filter::default()),
            Some(n @ Value::Object(_)) => n,
            Some(_) => return Err(RpcError::invalid_params("notifications must be an object")),
        };
        let flag = |k: &str| -> Result<bool, RpcError> {
            match n.get(k) {
                None | Some(Value::Null) => Ok(false),
                Some(Value::Bool(b)) => Ok(*b),
                Some(_) => Err(RpcError::invalid_params(format!("notifications.{k} must be a boolean"))),
            }
        };
        let offers = |kind: &str, what: &str| caps.get(kind).and_then(|c| c.get(what)) == Some(&json!(true));
        let uris = match n.get("resourceSubscriptions") {
            None | Some(Value::Null) => vec![],
            Some(Value::Array(a)) => {
                a.iter().map(|u| u.as_str().map(str::to_owned)).collect::<Option<Vec<_>>>().ok_or_else(
                    || RpcError::invalid_params("notifications.resourceSubscriptions must be strings"),
                )?
            }
            Some(_) => {
                return Err(RpcError::invalid_params("notifications.resourceSubscriptions must be an array"))
            }
        };
        let task_ids = match n.get("taskIds") {
            None | Some(Value::Null) => vec![],
            Some(Value::Array(a)) if a.len() <= MAX_LISTEN_TASKS => a
                .iter()
                .map(|u| u.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| RpcError::invalid_params("notifications.taskIds must be strings"))?,
            Some(Value::Array(_)) => {
                return Err(RpcError::invalid_params(format!(
                    "notifications.taskIds may name at most {MAX_LISTEN_TASKS} tasks"
                )))
            }
            Some(_) => return Err(RpcError::invalid_params("notifications.taskIds must be an array")),
        };
        Ok(Filter {
            task_ids: if crate::tasks::declares(caps) { task_ids } else { vec![] },
            tools: flag("toolsListChanged")? && offers("tools", "listChanged"),
            prompts: flag("promptsListChanged")? && offers("prompts", "listChanged"),
            resources: flag("resourcesListChanged")? && offers("resources", "listChanged"),
            uris: if offers("resources", "subscribe") { uris } else { vec![] },
        })
    }

    /// The acknowledged subset, as the wire has it.
    pub(crate) fn to_json(&self) -> Value {
        let mut m = Map::new();
        for (k, on) in [
            ("toolsListChanged", self.tools),
            ("promptsListChanged", self.prompts),
            ("resourcesListChanged", self.resources),
        ] {
            if on {
                m.insert(k.into(), json!(true));
            }
        }
        if !self.uris.is_empty() {
            m.insert("resourceSubscriptions".into(), json!(self.uris));
        }
        if !self.task_ids.is_empty() {
            m.insert("taskIds".into(), json!(self.task_ids));
        }
        Value::Object(m)
    }

    /// The notification for `c`, if this stream listens to it.
    pub(crate) fn pass(&self, c: &Change, id: &Value) -> Option<Value> {
        let (method, mut params) = match c {
            Change::ToolsListChanged if self.tools => ("notifications/tools/list_changed", json!({})),
            Change::PromptsListChanged if self.prompts => ("notifications/prompts/list_changed", json!({})),
            Change::ResourcesListChanged if self.resources => {
                ("notifications/resources/list_changed", json!({}))
            }
            Change::ResourceUpdated(u) if self.uris.contains(u) => {
                ("notifications/resources/updated", json!({"uri": u}))
            }
            _ => return None,
        };
        params["_meta"] = json!({META_SUBSCRIPTION: id});
        Some(jsonrpc::notification(method, params))
    }

    /// One of every change this stream listens to (after it fell behind).
    pub(crate) fn everything(&self) -> Vec<Change> {
        let mut v = vec![];
        if self.tools {
            v.push(Change::ToolsListChanged);
        }
        if self.prompts {
            v.push(Change::PromptsListChanged);
        }
        if self.resources {
            v.push(Change::ResourcesListChanged);
        }
        v.extend(self.uris.iter().cloned().map(Change::ResourceUpdated));
        v
    }
}

/// `_meta` key naming the subscription a listen stream's message is of.
pub(crate) const META_SUBSCRIPTION: &str = "io.modelcontextprotocol/subscriptionId";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::jsonrpc::code;

    #[test]
    fn a_listen_filter_is_what_was_asked_and_is_offered() {
        let caps = json!({"tools": {"listChanged": true}, "prompts": {"listChanged": false}, "resources": {"subscribe": true}});
        let asked = json!({"notifications": {"toolsListChanged": true, "promptsListChanged": true,
            "resourcesListChanged": true, "resourceSubscriptions": ["a://x"]}});
        let f = Filter::of(&asked, &caps).unwrap();
        assert_eq!(
            f,
            Filter {
                tools: true,
                prompts: false,
                resources: false,
                uris: vec!["a://x".into()],
                task_ids: vec![]
            }
        );
        assert_eq!(f.to_json(), json!({"toolsListChanged": true, "resourceSubscriptions": ["a://x"]}));
        let id = json!(7);
        let n = f.pass(&Change::ToolsListChanged, &id).unwrap();
        assert_eq!(n["params"]["_meta"][META_SUBSCRIPTION], 7);
        assert!(f.pass(&Change::PromptsListChanged, &id).is_none(), "not offered");
        assert!(f.pass(&Change::ResourceUpdated("a://y".into()), &id).is_none(), "not asked");
        assert_eq!(f.pass(&Change::ResourceUpdated("a://x".into()), &id).unwrap()["params"]["uri"], "a://x");
        assert_eq!(f.everything(), [Change::ToolsListChanged, Change::ResourceUpdated("a://x".into())]);
        assert_eq!(Filter::of(&json!({}), &caps).unwrap(), Filter::default());
        for bad in [
            json!({"notifications": 1}),
            json!({"notifications": {"toolsListChanged": "yes"}}),
            json!({"notifications": {"resourceSubscriptions": [1]}}),
            json!({"notifications": {"taskIds": "a"}}),
            json!({"notifications": {"taskIds": [1]}}),
            json!({"notifications": {"taskIds": vec!["a"; MAX_LISTEN_TASKS + 1]}}),
        ] {
            assert_eq!(Filter::of(&bad, &caps).unwrap_err().code, code::INVALID_PARAMS);
        }
    }
}
