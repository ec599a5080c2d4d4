//! The server under test: `BIN serve` as its own process on 127.0.0.1, its RSS read from
//! /proc, killed when it grows past a cap (the shared machine must survive an old build's
//! unbounded requests), restarted after a request it could not finish in time.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub struct Server {
    pub bin: PathBuf,
    pub db: PathBuf,
    pub url: String,
    port: u16,
    child: Option<Child>,
    pub log: PathBuf,
    /// Highest VmHWM (kB) of every process this server ran as.
    pub hwm_kb: Arc<AtomicU64>,
    /// Times the RSS guard killed it.
    pub killed: Arc<AtomicU64>,
    rss_cap_kb: u64,
}

/// (VmRSS, VmHWM) in kB of a process.
pub fn mem_kb(pid: u32) -> Option<(u64, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let get = |k: &str| {
        s.lines().find(|l| l.starts_with(k)).and_then(|l| l.split_whitespace().nth(1)).and_then(|v| v.parse().ok())
    };
    Some((get("VmRSS:")?, get("VmHWM:")?))
}

/// Pids of the servers running now, killed by [`kill_all`] when the benchmark is interrupted.
static PIDS: std::sync::Mutex<Vec<u32>> = std::sync::Mutex::new(Vec::new());

/// Kill every server this benchmark started (on SIGINT / SIGTERM: none is left behind).
pub fn kill_all() {
    for pid in PIDS.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    }
}

/// Kill every server this benchmark started and exit on SIGINT / SIGTERM (call once, from
/// `main`, inside the runtime).
pub fn kill_all_on_signal() {
    tokio::spawn(async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).unwrap();
        tokio::select! { _ = tokio::signal::ctrl_c() => {}, _ = term.recv() => {} }
        kill_all();
        std::process::exit(130);
    });
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl Server {
    pub fn new(bin: &Path, db: &Path, rss_cap_mb: u64) -> Server {
        let port = free_port();
        Server {
            bin: bin.to_path_buf(),
            db: db.to_path_buf(),
            url: format!("http://127.0.0.1:{port}"),
            port,
            child: None,
            log: db.with_extension("serve.log"),
            hwm_kb: Arc::default(),
            killed: Arc::default(),
            rss_cap_kb: rss_cap_mb * 1024,
        }
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// (VmRSS, VmHWM) in MB now.
    pub fn mem_mb(&self) -> (u64, u64) {
        self.pid().and_then(mem_kb).map_or((0, 0), |(r, h)| (r / 1024, h / 1024))
    }

    /// `BIN token create --machine M --db DB` (before the server runs).
    pub fn token(&self, machine: &str) -> anyhow::Result<String> {
        let out =
            Command::new(&self.bin).args(["token", "create", "--machine", machine, "--db"]).arg(&self.db).output()?;
        anyhow::ensure!(out.status.success(), "token create: {}", String::from_utf8_lossy(&out.stderr));
        Ok(String::from_utf8(out.stdout)?.trim().to_string())
    }

    /// Start it and wait until it answers; a thread watches its memory meanwhile.
    pub async fn start(&mut self) -> anyhow::Result<Duration> {
        let t = Instant::now();
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&self.log)?;
        let child = Command::new(&self.bin)
            .args(["serve", "--max-upload-mb", "4096", "--listen", &format!("127.0.0.1:{}", self.port), "--db"])
            .arg(&self.db)
            .env("RUST_LOG", "warn")
            .stdout(log.try_clone()?)
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()?;
        let pid = child.id();
        PIDS.lock().unwrap_or_else(|e| e.into_inner()).push(pid);
        self.child = Some(child);
        let (hwm, killed, cap) = (self.hwm_kb.clone(), self.killed.clone(), self.rss_cap_kb);
        std::thread::spawn(move || {
            while let Some((rss, h)) = mem_kb(pid) {
                hwm.fetch_max(h, Ordering::Relaxed);
                if rss > cap {
                    eprintln!("  !! server RSS {} MB over the cap {} MB: killing it", rss / 1024, cap / 1024);
                    killed.fetch_add(1, Ordering::Relaxed);
                    let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let http = reqwest::Client::new();
        loop {
            if let Ok(r) = http.get(format!("{}/favicon.ico", self.url)).send().await
                && r.status().is_success()
            {
                return Ok(t.elapsed());
            }
            if let Some(c) = self.child.as_mut()
                && let Some(st) = c.try_wait()?
            {
                anyhow::bail!("{} serve exited: {st} (log {})", self.bin.display(), self.log.display());
            }
            anyhow::ensure!(t.elapsed() < Duration::from_secs(300), "server did not answer in 300 s");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub fn alive(&mut self) -> bool {
        self.child.as_mut().is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            PIDS.lock().unwrap_or_else(|e| e.into_inner()).retain(|p| *p != c.id());
            if let Some((_, h)) = mem_kb(c.id()) {
                self.hwm_kb.fetch_max(h, Ordering::Relaxed);
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Stop and start again (after a request it did not finish: it may still be working on it).
    pub async fn restart(&mut self) -> anyhow::Result<Duration> {
        self.stop();
        self.start().await
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}
