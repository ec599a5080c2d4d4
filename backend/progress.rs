//! Progress bars of long scans and uploads, on stderr, only when stderr is a terminal and
//! `--quiet` was not given: scripts, CI logs and pipes see none. The scanner only counts
//! ([`crate::scan::Progress`]); this module draws.

use crate::scan::Progress;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Whether to draw: stderr is a terminal and not `--quiet`.
pub fn enabled(quiet: bool) -> bool {
    !quiet && std::io::stderr().is_terminal()
}

/// A bar (or spinner) being drawn; [`Bar::finish`] clears it. Nothing at all when disabled.
pub struct Bar {
    pb: Option<ProgressBar>,
    ticker: Option<tokio::task::JoinHandle<()>>,
}

impl Bar {
    /// A bar of a scan of `root`: entry dirs handled of found, fed from `counts` every 100 ms.
    /// Returns the bar and the counter to hand the scanner (None when not drawing).
    pub fn scan(quiet: bool, root: &str) -> (Bar, Option<Arc<Progress>>) {
        if !enabled(quiet) {
            return (Bar { pb: None, ticker: None }, None);
        }
        let counts = Arc::new(Progress::default());
        // no length until the walk has counted the entry dirs (a length of 0 draws as full)
        let pb = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        pb.set_style(
            ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} entries, {elapsed}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        pb.set_message(format!("scanning {}", crate::fmt::term(root)));
        pb.tick(); // drawn at once: a short scan still shows where it went
        let (bar, c) = (pb.clone(), counts.clone());
        let ticker = tokio::spawn(async move {
            loop {
                let found = c.found.load(Ordering::Relaxed) as u64;
                if found > 0 {
                    bar.set_length(found);
                }
                bar.set_position(c.done.load(Ordering::Relaxed) as u64);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        (Bar { pb: Some(pb), ticker: Some(ticker) }, Some(counts))
    }

    /// A spinner with elapsed time, for a step whose size is not counted (an upload).
    pub fn spinner(quiet: bool, msg: String) -> Bar {
        if !enabled(quiet) {
            return Bar { pb: None, ticker: None };
        }
        let pb = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        pb.set_style(
            ProgressStyle::with_template("{spinner} {msg}, {elapsed}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        pb.set_message(msg);
        pb.enable_steady_tick(Duration::from_millis(120));
        Bar { pb: Some(pb), ticker: None }
    }

    /// Stop drawing and clear the line (the command's own output follows).
    pub fn finish(self) {
        if let Some(t) = &self.ticker {
            t.abort();
        }
        if let Some(pb) = &self.pb {
            pb.finish_and_clear();
        }
    }
}
