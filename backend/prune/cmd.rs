//! `cachelens prune`: scan each root, decide, print; save the plan or apply it; scan again.

use super::{Plan, RootPlan, Rules, apply, disk};
use crate::cli::PruneArgs;
use crate::collect;
use crate::fmt::{bytes, term};
use anyhow::Context;
use std::path::{Path, PathBuf};

/// Runs the command.
pub async fn run(a: PruneArgs) -> anyhow::Result<()> {
    let machine = a.machine.clone().unwrap_or_else(collect::hostname);
    anyhow::ensure!(crate::model::valid_machine_name(&machine), "invalid machine name {machine:?}: use --machine");
    let db_path = a.db.path();
    let db = crate::db::Db::open(&db_path).await?;
    // beside an SQLite file; with PostgreSQL, beside the default database
    let beside = db.pool().file().map_or_else(crate::db::default_path, Path::to_path_buf);
    let plan_path = a.plan.clone().unwrap_or_else(|| beside.with_file_name("prune-plan.json"));
    let plan = if a.apply && a.plan.is_some() && a.paths.is_empty() {
        let text =
            std::fs::read_to_string(&plan_path).with_context(|| format!("cannot read {}", plan_path.display()))?;
        let plan: Plan =
            serde_json::from_str(&text).with_context(|| format!("{} is not a prune plan", plan_path.display()))?;
        anyhow::ensure!(
            plan.format == super::PLAN_FORMAT,
            "{}: plan format {:?} unknown",
            plan_path.display(),
            plan.format
        );
        anyhow::ensure!(
            plan.machine == machine,
            "the plan was made for machine {}, this is {machine} (--machine)",
            plan.machine
        );
        plan
    } else {
        make_plan(&a, &db, &machine).await?
    };
    for r in &plan.roots {
        apply::check_owner(Path::new(&r.root), a.allow_other_owner).or_else(|e| {
            if a.apply {
                Err(e)
            } else {
                eprintln!("note: {e:#}");
                Ok(())
            }
        })?;
    }
    if !a.apply {
        if let Some(dir) = plan_path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        }
        std::fs::write(&plan_path, serde_json::to_vec_pretty(&plan)?)
            .with_context(|| format!("cannot write {}", plan_path.display()))?;
        let cmd = apply_command(&a, &machine, &plan_path);
        if a.json {
            println!(
                "{}",
                serde_json::to_string_pretty(&serde_json::json!({"plan": plan, "plan_file": plan_path, "apply": cmd}))?
            );
        } else {
            print_plan(&plan);
            println!("plan saved to {}", term(&plan_path.display().to_string()));
            println!("to apply it: {}", term(&cmd));
        }
        return Ok(());
    }
    if !a.json {
        print_plan(&plan);
    }
    let mut done = vec![];
    for r in &plan.roots {
        let root = r.clone();
        let grace = a.grace;
        let applied = tokio::task::spawn_blocking(move || apply::apply(&root, grace)).await??;
        // what went is recorded: the entries taken out are marked removed
        let opts = collect::Opts::cli(&machine, &a.hook_hosts, crate::scan::limits::DEFAULT_TIME_BUDGET);
        let scan = collect::scan_local_opts(&db, Path::new(&r.root), &machine, opts).await?;
        if !a.json {
            println!(
                "{}: removed {} items, {} and {} inodes; {} kept because they changed; scan {} recorded {} entries removed",
                term(&r.root),
                applied.removed,
                bytes(applied.bytes),
                applied.inodes,
                applied.skipped.len(),
                scan.scan_id,
                scan.removed_entries
            );
            for (dir, why) in &applied.skipped {
                println!("  kept {}: {}", term(dir), term(why));
            }
        }
        done.push(serde_json::json!({"applied": applied, "scan": scan}));
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&serde_json::json!({"plan": plan, "applied": done}))?);
    }
    Ok(())
}

/// Scan each root found into the database and decide what can go.
async fn make_plan(a: &PruneArgs, db: &crate::db::Db, machine: &str) -> anyhow::Result<Plan> {
    let pool = db.pool();
    let known = crate::db::scans::roots_of(pool, machine).await?;
    let json = a.json;
    let mut say = |line: String| if json { eprintln!("{}", term(&line)) } else { println!("{}", term(&line)) };
    let roots = crate::locate::roots(&a.paths, &known, false, &mut say)?;
    let rules = Rules {
        now: crate::db::now_ms(),
        unused_for: a.unused_for.0,
        ir: a.ir,
        max_bytes: a.max_bytes,
        max_inodes: a.max_inodes,
    };
    let mut plan =
        Plan { format: super::PLAN_FORMAT.into(), machine: machine.to_string(), made_at: rules.now, roots: vec![] };
    for r in roots {
        let opts = collect::Opts::cli(machine, &a.hook_hosts, crate::scan::limits::DEFAULT_TIME_BUDGET);
        let (bar, counts) = crate::progress::Bar::scan(a.quiet, &r.path.display().to_string());
        let s = collect::scan_local_opts(db, &r.path, machine, collect::Opts { progress: counts, ..opts }).await;
        bar.finish();
        let s = s?;
        let rows = crate::db::prune::rows(pool, machine, &s.root).await?;
        let since = crate::db::prune::hook_since(pool, machine, &s.root).await?;
        let root = PathBuf::from(&s.root);
        let listing = tokio::task::spawn_blocking(move || disk::list(&root)).await??;
        plan.roots.push(super::decide(&s.root, &rows, &listing, since, &rules));
    }
    Ok(plan)
}

/// The command line that applies a saved plan.
fn apply_command(a: &PruneArgs, machine: &str, plan: &Path) -> String {
    let q = |s: &str| quote(s);
    let mut cmd = format!("cachelens prune --apply --plan {}", q(&plan.display().to_string()));
    if a.machine.is_some() {
        cmd.push_str(&format!(" --machine {}", q(machine)));
    }
    if let Some(db) = &a.db.db {
        cmd.push_str(&format!(" --db {}", q(&db.display().to_string())));
    }
    if a.allow_other_owner {
        cmd.push_str(" --allow-other-owner");
    }
    cmd
}

/// A word as a POSIX shell reads it back: as it is when plain, else in single quotes.
pub fn quote(s: &str) -> String {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"/._-:=@%+,".contains(&b)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

fn print_plan(plan: &Plan) {
    for r in &plan.roots {
        print_root(r);
    }
}

fn print_root(r: &RootPlan) {
    println!("{}: {} entries, {}, {} inodes", term(&r.root), r.entries, bytes(r.bytes), r.inodes);
    let (per, total) = r.tallies();
    if per.is_empty() {
        println!("  nothing to prune");
    }
    for t in &per {
        let label = t.class.map_or("", |c| c.label());
        println!("  {:>6} items {:>10} {:>8} inodes  {label}", t.items, bytes(t.bytes), t.inodes);
    }
    println!("  {:>6} items {:>10} {:>8} inodes  in all", total.items, bytes(total.bytes), total.inodes);
    println!("  last use: {}", r.last_use);
}
