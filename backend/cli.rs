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
    /// (with no cache on this machine: serve what the database holds, or, when it holds
    /// nothing, load the bundled demo caches).
    Up(UpArgs),
    /// Read Triton cache dirs into the database (or upload them to a server).
    #[command(after_help = SCAN_HELP)]
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
    /// Manage the machines a database holds (on the server).
    Machine {
        #[command(subcommand)]
        command: MachineCommand,
    },
    /// Move a database between stores: `cachelens db copy --from team.db --to postgres://…`.
    Db {
        #[command(subcommand)]
        command: DbCommand,
    },
    /// CI gate: fail when a change (a Triton upgrade, an env var, ...) would recompile more of
    /// the base's kernels than allowed: `cachelens gate BASE_DIR CHANGE_DIR --max-invalidated 10%`.
    #[command(after_help = GATE_HELP)]
    Gate(GateArgs),
    /// What can go from Triton caches (relocated, superseded, unused, orphaned temp dirs, IR
    /// files, over a budget): a dry run prints it per class with the command that applies it.
    #[command(after_help = PRUNE_HELP)]
    Prune(PruneArgs),
    /// Print a shell completion script: `cachelens completions bash > /etc/bash_completion.d/cachelens`.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
}

const SCAN_HELP: &str = "\
Exit status:
  0  every cache root was scanned (and uploaded, with --server)
  1  an error, or a root failed (the others were still scanned)
  3  another `cachelens scan` is scanning one of these roots into the same database or server
     (one at a time: a lock file per root and destination in cachelens' data dir, beside the
     default database); nothing was scanned. --wait-lock waits for it first";

const GATE_HELP: &str = "\
Exit status:
  0  passed: at most --max-invalidated of the base's kernel entries would recompile
  1  the gate failed: more would recompile (the report says which, grouped by cause)
  2  the gate could not decide: bad arguments, a missing or unreadable dir or database,
     no Triton cache in a dir, an unknown machine or scan, or a change side that holds no
     kernel entries, or fewer than 10% of the base's when the base has 10 or more (did its
     jobs run? --allow-empty-change gates it anyway)

The share counts base kernel entries (compiled variants) that the change compiles again under
a new key (the same variant: same signature, constexprs and launch options). New variants and
removed entries are listed but not counted. The report says what recompiling costs (the
compile times the hook measured). docs/ci-gate.md has a CI recipe.";

#[derive(Args, Debug)]
pub struct GateArgs {
    /// The base: a Triton cache dir compiled before the change (any dir holding caches, as for
    /// `scan`); with --db, a MACHINE or MACHINE@SCAN.
    pub base: String,
    /// The change: a cache dir compiled with the change; with --db, a MACHINE or MACHINE@SCAN.
    /// Left out with --db: BASE's latest scan (or BASE@SCAN) against the scan of the same
    /// cache dir before it.
    pub change: Option<String>,
    /// Fail when more base entries than this would recompile: a percentage (10%), a fraction
    /// (0.1, with a dot) or a count of entries (5).
    #[arg(long, value_name = "LIMIT", allow_hyphen_values = true)]
    pub max_invalidated: String,
    /// Compare machines or scans of this database instead of scanning two dirs. (CACHELENS_DB
    /// is not read here: a job's environment never turns two dirs into machine names.)
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// Print the verdict and the full report as JSON.
    #[arg(long)]
    pub json: bool,
    /// No progress bar and no notes on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    /// Invalidated entries listed per cause in the text report.
    #[arg(long, default_value_t = 20)]
    pub show: usize,
    /// Gate a change side that holds no kernel entries, or fewer than 10% of the base's (by
    /// default the gate cannot decide then, exit 2: its jobs most likely did not run).
    #[arg(long)]
    pub allow_empty_change: bool,
}

