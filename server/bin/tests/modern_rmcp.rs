//! rmcp 3.11's own client in its `Discover` lifecycle (MCP 2026-07-28, no
//! `initialize`) against the demo server over loopback: it lists the tools,
//! calls one, and completes an elicitation by input-required result (its
//! handler answers; rmcp's `call_tool` retries with the answer and the
//! server's `requestState`). No session is created.

mod common;
use common::*;
use gapless_server::ServerConfig;
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult,
    ElicitationAction, Implementation, ProtocolVersion,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RequestContext};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, ErrorData, RoleClient};
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Clone, Default)]
struct Answers {
    asked: Arc<Mutex<Vec<String>>>,
}

impl ClientHandler for Answers {
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        if let ElicitRequestParams::FormElicitationParams { message, .. } = request {
            self.asked.lock().unwrap().push(message);
        }
        Ok(ElicitResult::new(ElicitationAction::Accept).with_content(json!({"name": "Rs"})))
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::builder().enable_elicitation().build(),
            Implementation::new("gapless-rmcp-modern", "0"),
        )
    }
}

/// rmcp's client on `s` in its `Discover` lifecycle (2026-07-28 only),
/// answering with `answers`.
async fn discover(s: &TestServer, answers: &Answers) -> rmcp::service::RunningService<RoleClient, Answers> {
    let transport = StreamableHttpClientTransport::from_uri(s.url.clone());
    let lifecycle = ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] };
    tokio::time::timeout(Duration::from_secs(20), answers.clone().serve_with_lifecycle(transport, lifecycle))
        .await
        .expect("discover in time")
        .expect("server/discover answered")
}

fn text(r: &rmcp::model::CallToolResult) -> String {
    serde_json::to_value(&r.content).unwrap()[0]["text"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn rmcps_client_in_its_discover_lifecycle() {
    let s = start(ServerConfig::default()).await;
    let answers = Answers::default();
    let client = discover(&s, &answers).await;
    let tools = client.list_tools(None).await.unwrap();
    assert!(tools.tools.iter().any(|t| t.name == "test_input_required_result_elicitation"));
    let simple = client.call_tool(CallToolRequestParams::new("test_simple_text")).await.unwrap();
    assert_eq!(text(&simple), "This is a simple text response for testing.");
    let hello =
        client.call_tool(CallToolRequestParams::new("test_input_required_result_elicitation")).await.unwrap();
    assert_eq!(text(&hello), "Hello, Rs!");
    assert_eq!(*answers.asked.lock().unwrap(), ["What is your name?"]);
    client.cancel().await.unwrap();
    assert_eq!(s.server.hub().len(), 0, "no session");
    let m = s.server.metrics_text();
    assert!(m.contains("gapless_sessions_created_total 0"), "{m}");
}

/// The same client against an rmcp handler on gapless-rmcp (the conformance
/// fixtures, `--host rmcp-conformance`): each 2026-07-28 request gets a
/// handler of its own, whose peer holds the request's version, and no
/// session is created. A handler written for a 2025 session that sends
/// `peer.create_elicitation` is refused by rmcp's own peer on that version
/// (it must return rmcp's `InputRequiredResult`): the client gets that
/// error, never a request that waits for ever. One that returns rmcp's
/// `InputRequiredResult` gets its answers on the client's retry.
#[tokio::test]
async fn rmcps_client_against_an_rmcp_handler_without_a_session() {
    let server = gapless_server::McpServer::builder(gapless_server_bin::rmcp_conformance().unwrap())
        .config(ServerConfig::default())
        .build()
        .unwrap();
    let s = TestServer::at(serve(server.router()).await, "/mcp", server);
    let answers = Answers::default();
    let client = discover(&s, &answers).await;
    let tools = client.list_tools(None).await.unwrap();
    assert!(tools.tools.iter().any(|t| t.name == "test_elicitation"), "{:?}", tools.tools);
    let simple = client.call_tool(CallToolRequestParams::new("test_simple_text")).await.unwrap();
    assert_eq!(text(&simple), "This is a simple text response for testing.");
    let args = json!({"message": "Who are you?"}).as_object().unwrap().clone();
    let asked = tokio::time::timeout(
        Duration::from_secs(10),
        client.call_tool(CallToolRequestParams::new("test_elicitation").with_arguments(args)),
    )
    .await
    .expect("answered in time");
    let e = format!("{:?}", asked.expect_err("a server → client request has no place on 2026-07-28"));
    assert!(e.contains("InputRequiredResult"), "{e}");
    assert!(answers.asked.lock().unwrap().is_empty(), "the client was never asked");
    // A tool that runs its own rounds (rmcp's InputRequiredResult and its
    // sealed requestState, which the transport leaves to it): rmcp's client
    // answers and retries.
    let hello =
        client.call_tool(CallToolRequestParams::new("test_input_required_result_elicitation")).await.unwrap();
    assert_eq!(text(&hello), "Hello, Rs!");
    assert_eq!(*answers.asked.lock().unwrap(), ["What is your name?"]);
    client.cancel().await.unwrap();
    assert_eq!(s.server.hub().len(), 0, "no session");
}
