//! What each subcommand does. Cache text they print for people (root paths, dir names, skip
//! reasons, kernel names) goes through [`crate::fmt::term`]; `--json` prints it as JSON strings.

use crate::cli::{
    Cli, Command, DbArg, DbCommand, ExplainArgs, Keep, MachineCommand, ScanArgs, ServeArgs, TokenCommand, UpArgs,
};
use crate::collect;
use crate::db;
use crate::fmt::term;
use crate::model::ScanSummary;
use crate::web::{self, AppState, Config};
use std::path::PathBuf;
use std::process::ExitCode;

/// Runs a command. An error exits 1 (main); the gate says its own status (2 on error).
pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Up(a) => up(a).await,
        Command::Scan(a) => scan(a).await,
        Command::Serve(a) => serve(a).await,
        Command::Explain(a) => explain(a).await,
        Command::Token { command } => token(command).await,
        Command::Machine { command } => machine(command).await,
        Command::Db { command } => db_command(command).await,
        Command::Gate(a) => return Ok(crate::gate::run(a).await),
        Command::Prune(a) => crate::prune::cmd::run(a).await,
        Command::Completions { shell } => {
            use clap::CommandFactory;
            clap_complete::generate(shell, &mut Cli::command(), "cachelens", &mut std::io::stdout());
            Ok(())
        }
    }
    .map(|()| ExitCode::SUCCESS)
}

async fn scan(a: ScanArgs) -> anyhow::Result<()> {
    if let Some(server) = &a.server {
        // what is wrong with --server or --token, said before anything is scanned
        crate::upload::server_base(server)?;
        anyhow::ensure!(a.token.is_some(), "--server needs --token (or CACHELENS_TOKEN): see `cachelens token create`");
    }
    let machine = a.machine.clone().unwrap_or_else(collect::hostname);
    // The server's rule for uploaded names, applied to local scans too: the name becomes a URL
    // part of every page of this machine.
    anyhow::ensure!(
        crate::model::valid_machine_name(&machine),
        "invalid machine name {machine:?}: use --machine with 1-64 letters, digits, '.', '_' or '-', not starting with '.'"
    );
    // the roots found go to stdout, or to stderr when stdout is JSON
    let json = a.json;
    let mut say = |line: String| if json { eprintln!("{}", term(&line)) } else { println!("{}", term(&line)) };
    let known = match &a.server {
        Some(_) => vec![],
        None => db::scans::roots_of(&db::open(&a.db.path()).await?, &machine).await?,
    };
    let paths = crate::locate::roots(&a.paths, &known, a.allow_empty, &mut say)?;
    if paths.is_empty() {
        say("no Triton cache found (--allow-empty): nothing scanned".into());
    }
    // every root's lock before any is scanned: a scan already at work on one stops this one
    let dest = match &a.server {
        Some(s) => s.trim_end_matches('/').to_string(),
        None => {
            let db = a.db.path();
            std::fs::canonicalize(&db).unwrap_or(db).display().to_string()
        }
    };
    let mut _locks = vec![];
    for r in &paths {
        _locks.push(crate::lock::lock(&r.path, &dest, a.wait_lock).await?);
    }
    if let Some(server) = &a.server {
        return upload(&a, server, &machine, &paths).await;
    }
    let store = db::Db::open_command(&a.db.path()).await?;
    let mut summaries = vec![];
    let mut failed = vec![];
    for r in &paths {
        let opts = collect::Opts { full: a.full, ..collect::Opts::cli(&machine, &a.hook_hosts, a.time_budget) };
        // One root that fails (unreadable, a full disk) never costs the machine's other roots.
        match scan_root(&store, r, &machine, opts, a.quiet).await {
            Ok(s) => summaries.push(s),
            Err(e) => failed.push(root_failed(r, e)),
        }
    }
    let hit_miss = db::headline::hit_miss(store.pool(), &machine).await?;
    let dest = Dest { database: Some(a.db.path().display().to_string()), server: None, dashboard: None };
    print_summaries(&summaries, &failed, a.json, &dest, hit_miss.as_ref());
    roots_failed(&failed, paths.len())
}