const PRUNE_HELP: &str = "\
A dry run scans each cache dir into the database (as `scan`), prints per class the entries,
bytes and inodes it would free, saves the plan (--plan) and prints the command that applies it.
`--apply --plan FILE` removes only that plan's items whose files are as planned; `--apply`
with paths plans and applies at once. Each entry is taken out of Triton's key namespace
before it is removed; a scan afterwards records what went.";

#[derive(Args, Debug)]
pub struct PruneArgs {
    /// Dirs to search for Triton caches, as for `scan` (default: every default location that exists).
    pub paths: Vec<PathBuf>,
    /// Entries neither hit nor compiled for this long can go (`30d`, `12h`, `none`: keep them).
    #[arg(long, default_value = "30d", value_parser = age)]
    pub unused_for: Age,
    /// Also remove the IR files (.ttir, .ttgir, .llir, .ptx, .amdgcn) of kept entries, keeping what
    /// TRITON_STORE_BINARY_ONLY=1 keeps: the binary, metadata, group file (rewritten) and .source.
    #[arg(long)]
    pub ir: bool,
    /// Then remove least recently used entries until each cache dir holds at most this many bytes
    /// (`500M`, `20G`, `1T`, or bytes).
    #[arg(long, value_parser = size)]
    pub max_bytes: Option<i64>,
    /// ... and at most this many inodes (files and dirs; `200k`, `1M`, or a count).
    #[arg(long, value_parser = size)]
    pub max_inodes: Option<i64>,
    /// Remove: the --plan file's items, or (with paths or none) what this run plans.
    #[arg(long)]
    pub apply: bool,
    /// The plan file: written by a dry run, read by --apply (default: prune-plan.json beside the database, or
    /// beside the default database when --db is PostgreSQL's).
    #[arg(long)]
    pub plan: Option<PathBuf>,
    /// Prune a cache dir owned by another user (its jobs are not yours).
    #[arg(long)]
    pub allow_other_owner: bool,
    /// How long a reader that found an entry's group file before it was set aside may take to
    /// load the entry, before the entry is renamed out (`1s`, `0.2`: seconds).
    #[arg(long, default_value = "1s", value_parser = duration)]
    pub grace: std::time::Duration,
    /// Machine name to record (default: the hostname).
    #[arg(long, env = "CACHELENS_MACHINE")]
    pub machine: Option<String>,
    #[command(flatten)]
    pub db: DbArg,
    /// Hosts whose hook events are this machine's (see `scan --help`).
    #[arg(long = "hook-host", env = "CACHELENS_HOOK_HOSTS", value_delimiter = ',')]
    pub hook_hosts: Vec<String>,
    /// Print the plan (and what was removed) as JSON.
    #[arg(long)]
    pub json: bool,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
}

/// An age in ms (`None`: no limit).
#[derive(Debug, Clone, Copy)]
pub struct Age(pub Option<i64>);

/// An age on the command line: a duration with `d` for days too; `none` for no limit.
pub fn age(s: &str) -> Result<Age, String> {
    let t = s.trim();
    if matches!(t, "none" | "off") {
        return Ok(Age(None));
    }
    let d = match t.strip_suffix('d') {
        Some(n) => n
            .trim()
            .parse::<f64>()
            .map(|n| n * 86_400.0)
            .map_err(|_| format!("{s:?} is not an age (30d, 12h, none)"))?,
        None => duration(t)?.as_secs_f64(),
    };
    Ok(Age(Some((d * 1000.0) as i64)))
}

/// A size or count with an optional k/M/G/T suffix (powers of 1024 for bytes and counts alike).
pub fn size(s: &str) -> Result<i64, String> {
    let t = s.trim().trim_end_matches(['B', 'i']);
    let (n, mul) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let mul = match c.to_ascii_lowercase() {
                'k' => 1i64 << 10,
                'm' => 1 << 20,
                'g' => 1 << 30,
                't' => 1 << 40,
                _ => return Err(format!("{s:?}: unknown unit (k, M, G, T)")),
            };
            (&t[..i], mul)
        }
        _ => (t, 1),
    };
    let n: f64 = n.trim().parse().map_err(|_| format!("{s:?} is not a size (500M, 20G, 200k, 1000)"))?;
    (n >= 0.0).then_some((n * mul as f64) as i64).ok_or_else(|| format!("{s:?} is negative"))
}

