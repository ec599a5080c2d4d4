//! Query strings shared by a page and its JSON API twin (`/compare` and `/api/v1/compare`, ...):
//! one type per question, so that the page and the API accept the same parameters.

use super::AppState;
use super::error::AppError;
use crate::answers::load::{self as dbx, Limits};
use crate::answers::stored::{Lookup, Spec, lookup};
use crate::db::history::{Bucket, HistoryFilter};
use crate::db::reports::Stored;
use crate::db::scans::ScanRef;
use crate::explain::Cause;
use serde::Deserialize;

/// Query of `/compare` (page and API).
#[derive(Debug, Deserialize, Default)]
pub struct CompareQuery {
    pub a: Option<String>,
    pub b: Option<String>,
    /// `source`, `ttir`, `ttgir`, `llir`, `ptx` or `amdgcn`.
    pub ir: Option<String>,
    /// `0` keeps locations in the IR diff.
    pub strip: Option<String>,
}

impl CompareQuery {
    pub fn ids(&self) -> Result<(&str, &str), AppError> {
        fn need<'a>(v: &'a Option<String>, n: &str) -> Result<&'a str, AppError> {
            v.as_deref()
                .filter(|s| !s.is_empty())
                .ok_or_else(|| AppError::BadRequest(format!("missing {n}=MACHINE:KEY")))
        }
        Ok((need(&self.a, "a")?, need(&self.b, "b")?))
    }
    pub fn strip(&self) -> bool {
        !matches!(self.strip.as_deref(), Some("0" | "false" | "no" | "off"))
    }
    pub fn ir(&self) -> Option<&str> {
        self.ir.as_deref().filter(|s| !s.is_empty())
    }
}

/// Query of `/api/v1/nearest` and the nearest page.
#[derive(Debug, Deserialize, Default)]
pub struct NearestQuery {
    pub entry: Option<String>,
    pub limit: Option<usize>,
}

impl NearestQuery {
    pub fn limit(&self) -> usize {
        self.limit.unwrap_or(20).clamp(1, 1000)
    }
}

/// Query of `/invalidations` (page and API). `cause` and `page` page through one cause's
/// rows on the page (`new_page`, `removed_page` the New and Removed lists); the API pages every
/// list with `limit` and `offset` (`cause`: invalidated rows of that cause only).
#[derive(Debug, Deserialize, Default)]
pub struct InvalidationsQuery {
    pub machine: Option<String>,
    pub from: Option<i64>,
    pub to: Option<i64>,
    pub a: Option<String>,
    pub b: Option<String>,
    pub cause: Option<String>,
    pub page: Option<usize>,
    pub new_page: Option<usize>,
    pub removed_page: Option<usize>,
    pub limit: Option<i64>,
    pub offset: Option<i64>,
    /// The API: wait at most this many seconds for a report being computed, then answer 202
    /// with its progress (default: until it is stored).
    pub wait: Option<f64>,
}

/// The scans behind a one-machine invalidations report (for the scan picker).
pub struct ScanContext {
    pub from: Option<ScanRef>,
    pub to: ScanRef,
    pub scans: Vec<ScanRef>,
}

impl InvalidationsQuery {
    /// No machine given: the page offers a picker, the API answers 400.
    pub fn is_empty(&self) -> bool {
        [&self.machine, &self.a, &self.b].iter().all(|v| v.as_deref().is_none_or(str::is_empty))
    }

    /// The cause asked for (400 for an unknown one).
    pub fn cause(&self) -> Result<Option<Cause>, AppError> {
        match self.cause.as_deref().filter(|c| !c.is_empty()) {
            None => Ok(None),
            Some(c) => Cause::parse(c).map(Some).ok_or_else(|| {
                AppError::BadRequest(format!(
                    "unknown cause {c:?}: one of compiler, backend, env, source, options, none, unknown"
                ))
            }),
        }
    }

    /// The stored report the query asks for, computed first if the sides changed: waited for
    /// however long it takes (the API).
    pub async fn run(&self, s: &AppState, limits: Limits) -> Result<(Stored, Option<ScanContext>), AppError> {
        match self.lookup(s, limits, None).await? {
            (Lookup::Ready(s), scans) => Ok((*s, scans)),
            (Lookup::Computing { .. }, _) => unreachable!("no wait limit"),
        }
    }

    /// [`Self::run`], waiting at most `wait` for a computation (the page: it shows the progress
    /// and asks again).
    pub async fn lookup(
        &self,
        s: &AppState,
        limits: Limits,
        wait: Option<std::time::Duration>,
    ) -> Result<(Lookup, Option<ScanContext>), AppError> {
        let (db, jobs) = (&s.db, &*s.jobs);
        let pool = db.pool();
        let some = |v: &Option<String>| v.clone().filter(|s| !s.is_empty());
        match (some(&self.machine), some(&self.a), some(&self.b)) {
            (Some(m), None, None) => {
                let (from, to, scans) = dbx::pick_scans(pool, &m, self.from, self.to).await?;
                let spec = Spec::Scans { from: from.clone(), to: to.clone() };
                Ok((lookup(db, jobs, &spec, limits, wait).await?, Some(ScanContext { from, to, scans })))
            }
            (None, Some(a), Some(b)) => {
                for m in [&a, &b] {
                    if !crate::db::explain::machine_exists(pool, m).await? {
                        return Err(AppError::NotFound(format!("no machine {m:?}")));
                    }
                }
                Ok((lookup(db, jobs, &Spec::Machines { a, b }, limits, wait).await?, None))
            }
            _ => Err(AppError::BadRequest("give machine=M (with optional from=SCAN&to=SCAN) or a=M1&b=M2".into())),
        }
    }
}

/// Query of `/api/v1/history` and of the `/history` page.
#[derive(Debug, Default, Deserialize)]
pub struct HistoryQuery {
    pub machine: Option<String>,
    pub kernel: Option<String>,
    /// `hour` (default), `day`, `minute` or `second`.
    pub bucket: Option<String>,
    /// Unix ms, inclusive.
    pub from: Option<i64>,
    /// Unix ms, exclusive.
    pub to: Option<i64>,
    pub limit: Option<i64>,
    pub offset: Option<i64>,
    /// The page's kernel table: which page of it (from 1).
    pub kpage: Option<usize>,
}

fn nonempty(s: &Option<String>) -> Option<String> {
    s.as_deref().map(str::trim).filter(|s| !s.is_empty()).map(str::to_string)
}

impl HistoryQuery {
    /// The filter, with empty form fields meaning "all".
    pub fn filter(&self) -> HistoryFilter {
        HistoryFilter { machine: nonempty(&self.machine), kernel: nonempty(&self.kernel), from: self.from, to: self.to }
    }

    /// The bucket width; 400 on anything but `second|minute|hour|day`.
    pub fn bucket(&self) -> Result<Bucket, AppError> {
        match nonempty(&self.bucket) {
            None => Ok(Bucket::Hour),
            Some(b) => Bucket::parse(&b)
                .ok_or_else(|| AppError::BadRequest(format!("bucket must be hour, day, minute or second, not {b:?}"))),
        }
    }
}
