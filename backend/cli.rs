//! Subcommands and their flags.

use clap::{Args, Parser, Subcommand};
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(name = "cachelens", version, about = "A team dashboard for Triton's GPU kernel cache")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Args, Debug, Clone)]
pub struct DbArg {
    /// SQLite database file (default: ~/.local/share/cachelens/cachelens.db).
    #[arg(long, env = "CACHELENS_DB")]
    pub db: Option<PathBuf>,
}

impl DbArg {
    pub fn path(&self) -> PathBuf {
        self.db.clone().unwrap_or_else(crate::db::default_path)
    }
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Scan this machine's Triton cache into the default database and serve the dashboard
    /// (with no cache on this machine: load the bundled demo caches instead).
    Up(UpArgs),
    /// Read Triton cache dirs into the database (or upload them to a server).
    Scan(ScanArgs),
    /// Serve the dashboard and the JSON API.
    Serve(ServeArgs),
    /// Explain why two entries differ: `cachelens explain MACHINE:KEY MACHINE:KEY`.
    Explain(ExplainArgs),
    /// Manage upload tokens (on the server).
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
}

#[derive(Args, Debug)]
pub struct ScanArgs {
    /// Dirs to search for Triton caches, at any depth up to 8 (plain, Inductor's
    /// triton/<device>/, vLLM's rank_<i>_<j>/triton_cache/); default: every default location that
    /// exists ($TRITON_CACHE_DIR or $TRITON_HOME/.triton/cache or ~/.triton/cache,
    /// $TORCHINDUCTOR_CACHE_DIR or /tmp/torchinductor_$USER, $VLLM_CACHE_ROOT or ~/.cache/vllm).
    pub paths: Vec<PathBuf>,
    /// Succeed (exit 0) when no Triton cache is found (scripts run before any compile).
    #[arg(long)]
    pub allow_empty: bool,
    /// Machine name to record (default: the hostname).
    #[arg(long, env = "CACHELENS_MACHINE")]
    pub machine: Option<String>,
    #[command(flatten)]
    pub db: DbArg,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
    /// Check every entry file by file (size and mtime of each file). Without it, an entry dir
    /// whose inode, mtime and ctime are as the last scan saw them is not listed: Triton changes
    /// an entry only by renaming files into it, which moves those. An in-place rewrite of a
    /// file (not Triton's way) is seen only with --full.
    #[arg(long)]
    pub full: bool,
    /// Upload to this server instead of writing a local database.
    #[arg(long, env = "CACHELENS_SERVER")]
    pub server: Option<String>,
    /// Upload token (see `cachelens token create`).
    #[arg(long, env = "CACHELENS_TOKEN")]
    pub token: Option<String>,
    /// Give up uploading after this many tries.
    #[arg(long, default_value_t = 6)]
    pub retries: u32,
}

#[derive(Args, Debug)]
pub struct UpArgs {
    /// Dirs to search for Triton caches (default: every default location that exists; see
    /// `cachelens scan --help`).
    pub paths: Vec<PathBuf>,
    #[command(flatten)]
    pub db: DbArg,
    /// Address to listen on.
    #[arg(long, env = "CACHELENS_LISTEN", default_value = "127.0.0.1:8600")]
    pub listen: SocketAddr,
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// Address to listen on.
    #[arg(long, env = "CACHELENS_LISTEN", default_value = "127.0.0.1:8600")]
    pub listen: SocketAddr,
    /// Load the bundled demo caches into a fresh database and serve them: a temporary database,
    /// or the --db file if it does not exist yet (an existing database is refused, so real scans
    /// never mix with the demo).
    #[arg(long)]
    pub demo: bool,
    /// Largest accepted upload in MiB (after decompression).
    #[arg(long, env = "CACHELENS_MAX_UPLOAD_MB", default_value_t = 256)]
    pub max_upload_mb: usize,
    /// Require this token to read pages and the read API (see README: Deployment); at least
    /// 16 characters.
    #[arg(long, env = "CACHELENS_READ_TOKEN")]
    pub read_token: Option<String>,
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// Connection limits of `serve` (docs/THREAT-MODEL.md says what each protects).
#[derive(Args, Debug, Clone)]
pub struct LimitArgs {
    /// Close a connection whose request headers take longer than this (seconds); also the
    /// idle time allowed between two requests on one connection.
    #[arg(long, env = "CACHELENS_HEADER_TIMEOUT", default_value_t = 10)]
    pub header_timeout: u64,
    /// Fail a request whose body sends nothing for this long (seconds).
    #[arg(long, env = "CACHELENS_BODY_TIMEOUT", default_value_t = 30)]
    pub body_timeout: u64,
    /// Fail an upload whose body has not arrived whole after this long (seconds).
    #[arg(long, env = "CACHELENS_UPLOAD_TIMEOUT", default_value_t = 300)]
    pub upload_timeout: u64,
    /// Connections served at once (more wait in the listen backlog); lowered to fit the
    /// process's open-file limit.
    #[arg(long, env = "CACHELENS_MAX_CONNECTIONS", default_value_t = 1024)]
    pub max_connections: usize,
}

impl Default for LimitArgs {
    fn default() -> Self {
        LimitArgs { header_timeout: 10, body_timeout: 30, upload_timeout: 300, max_connections: 1024 }
    }
}

#[derive(Args, Debug)]
pub struct ExplainArgs {
    /// First entry, MACHINE:KEY
    pub a: String,
    /// Second entry, MACHINE:KEY
    pub b: String,
    #[command(flatten)]
    pub db: DbArg,
    /// Print JSON (as /api/v1/compare).
    #[arg(long)]
    pub json: bool,
    /// Which IR to diff: source, ttir, ttgir, llir, ptx or amdgcn (default: source, else ttir).
    #[arg(long)]
    pub ir: Option<String>,
    /// Print the IR diff itself (side by side, equal runs collapsed), not only its counts.
    #[arg(long)]
    pub diff: bool,
    /// Keep location noise (`loc(...)`, `#loc` lines, `.loc`/`.file` directives) in the IR diff.
    #[arg(long)]
    pub keep_locations: bool,
}

#[derive(Subcommand, Debug)]
pub enum TokenCommand {
    /// Create a token for a machine; prints the token alone on stdout (shown once).
    Create {
        #[arg(long)]
        machine: String,
        #[command(flatten)]
        db: DbArg,
    },
    /// List tokens (never the tokens themselves).
    List {
        #[command(flatten)]
        db: DbArg,
    },
    /// Revoke a token by id.
    Revoke {
        id: i64,
        #[command(flatten)]
        db: DbArg,
    },
}
