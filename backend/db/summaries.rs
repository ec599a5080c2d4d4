//! Reads of the summary tables (`page_*`, built by `rebuild`): per machine, per kernel, per
//! artifact type and per kernel variant. The dashboard and the JSON API ask the same questions
//! here, so their figures agree. Call [`super::Db::fresh_summaries`] first.

use super::Page;
use super::Store;
use serde::Serialize;
use sqlx::{Any, FromRow, QueryBuilder};

/// A machine as the overview lists it.
#[derive(Debug, Serialize, FromRow)]
pub struct MachineSummary {
    pub id: i64,
    pub name: String,
    pub entries: i64,
    pub kernels: i64,
    pub bytes: i64,
    pub relocated: i64,
    pub last_scan_at: Option<i64>,
    pub versions_csv: Option<String>,
}

const MACHINE_SUMMARY: &str =
    "SELECT m.id, m.name, COALESCE(s.entries, 0) AS entries, COALESCE(s.kernels, 0) AS kernels,
        COALESCE(s.bytes, 0) AS bytes, COALESCE(s.relocated, 0) AS relocated,
        (SELECT MAX(scanned_at) FROM scans WHERE machine_id = m.id) AS last_scan_at, s.versions AS versions_csv
     FROM machines m LEFT JOIN page_machine_stats s ON s.machine_id = m.id";

/// Machines by name with their live totals: the overview ([`Page::ALL`]) and `/api/v1/machines`.
pub async fn machine_summaries(pool: &Store, page: Page) -> sqlx::Result<Vec<MachineSummary>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!("{MACHINE_SUMMARY} ORDER BY m.name LIMIT ? OFFSET ?")))
        .bind(page.limit)
        .bind(page.offset)
        .fetch_all(pool)
        .await
}

/// One machine by name.
pub async fn machine_summary(pool: &Store, name: &str) -> sqlx::Result<Option<MachineSummary>> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!("{MACHINE_SUMMARY} WHERE m.name = ?")))
        .bind(name)
        .fetch_optional(pool)
        .await
}

/// A machine as `/api/v1/machines` returns it.
#[derive(Debug, Serialize)]
pub struct MachineRow {
    pub name: String,
    pub entries: i64,
    pub kernels: i64,
    pub bytes: i64,
    /// Live entries whose group file points to another path (Triton misses on them there).
    pub relocated: i64,
    pub last_scan_at: Option<i64>,
    pub triton_versions: Vec<String>,
}

impl From<MachineSummary> for MachineRow {
    fn from(m: MachineSummary) -> MachineRow {
        let versions = m.versions_csv.as_deref().unwrap_or("").split(',').filter(|s| !s.is_empty());
        MachineRow {
            name: m.name,
            entries: m.entries,
            kernels: m.kernels,
            bytes: m.bytes,
            relocated: m.relocated,
            last_scan_at: m.last_scan_at,
            triton_versions: versions.map(str::to_string).collect(),
        }
    }
}

/// Fleet-wide bytes of one artifact type.
#[derive(Debug, Serialize, FromRow)]
pub struct ExtStat {
    pub ext: String,
    pub files: i64,
    pub bytes: i64,
}

pub async fn ext_stats(pool: &Store) -> sqlx::Result<Vec<ExtStat>> {
    sqlx::query_as("SELECT ext, files, bytes FROM page_ext_stats ORDER BY bytes DESC").fetch_all(pool).await
}

/// (version, entries, bytes) of one machine's live entries.
pub async fn machine_versions(pool: &Store, machine_id: i64) -> sqlx::Result<Vec<(Option<String>, i64, i64)>> {
    sqlx::query_as(
        "SELECT triton_version, entries, bytes FROM page_machine_versions WHERE machine_id = ? ORDER BY triton_version",
    )
    .bind(machine_id)
    .fetch_all(pool)
    .await
}

