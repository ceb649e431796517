//! The composition root: [`AppState`], everything the routes share, built
//! once from the builder's parts ([`build`]). Only the layers above it
//! (`http/`, `operator/`, `lib.rs`, `serve.rs`) name it.

use crate::backend::{Backend, RedisStore};
use crate::host::Host;
use crate::protocol::Protocol;
use crate::session::fairness::Fairness;
use crate::session::Sessions;
use crate::sessionless::inflight::Inflight;
use crate::tasks::{Limits, Tasks};
use crate::telemetry::Metrics;
use crate::vocab::byte_budget::BodyBudget;
use crate::vocab::change::Announcer;
use crate::vocab::config::ServerConfig;
use crate::vocab::identity::IdentityFn;
use crate::vocab::request_state::StateKey;
use gapless::ring::ConfigError;
use gapless::Hub;
use std::fmt;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Everything the handlers share.
pub(crate) struct AppState {
    /// This node's sessions (and where they live).
    pub(crate) sessions: Arc<Sessions>,
    /// What the protocol layer runs messages with (the application, tasks,
    /// announcements, the `requestState` key).
    pub(crate) protocol: Protocol,
    pub(crate) config: Arc<ServerConfig>,
    pub(crate) identity: Option<IdentityFn>,
    /// Cancelled on shutdown: every open stream ends.
    pub(crate) shutdown: CancellationToken,
    /// Per-client limits on `initialize` and live sessions.
    pub(crate) fairness: Arc<Fairness>,
    /// The endpoint's route inside the router (`/mcp` by default; `/` when
    /// the application nests the router at the endpoint's path itself).
    pub(crate) path: String,
    /// What the operator's metrics count (`telemetry/`).
    pub(crate) metrics: Arc<Metrics>,
    /// The bound on 2026-07-28 requests in flight.
    pub(crate) sessionless: Arc<Inflight>,
    /// The bound on request bodies being received.
    pub(crate) bodies: Arc<BodyBudget>,
}

impl AppState {
    /// Expires idle sessions, tickets and tasks.
    pub(crate) fn sweep(&self) {
        self.sessions.sweep();
        self.protocol.tasks.store.sweep(crate::vocab::time::now_ms());
        self.protocol.tasks.sweep_listen_reads();
    }
}

/// Why [`McpServerBuilder::build`](crate::McpServerBuilder::build) refused a configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BuildError {
    /// The ring bounds are invalid.
    Ring(ConfigError),
    /// The endpoint path is not an absolute path of plain segments.
    Path {
        /// The path as given.
        path: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The cluster store could not be used.
    Store(String),
    /// `ServerConfig::request_state_secret` has fewer than 16 bytes.
    Secret,
    /// The task event streams' bounds are invalid (`task_events_*`,
    /// `max_task_event_bytes`).
    TaskEvents(String),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::Ring(e) => write!(f, "invalid ring configuration: {e}"),
            BuildError::Path { path, reason } => write!(f, "invalid endpoint path {path:?}: {reason}"),
            BuildError::Store(e) => write!(f, "session store: {e}"),
            BuildError::Secret => f.write_str("request_state_secret must have at least 16 bytes"),
            BuildError::TaskEvents(e) => write!(f, "invalid task event stream bounds: {e}"),
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BuildError::Ring(e) => Some(e),
            BuildError::Path { .. }
            | BuildError::Store(_)
            | BuildError::Secret
            | BuildError::TaskEvents(_) => None,
        }
    }
}

/// The bounds of each task's event stream, checked.
fn task_events(c: &ServerConfig) -> Result<gapless::task::TaskEventsConfig, BuildError> {
    let config = gapless::task::TaskEventsConfig {
        max_events: c.task_events_max,
        max_bytes: c.task_events_max_bytes,
        max_age: Some(c.task_events_max_age),
    };
    gapless::task::TaskEvents::new(config).map_err(|e| BuildError::TaskEvents(e.to_string()))?;
    // A stream keeps an event's type with its payload.
    let room = c.task_events_max_bytes.saturating_sub(crate::tasks::EVENT_OVERHEAD);
    if c.max_task_event_bytes == 0 || c.max_task_event_bytes > room {
        return Err(BuildError::TaskEvents(format!(
            "max_task_event_bytes ({}) must be between 1 and task_events_max_bytes ({}) less {} bytes for the event's type",
            c.max_task_event_bytes,
            c.task_events_max_bytes,
            crate::tasks::EVENT_OVERHEAD
        )));
    }
    Ok(config)
}