/// A cache root that failed, and why (`scan --json`'s `failed`).
#[derive(serde::Serialize)]
struct Failed {
    root: String,
    error: String,
}

/// Say on stderr that one root failed, and why (the others go on).
fn root_failed(r: &crate::locate::Root, e: anyhow::Error) -> Failed {
    let f = Failed { root: r.path.display().to_string(), error: format!("{e:#}") };
    eprintln!("error: scanning {}: {}", term(&f.root), term(&f.error));
    f
}

/// An error (exit 1) when any root failed, after every other root was done.
fn roots_failed(failed: &[Failed], of: usize) -> anyhow::Result<()> {
    match failed {
        [] => Ok(()),
        _ => {
            let each: Vec<String> = failed.iter().map(|f| format!("{}: {}", f.root, f.error)).collect();
            anyhow::bail!("{} of {of} cache roots failed (the others were stored): {}", failed.len(), each.join("; "))
        }
    }
}

/// Scan one root found into the local database, with what sits beside it.
async fn scan_root(
    db: &db::Db,
    r: &crate::locate::Root,
    machine: &str,
    opts: collect::Opts,
    quiet: bool,
) -> anyhow::Result<ScanSummary> {
    crate::failpoint::root(&r.path)?;
    let (bar, counts) = crate::progress::Bar::scan(quiet, &r.path.display().to_string());
    let opts = collect::Opts { progress: counts, beside: r.beside.clone(), hazards: true, ..opts };
    let s = collect::scan_local_opts(db, &r.path, machine, opts).await;
    bar.finish();
    s
}

/// `scan --server`: scan each root into a report and upload it.
async fn upload(a: &ScanArgs, server: &str, machine: &str, paths: &[crate::locate::Root]) -> anyhow::Result<()> {
    use anyhow::Context;
    let token =
        a.token.as_deref().context("--server needs --token (or CACHELENS_TOKEN): see `cachelens token create`")?;
    let mut summaries = vec![];
    let mut failed = vec![];
    let mut hit_miss = None;
    for r in paths {
        let up = match scan_and_upload(a, server, token, r, machine).await {
            Ok(up) => up,
            Err(e) => {
                failed.push(root_failed(r, e));
                continue;
            }
        };
        if !a.json {
            println!(
                "uploaded {:.1} KiB (gzip): {} entries whole, {} whose facts the server held, {} of {} IR blobs the server lacked ({} more it held, proven by hash), {} hook event lines{}",
                up.body_bytes as f64 / 1024.0,
                up.entries_sent,
                up.present_sent,
                up.blobs_sent,
                up.blobs_total,
                up.blobs_proven,
                up.events_sent,
                if up.response.created {
                    String::new()
                } else {
                    format!("; already stored as scan {}", up.response.scan_id)
                }
            );
        }
        // the latest answer's: it counts what every earlier root sent too
        hit_miss = up.response.hit_miss.or(hit_miss);
        summaries.push(up.response.summary);
    }
    let base = server.trim_end_matches('/').to_string();
    let dest = Dest {
        dashboard: Some(format!("{base}/machines/{}", crate::fmt::enc(machine))),
        database: None,
        server: Some(base),
    };
    print_summaries(&summaries, &failed, a.json, &dest, hit_miss.as_ref());
    roots_failed(&failed, paths.len())
}

