//! A session's values, holds and flush for the application
//! (`SessionHandle::set_value`, `value`, `hold`, `flush`) and
//! `Host::on_attach` (`docs/SPEC.md` §5.1), in one process and on two
//! cluster nodes of a real `redis-server`: what a gateway keeps of a
//! session for every node.

mod common;
use common::*;
use futures_util::future::BoxFuture;
use gapless_redis::testing::RedisServer;
use gapless_server::{Host, McpServer, RequestContext, RpcError, ServerConfig, SessionHandle, ValueError};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A host whose methods are the session handle's: `values/set`,
/// `values/get`, `values/hold`, `values/flush`; it keeps the handle of each
/// session's `notifications/initialized`, and counts `on_attach`.
#[derive(Default)]
struct ValuesHost {
    handles: Arc<Mutex<Vec<SessionHandle>>>,
    attached: Arc<AtomicUsize>,
}

fn err(e: ValueError) -> RpcError {
    RpcError::new(-31000, e.to_string())
}

impl Host for ValuesHost {
    fn capabilities(&self) -> Value {
        json!({})
    }

    fn handle(
        &self,
        method: String,
        params: Value,
        ctx: RequestContext,
    ) -> BoxFuture<'static, Result<Value, RpcError>> {
        Box::pin(async move {
            let s = ctx.session().expect("a session");
            let name = params["name"].as_str().unwrap_or_default().to_owned();
            match method.as_str() {
                "values/set" => {
                    s.set_value(&name, params["value"].as_str().unwrap()).await.map_err(err)?;
                    Ok(json!({}))
                }
                "values/get" => Ok(json!({"value": s.value(&name).await.map_err(err)?})),
                "values/hold" => Ok(json!({"held": s.hold(&name).await.map_err(err)?})),
                "values/release" => {
                    s.release(&name).await.map_err(err)?;
                    Ok(json!({}))
                }
                "values/acquire" => {
                    s.acquire(&name).await.map_err(err)?;
                    Ok(json!({}))
                }
                "values/flush" => {
                    s.notify("notifications/message", json!({"level": "info", "data": "before"}))
                        .await
                        .unwrap();
                    s.flush().await.map_err(|e| RpcError::new(-31000, e.to_string()))?;
                    Ok(json!({"in_cluster": s.in_cluster()}))
                }
                _ => Err(RpcError::new(-32601, "no such method")),
            }
        })
    }

    fn on_notification(&self, method: &str, _params: &Value, session: &SessionHandle) {
        if method == "notifications/initialized" {
            self.handles.lock().unwrap().push(session.clone());
        }
    }

    fn on_attach(&self, _session: &SessionHandle) {
        self.attached.fetch_add(1, Ordering::SeqCst);
    }
}

async fn rpc(s: &TestServer, sid: &str, method: &str, params: Value) -> Value {
    let r = s
        .post_accepting(
            sid,
            json!({"jsonrpc":"2.0","id":1,"method":method,"params":params}),
            "application/json, text/event-stream",
        )
        .await;
    assert_eq!(r.status(), 200, "{method}");
    let mut sse = SseReader::new(r);
    while let Some(e) = sse.next().await {
        if let Some(m) = e.json().filter(|m| m.get("id").is_some()) {
            return m;
        }
    }
    panic!("{method}: no response")
}