#[derive(Args, Debug)]
pub struct ScanArgs {
    /// Dirs to search for Triton caches, at any depth up to 8, 6 below a torch_compile_cache dir
    /// (plain, Inductor's triton/<device>/, vLLM's rank_<i>_<j>/triton_cache/ and
    /// rank_<i>_<j>/<prefix>/ compile artifacts); default: every default location that
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
    /// Tries per request of an upload (a failed one says on stderr what failed and when the
    /// next try is).
    #[arg(long, default_value_t = 6)]
    pub retries: u32,
    /// Give up connecting to the server after this long (a try failed).
    #[arg(long, env = "CACHELENS_CONNECT_TIMEOUT", default_value = "10s", value_parser = duration)]
    pub connect_timeout: std::time::Duration,
    /// A try fails when the server sends nothing for this long; bytes flowing either way (a
    /// slow link) keep it going.
    #[arg(long, env = "CACHELENS_READ_TIMEOUT", default_value = "120s", value_parser = duration)]
    pub read_timeout: std::time::Duration,
    /// Bound on each cache root's upload as a whole: its requests, their tries and waits on a
    /// busy server; past it the upload fails (exit 1) and the next scan goes on from it.
    #[arg(long, env = "CACHELENS_GIVE_UP_AFTER", default_value = "2h", value_parser = duration)]
    pub give_up_after: std::time::Duration,
    /// No progress bar (there is none either when stderr is not a terminal).
    #[arg(long, short)]
    pub quiet: bool,
    /// Stop reading entries of a cache dir after this long (`90s`, `30m`, `2h`, `0`, or `none`):
    /// the entries not reached are counted as skipped ("time budget reached") and kept as they
    /// were, never marked removed; the next scan reads on. Each cache dir found has its own.
    #[arg(long, env = "CACHELENS_TIME_BUDGET", default_value = "30m", value_parser = duration)]
    pub time_budget: std::time::Duration,
    /// Hook events are credited by their host: this machine's are those whose host is the
    /// hostname ($CACHELENS_HOSTNAME if set) or the --machine name. Each --hook-host NAME adds
    /// a host to credit here (e.g. a container's hostname); `*` credits every host (a cache
    /// that only this machine's jobs write). Others' events are left for their own scans.
    #[arg(long = "hook-host", env = "CACHELENS_HOOK_HOSTS", value_delimiter = ',')]
    pub hook_hosts: Vec<String>,
    /// When another scan of one of these roots is running, wait this long for it (`0`: stop at
    /// once, exit 3).
    #[arg(long, env = "CACHELENS_WAIT_LOCK", default_value = "0", value_parser = duration)]
    pub wait_lock: std::time::Duration,
}

