//! Who is calling: sessions are bound to the identity they were created
//! under, and a request of another identity sees them as unknown (404).
//!
//! The identity comes, in this order, from
//! 1. a [`CallerIdentity`] in the request's extensions, which the
//!    application's own auth layer puts there (the axum way: the layer runs
//!    before the MCP router and knows who authenticated);
//! 2. else the builder's [`IdentityFn`], which sees the request's head
//!    (headers and extensions), e.g. to hash an `Authorization` header;
//! 3. else none: every session is anonymous and bound to no one.

use http::request::Parts;
use std::sync::Arc;

/// A caller identity, set by the application's auth layer as a request
/// extension (`req.extensions_mut().insert(CallerIdentity(..))`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CallerIdentity(pub String);

/// Derives a caller identity from a request's head when no
/// [`CallerIdentity`] extension is present.
pub type IdentityFn = Arc<dyn Fn(&Parts) -> Option<String> + Send + Sync>;

/// The identity of the request with head `parts`.
pub(crate) fn resolve(parts: &Parts, f: Option<&IdentityFn>) -> Option<String> {
    if let Some(CallerIdentity(id)) = parts.extensions.get::<CallerIdentity>() {
        return Some(id.clone());
    }
    f.and_then(|f| f(parts))
}

/// The resolved identity, stored in the extensions by the request guard
/// for the handlers.
#[derive(Clone, Debug)]
pub(crate) struct Caller(pub(crate) Option<String>);