/// The shared state of a server around `host`, or why the configuration
/// is refused.
pub(crate) fn build(
    host: Arc<dyn Host>,
    mut config: ServerConfig,
    path: &str,
    identity: Option<IdentityFn>,
    store: Option<(RedisStore, String)>,
) -> Result<Arc<AppState>, BuildError> {
    let path = normalize_path(path)?;
    // Where sessions and tasks live is decided here, once.
    let backend = match store {
        Some((store, url)) => Backend::cluster(store, &url, &mut config.hub.ring)
            .map_err(|e| BuildError::Store(e.to_string()))?,
        None => Backend::Local,
    };
    let hub = Arc::new(Hub::new(config.hub).map_err(BuildError::Ring)?);
    let c = &config;
    let fairness =
        Arc::new(Fairness::new(c.initialize_per_sec, c.initialize_burst, c.max_sessions_per_client));
    if c.request_state_secret.as_ref().is_some_and(|s| s.len() < 16) {
        return Err(BuildError::Secret);
    }
    let input_key = StateKey::new(c.request_state_secret.as_deref());
    let sessionless = Inflight::new(c.max_stateless_inflight, c.max_stateless_inflight_per_client);
    let bodies = Arc::new(BodyBudget::new(c.max_body_bytes_in_flight, c.max_body_bytes));
    let limits = Limits {
        ttl: c.task_ttl,
        max_ttl: c.max_task_ttl,
        poll_interval: c.task_poll_interval,
        max_tasks: c.max_tasks,
        max_per_client: c.max_tasks_per_client,
        max_result_bytes: c.max_task_result_bytes,
        // In this process, or in a cluster beside the task records
        // (`docs/SPEC.md` §5.6).
        events: Some((task_events(c)?, c.max_task_event_bytes)),
    };
    let metrics = Arc::new(Metrics::new());
    // Tasks live where sessions do: in Redis in cluster mode.
    let task_store = backend.task_store();
    let cluster_events = limits.events.and_then(|(config, _)| backend.task_events(&task_store, config));
    let tasks = Arc::new(Tasks::new(
        task_store,
        limits,
        backend.node(),
        Arc::clone(&metrics),
        Arc::clone(&hub),
        cluster_events,
        backend.task_news(),
    ));
    let config = Arc::new(config);
    let (shutdown, changes) = (CancellationToken::new(), Announcer::new());
    let on_attach = {
        let host = Arc::clone(&host);
        Box::new(move |s: &Arc<crate::session::SessionState>| {
            host.on_attach(&crate::host::SessionHandle { sess: Arc::clone(s) })
        })
    };
    let sessions = Sessions::new(
        hub,
        backend,
        Arc::clone(&config),
        Arc::clone(&metrics),
        shutdown.clone(),
        changes.clone(),
        on_attach,
    );
    let protocol = Protocol {
        host,
        config: Arc::clone(&config),
        tasks,
        changes,
        input_key,
        mirrors: Default::default(),
        shutdown: shutdown.clone(),
    };
    Ok(Arc::new(AppState {
        sessions,
        protocol,
        config,
        identity,
        shutdown,
        fairness,
        path,
        metrics,
        sessionless,
        bodies,
    }))
}

/// `/mcp`, `/a/b` or `/`: absolute, no empty, `.`/`..` or `{`/`}` segment,
/// no query; a trailing `/` is dropped.
fn normalize_path(path: &str) -> Result<String, BuildError> {
    let bad = |reason| Err(BuildError::Path { path: path.to_owned(), reason });
    if !path.starts_with('/') {
        return bad("must start with '/'");
    }
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        return Ok("/".to_owned());
    }
    for seg in trimmed[1..].split('/') {
        if seg.is_empty() || seg == "." || seg == ".." {
            return bad("has an empty, '.' or '..' segment");
        }
        if seg.bytes().any(|b| matches!(b, b'{' | b'}' | b'?' | b'#' | b'*' | b':') || b <= b' ' || b >= 0x7f)
        {
            return bad(
                "may hold only plain path characters (no '{', '}', '?', '#', '*', ':', spaces or non-ASCII)",
            );
        }
    }
    Ok(trimmed.to_owned())
}

#[cfg(test)]
mod tests {
    use super::normalize_path;

    #[test]
    fn endpoint_paths() {
        assert_eq!(normalize_path("/mcp").unwrap(), "/mcp");
        assert_eq!(normalize_path("/mcp/").unwrap(), "/mcp");
        assert_eq!(normalize_path("/a/b").unwrap(), "/a/b");
        assert_eq!(normalize_path("/").unwrap(), "/");
        for bad in ["", "mcp", "/a//b", "/a/../b", "/{id}", "/a b", "/m?x", "/é"] {
            assert!(normalize_path(bad).is_err(), "{bad:?}");
        }
    }
}