/// One root scanned and uploaded as it is read (a staged upload), with a bar for the scan.
async fn scan_and_upload(
    a: &ScanArgs,
    server: &str,
    token: &str,
    r: &crate::locate::Root,
    machine: &str,
) -> anyhow::Result<crate::upload::Uploaded> {
    crate::failpoint::root(&r.path)?;
    let retry = crate::upload::Retry {
        connect: a.connect_timeout,
        read: a.read_timeout,
        deadline: std::time::Instant::now().checked_add(a.give_up_after),
        ..crate::upload::Retry::new(a.retries)
    };
    let (bar, counts) = crate::progress::Bar::scan(a.quiet, &r.path.display().to_string());
    let opts = collect::Opts {
        progress: counts,
        beside: r.beside.clone(),
        full: a.full,
        ..collect::Opts::cli(machine, &a.hook_hosts, a.time_budget)
    };
    let up = crate::upload::scan_and_upload_opts(server, token, &r.path, machine, retry, opts).await;
    bar.finish();
    up
}

/// Where a scan's results went: a database file or a server, and the machine's dashboard page
/// when its URL is known (a server's).
#[derive(serde::Serialize)]
struct Dest {
    database: Option<String>,
    server: Option<String>,
    dashboard: Option<String>,
}

/// `scan --json`: one object whatever the number of roots (README "Scan output").
#[derive(serde::Serialize)]
struct ScanOutput<'a> {
    /// One summary per cache root scanned, in the order found.
    scans: &'a [ScanSummary],
    /// Roots that failed, and why (the others were scanned).
    failed: &'a [Failed],
    #[serde(flatten)]
    dest: &'a Dest,
    /// The machine's hits and misses as the hook saw them (null: the server did not say).
    hit_miss: Option<&'a crate::model::HitMiss>,
}

fn print_summaries(
    summaries: &[ScanSummary],
    failed: &[Failed],
    json: bool,
    dest: &Dest,
    hit_miss: Option<&crate::model::HitMiss>,
) {
    if json {
        let out = ScanOutput { scans: summaries, failed, dest, hit_miss };
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        return;
    }
    for s in summaries {
        println!(
            "scan {} of {} on {}: {} entries ({:.1} MiB) — {} new, {} changed, {} unchanged, {} removed; {} partial, {} relocated; {} hook events, {} best configs; {} ms",
            s.scan_id,
            term(&s.root),
            term(&s.machine),
            s.entries,
            s.bytes as f64 / 1048576.0,
            s.new_entries,
            s.changed_entries,
            s.unchanged_entries,
            s.removed_entries,
            s.partial,
            s.relocated,
            s.events,
            s.best_configs,
            s.duration_ms
        );
        for (reason, n) in &s.skipped {
            println!("  skipped {n}: {}", term(reason));
        }
        for t in &s.beside {
            let floor = if t.complete { "" } else { "at least " };
            let mib = t.bytes as f64 / 1048576.0;
            let inodes = t.inodes.map(|n| format!(", {n} inodes")).unwrap_or_default();
            println!(
                "  beside it: {}: {floor}{} files{inodes}, {mib:.1} MiB in {}",
                term(&t.tool),
                t.files,
                term(&t.path)
            );
            if let Some(h) = &t.holds {
                println!("    holds: {}", term(h));
            }
        }
        if let Some(h) = &s.hazards {
            println!(
                "  file system: {}{}, {} of {} free, {} of {} inodes free; this cache uses {} inodes",
                h.fs_type,
                if h.network { " (network)" } else { "" },
                crate::fmt::bytes(h.fs_bytes_free as i64),
                crate::fmt::bytes(h.fs_bytes as i64),
                h.fs_inodes_free,
                h.fs_inodes,
                h.cache_inodes
            );
            for w in &h.warnings {
                println!("  warning: {}", term(w));
            }
        }
        if s.relocated > 0 {
            println!(
                "  note: {} entries have group files pointing to another path: Triton will miss on them here",
                s.relocated
            );
        }
    }
    match dest {
        Dest { server: Some(s), .. } => println!("server: {}", term(s)),
        Dest { database: Some(d), .. } => println!("database: {}", term(d)),
        _ => {}
    }
    if let Some(h) = hit_miss {
        println!("{}", term(&h.line()));
    }
    if let Some(d) = &dest.dashboard {
        println!("dashboard: {}", term(d));
    }
}

