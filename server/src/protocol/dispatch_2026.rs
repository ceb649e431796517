//! A request of MCP 2026-07-28, which has no session (`docs/SPEC.md` §5.4):
//! answered by the transport (`builtin.rs`), by the listen machinery
//! (`listen.rs`), the tasks extension (`tasks/`) and its event streams
//! (`task_stream.rs`), or by the application,
//! whose handler runs on an [`Exchange`] to its response; an attempt its
//! handler ends by asking for input is answered with an input-required
//! result, and a handler that makes the request a task goes on as the
//! task's work.

use super::builtin::{self, complete};
use super::listen::{listen, Listen};
use super::task_stream::{task_stream, StreamCall};
use super::Protocol;
use crate::host::{RequestContext, Via};
use crate::sessionless::exchange::{brought, End, Exchange, Origin, Running};
use crate::sessionless::filter::Filter;
use crate::sessionless::inflight::Permit;
use crate::sessionless::queue::queue;
use crate::sessionless::Declared;
use crate::tasks::{self, Tasks};
use crate::vocab::jsonrpc::{self, RpcError};
use crate::vocab::request_state::{self, Binding, StateKey};
use crate::vocab::sync::lock;
use futures_util::future::BoxFuture;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

/// A checked 2026-07-28 request.
pub(crate) struct Call {
    pub(crate) id: Value,
    pub(crate) method: String,
    pub(crate) params: Value,
    /// What it declared in `_meta`.
    pub(crate) declared: Declared,
    /// The caller's identity.
    pub(crate) caller: Option<String>,
    /// The connection it came on (its peer's address and port), if known:
    /// one `tasks/stream` per task and connection.
    pub(crate) connection: Option<std::net::SocketAddr>,
    /// The headers of the HTTP request that carried it.
    pub(crate) headers: Option<Arc<http::HeaderMap>>,
}

/// Where a request's response goes: its id, its method (a result is
/// completed for it), and the server's identity.
struct Answer {
    id: Value,
    method: String,
    server_info: Value,
    reply: oneshot::Sender<Value>,
}

impl Answer {
    /// Sends `outcome` as the response (a result completed for the
    /// revision; an error with a code the revision forbids made one it
    /// allows, [`RpcError::for_2026`]).
    fn send(self, outcome: Result<Value, RpcError>) {
        let Answer { id, method, server_info, reply } = self;
        let outcome = outcome.map(|r| complete(&method, r, server_info)).map_err(RpcError::for_2026);
        let _ = reply.send(jsonrpc::response(&id, outcome));
    }
}

/// A response that is already answered: no notification comes.
fn answered(response: oneshot::Receiver<Value>) -> Running {
    let (_, notifications) = queue();
    Running { notifications, response, cancel: CancellationToken::new() }
}

/// Starts `call`, admitted under `permit`: `server/discover` and the
/// removed methods answered here, `subscriptions/listen`, the tasks
/// extension's methods, anything else by the application.
pub(crate) fn start(p: &Protocol, call: Call, permit: Permit) -> Running {
    let (reply, response) = oneshot::channel();
    let server_info = p.host.server_info();
    let Call { id, method, mut params, declared, caller, connection, headers } = call;
    if p.host.forwards_sessionless() {
        let answer = Answer { id: id.clone(), method: method.clone(), server_info, reply };
        let call = Call { id, method, params, declared, caller, connection, headers };
        return run(p, call, Map::new(), answer, response, permit);
    }
    let events = p.tasks.serves_events();
    if let Some(outcome) = builtin::sessionless(&*p.host, &method, &declared.version, events) {
        Answer { id, method, server_info, reply }.send(outcome);
        return answered(response);
    }
    if method == "subscriptions/listen" {
        let (tx, notifications) = queue();
        match Filter::of(&params, &p.host.capabilities()) {
            // Task status notifications need the extension declared.
            Ok(f) if !f.task_ids.is_empty() && !tasks::declares(&declared.capabilities) => {
                drop(reply.send(jsonrpc::response(&id, Err(tasks::required()))))
            }
            Ok(filter) => listen(p, Listen { id, filter, caller, server_info }, tx, reply, permit),
            Err(e) => drop(reply.send(jsonrpc::response(&id, Err(e)))),
        }
        return Running { notifications, response, cancel: CancellationToken::new() };
    }
    if method == "tasks/stream" {
        drop(reply);
        let capabilities = declared.capabilities;
        let call = StreamCall { id, params, capabilities, caller, connection, server_info };
        return task_stream(p, call, permit);
    }
    let answer = Answer { id, method, server_info, reply };
    if answer.method.starts_with("tasks/") {
        // The tasks extension's own methods: served from the task store.
        let tasks = Arc::clone(&p.tasks);
        let serves = tasks::declares(&p.host.capabilities());
        tokio::spawn(async move {
            let _permit = permit;
            let outcome =
                tasks.serve(&answer.method, &params, &declared.capabilities, caller.as_deref(), serves).await;
            answer.send(outcome);
        });
        return answered(response);
    }
    // The answers the retry brought for the handler's asks, verified,
    // taken out of the params (moved, not copied: they may be megabytes;
    // the digest a state binds leaves them out anyway); an application
    // that runs its own rounds gets the params untouched.
    let answers = match p.host.seals_request_state() {
        true => match brought(&p.input_key, caller.as_deref(), &answer.method, &mut params) {
            Ok(a) => a,
            Err(e) => {
                answer.send(Err(e));
                return answered(response);
            }
        },
        false => Map::new(),
    };
    let call = Call {
        id: answer.id.clone(),
        method: answer.method.clone(),
        params,
        declared,
        caller,
        connection,
        headers,
    };
    run(p, call, answers, answer, response, permit)
}

