//! One request to the server under test and one route driven by concurrent clients: what the
//! load benchmark (`drive.rs`, `drive_upload.rs`) and the fleet benchmark (`benches/fleet/`)
//! time routes with.

use crate::fleet::Facts;
use crate::routes::Route;
use std::time::{Duration, Instant};

/// How one request went.
#[derive(Clone, Debug)]
pub enum Outcome {
    Ok(Duration, usize),
    /// 202 with `Retry-After`: a report being computed, answered at once with its progress (the
    /// page asks again by itself). Timed apart from the answers that hold the report.
    Pending(Duration),
    Status(u16, Duration),
    Timeout,
    Error(String),
}

impl Outcome {
    pub fn ms(&self) -> Option<f64> {
        match self {
            Outcome::Ok(d, _) => Some(d.as_secs_f64() * 1000.0),
            _ => None,
        }
    }
    pub fn show(&self) -> String {
        match self {
            Outcome::Ok(d, b) => format!("{} ({})", ms(d.as_secs_f64() * 1000.0), kb(*b)),
            Outcome::Pending(d) => format!("202 in {}", ms(d.as_secs_f64() * 1000.0)),
            Outcome::Status(s, d) => format!("HTTP {s} in {}", ms(d.as_secs_f64() * 1000.0)),
            Outcome::Timeout => "timeout".into(),
            Outcome::Error(e) => format!("error: {}", e.chars().take(60).collect::<String>()),
        }
    }
}

pub fn ms(v: f64) -> String {
    if v >= 10_000.0 { format!("{:.1} s", v / 1000.0) } else { format!("{v:.1} ms") }
}

pub fn kb(b: usize) -> String {
    if b >= 1 << 20 { format!("{:.1} MB", b as f64 / 1048576.0) } else { format!("{:.0} KB", b as f64 / 1024.0) }
}

pub async fn get(http: &reqwest::Client, base: &str, url: &str, timeout: Duration) -> Outcome {
    let (hx, path) = match url.strip_prefix("HX ") {
        Some(p) => (true, p),
        None => (false, url),
    };
    let mut req = http.get(format!("{base}{path}")).timeout(timeout);
    if hx {
        req = req.header("HX-Request", "true");
    }
    let t = Instant::now();
    let resp = match req.send().await {
        Ok(r) => r,
        Err(e) if e.is_timeout() => return Outcome::Timeout,
        Err(e) => return Outcome::Error(e.to_string()),
    };
    let status = resp.status();
    let pending = status == reqwest::StatusCode::ACCEPTED && resp.headers().contains_key("retry-after");
    match resp.bytes().await {
        Ok(_) if pending => Outcome::Pending(t.elapsed()),
        Ok(b) if status.is_success() || status.is_redirection() => Outcome::Ok(t.elapsed(), b.len()),
        Ok(_) => Outcome::Status(status.as_u16(), t.elapsed()),
        Err(e) if e.is_timeout() => Outcome::Timeout,
        Err(e) => Outcome::Error(e.to_string()),
    }
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).pool_max_idle_per_host(64).build().unwrap()
}

/// The `i`-th URL of a route, its placeholders filled from the fleet.
pub fn fill(r: &Route, f: &Facts, i: usize) -> String {
    let t = r.urls[i % r.urls.len()];
    let enc = cachelens::fmt::enc;
    let (m, key, art) = &f.entries[i % f.entries.len()];
    let (old, new) = &f.upgrade_pairs[i % f.upgrade_pairs.len()];
    let terms = ["soft", "matmul", "layer", "add_k", "fused", "poi", "per_", "red", "kernel_v1", "mul"];
    t.replace("{machine2}", &f.machines[(i + 1) % f.machines.len()])
        .replace("{machine}", m)
        .replace("{key}", key)
        .replace("{artifact}", &enc(art))
        .replace("{kernel}", &enc(&f.kernels[i % f.kernels.len()]))
        .replace("{q}", terms[i % terms.len()])
        .replace("{up}", &f.up)
        .replace("{from}", &f.from.to_string())
        .replace("{to}", &f.to.to_string())
        .replace("{old}", old)
        .replace("{new}", new)
        .replace("{pair_old}", &f.pair_old)
        .replace("{pair_new}", &f.pair_new)
        .replace("{autotune}", &f.autotune)
        .replace("{decision}", &f.decision.to_string())
        .replace("{deep}", &f.deep.to_string())
}

/// The `p` quantile of sorted values (NaN when there are none).
pub fn pct(v: &[f64], p: f64) -> f64 {
    v.get(((v.len() as f64 - 1.0) * p).round() as usize).copied().unwrap_or(f64::NAN)
}

/// How a route is driven: `clients` concurrent clients, until `requests` or `route_secs` are
/// spent, each request given `timeout`.
#[derive(Clone, Copy)]
pub struct Load {
    pub clients: usize,
    pub requests: usize,
    pub route_secs: f64,
    pub timeout: Duration,
}

/// A route driven as `a` says: sorted latencies of the answers (ms), sorted latencies of the
/// 202 answers, timeouts, errors, seconds taken.
pub async fn drive(a: Load, base: &str, r: &'static Route, f: &Facts) -> (Vec<f64>, Vec<f64>, usize, usize, f64) {
    let http = client();
    let t = Instant::now();
    let mut tasks = vec![];
    for c in 0..a.clients {
        let (http, base, f, timeout, budget) =
            (http.clone(), base.to_string(), f.clone(), a.timeout, Duration::from_secs_f64(a.route_secs));
        let (requests, clients) = (a.requests, a.clients);
        tasks.push(tokio::spawn(async move {
            let (mut lat, mut pending, mut timeouts, mut errors) = (vec![], vec![], 0, 0);
            for i in (c..requests).step_by(clients) {
                if t.elapsed() > budget {
                    break;
                }
                match get(&http, &base, &fill(r, &f, i), timeout).await {
                    Outcome::Ok(d, _) => lat.push(d.as_secs_f64() * 1000.0),
                    Outcome::Pending(d) => pending.push(d.as_secs_f64() * 1000.0),
                    Outcome::Timeout => timeouts += 1,
                    _ => errors += 1,
                }
            }
            (lat, pending, timeouts, errors)
        }));
    }
    let (mut all, mut pend, mut to, mut er) = (vec![], vec![], 0, 0);
    for t in tasks {
        let (l, p, a, b) = t.await.unwrap();
        all.extend(l);
        pend.extend(p);
        to += a;
        er += b;
    }
    all.sort_by(|a, b| a.partial_cmp(b).unwrap());
    pend.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (all, pend, to, er, t.elapsed().as_secs_f64())
}

/// The machine's load average (1, 5, 15 minutes) as /proc/loadavg says it: both benches print it
/// beside their figures (the machine is shared with other work).
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}
