//! A counting TCP proxy in front of the server under test: the nodes' clients talk to it, it
//! passes every byte on and counts them each way, so bytes on the wire are measured whatever the
//! protocol (HTTP headers included; loopback, no TLS). The readers of the routes go to the server
//! directly and are not counted.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub struct Proxy {
    pub url: String,
    /// Bytes client → server.
    pub up: Arc<AtomicU64>,
    /// Bytes server → client.
    pub down: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// (up, down) so far.
    pub fn bytes(&self) -> (u64, u64) {
        (self.up.load(Ordering::Relaxed), self.down.load(Ordering::Relaxed))
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn pump(mut from: tokio::net::tcp::OwnedReadHalf, mut to: tokio::net::tcp::OwnedWriteHalf, n: Arc<AtomicU64>) {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(k) => {
                n.fetch_add(k as u64, Ordering::Relaxed);
                if to.write_all(&buf[..k]).await.is_err() {
                    break;
                }
            }
        }
    }
    let _ = to.shutdown().await;
}

/// Listen on a free loopback port and pass every connection on to `target`.
pub async fn start(target: SocketAddr) -> anyhow::Result<Proxy> {
    let l = TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", l.local_addr()?);
    let (up, down) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let (u, d) = (up.clone(), down.clone());
    let task = tokio::spawn(async move {
        while let Ok((c, _)) = l.accept().await {
            let (u, d) = (u.clone(), d.clone());
            tokio::spawn(async move {
                let Ok(s) = TcpStream::connect(target).await else { return };
                let _ = (c.set_nodelay(true), s.set_nodelay(true));
                let ((cr, cw), (sr, sw)) = (c.into_split(), s.into_split());
                tokio::join!(pump(cr, sw, u), pump(sr, cw, d));
            });
        }
    });
    Ok(Proxy { url, up, down, task })
}