async fn served(host: ValuesHost, redis: Option<&str>) -> TestServer {
    let mut b = McpServer::builder(host).config(ServerConfig::default());
    if let Some(url) = redis {
        let store =
            gapless_redis::RedisStore::connect(url, gapless_redis::StoreConfig::default()).await.unwrap();
        b = b.store(store, url);
    }
    let server = b.build().unwrap();
    let addr = serve(server.router()).await;
    TestServer::at(addr, "/mcp", server)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_process_values_live_with_the_session_and_every_hold_is_held() {
    let host = ValuesHost::default();
    let (handles, attached) = (Arc::clone(&host.handles), Arc::clone(&host.attached));
    let s = served(host, None).await;
    let sid = s.initialize().await;
    assert_eq!(rpc(&s, &sid, "values/get", json!({"name": "k"})).await["result"], json!({"value": null}));
    rpc(&s, &sid, "values/set", json!({"name": "k", "value": "v1"})).await;
    assert_eq!(rpc(&s, &sid, "values/get", json!({"name": "k"})).await["result"], json!({"value": "v1"}));
    assert_eq!(rpc(&s, &sid, "values/hold", json!({"name": "h"})).await["result"], json!({"held": true}));
    assert_eq!(rpc(&s, &sid, "values/flush", json!({})).await["result"], json!({"in_cluster": false}));
    let other = s.initialize().await;
    assert_eq!(
        rpc(&s, &other, "values/get", json!({"name": "k"})).await["result"],
        json!({"value": null}),
        "per session"
    );

    let handle = handles.lock().unwrap()[0].clone();
    let r = s.http.delete(&s.url).header("mcp-session-id", &sid).send().await.unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(handle.value("k").await, Err(ValueError::Closed), "gone with the session");
    assert_eq!(handle.set_value("k", "v2").await, Err(ValueError::Closed));
    assert_eq!(handle.hold("h").await, Err(ValueError::Closed));
    assert_eq!(attached.load(Ordering::SeqCst), 0, "no node takes a session up in process");
}

/// Two cluster nodes: a value set on one is read on the other, which was
/// told it took the session up; a hold is one node's; the store says a
/// session is gone to a node that still has its state; `end` on one node
/// is `404` on the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_values_are_every_nodes_and_a_hold_is_one_nodes() {
    let redis = RedisServer::start(&[]);
    let (ha, hb) = (ValuesHost::default(), ValuesHost::default());
    let (handles_a, attached_a, attached_b) =
        (Arc::clone(&ha.handles), Arc::clone(&ha.attached), Arc::clone(&hb.attached));
    let a = served(ha, Some(&redis.url())).await;
    let b = served(hb, Some(&redis.url())).await;
    let sid = a.initialize().await;
    rpc(&a, &sid, "values/set", json!({"name": "k", "value": "from a"})).await;
    assert_eq!(rpc(&b, &sid, "values/get", json!({"name": "k"})).await["result"], json!({"value": "from a"}));
    assert_eq!((attached_a.load(Ordering::SeqCst), attached_b.load(Ordering::SeqCst)), (0, 1));
    assert_eq!(rpc(&a, &sid, "values/hold", json!({"name": "h"})).await["result"], json!({"held": true}));
    assert_eq!(rpc(&b, &sid, "values/hold", json!({"name": "h"})).await["result"], json!({"held": false}));
    assert_eq!(
        rpc(&a, &sid, "values/hold", json!({"name": "h"})).await["result"],
        json!({"held": true}),
        "the holder again"
    );
    // b waits for it (acquire) while a holds it, and gets it once a lets
    // go; a live holder's hold is never taken, however long it goes
    // without a word.
    let waiting = {
        let (url, http, sid) = (b.url.clone(), b.http.clone(), sid.clone());
        tokio::spawn(async move {
            let body = json!({"jsonrpc":"2.0","id":9,"method":"values/acquire","params":{"name":"h"}});
            http.post(&url)
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .header("mcp-session-id", &sid)
                .body(body.to_string())
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap()
        })
    };
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(!waiting.is_finished(), "a's hold is a's while a lives");
    rpc(&a, &sid, "values/release", json!({"name": "h"})).await;
    assert_eq!(rpc(&b, &sid, "values/hold", json!({"name": "h"})).await["result"], json!({"held": true}));
    let acquired = tokio::time::timeout(Duration::from_secs(5), waiting).await.expect("acquired").unwrap();
    assert!(acquired.contains("\"result\":{}"), "{acquired}");
    assert_eq!(rpc(&a, &sid, "values/hold", json!({"name": "h"})).await["result"], json!({"held": false}));
    assert_eq!(rpc(&b, &sid, "values/flush", json!({})).await["result"], json!({"in_cluster": true}));

    // Deleted on b: a's handle learns it from the store.
    let handle = handles_a.lock().unwrap()[0].clone();
    let r = b.http.delete(&b.url).header("mcp-session-id", &sid).send().await.unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(handle.value("k").await, Err(ValueError::Closed));

    // `end` on a is 404 on b.
    let again = a.initialize().await;
    assert_eq!(rpc(&b, &again, "values/get", json!({"name": "k"})).await["result"], json!({"value": null}));
    let handle = handles_a.lock().unwrap()[1].clone();
    handle.end();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let r = b
            .post(Some(&again), json!({"jsonrpc":"2.0","id":2,"method":"values/get","params":{"name":"k"}}))
            .await;
        if r.status() == 404 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "still {} on the other node", r.status());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
