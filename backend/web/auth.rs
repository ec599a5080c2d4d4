//! Read-access restriction (`serve --read-token`, env `CACHELENS_READ_TOKEN`).
//!
//! When a read token is configured, every route of the read router (pages, read API, static
//! files, unknown paths) needs it, given as `Authorization: Bearer <token>`, as the password of
//! HTTP basic auth (any user name), or as the `cachelens_read` cookie that
//! `GET /login?token=<token>` sets. The rule is a layer of the read router (see `web::app`):
//! the upload routes live in another router and are authenticated by machine tokens instead.
//!
//! The cookie holds a value derived from the token (sha256 of a fixed label and the token), not
//! the token: a leaked cookie (browser profile, proxy log) does not give away the token itself.

use super::AppState;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use sha2::{Digest, Sha256};

/// Name of the cookie set by `/login`.
pub const COOKIE: &str = "cachelens_read";

/// Shortest read token `serve` accepts.
pub const MIN_READ_TOKEN: usize = 16;

/// Refuse (at start-up) a read token that is empty, short or not one header-safe word.
pub fn check_read_token(token: &str) -> Result<(), String> {
    if token.len() < MIN_READ_TOKEN {
        return Err(format!(
            "the read token (--read-token / CACHELENS_READ_TOKEN) must be at least {MIN_READ_TOKEN} characters \
             (it is {}); e.g. `openssl rand -hex 24`",
            token.len()
        ));
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("the read token must be printable ASCII without spaces".into());
    }
    Ok(())
}

/// The cookie value that stands for `token`.
pub fn cookie_value(token: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"cachelens read cookie v1\0");
    h.update(token.as_bytes());
    hex::encode(h.finalize())
}

/// Middleware of the read router: 401 unless the request carries the read token (when one is
/// configured).
pub async fn read_access(State(s): State<AppState>, req: Request, next: Next) -> Response {
    let Some(want) = s.config.read_token.as_deref() else { return next.run(req).await };
    let (tokens, cookies) = presented(req.headers());
    let cookie = cookie_value(want);
    if tokens.iter().any(|t| same(t, want)) || cookies.iter().any(|c| same(c, &cookie)) {
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

/// What the request offers: tokens (bearer, basic-auth password) and login cookie values.
fn presented(h: &HeaderMap) -> (Vec<String>, Vec<String>) {
    let (mut tokens, mut cookies) = (vec![], vec![]);
    if let Some(v) = h.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok())
        && let Some((scheme, rest)) = v.split_once(' ')
    {
        if scheme.eq_ignore_ascii_case("bearer") {
            tokens.push(rest.trim().to_string());
        } else if scheme.eq_ignore_ascii_case("basic")
            && let Some(pw) = base64_decode(rest.trim())
                .and_then(|b| String::from_utf8(b).ok())
                .and_then(|s| s.split_once(':').map(|(_, p)| p.to_string()))
        {
            tokens.push(pw);
        }
    }
    for v in h.get_all(header::COOKIE).iter().filter_map(|v| v.to_str().ok()) {
        for kv in v.split(';') {
            if let Some((k, val)) = kv.trim().split_once('=')
                && k == COOKIE
            {
                cookies.push(val.to_string());
            }
        }
    }
    (tokens, cookies)
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
                "{COOKIE}={}; Path=/; HttpOnly; SameSite=Lax; Max-Age=31536000{}",
                cookie_value(t),
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
        assert_eq!(presented(&h), (vec!["s3cret".to_string()], vec!["tok".to_string()]));
        assert!(same("x", "x") && !same("x", "y"));
    }

    #[test]
    fn short_tokens_refused() {
        for t in ["", "x", "short-token-15c", "has a space in it ok"] {
            assert!(check_read_token(t).is_err(), "{t:?}");
        }
        assert!(check_read_token("0123456789abcdef").is_ok());
        assert_ne!(cookie_value("0123456789abcdef"), "0123456789abcdef");
    }
}