/// A kernel's live totals, on one machine or across the fleet.
#[derive(Debug, Serialize, FromRow)]
pub struct KernelStat {
    pub name: String,
    pub entries: i64,
    pub machines: i64,
    pub bytes: i64,
    pub last_compiled: Option<i64>,
}

/// The biggest kernels of one machine by bytes.
pub async fn biggest_kernels(pool: &Store, machine_id: i64, limit: i64) -> sqlx::Result<Vec<KernelStat>> {
    sqlx::query_as(
        "SELECT kernel AS name, entries, 1 AS machines, bytes, last_compiled
         FROM page_machine_kernels WHERE machine_id = ? ORDER BY bytes DESC, kernel LIMIT ?",
    )
    .bind(machine_id)
    .bind(limit)
    .fetch_all(pool)
    .await
}

/// (UTC day as unix days, entries compiled that day) for one machine, removed entries included:
/// they were compiled all the same.
pub async fn compiled_per_day(pool: &Store, machine_id: i64) -> sqlx::Result<Vec<(i64, i64)>> {
    sqlx::query_as("SELECT day, entries FROM page_machine_days WHERE machine_id = ? ORDER BY day")
        .bind(machine_id)
        .fetch_all(pool)
        .await
}

/// Filters of the kernel list (`/kernels` and `/api/v1/kernels`); blank means no filter.
#[derive(Debug, Default, Clone, serde::Deserialize)]
pub struct KernelFilter {
    pub machine: Option<String>,
    pub q: Option<String>,
    pub backend: Option<String>,
    pub arch: Option<String>,
    pub triton_version: Option<String>,
    /// `variants` (default), `size`, `name` or `last`.
    pub sort: Option<String>,
    pub limit: Option<i64>,
    pub offset: Option<i64>,
}

/// The query string of the `/kernels` page.
#[derive(Debug, Default, Clone, serde::Deserialize, Serialize)]
pub struct KernelQuery {
    #[serde(default)]
    pub q: String,
    #[serde(default)]
    pub machine: String,
    #[serde(default)]
    pub backend: String,
    #[serde(default)]
    pub arch: String,
    #[serde(default)]
    pub triton_version: String,
    /// `variants` (default), `size`, `last` or `name`.
    #[serde(default)]
    pub sort: String,
    #[serde(default)]
    pub page: Option<i64>,
}

impl KernelQuery {
    /// The filters this query sets.
    pub fn filter(&self) -> KernelFilter {
        let some = |s: &String| Some(s.clone());
        KernelFilter {
            machine: some(&self.machine),
            q: some(&self.q),
            backend: some(&self.backend),
            arch: some(&self.arch),
            triton_version: some(&self.triton_version),
            sort: some(&self.sort),
            limit: None,
            offset: None,
        }
    }
}