/// The README's first command: scan what this machine has, serve the default database's data,
/// or show the demo, then serve. The port is taken first: a busy one is said before anything
/// is scanned or loaded.
async fn up(a: UpArgs) -> anyhow::Result<()> {
    let listener = listen(a.listen).await?;
    // a path given that does not exist (or holds no Triton cache) falls back to the demo too
    let given: Vec<PathBuf> = a.paths.iter().filter(|p| p.is_dir()).cloned().collect();
    let path = a.db.path();
    let held = match path.exists() {
        true => Some(db::open(&path).await?),
        false => None,
    };
    let present = if !a.paths.is_empty() && given.is_empty() {
        vec![]
    } else {
        let known = match &held {
            Some(pool) => db::scans::roots_of(pool, &collect::hostname()).await?,
            None => vec![],
        };
        crate::locate::roots(&given, &known, true, &mut |line| eprintln!("{}", term(&line)))?
    };
    let machines = match &held {
        Some(pool) => db::scans::machines_scanned(pool).await?,
        None => 0,
    };
    let demo = present.is_empty() && machines == 0;
    let db = if demo {
        // keep the demo apart from the real default database; a --db the user named is never
        // deleted (serve refuses to load the demo into it if it exists)
        DbArg { db: Some(a.db.db.clone().unwrap_or_else(demo_db_default)) }
    } else {
        a.db.clone()
    };
    if demo {
        eprintln!("no Triton cache found and no scans in {}: loading the bundled demo caches", path.display());
        if a.db.db.is_none() {
            // our own demo database from an earlier run: start it afresh
            let _ = std::fs::remove_file(demo_db_default());
        }
    } else if present.is_empty() {
        eprintln!(
            "no Triton cache found on this machine: serving the {machines} machine{} already scanned into {}",
            if machines == 1 { "" } else { "s" },
            path.display()
        );
    } else {
        let store = db::Db::open_command(&db.path()).await?;
        let machine = collect::hostname();
        let mut summaries = vec![];
        for r in &present {
            let opts = collect::Opts::cli(&machine, &[], crate::scan::limits::DEFAULT_TIME_BUDGET);
            summaries.push(scan_root(&store, r, &machine, opts, false).await?);
        }
        let hit_miss = db::headline::hit_miss(store.pool(), &machine).await?;
        let page = format!("http://{}/machines/{}", listener.local_addr()?, crate::fmt::enc(&machine));
        let dest = Dest { database: Some(db.path().display().to_string()), server: None, dashboard: Some(page) };
        print_summaries(&summaries, &[], false, &dest, hit_miss.as_ref());
    }
    drop(held);
    let args = ServeArgs {
        db,
        listen: a.listen,
        demo,
        max_upload_mb: 256,
        upload_queue: 64,
        read_token: None,
        login_days: 7,
        report_wait_ms: Config::default().report_wait.as_millis() as u64,
        keep_removed: Keep::default(),
        limits: Default::default(),
    };
    serve_on(args, listener).await
}

/// Take the address to serve on, saying what to do when its port is busy.
async fn listen(addr: std::net::SocketAddr) -> anyhow::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr).await.map_err(|e| match e.kind() {
        std::io::ErrorKind::AddrInUse => {
            let host = match addr {
                std::net::SocketAddr::V4(a) => a.ip().to_string(),
                std::net::SocketAddr::V6(a) => format!("[{}]", a.ip()),
            };
            anyhow::anyhow!(
                "cannot listen on {addr}: port {} is in use (another `cachelens up` or `serve`?); \
                 choose another with --listen {host}:PORT (or CACHELENS_LISTEN)",
                addr.port()
            )
        }
        _ => anyhow::anyhow!("cannot listen on {addr}: {e}"),
    })
}

