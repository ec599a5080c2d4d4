//! Named points where a test can make this process die at once, as `kill -9` would
//! (`CACHELENS_FAILPOINT=<name>`; unset in any real deployment: then a point costs one load of
//! a value read once). Used by tests/e2e/contract.rs to kill a server at every write step of
//! an upload and check that its retry stores exactly what an uninterrupted upload stores, and by
//! tests/e2e/two_servers.rs to kill or slow a server computing a report.

/// The point `CACHELENS_FAILPOINT` names, if any (read once).
fn armed() -> Option<&'static str> {
    static ARMED: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    ARMED.get_or_init(|| std::env::var("CACHELENS_FAILPOINT").ok().filter(|v| !v.is_empty())).as_deref()
}

/// Abort the process here when `CACHELENS_FAILPOINT` names this point.
pub fn hit(name: &str) {
    if armed() == Some(name) {
        eprintln!("failpoint {name}: aborting");
        std::process::abort();
    }
}

/// Sleep `for_` here when `CACHELENS_FAILPOINT` names this point (a test's stand-in for slow
/// work: a report computed while another server asks for it).
pub async fn pause(name: &str, for_: std::time::Duration) {
    if armed() == Some(name) {
        tokio::time::sleep(for_).await;
    }
}

/// An error for the cache root named by `CACHELENS_FAIL_ROOT` (a test's stand-in for any
/// failure of one root: a full disk, a refused upload).
pub fn root(path: &std::path::Path) -> anyhow::Result<()> {
    match std::env::var_os("CACHELENS_FAIL_ROOT") {
        Some(p) if std::path::Path::new(&p) == path => anyhow::bail!("failpoint: this root fails"),
        _ => Ok(()),
    }
}
