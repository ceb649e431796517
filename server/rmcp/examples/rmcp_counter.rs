//! An rmcp counter server on gapless's transport: the one-line change from
//! rmcp's `StreamableHttpService` to gapless-rmcp's.
//!
//! ```sh
//! cargo run -p gapless-rmcp --example rmcp_counter -- 127.0.0.1:8080
//! ```
//!
//! The endpoint is `http://127.0.0.1:8080/mcp`.

mod counter;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let bind = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:8080".to_owned());
    let mcp = gapless_rmcp::StreamableHttpService::new(
        || Ok(counter::Counter::new()),
        gapless_rmcp::Config::default(),
    )?;
    let app = axum::Router::new().nest_service("/mcp", mcp);
    let listener = tokio::net::TcpListener::bind(&bind).await?;
    eprintln!("rmcp counter on gapless: http://{}/mcp", listener.local_addr()?);
    axum::serve(listener, app).await?;
    Ok(())
}
