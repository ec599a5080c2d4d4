//! The accept loop of `cachelens serve`: HTTP/1 with the limits that keep slow or hostile
//! clients from starving the server (docs/THREAT-MODEL.md).
//!
//! `axum::serve` has no header-read timeout and no cap on connections: a thousand sockets that
//! never finish their headers hold a thousand file descriptors until the process hits its
//! `RLIMIT_NOFILE` and can accept nothing more. Here each connection holds a permit of a
//! semaphore smaller than the file limit (a connection past the cap waits in the kernel's
//! listen backlog, costing the server nothing), hyper closes a connection whose headers do not
//! arrive within the header timeout, and an accept error (EMFILE, ENFILE) pauses the loop
//! instead of spinning on it. Request bodies have their own idle timeout (a layer in `app`).

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// Connection limits of `serve` (flags of `cachelens serve`).
#[derive(Debug, Clone)]
pub struct Limits {
    /// Close a connection whose request headers have not all arrived after this long (also the
    /// idle time allowed between two requests of a kept-alive connection).
    pub header_timeout: Duration,
    /// Connections served at once; more wait in the listen backlog.
    pub max_connections: usize,
}

/// File descriptors kept free of connections: the SQLite pool (database, WAL and shm files per
/// connection), the listener, logs, and the blocking threads' files.
const FD_RESERVE: usize = 64;

impl Limits {
    /// The connection cap actually used: `max_connections`, lowered to fit under the process's
    /// open-file limit so that the cap, not EMFILE, is what a flood runs into.
    pub fn effective_connections(&self) -> usize {
        match nofile_limit() {
            Some(n) => self.max_connections.min(n.saturating_sub(FD_RESERVE).max(16)),
            None => self.max_connections,
        }
    }
}

/// The soft `RLIMIT_NOFILE` of this process (Linux: from /proc/self/limits).
fn nofile_limit() -> Option<usize> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..].split_whitespace().next()?.parse().ok()
}

/// Serve `app` on `listener` until `shutdown` resolves.
pub async fn serve(listener: TcpListener, app: Router, limits: Limits, shutdown: impl Future<Output = ()>) {
    let cap = limits.effective_connections();
    tracing::info!(max_connections = cap, header_timeout_s = limits.header_timeout.as_secs(), "serving");
    let permits = Arc::new(Semaphore::new(cap));
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(limits.header_timeout).keep_alive(true);
    let builder = Arc::new(builder);
    tokio::pin!(shutdown);
    loop {
        // Take a permit before accepting: at the cap, new clients wait in the backlog.
        let permit = tokio::select! {
            p = permits.clone().acquire_owned() => p.expect("the semaphore is never closed"),
            _ = &mut shutdown => return,
        };
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(accepted) => accepted,
                Err(e) => {
                    // EMFILE/ENFILE/ECONNABORTED...: the loop must neither die nor spin.
                    tracing::warn!("accept failed: {e}; pausing accepts for 100 ms");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = &mut shutdown => return,
        };
        // The client's address for the handlers (`auth`'s guess limits per address).
        let inner = TowerToHyperService::new(app.clone());
        let service = hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
            req.extensions_mut().insert(axum::extract::ConnectInfo(peer));
            hyper::service::Service::call(&inner, req)
        });
        let builder = builder.clone();
        tokio::spawn(async move {
            let _permit = permit;
            if let Err(e) = builder.serve_connection(TokioIo::new(stream), service).await {
                tracing::debug!("connection ended: {e}");
            }
        });
    }
}
