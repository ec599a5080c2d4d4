//! Read-access restriction (`serve --read-token`, env `CACHELENS_READ_TOKEN`).
//!
//! When a read token is configured, every route of the read router (pages, read API, static
//! files, unknown paths) needs it, given as `Authorization: Bearer <token>`, as the password of
//! HTTP basic auth (any user name), or as the `cachelens_read` cookie that
//! `GET /login?token=<token>` sets. The rule is a layer of the read router (see `web::app`):
//! the upload routes live in another router and are authenticated by machine tokens instead.
//!
//! The cookie holds its issue time and a MAC of it keyed by the token (HMAC-SHA256), not the
//! token: a leaked cookie (browser profile, proxy log) does not give away the token itself, it
//! is refused once older than `Config::login_max_age` (`serve --login-days`, 7 by default; the
//! browser drops it then too: `Max-Age`), and once the token changes.
//!
//! Guessing the token is rate-limited ([`Attempts`]): every `/login` attempt and every request
//! that presents a wrong bearer or basic-auth token takes one from token buckets of the client's
//! address ([`PER_CLIENT`]) and of the whole server ([`GLOBAL`]); while either is empty the
//! answer is 429 with `Retry-After`, before the token is compared. A cookie is never limited.

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

/// Days of a login cookie by default (`serve --login-days`).
pub const LOGIN_DAYS: u64 = 7;

/// HMAC-SHA256 of `msg` keyed by `key` (RFC 2104), with sha2 alone.
fn hmac_sha256(key: &[u8], msg: &[u8]) -> [u8; 32] {
    let mut k = [0u8; 64];
    if key.len() > 64 {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let pad = |b: u8| k.map(|x| x ^ b);
    let inner = Sha256::new().chain_update(pad(0x36)).chain_update(msg).finalize();
    Sha256::new().chain_update(pad(0x5c)).chain_update(inner).finalize().into()
}

fn now_s() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The cookie value for `token` issued at `issued` (Unix seconds): `v2.<issued>.<hex MAC>`.
pub fn cookie_value_at(token: &str, issued: u64) -> String {
    let mac = hmac_sha256(token.as_bytes(), format!("cachelens read cookie v2\0{issued}").as_bytes());
    format!("v2.{issued}.{}", hex::encode(mac))
}

/// The cookie value for `token` issued now.
pub fn cookie_value(token: &str) -> String {
    cookie_value_at(token, now_s())
}

/// Whether `value` is a login cookie of `token` issued within `max_age` (and not in the future,
/// one minute of clock skew aside).
fn cookie_valid(value: &str, token: &str, max_age: std::time::Duration) -> bool {
    let Some(issued) =
        value.strip_prefix("v2.").and_then(|r| r.split_once('.')).and_then(|(t, _)| t.parse::<u64>().ok())
    else {
        return false;
    };
    let now = now_s();
    issued <= now + 60
        && now.saturating_sub(issued) <= max_age.as_secs()
        && same(value, &cookie_value_at(token, issued))
}

/// A token bucket: `burst` guesses at once, refilled at `per_s` a second.
#[derive(Debug, Clone, Copy)]
pub struct Rate {
    pub burst: f64,
    pub per_s: f64,
}

/// Guesses of one client address: 10 at once, then one a second.
pub const PER_CLIENT: Rate = Rate { burst: 10.0, per_s: 1.0 };

/// Guesses of all clients together: 100 at once, then 20 a second (a guesser with many
/// addresses; behind a reverse proxy every client has the proxy's address, and this is the
/// per-client limit too).
pub const GLOBAL: Rate = Rate { burst: 100.0, per_s: 20.0 };

/// Client addresses whose buckets are kept at most: past it the full ones are dropped (a full
/// bucket is what a new one is), else all of them (the global bucket still holds).
const MAX_CLIENTS: usize = 4096;

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: std::time::Instant,
}

impl Bucket {
    fn new(r: Rate, now: std::time::Instant) -> Bucket {
        Bucket { tokens: r.burst, at: now }
    }
    fn refill(&mut self, r: Rate, now: std::time::Instant) {
        self.tokens = (self.tokens + now.duration_since(self.at).as_secs_f64() * r.per_s).min(r.burst);
        self.at = now;
    }
    /// Seconds until one guess is allowed (0: now).
    fn wait(&self, r: Rate) -> u64 {
        if self.tokens >= 1.0 { 0 } else { ((1.0 - self.tokens) / r.per_s).ceil().max(1.0) as u64 }
    }
}

/// Rate limits on read-token guesses (see the module docs), one per server (`AppState`).
#[derive(Debug)]
pub struct Attempts {
    per_client: Rate,
    global: Rate,
    inner: std::sync::Mutex<(Bucket, std::collections::HashMap<Option<std::net::IpAddr>, Bucket>)>,
}

impl Default for Attempts {
    fn default() -> Self {
        Attempts::new(PER_CLIENT, GLOBAL)
    }
}

impl Attempts {
    pub fn new(per_client: Rate, global: Rate) -> Attempts {
        let now = std::time::Instant::now();
        Attempts { per_client, global, inner: std::sync::Mutex::new((Bucket::new(global, now), Default::default())) }
    }

    /// Takes one guess for `client` (`None`: address unknown, one bucket for all such): `Err`
    /// with the seconds to wait when its bucket or the global one is empty.
    pub fn take(&self, client: Option<std::net::IpAddr>) -> Result<(), u64> {
        let now = std::time::Instant::now();
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let (global, clients) = &mut *g;
        if clients.len() >= MAX_CLIENTS && !clients.contains_key(&client) {
            let r = self.per_client;
            clients.retain(|_, b| {
                b.refill(r, now);
                b.tokens < r.burst
            });
            if clients.len() >= MAX_CLIENTS {
                clients.clear();
            }
        }
        global.refill(self.global, now);
        let b = clients.entry(client).or_insert_with(|| Bucket::new(self.per_client, now));
        b.refill(self.per_client, now);
        let wait = b.wait(self.per_client).max(global.wait(self.global));
        if wait > 0 {
            return Err(wait);
        }
        b.tokens -= 1.0;
        global.tokens -= 1.0;
        Ok(())
    }