/// A duration on the command line: seconds (`90`), or with `s`, `m` or `h`; `none` for no limit.
pub fn duration(s: &str) -> Result<std::time::Duration, String> {
    let s = s.trim();
    if matches!(s, "none" | "off") {
        return Ok(std::time::Duration::MAX);
    }
    let (num, unit) = match s.strip_suffix(['s', 'm', 'h']) {
        Some(n) => (n, s.as_bytes()[s.len() - 1]),
        None => (s, b's'),
    };
    let n: f64 = num.trim().parse().map_err(|_| format!("{s:?} is not a duration (90s, 30m, 2h, 0, none)"))?;
    let secs = n * match unit {
        b'h' => 3600.0,
        b'm' => 60.0,
        _ => 1.0,
    };
    std::time::Duration::try_from_secs_f64(secs).map_err(|e| format!("{s:?}: {e}"))
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
    /// Uploads received and waiting for their turn at once, their bodies spooled to unnamed
    /// files beside the database; more are answered 503 with Retry-After (clients retry).
    #[arg(long, env = "CACHELENS_UPLOAD_QUEUE", default_value_t = 64)]
    pub upload_queue: usize,
    /// Require this token to read pages and the read API (see README: Deployment); at least
    /// 16 characters.
    #[arg(long, env = "CACHELENS_READ_TOKEN")]
    pub read_token: Option<String>,
    /// Days a login cookie (`/login?token=`) stays valid; it is also refused as soon as the read
    /// token changes.
    #[arg(long, env = "CACHELENS_LOGIN_DAYS", default_value_t = 7, value_parser = clap::value_parser!(u64).range(1..=365))]
    pub login_days: u64,
    /// How long the invalidations page waits for a report being computed (milliseconds) before
    /// it shows the computation's progress and fills in when the report is stored.
    #[arg(long, env = "CACHELENS_REPORT_WAIT_MS", default_value_t = 50)]
    pub report_wait_ms: u64,
    /// How long removed entries (gone from their cache) and stored invalidation reports are
    /// kept before they are deleted, checked hourly: `90d`, `12h`, `2w`, or `forever`. Hour and
    /// day history keeps what aged out; reports are computed again when asked.
    #[arg(long, env = "CACHELENS_KEEP_REMOVED", default_value = "90d", value_parser = parse_keep)]
    pub keep_removed: Keep,
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// How long `serve` keeps removed entries and stored reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    Forever,
    For(std::time::Duration),
}

impl Default for Keep {
    fn default() -> Keep {
        Keep::For(std::time::Duration::from_secs(90 * 86_400))
    }
}

fn parse_keep(s: &str) -> Result<Keep, String> {
    if s == "forever" {
        return Ok(Keep::Forever);
    }
    match humantime::parse_duration(s) {
        Ok(d) if d >= std::time::Duration::from_secs(3600) => Ok(Keep::For(d)),
        Ok(_) => Err("at least 1h (or `forever`)".to_string()),
        Err(e) => Err(format!("{e}: give a duration such as 90d, 12h or 2w, or `forever`")),
    }
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
pub enum MachineCommand {
    /// Delete a machine that left the fleet and everything that is only its: entries, scans,
    /// hook events and their history (subtracted from the fleet's), summaries, staged uploads,
    /// its landing reports; its tokens are revoked. A node that uploads again under the name
    /// starts afresh (with a new token).
    Retire {
        name: String,
        #[command(flatten)]
        db: DbArg,
        /// Print what was deleted as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum DbCommand {
    /// Back up an SQLite database, served or not, into a new file (`VACUUM INTO`: one consistent
    /// snapshot, compacted; the server goes on meanwhile). Restore: stop the server, put the
    /// file in place of the database (its `-wal` and `-shm` files removed), start it.
    Backup {
        #[command(flatten)]
        db: DbArg,
        /// The backup file to write (it must not exist yet).
        #[arg(long)]
        to: PathBuf,
    },
    /// Copy an SQLite database into an empty PostgreSQL database (its schema is created), every
    /// table compared with the source before anything is committed. The SQLite file is only
    /// read (migrated first if an older release made it) and may be served meanwhile.
    Copy {
        /// The SQLite database file.
        #[arg(long)]
        from: PathBuf,
        /// The PostgreSQL database: postgres://USER[:PASSWORD]@HOST[:PORT]/DB.
        #[arg(long)]
        to: String,
        /// Print what was copied as JSON.
        #[arg(long)]
        json: bool,
    },
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
        /// Print JSON: `[{id, machine, created_at, revoked_at, last_used_at}]` (times in ms).
        #[arg(long)]
        json: bool,
    },
    /// Revoke a token by id.
    Revoke {
        id: i64,
        #[command(flatten)]
        db: DbArg,
    },
}
