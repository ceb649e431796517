//! Who may read the metrics and the status page's data: loopback
//! clients, or holders of a bearer token.

use crate::vocab::secret::constant_time_eq;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use std::net::SocketAddr;

/// Who may read `/metrics` (and, later, `/status`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ObserveAccess {
    /// Loopback clients only (the default); others get `403`.
    #[default]
    Loopback,
    /// Any client with `Authorization: Bearer <token>`; without it, or
    /// with another token, `401`.
    Token(String),
}

impl ObserveAccess {
    /// `None` when the request may read, else the refusal.
    pub(crate) fn check(&self, peer: Option<SocketAddr>, headers: &HeaderMap) -> Option<Response> {
        match self {
            ObserveAccess::Loopback => match peer {
                Some(p) if p.ip().is_loopback() => None,
                _ => Some(
                    (
                        StatusCode::FORBIDDEN,
                        "metrics are served to loopback clients only (configure a token)",
                    )
                        .into_response(),
                ),
            },
            ObserveAccess::Token(token) => {
                let given = headers
                    .get(header::AUTHORIZATION)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.strip_prefix("Bearer "));
                if given.is_some_and(|g| constant_time_eq(g.as_bytes(), token.as_bytes())) {
                    return None;
                }
                let mut r = (StatusCode::UNAUTHORIZED, "a valid bearer token is required").into_response();
                r.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                Some(r)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_only_by_default() {
        let h = HeaderMap::new();
        let local: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let local6: SocketAddr = "[::1]:9".parse().unwrap();
        let remote: SocketAddr = "192.0.2.7:9".parse().unwrap();
        let a = ObserveAccess::Loopback;
        assert!(a.check(Some(local), &h).is_none());
        assert!(a.check(Some(local6), &h).is_none());
        assert_eq!(a.check(Some(remote), &h).unwrap().status(), StatusCode::FORBIDDEN);
        assert_eq!(a.check(None, &h).unwrap().status(), StatusCode::FORBIDDEN, "no peer address: refused");
    }

    #[test]
    fn a_token_admits_anyone_who_has_it_and_nobody_else() {
        let remote: SocketAddr = "192.0.2.7:9".parse().unwrap();
        let a = ObserveAccess::Token("s3cret".into());
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::AUTHORIZATION, HeaderValue::from_str(v).unwrap());
            h
        };
        assert!(a.check(Some(remote), &with("Bearer s3cret")).is_none());
        for bad in ["Bearer s3cre", "Bearer s3cret2", "Bearer S3CRET", "Basic s3cret", "s3cret"] {
            let r = a.check(Some(remote), &with(bad)).expect(bad);
            assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "{bad}");
        }
        assert_eq!(a.check(Some(remote), &HeaderMap::new()).unwrap().status(), StatusCode::UNAUTHORIZED);
        let local: SocketAddr = "127.0.0.1:9".parse().unwrap();
        assert_eq!(
            a.check(Some(local), &HeaderMap::new()).unwrap().status(),
            StatusCode::UNAUTHORIZED,
            "with a token, loopback needs it too"
        );
    }
}