/// Where `up` keeps its demo database: beside the default one, never in it.
fn demo_db_default() -> PathBuf {
    crate::db::default_path().with_file_name("demo.db")
}

/// The database `serve` opens. `--demo` loads into a fresh database: a temporary one, or the
/// `--db` file when it does not exist yet — never into an existing database, whose real scans
/// would be mixed with the demo machines.
fn serve_db_path(a: &ServeArgs) -> anyhow::Result<PathBuf> {
    match (&a.db.db, a.demo) {
        (None, true) => Ok(tempfile_dir()?.join("demo.db")),
        (Some(p), true) => {
            anyhow::ensure!(
                !p.exists(),
                "--demo loads the bundled caches into a fresh database, and {} already exists: \
                 leave out --db (and CACHELENS_DB) to use a temporary one, or name a file that does not exist",
                p.display()
            );
            Ok(p.clone())
        }
        (_, false) => Ok(a.db.path()),
    }
}

async fn serve(a: ServeArgs) -> anyhow::Result<()> {
    if let Some(t) = &a.read_token {
        web::auth::check_read_token(t).map_err(anyhow::Error::msg)?;
    }
    let listener = listen(a.listen).await?;
    serve_on(a, listener).await
}

/// Serve on a listener already bound (so that a busy port is said before the demo loads).
async fn serve_on(a: ServeArgs, listener: tokio::net::TcpListener) -> anyhow::Result<()> {
    let db_path = serve_db_path(&a)?;
    let store = db::Db::open(&db_path).await?;
    if a.demo {
        let work = db_path.with_extension("demo-caches");
        eprintln!(
            "demo: unpacking the bundled caches into {} and scanning them into {}",
            work.display(),
            db_path.display()
        );
        let n = crate::demo::load(&store, &work).await?;
        let caches = crate::demo::disk_bytes(&work);
        let dbytes: u64 = ["", "-wal"]
            .iter()
            .filter_map(|s| std::fs::metadata(format!("{}{s}", db_path.display())).ok())
            .map(|m| m.len())
            .sum();
        eprintln!(
            "demo: loaded {n} scans of real Triton caches: {} ({caches} bytes) of caches in {}, {} database {}",
            crate::fmt::bytes(caches as i64),
            work.display(),
            crate::fmt::bytes(dbytes as i64),
            db_path.display()
        );
    }
    let secs = std::time::Duration::from_secs;
    let config = Config {
        max_upload_bytes: a.max_upload_mb << 20,
        read_token: a.read_token.clone(),
        login_max_age: secs(a.login_days * 86_400),
        body_idle_timeout: secs(a.limits.body_timeout),
        upload_read_timeout: secs(a.limits.upload_timeout),
        upload_queue: a.upload_queue,
        // beside an SQLite file; for PostgreSQL the system's temp dir
        spool_dir: store
            .pool()
            .file()
            .and_then(|f| f.parent())
            .filter(|p| !p.as_os_str().is_empty())
            .map(std::path::Path::to_path_buf),
        report_wait: std::time::Duration::from_millis(a.report_wait_ms),
        ..Config::default()
    };
    let limits =
        web::serve::Limits { header_timeout: secs(a.limits.header_timeout), max_connections: a.limits.max_connections };
    let state = AppState::new(store, config);
    state.db.rebuild_soon(); // a database scanned or migrated while no server ran
    state.db.fill_classes_soon(); // entries stored before classes were (migration 0025)
    tokio::spawn(db::keysets::warm(state.db.clone())); // the same, for machine-pair reports
    if let Keep::For(keep) = a.keep_removed {
        tokio::spawn(db::retention::age_out_every(state.db.clone(), keep, secs(3600)));
    }
    let app = web::app(state);
    eprintln!(
        "cachelens: at most {} connections, {} s for a request's headers",
        limits.effective_connections(),
        a.limits.header_timeout
    );
    // Scripts and tests read the URL from the end of this line: keep it last.
    eprintln!("cachelens: serving {} on http://{}", db_path.display(), listener.local_addr()?);
    web::serve::serve(listener, app, limits, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await;
    Ok(())
}

/// A fresh private directory for the demo database.
fn tempfile_dir() -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("cachelens-demo-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

async fn explain(a: ExplainArgs) -> anyhow::Result<()> {
    let path = a.db.path();
    anyhow::ensure!(db::exists(&path), "no database at {} (scan first, or pass --db FILE)", path.display());
    let store = db::Db::open(&path).await?;
    let r =
        crate::answers::load::compare_ids(&store, &Default::default(), &a.a, &a.b, a.ir.as_deref(), !a.keep_locations)
            .await?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        print!("{}", crate::explain::render_text(&r));
        if a.diff {
            print!("{}", crate::explain::render_diff(&r));
        }
    }
    Ok(())
}

async fn machine(c: MachineCommand) -> anyhow::Result<()> {
    match c {
        MachineCommand::Retire { name, db, json } => {
            let path = db.path();
            anyhow::ensure!(db::exists(&path), "no database at {} (pass --db FILE)", path.display());
            let store = db::Db::open(&path).await?;
            let r = db::retention::retire(&store, &name).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&r)?);
            } else {
                println!(
                    "retired machine {} from {}: {} entries ({} facts no other machine held), {} scans, {} hook events, {} stored reports deleted; {} tokens revoked",
                    term(&r.machine),
                    path.display(),
                    r.entries,
                    r.facts,
                    r.scans,
                    r.events,
                    r.reports,
                    r.tokens_revoked
                );
            }
        }
    }
    Ok(())
}

