//! Read-access restriction (`serve --read-token`, env `CACHELENS_READ_TOKEN`).
//!
//! When a read token is configured, every page and every read API call needs it, given as
//! `Authorization: Bearer <token>`, as the password of HTTP basic auth (any user name), or as
//! the `cachelens_read` cookie that `GET /login?token=<token>` sets. Uploads
//! (`POST /api/v1/scans`, `POST /api/v1/blobs/missing`) are authenticated by their machine
//! tokens instead, whether or not a read token is set.

use super::AppState;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use sha2::{Digest, Sha256};

/// Name of the cookie set by `/login`.
pub const COOKIE: &str = "cachelens_read";

/// Routes that never need the read token: uploads (machine tokens) and the login itself.
fn exempt(method: &Method, path: &str) -> bool {
    path == "/login" || (method == Method::POST && matches!(path, "/api/v1/scans" | "/api/v1/blobs/missing"))
}

/// Middleware: 401 unless the request carries the read token (when one is configured).
pub async fn read_access(State(s): State<AppState>, req: Request, next: Next) -> Response {
    let Some(want) = s.config.read_token.as_deref() else { return next.run(req).await };
    if exempt(req.method(), req.uri().path()) || presented(req.headers()).iter().any(|t| same(t, want)) {
        return next.run(req).await;
    }
    let msg = "this cachelens needs the read token: Authorization: Bearer <token>, basic auth with the token as password, or visit /login?token=<token>";
    let mut resp = if req.uri().path().starts_with("/api/") {
        (StatusCode::UNAUTHORIZED, axum::Json(serde_json::json!({ "error": msg }))).into_response()
    } else {
        (StatusCode::UNAUTHORIZED, msg).into_response()
    };
    // Makes a browser ask for it (the user name is ignored).
    resp.headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Basic realm=\"cachelens\", charset=\"UTF-8\""));
    resp
}

/// Every token the request offers: bearer, basic-auth password, cookie.
fn presented(h: &HeaderMap) -> Vec<String> {
    let mut out = vec![];
    if let Some(v) = h.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok())
        && let Some((scheme, rest)) = v.split_once(' ')
    {
        if scheme.eq_ignore_ascii_case("bearer") {
            out.push(rest.trim().to_string());
        } else if scheme.eq_ignore_ascii_case("basic")
            && let Some(pw) = base64_decode(rest.trim())
                .and_then(|b| String::from_utf8(b).ok())
                .and_then(|s| s.split_once(':').map(|(_, p)| p.to_string()))
        {
            out.push(pw);
        }
    }
    for v in h.get_all(header::COOKIE).iter().filter_map(|v| v.to_str().ok()) {
        for kv in v.split(';') {
            if let Some((k, val)) = kv.trim().split_once('=')
                && k == COOKIE
            {
                out.push(val.to_string());
            }
        }
    }
    out
}

/// Compare in constant time (over the digests, so lengths leak nothing either).
fn same(a: &str, b: &str) -> bool {
    let (x, y) = (Sha256::digest(a.as_bytes()), Sha256::digest(b.as_bytes()));
    x.iter().zip(y.iter()).fold(0u8, |acc, (p, q)| acc | (p ^ q)) == 0
}

#[derive(serde::Deserialize)]
pub struct LoginQuery {
    token: Option<String>,
}

/// `GET /login?token=...`: with the right token, set the cookie and go to the dashboard.
pub async fn login(State(s): State<AppState>, headers: HeaderMap, Query(q): Query<LoginQuery>) -> Response {
    let Some(want) = s.config.read_token.as_deref() else { return Redirect::to("/").into_response() };
    match q.token.as_deref() {
        Some(t) if same(t, want) => {
            // Secure when the reverse proxy says the client came over https.
            let https = headers.get("x-forwarded-proto").is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"https"));
            let cookie = format!(
                "{COOKIE}={t}; Path=/; HttpOnly; SameSite=Lax; Max-Age=31536000{}",
                if https { "; Secure" } else { "" }
            );
            let mut resp = Redirect::to("/").into_response();
            if let Ok(v) = HeaderValue::from_str(&cookie) {
                resp.headers_mut().insert(header::SET_COOKIE, v);
            }
            resp
        }
        _ => (StatusCode::UNAUTHORIZED, "wrong or missing token: /login?token=<read token>").into_response(),
    }
}

/// Standard base64 (as basic auth uses), without pulling in a crate for it.
fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let s = s.trim_end_matches('=');
    let (mut out, mut acc, mut bits) = (Vec::with_capacity(s.len() * 3 / 4), 0u32, 0u32);
    for c in s.bytes() {
        acc = (acc << 6) | val(c)? as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_auth_password() {
        assert_eq!(base64_decode("dXNlcjpzM2NyZXQ=").unwrap(), b"user:s3cret");
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic dXNlcjpzM2NyZXQ="));
        h.insert(header::COOKIE, HeaderValue::from_static("a=b; cachelens_read=tok"));
        assert_eq!(presented(&h), ["s3cret", "tok"]);
        assert!(same("x", "x") && !same("x", "y"));
    }
}