    /// Gives back the guess taken for `client` (it was the token).
    pub fn give_back(&self, client: Option<std::net::IpAddr>) {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let (global, clients) = &mut *g;
        global.tokens = (global.tokens + 1.0).min(self.global.burst);
        if let Some(b) = clients.get_mut(&client) {
            b.tokens = (b.tokens + 1.0).min(self.per_client.burst);
        }
    }
}

/// The client's address, when the server's accept loop recorded it (`serve::serve`).
fn client_of(req_ext: &axum::http::Extensions) -> Option<std::net::IpAddr> {
    req_ext.get::<axum::extract::ConnectInfo<std::net::SocketAddr>>().map(|c| c.0.ip())
}

/// The 429 answer of a guess over the limits.
fn too_many(api: bool, wait: u64) -> Response {
    let msg = format!("too many read-token attempts from this address or in all: try again in {wait} s");
    let retry = [(header::RETRY_AFTER, wait.to_string())];
    if api {
        (StatusCode::TOO_MANY_REQUESTS, retry, axum::Json(serde_json::json!({ "error": msg }))).into_response()
    } else {
        (StatusCode::TOO_MANY_REQUESTS, retry, msg).into_response()
    }
}

/// Middleware of the read router: 401 unless the request carries the read token or a valid
/// login cookie (when a read token is configured); 429 while token guesses are over the limits.
pub async fn read_access(State(s): State<AppState>, req: Request, next: Next) -> Response {
    let Some(want) = s.config.read_token.as_deref() else { return next.run(req).await };
    let (tokens, cookies) = presented(req.headers());
    if cookies.iter().any(|c| cookie_valid(c, want, s.config.login_max_age)) {
        return next.run(req).await;
    }
    let api = req.uri().path().starts_with("/api/");
    if !tokens.is_empty() {
        // Taken before the comparison, so that a guess over the limits learns nothing.
        let client = client_of(req.extensions());
        if let Err(wait) = s.attempts.take(client) {
            return too_many(api, wait);
        }
        if tokens.iter().any(|t| same(t, want)) {
            s.attempts.give_back(client);
            return next.run(req).await;
        }
    }
    let msg = "this cachelens needs the read token: Authorization: Bearer <token>, basic auth with the token as password, or visit /login?token=<token>";
    let mut resp = if api {
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

/// `GET /login?token=...`: with the right token, set the cookie (valid for
/// `Config::login_max_age`) and go to the dashboard. Every attempt counts against the guess
/// limits ([`Attempts`]): 429 with `Retry-After` past them, before the token is compared.
pub async fn login(State(s): State<AppState>, req: Request) -> Response {
    let Some(want) = s.config.read_token.as_deref() else { return Redirect::to("/").into_response() };
    let Query(q) = match Query::<LoginQuery>::try_from_uri(req.uri()) {
        Ok(q) => q,
        Err(e) => return (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    };
    let client = client_of(req.extensions());
    if let Err(wait) = s.attempts.take(client) {
        return too_many(false, wait);
    }
    match q.token.as_deref() {
        Some(t) if same(t, want) => {
            s.attempts.give_back(client);
            // Secure when the reverse proxy says the client came over https.
            let headers = req.headers();
            let https = headers.get("x-forwarded-proto").is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"https"));
            let cookie = format!(
                "{COOKIE}={}; Path=/; HttpOnly; SameSite=Lax; Max-Age={}{}",
                cookie_value(t),
                s.config.login_max_age.as_secs(),
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

    #[test]
    fn hmac_matches_rfc4231() {
        // RFC 4231 test case 2.
        let mac = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(hex::encode(mac), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    }

    #[test]
    fn cookies_expire_and_follow_the_token() {
        let (t, day) = ("0123456789abcdef", std::time::Duration::from_secs(86_400));
        let now = now_s();
        assert!(cookie_valid(&cookie_value(t), t, 7 * day));
        assert!(cookie_valid(&cookie_value_at(t, now - 6 * 86_400), t, 7 * day));
        assert!(!cookie_valid(&cookie_value_at(t, now - 8 * 86_400), t, 7 * day), "expired");
        assert!(!cookie_valid(&cookie_value_at(t, now + 3600), t, 7 * day), "from the future");
        assert!(!cookie_valid(&cookie_value(t), "another-token-0123", 7 * day), "rotated token");
        let v = cookie_value_at(t, now - 8 * 86_400);
        let forged = v.replacen(&(now - 8 * 86_400).to_string(), &now.to_string(), 1);
        assert!(!cookie_valid(&forged, t, 7 * day), "issue time under the MAC");
    }

    #[test]
    fn guesses_run_out_per_client_and_in_all() {
        let a = Attempts::new(Rate { burst: 3.0, per_s: 0.001 }, Rate { burst: 5.0, per_s: 0.001 });
        let (x, y, z) = (Some([10, 0, 0, 1].into()), Some([10, 0, 0, 2].into()), Some([10, 0, 0, 3].into()));
        assert!((0..3).all(|_| a.take(x).is_ok()));
        assert!(a.take(x).unwrap_err() > 0, "client x is out");
        assert!(a.take(y).is_ok() && a.take(y).is_ok());
        assert!(a.take(z).is_err(), "the global bucket is out");
    }
}