async fn db_command(c: DbCommand) -> anyhow::Result<()> {
    match c {
        DbCommand::Backup { db, to } => {
            let from = db.path();
            let b = db::backup::backup(&from, &to).await?;
            println!(
                "backed up {} to {}: {} bytes, {} machines, {} entries, integrity ok, in {:.1} s",
                from.display(),
                to.display(),
                b.bytes,
                b.machines,
                b.entries,
                b.millis as f64 / 1000.0
            );
        }
        DbCommand::Copy { from, to, json } => {
            let c = db::copy::copy(&from, &to).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&c)?);
            } else {
                println!(
                    "copied {} to {}: {} rows in {} tables (schema {}), each table compared, in {:.1} s",
                    c.from,
                    c.to,
                    c.rows,
                    c.tables.len(),
                    c.version,
                    c.millis as f64 / 1000.0
                );
            }
        }
    }
    Ok(())
}

async fn token(c: TokenCommand) -> anyhow::Result<()> {
    match c {
        TokenCommand::Create { machine, db } => {
            anyhow::ensure!(crate::model::valid_machine_name(&machine), "invalid machine name {machine:?}");
            let path = db.path();
            let store = db::Db::open(&path).await?;
            println!("{}", db::tokens::create(&store, &machine).await?);
            // stdout is the token alone (scripts read it); where it went, on stderr: a server
            // started on another database does not know it
            eprintln!("token for machine {machine} stored in {} (serve this database: --db)", path.display());
        }
        TokenCommand::List { db, json } => {
            let pool = db::open(&db.path()).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&db::tokens::list(&pool).await?)?);
                return Ok(());
            }
            println!("{:>4}  {:<24} {:<8} created", "id", "machine", "state");
            for t in db::tokens::list(&pool).await? {
                let state = if t.revoked_at.is_some() { "revoked" } else { "active" };
                let when = crate::fmt::time(Some(t.created_at));
                println!("{:>4}  {:<24} {:<8} {when}", t.id, term(&t.machine), state);
            }
        }
        TokenCommand::Revoke { id, db } => {
            let store = db::Db::open(&db.path()).await?;
            anyhow::ensure!(db::tokens::revoke(&store, id).await?, "no active token with id {id}");
            println!("revoked token {id}");
        }
    }
    Ok(())
}