/// Runs the application's handler of `call` on its exchange.
fn run(
    p: &Protocol,
    call: Call,
    answers: Map<String, Value>,
    answer: Answer,
    response: oneshot::Receiver<Value>,
    permit: Permit,
) -> Running {
    let Call { id, method, params, declared, caller, headers, .. } = call;
    let cancel = CancellationToken::new();
    // The handler's own cancellation: the response's until the request
    // becomes a task, the task's after (the response is over by then).
    let work = CancellationToken::new();
    let origin = Origin { caller: caller.clone(), client: permit.client_key(), work: work.clone() };
    let (exchange, notifications, ended) =
        Exchange::open(declared, &method, answers, origin, p.changes.clone(), Arc::clone(&p.tasks));
    let ctx = RequestContext {
        headers,
        progress_token: params.get("_meta").and_then(|m| m.get("progressToken")).cloned(),
        via: Via::Exchange(Arc::clone(&exchange)),
        request_id: id.clone(),
        cancel: work.clone(),
    };
    let handler = p.host.handle(method.clone(), params.clone(), ctx);
    let span = tracing::info_span!("request", id = %id, method = %method, era = "2026-07-28");
    let attempt = Attempt {
        method,
        params,
        caller,
        exchange,
        tasks: Arc::clone(&p.tasks),
        key: p.input_key.clone(),
        ttl_ms: p.config.request_state_ttl.as_millis() as u64,
        stop: cancel.clone(),
        shutdown: p.shutdown.clone(),
        work,
    };
    tokio::spawn(tracing::Instrument::instrument(attempt.drive(handler, ended, answer, permit), span));
    Running { notifications, response, cancel }
}

/// One attempt at a request, as its spawned task drives it.
struct Attempt {
    method: String,
    params: Value,
    caller: Option<String>,
    exchange: Arc<Exchange>,
    tasks: Arc<Tasks>,
    /// What seals an input-required result's `requestState`, and for how
    /// long.
    key: StateKey,
    ttl_ms: u64,
    /// The response's cancellation (the client closed it).
    stop: CancellationToken,
    shutdown: CancellationToken,
    /// The handler's cancellation.
    work: CancellationToken,
}

impl Attempt {
    /// Runs `handler` to its outcome, or to the attempt's early end
    /// (`ended`: input asked for, a capability missing, an invalid answer,
    /// a task made), and answers; a task goes on after its handle is sent.
    /// A cancelled request (the client closed the response) or a shutdown
    /// gets no response.
    async fn drive(
        self,
        mut handler: BoxFuture<'static, Result<Value, RpcError>>,
        ended: oneshot::Receiver<End>,
        answer: Answer,
        permit: Permit,
    ) {
        // Resolves only if the handler ends its attempt early (its sender
        // is dropped with the exchange otherwise).
        let ended = async move {
            match ended.await {
                Ok(e) => e,
                Err(_) => std::future::pending().await,
            }
        };
        let outcome = tokio::select! {
            biased;
            r = &mut handler => r,
            e = ended => match e {
                End::Task(created) => {
                    // Stored already: the client may poll it from now.
                    answer.send(Ok(Value::Object(created)));
                    drop(permit);
                    let Some((task, _)) = self.exchange.task.get().cloned() else { return };
                    drop(self.exchange);
                    self.tasks.run(&task, handler, self.shutdown).await;
                    return;
                }
                End::Input(missing) => Ok(self.input_required(missing)),
                End::Capability(caps) => Err(RpcError::missing_client_capability(caps)),
                End::Invalid(why) => Err(RpcError::invalid_params(why)),
            },
            _ = self.stop.cancelled() => return self.work.cancel(),
            _ = self.shutdown.cancelled() => return self.work.cancel(),
        };
        if let Some((task, created)) = self.exchange.task.get().cloned() {
            // The handler became a task and ended before its response went
            // out: the response is still the task's handle, and the
            // outcome the task's.
            answer.send(Ok(Value::Object(created)));
            self.tasks.settle(&task, outcome).await;
            return;
        }
        answer.send(outcome);
        drop(permit);
    }

    /// An input-required result naming the `missing` inputs, with what
    /// this attempt was answered sealed in its `requestState`.
    fn input_required(&self, missing: Map<String, Value>) -> Value {
        let b = Binding { caller: self.caller.as_deref(), method: &self.method, params: &self.params };
        let used = lock(&self.exchange.used).clone();
        json!({
            "resultType": "input_required",
            "inputRequests": missing,
            "requestState": request_state::seal(&self.key, &b, &used, self.ttl_ms),
        })
    }
}
