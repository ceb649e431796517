//! The extension's methods (`docs/SPEC.md` §5.5): `tasks/get`,
//! `tasks/update`, `tasks/cancel`, each checked in the order of the
//! section's table.

use super::{declares, not_found, now_ms, required, unavailable, visible, wire, Tasks};
use crate::backend::task_store::{Lookup, Record, Status};
use crate::vocab::jsonrpc::RpcError;
use serde_json::{json, Map, Value};

impl Tasks {
    /// Serves `tasks/get`, `tasks/update`, `tasks/cancel` of a 2026-07-28
    /// request that declared `capabilities`, from `caller`, for an
    /// application that `serves` the extension (its capabilities name it);
    /// any other `tasks/` method, or any at all for an application that
    /// does not, is not served (-32601).
    pub(crate) async fn serve(
        &self,
        method: &str,
        params: &Value,
        capabilities: &Value,
        caller: Option<&str>,
        serves: bool,
    ) -> Result<Value, RpcError> {
        if !serves || !matches!(method, "tasks/get" | "tasks/update" | "tasks/cancel") {
            return Err(RpcError::method_not_found(method));
        }
        if !declares(capabilities) {
            return Err(required());
        }
        let id = match params.get("taskId") {
            Some(Value::String(s)) => s.as_str(),
            _ => return Err(RpcError::invalid_params("params.taskId must be a string")),
        };
        let now = now_ms();
        match method {
            "tasks/get" => match visible(self.store.get(id, now).await.map_err(unavailable)?, caller) {
                Lookup::Found(r) => Ok(Value::Object(wire(&r, true))),
                l => Err(not_found(id, &l)),
            },
            "tasks/update" => self.update(id, params, caller, now).await,
            _ => self.cancel(id, caller, now).await,
        }
    }

    /// `tasks/update`: answers to outstanding input requests move into the
    /// record (other keys are ignored), all or none; the task is working
    /// again once none is outstanding. Acknowledged only once recorded.
    async fn update(
        &self,
        id: &str,
        params: &Value,
        caller: Option<&str>,
        now: u64,
    ) -> Result<Value, RpcError> {
        let responses = match params.get("inputResponses") {
            Some(Value::Object(m)) => m.clone(),
            None | Some(Value::Null) => Map::new(),
            Some(_) => return Err(RpcError::invalid_params("params.inputResponses must be an object")),
        };
        self.check_owner(id, caller, now).await?;
        let mut invalid: Option<String> = None;
        let mut change = |r: &mut Record| {
            invalid = None;
            if r.status.is_terminal() {
                return false;
            }
            let mut take = vec![];
            for (k, v) in &responses {
                let Some(req) = r.input_requests.get(k) else { continue };
                let method = req.get("method").and_then(Value::as_str).unwrap_or_default();
                if let Err(why) = crate::vocab::request_state::check_answer(method, v) {
                    invalid = Some(format!("inputResponses[{k:?}] is not a result of {method}: {why}"));
                    return false;
                }
                take.push(k.clone());
            }
            if take.is_empty() {
                return false;
            }
            for k in take {
                r.input_requests.remove(&k);
                r.answers.insert(k.clone(), responses[&k].clone());
            }
            if r.input_requests.is_empty() {
                r.status = Status::Working;
            }
            r.updated_at_ms = now;
            true
        };
        let l = visible(self.modify(id, now, &mut change).await.map_err(unavailable)?, caller);
        if let Some(why) = invalid {
            return Err(RpcError::invalid_params(why));
        }
        match l {
            Lookup::Found(_) => {
                if let Some(w) = crate::vocab::sync::lock(&self.running).get(id) {
                    w.input.notify_one();
                }
                // The work may run on another node.
                self.tell(id, false).await;
                Ok(json!({}))
            }
            l => Err(not_found(id, &l)),
        }
    }

    /// `tasks/cancel`: a task not yet terminal becomes cancelled at once and
    /// its work here is stopped; a terminal one is acknowledged unchanged.
    async fn cancel(&self, id: &str, caller: Option<&str>, now: u64) -> Result<Value, RpcError> {
        self.check_owner(id, caller, now).await?;
        let mut ended = false;
        let mut change = |r: &mut Record| {
            ended = r.end(Status::Cancelled, None, Some("cancelled by the client".into()), now);
            ended
        };
        let after = self.modify(id, now, &mut change).await;
        if ended {
            self.count_end(&after);
        }
        match visible(after.map_err(unavailable)?, caller) {
            Lookup::Found(r) => {
                if let Some(w) = crate::vocab::sync::lock(&self.running).get(id) {
                    w.cancel.cancel();
                }
                if ended {
                    // Sealed first: no event of the work's after this
                    // reaches a reader, on any node.
                    if let Some(e) = &self.events {
                        e.seal(id, r.expires_at_ms()).await;
                    }
                    // The work may run on another node: it stops at once.
                    self.tell(id, true).await;
                } else if r.status.is_terminal() {
                    self.end_events(id);
                }
                Ok(json!({}))
            }
            l => Err(not_found(id, &l)),
        }
    }

    /// Refuses, as unknown, a task that is not `caller`'s, before anything
    /// of it changes.
    async fn check_owner(&self, id: &str, caller: Option<&str>, now: u64) -> Result<(), RpcError> {
        match visible(self.store.get(id, now).await.map_err(unavailable)?, caller) {
            Lookup::Found(_) => Ok(()),
            l => Err(not_found(id, &l)),
        }
    }
}