fn nonempty(s: &Option<String>) -> Option<&str> {
    s.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

/// One page of the kernel list, with each kernel's live totals.
pub async fn kernels(pool: &Store, f: &KernelFilter, page: Page) -> sqlx::Result<Vec<KernelStat>> {
    let order = match f.sort.as_deref().map(str::trim) {
        Some("size") => "bytes DESC",
        Some("last") => "last_compiled DESC",
        Some("name") => "name ASC",
        _ => "entries DESC",
    };
    let like = nonempty(&f.q).map(|q| format!("%{}%", q.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_")));
    let filtered = [&f.machine, &f.backend, &f.arch, &f.triton_version].iter().any(|s| nonempty(s).is_some());
    // unfiltered: one row per kernel already summed; filtered: sum the matching groups. Each
    // filter is written only when given: with `(?2 IS NULL OR m.name = ?2)` SQLite read every
    // group of the fleet (85,000 at 1.25M entries, ~10 ms a page) instead of the machine's.
    let mut qb = QueryBuilder::<Any>::new("");
    if filtered {
        qb.push(
            "SELECT k.kernel AS name, SUM(k.entries) AS entries, COUNT(DISTINCT k.machine_id) AS machines,
                    CAST(TOTAL(k.bytes) AS INTEGER) AS bytes, MAX(k.last_compiled) AS last_compiled
             FROM page_kernel_stats k WHERE true",
        );
        if let Some(m) = nonempty(&f.machine) {
            qb.push(" AND k.machine_id = (SELECT id FROM machines WHERE name = ").push_bind(m).push(")");
        }
        for (col, v) in [("backend", &f.backend), ("arch", &f.arch), ("triton_version", &f.triton_version)] {
            if let Some(v) = nonempty(v) {
                qb.push(format!(" AND k.{col} = ")).push_bind(v);
            }
        }
        if let Some(like) = like {
            qb.push(" AND k.kernel LIKE ").push_bind(like).push(" ESCAPE '\\'");
        }
        qb.push(format!(" GROUP BY k.kernel ORDER BY {order}, name"));
    } else {
        qb.push("SELECT kernel AS name, entries, machines, bytes, last_compiled FROM page_kernel_totals WHERE true");
        if let Some(like) = like {
            qb.push(" AND kernel LIKE ").push_bind(like).push(" ESCAPE '\\'");
        }
        qb.push(format!(" ORDER BY {order}, name"));
    }
    qb.push(" LIMIT ").push_bind(page.limit).push(" OFFSET ").push_bind(page.offset);
    qb.build_query_as().fetch_all(pool).await
}

/// The values offered by the kernel list's selects.
#[derive(Debug, Default, Serialize)]
pub struct FilterChoices {
    pub machines: Vec<String>,
    pub backends: Vec<String>,
    pub arches: Vec<String>,
    pub versions: Vec<String>,
}

pub async fn filter_choices(pool: &Store) -> sqlx::Result<FilterChoices> {
    let col = |c: &'static str| {
        sqlx::query_scalar::<_, String>("SELECT value FROM page_choices WHERE col = ? ORDER BY value")
            .bind(c)
            .fetch_all(pool)
    };
    Ok(FilterChoices {
        machines: sqlx::query_scalar("SELECT name FROM machines ORDER BY name").fetch_all(pool).await?,
        backends: col("backend").await?,
        arches: col("arch").await?,
        versions: col("triton_version").await?,
    })
}

/// How many live entries a kernel has (every kind), as of the last summary rebuild.
pub async fn kernel_live_entries(pool: &Store, kernel: &str) -> sqlx::Result<i64> {
    // from the summary table: counting a kernel's rows per request costs ~100 ms at 25,000
    // entries of one kernel (load bench)
    let n: Option<i64> = sqlx::query_scalar("SELECT entries FROM page_kernel_totals WHERE kernel = ?")
        .bind(kernel)
        .fetch_optional(pool)
        .await?;
    Ok(n.unwrap_or(0))
}

/// One cell of a kernel's variants grid (from `page_variant_cells`).
#[derive(Debug, Serialize, FromRow)]
pub struct VariantCell {
    pub backend: Option<String>,
    pub arch: Option<String>,
    pub triton_version: Option<String>,
    pub signature: Option<String>,
    pub shapes: Option<String>,
    pub num_warps: Option<i64>,
    pub num_stages: Option<i64>,
    pub kind: String,
    pub entries: i64,
    pub machines: String,
    pub reg_min: Option<i64>,
    pub reg_max: Option<i64>,
    pub spill_min: Option<i64>,
    pub spill_max: Option<i64>,
    pub shared_min: Option<i64>,
    pub shared_max: Option<i64>,
    pub shared_binary: i64,
    pub best_config: i64,
    pub sample_min: i64,
    pub sample_max: i64,
    /// Entries whose machine code another key of the kernel also has (same binaries included).
    pub shared_code: i64,
    /// `"<machine>\t<key>"` of `sample_min` and `sample_max` (`None` before the first rebuild
    /// after migration 0024: read them by id).
    pub sample_min_ref: Option<String>,
    pub sample_max_ref: Option<String>,
}

impl VariantCell {
    /// (id, machine, key) of the samples whose names the cell holds.
    pub fn sample_names(&self) -> impl Iterator<Item = (i64, String, String)> + '_ {
        [(self.sample_min, &self.sample_min_ref), (self.sample_max, &self.sample_max_ref)].into_iter().filter_map(
            |(id, r)| {
                let (m, k) = r.as_deref()?.rsplit_once('\t')?;
                Some((id, m.to_string(), k.to_string()))
            },
        )
    }
}

/// Every cell of a kernel's variants grid (call [`super::Db::fresh_summaries`] first).
pub async fn kernel_cells(pool: &Store, kernel: &str) -> sqlx::Result<Vec<VariantCell>> {
    sqlx::query_as(
        // the machines from the cell's counters, by name (0053); a cell from before names them
        "SELECT backend, arch, triton_version, signature, shapes, num_warps, num_stages, kind, entries,
                COALESCE((SELECT GROUP_CONCAT(m.name, ',' ORDER BY m.name)
                          FROM variant_machines vm JOIN machines m ON m.id = vm.machine_id
                          WHERE vm.variant_id = c.variant_id), c.machines) AS machines,
                reg_min, reg_max, spill_min, spill_max, shared_min, shared_max, shared_binary, best_config,
                sample_min, sample_max, shared_code, sample_min_ref, sample_max_ref
         FROM page_variant_cells c WHERE kernel = ?",
    )
    .bind(kernel)
    .fetch_all(pool)
    .await
}

/// The cells of `kernel` on `machine` alone ([`VariantCell`] as the rebuild makes them for the
/// fleet), read from its live entries (`kernel_cells_on.sql`).
pub async fn kernel_cells_on(pool: &Store, kernel: &str, machine: &str) -> sqlx::Result<Vec<VariantCell>> {
    sqlx::query_as(include_str!("kernel_cells_on.sql")).bind(kernel).bind(machine).fetch_all(pool).await
}

/// One autotune config of a kernel, summed over the runs that measured it.
#[derive(Debug, Serialize, FromRow)]
pub struct AutotuneConfig {
    /// The (backend, arch, version) of the cache the run sat in; `None` when no compiled entry
    /// of the kernel sits beside it. `machines`: the machines the runs were on, comma-separated.
    pub backend: Option<String>,
    pub arch: Option<String>,
    pub triton_version: Option<String>,
    pub config_json: String,
    pub num_warps: Option<i64>,
    pub num_stages: Option<i64>,
    pub runs: i64,
    pub machines: String,
    pub best_ms: Option<f64>,
    pub wins: i64,
}

pub async fn kernel_autotune_configs(pool: &Store, kernel: &str) -> sqlx::Result<Vec<AutotuneConfig>> {
    sqlx::query_as(
        // one row per (grid, config), its machines joined: the table holds a row per machine,
        // and fetching 3,000 of them made a 20-machine kernel page 40 ms
        "SELECT backend, arch, triton_version, config_json, MIN(num_warps) AS num_warps,
                MIN(num_stages) AS num_stages, SUM(runs) AS runs, GROUP_CONCAT(machines, ',') AS machines,
                MIN(best_ms) AS best_ms, SUM(wins) AS wins
         FROM page_autotune_configs
         WHERE kernel = ? GROUP BY backend, arch, triton_version, config_json
         ORDER BY MIN(best_ms) IS NULL, MIN(best_ms)",
    )
    .bind(kernel)
    .fetch_all(pool)
    .await
}

/// Live entries of a kernel whose binary another live key of it shares, and those whose machine
/// code another live key shares (a superset: same bytes, same code).
pub async fn kernel_identical(pool: &Store, kernel: &str) -> sqlx::Result<(i64, i64)> {
    Ok(sqlx::query_as("SELECT identical, same_code FROM page_kernel_identical WHERE kernel = ?")
        .bind(kernel)
        .fetch_optional(pool)
        .await?
        .unwrap_or((0, 0)))
}
