//! Where a run's database lives: an SQLite file under `--work`, or (with `--pg URL`) a database of
//! its own on that PostgreSQL server, made afresh for each run so that the two stores start alike.
//! Sizes are measured the nearest way each store allows; the PostgreSQL processes serving the
//! database are timed apart from the cachelens server (their CPU is the store's share of the work).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub enum Db {
    File(PathBuf),
    /// `name` on the server of `server` (a URL whose role may create databases); `url` is its own.
    Pg {
        server: String,
        name: String,
        url: String,
    },
}

/// Database size once the server stopped: on SQLite the file and its WAL after a checkpoint, on
/// PostgreSQL `pg_database_size` (its WAL is the server's, shared by every database: none); per
/// table and index when the store tells (`dbstat`; `pg_class`).
pub struct DbSize {
    pub file: u64,
    pub wal: Option<u64>,
    pub tables: Option<Vec<(String, i64)>>,
}

impl Db {
    /// The run's database: `<work>/<stem>.db`, or `fleet_<stem>` (lower case, `_` for anything
    /// PostgreSQL would want quoted) on the `--pg` server.
    pub fn new(work: &Path, stem: &str, pg: Option<&str>) -> anyhow::Result<Db> {
        let Some(server) = pg else { return Ok(Db::File(work.join(format!("{stem}.db")))) };
        let name: String = format!("fleet_{stem}")
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' })
            .collect();
        let mut url = reqwest::Url::parse(server)?;
        url.set_path(&format!("/{name}"));
        Ok(Db::Pg { server: server.to_string(), name, url: url.to_string() })
    }

    /// What `--db` is given.
    pub fn arg(&self) -> PathBuf {
        match self {
            Db::File(p) => p.clone(),
            Db::Pg { url, .. } => PathBuf::from(url),
        }
    }

    /// The server's log, beside the SQLite file or named after the PostgreSQL database.
    pub fn log(&self, work: &Path) -> PathBuf {
        match self {
            Db::File(p) => p.with_extension("serve.log"),
            Db::Pg { name, .. } => work.join(format!("{name}.serve.log")),
        }
    }

    /// Empty: the SQLite files removed, the PostgreSQL database dropped (a server a killed run left
    /// connected included) and created again as `serve` would want one made.
    pub async fn fresh(&self) -> anyhow::Result<()> {
        match self {
            Db::File(p) => {
                for ext in ["", "-wal", "-shm"] {
                    let _ = std::fs::remove_file(format!("{}{ext}", p.display()));
                }
            }
            Db::Pg { server, name, .. } => {
                use sqlx::{AssertSqlSafe, Connection};
                let mut c = sqlx::PgConnection::connect(server).await?;
                // the name is ours, made of [a-z0-9_]
                let drop = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
                sqlx::query(AssertSqlSafe(drop)).execute(&mut c).await?;
                let create =
                    format!("CREATE DATABASE {name} TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'");
                sqlx::query(AssertSqlSafe(create)).execute(&mut c).await?;
            }
        }
        Ok(())
    }

    pub async fn size(&self) -> DbSize {
        use sqlx::{ConnectOptions, Connection, Row};
        match self {
            Db::File(db) => {
                let mut tables = None;
                if let Ok(mut c) = sqlx::sqlite::SqliteConnectOptions::new().filename(db).connect().await {
                    let _ = sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)").execute(&mut c).await;
                    if let Ok(rows) = sqlx::query("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC")
                        .fetch_all(&mut c)
                        .await
                    {
                        tables = Some(rows.iter().map(|r| (r.get::<String, _>(0), r.get::<i64, _>(1))).collect());
                    }
                }
                let len = |p: PathBuf| std::fs::metadata(p).map_or(0, |m| m.len());
                let wal = len(PathBuf::from(format!("{}-wal", db.display())));
                DbSize { file: len(db.to_path_buf()), wal: Some(wal), tables }
            }
            Db::Pg { url, .. } => {
                let Ok(mut c) = sqlx::PgConnection::connect(url).await else {
                    return DbSize { file: 0, wal: None, tables: None };
                };
                let file = sqlx::query_scalar::<_, i64>("SELECT pg_database_size(current_database())")
                    .fetch_one(&mut c)
                    .await
                    .unwrap_or(0);
                // A table's size with its TOAST table (and free-space and visibility maps), as
                // dbstat counts a table's overflow pages: long texts and blobs live there.
                let rows = sqlx::query(
                    "SELECT c.relname::text, CASE c.relkind WHEN 'r' THEN pg_table_size(c.oid) \
                     ELSE pg_relation_size(c.oid) END FROM pg_class c \
                     JOIN pg_namespace n ON n.oid = c.relnamespace \
                     WHERE n.nspname = 'public' AND c.relkind IN ('r', 'i') ORDER BY 2 DESC, 1",
                )
                .fetch_all(&mut c)
                .await;
                let tables = rows.ok().map(|rows| rows.iter().map(|r| (r.get(0), r.get(1))).collect());
                DbSize { file: file.max(0) as u64, wal: None, tables }
            }
        }
    }

    /// On PostgreSQL, a sampler of its processes' CPU for this database (none on SQLite: the
    /// server's own CPU is all of it).
    pub fn cpu(&self) -> Option<PgCpu> {
        match self {
            Db::File(_) => None,
            Db::Pg { name, .. } => Some(PgCpu::start(name)),
        }
    }
}

/// CPU (utime + stime) of the PostgreSQL processes whose command line names the database: its
/// backends and autovacuum workers (the checkpointer, WAL writer and parallel query workers name
/// none: not counted). A backend's figures leave /proc with it when its connection closes, so a
/// thread samples every 200 ms and keeps each pid's last figure (a closed connection's last
/// < 200 ms is lost).
pub struct PgCpu {
    seen: Arc<Mutex<HashMap<u32, f64>>>,
    stop: Arc<AtomicBool>,
    name: String,
}

impl PgCpu {
    fn start(name: &str) -> PgCpu {
        let (seen, stop) = (Arc::new(Mutex::new(HashMap::new())), Arc::new(AtomicBool::new(false)));
        let p = PgCpu { seen: seen.clone(), stop: stop.clone(), name: name.to_string() };
        let name = name.to_string();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                sample(&name, &seen);
                std::thread::sleep(Duration::from_millis(200));
            }
        });
        p
    }

    /// ms so far, sampled now.
    pub fn ms(&self) -> f64 {
        sample(&self.name, &self.seen);
        self.seen.lock().unwrap().values().sum()
    }
}

impl Drop for PgCpu {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn sample(name: &str, seen: &Mutex<HashMap<u32, f64>>) {
    let Ok(dir) = std::fs::read_dir("/proc") else { return };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if comm.trim() != "postgres" {
            continue;
        }
        // "postgres: ROLE DB HOST(PORT) STATE", "postgres: autovacuum worker DB"
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd);
        if cmd.split(|c: char| c.is_whitespace() || c == '\0').any(|w| w == name) {
            let ms = crate::run::cpu_ms(pid);
            let mut seen = seen.lock().unwrap();
            let v = seen.entry(pid).or_default();
            *v = v.max(ms);
        }
    }
}
