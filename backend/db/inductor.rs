//! Autotune decisions for `GET /api/v1/autotune` and the `/autotune` pages: Inductor's
//! max-autotune choices as stored (`inductor_autotune`, migration 0013, replaced per root by each
//! scan, with one `inductor_choices` row per choice, migration 0016), then Triton's own
//! `.autotune.json` results (read from their stored text). Each decision carries its winner's
//! margin over the runner-up and whether aten or a Triton template won.

use super::Page;
use super::{Store, Tx};
use crate::model::{AutotuneChoice, InductorAutotune};
use serde::Serialize;
use sqlx::Row;
use std::collections::BTreeMap;

/// Delete the autotune decisions of `machine_id`'s `root`: a scan replaces them with its own.
pub async fn clear(tx: &mut Tx<'static>, machine_id: i64, root: &str) -> sqlx::Result<()> {
    sqlx::query("DELETE FROM inductor_autotune WHERE machine_id = ? AND root = ?")
        .bind(machine_id)
        .bind(root)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// Store decisions found by scan `scan_id` of `machine_id`'s `root` (after [`clear`]).
pub async fn insert(
    tx: &mut Tx<'static>,
    machine_id: i64,
    root: &str,
    scan_id: i64,
    rows: &[InductorAutotune],
) -> sqlx::Result<()> {
    for r in rows {
        let winner = r.choices.first().map(|c| c.name.clone()).unwrap_or_default();
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO inductor_autotune (machine_id, root, path, op, key, precision, choices_json, winner, scan_id)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        )
        .bind(machine_id)
        .bind(root)
        .bind(&r.path)
        .bind(&r.op)
        .bind(&r.key)
        .bind(&r.precision)
        .bind(serde_json::to_string(&r.choices).unwrap_or_else(|_| "[]".into()))
        .bind(winner)
        .bind(scan_id)
        .fetch_one(&mut **tx)
        .await?;
        for (rank, c) in r.choices.iter().enumerate() {
            sqlx::query(
                "INSERT INTO inductor_choices (decision_id, rank, machine_id, name, module, ms) VALUES (?, ?, ?, ?, ?, ?)",
            )
            .bind(id)
            .bind(rank as i64)
            .bind(machine_id)
            .bind(&c.name)
            .bind(choice_module(&c.name))
            .bind(c.ms)
            .execute(&mut **tx)
            .await?;
        }
    }
    Ok(())
}

/// The Inductor module a choice was generated into: Inductor names a benchmarked template
/// choice `<template>-<module stem>` (`triton_mm-cga37…`, the stem `c` + 51 base32 chars of
/// `<inductor dir>/ga/cga37….py`). Extern (aten) choices end with a hash of the same form
/// that names no module; they simply match no entry.
pub fn choice_module(name: &str) -> Option<&str> {
    let (_, stem) = name.rsplit_once('-')?;
    let ok =
        stem.len() == 52 && stem.starts_with('c') && stem.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    ok.then_some(stem)
}

/// Whether a choice is one of Inductor's Triton templates (`triton_mm-…`, `triton_bmm-…`,
/// `triton_persistent_tma_mm-…`); anything else (`addmm-…`, `bias_addmm-…`, `mm-…`) is an
/// extern kernel, counted as aten.
pub fn choice_kind(name: &str) -> &'static str {
    if name.starts_with("triton_") { "triton" } else { "aten" }
}

/// Record which Inductor module each of the facts `ids` (just written, with their files) was
/// compiled from (`fact_modules`: a function of the fact's TTIR, so once per fact; a machine's
/// entry reaches its module through its fact): the first line of its TTIR (`.source` or `.ttir`) is
/// `#loc = loc("<inductor dir>/<2 chars>/c<51 chars>.py":line:col)` for a kernel Inductor
/// generated. The same rule as migration 0016's backfill ([`module_of_first_line`]), applied in
/// Rust since blob texts are compressed (migration 0030): only the first line is decompressed.
/// A fact whose texts the writer has in hand takes [`module_in_hand`] instead.
pub async fn link_modules(conn: &mut crate::db::Conn<'_>, ids: &[i64]) -> sqlx::Result<()> {
    for part in ids.chunks(500) {
        let mut qb = sqlx::QueryBuilder::<sqlx::Any>::new(format!(
            "SELECT f.id, {} FROM facts f JOIN fact_files a ON a.fact = f.fact JOIN blobs b ON b.sha256 = a.sha256
             WHERE a.ext IN ('source', 'ttir') AND f.id IN (",
            super::blobs::COLUMNS
        ));
        let mut sep = qb.separated(", ");
        for id in part {
            sep.push_bind(*id);
        }
        qb.push(")");
        let mut found: Vec<(i64, String)> = vec![];
        for r in qb.build().fetch_all(&mut *conn).await? {
            let line = super::blobs::Stored::from_row(&r)?.first_line()?;
            if let Some(m) = module_of_first_line(&line) {
                found.push((r.try_get(0)?, m));
            }
        }
        store_modules(conn, &found).await?;
    }
    Ok(())
}

/// Store `(fact id, module)` rows found by [`link_modules`] or [`module_in_hand`] (a fact's
/// first row stays).
pub async fn store_modules(conn: &mut crate::db::Conn<'_>, found: &[(i64, String)]) -> sqlx::Result<()> {
    for rows in found.chunks(300) {
        let mut qb = sqlx::QueryBuilder::<sqlx::Any>::new("INSERT OR IGNORE INTO fact_modules(fact_id, module) ");
        qb.push_values(rows, |mut b, (id, m)| {
            b.push_bind(*id).push_bind(m.clone());
        });
        qb.build().execute(&mut *conn).await?;
    }
    Ok(())
}

/// [`link_modules`]' answer for an entry from the texts its writer holds (an artifact's own: a
/// local scan carries every TTIR it read; else `blobs`: an upload's texts the server lacked),
/// without reading back and decompressing what was just stored. `None` when the text of one
/// of its `.source` and `.ttir` files is not in hand: [`link_modules`] reads the stored ones.
pub fn module_in_hand(e: &crate::model::Entry, blobs: &BTreeMap<String, String>) -> Option<Option<String>> {
    let mut found = None;
    for a in e.artifacts.iter().filter(|a| matches!(a.ext(), "source" | "ttir")) {
        let text = a.text.as_deref().or_else(|| blobs.get(&a.sha256).map(String::as_str))?;
        found = found.or_else(|| module_of_first_line(super::blobs::first_line_of(text)));
    }
    Some(found)
}

/// The Inductor module a TTIR's first line names: migration 0016's SQL rule, counted in
/// characters as SQL's `substr` and `instr` count them. The line starts with `#loc = loc("`
/// (ASCII case aside, as `LIKE`), and the 56 characters before its first `.py"` are
/// `/<2 chars>/c<51 chars>` whose 2 chars are the module's 2nd and 3rd (Inductor's layout).
pub fn module_of_first_line(line: &str) -> Option<String> {
    const PREFIX: &[u8] = b"#loc = loc(\"";
    if !line.as_bytes().get(..PREFIX.len())?.eq_ignore_ascii_case(PREFIX) {
        return None;
    }
    let before: Vec<char> = line[..line.find(".py\"")?].chars().collect();
    let n = before.len();
    let ok = n >= 56
        && before[n - 53] == '/'
        && before[n - 56] == '/'
        && before[n - 52] == 'c'
        && before[n - 55..n - 53] == before[n - 51..n - 49];
    ok.then(|| before[n - 52..].iter().collect())
}

/// A decision as `GET /api/v1/autotune` returns it.
#[derive(Debug, Clone, Serialize)]
pub struct AutotuneRow {
    pub source: &'static str,
    pub machine: String,
    pub op: String,
    pub key: String,
    pub precision: String,
    pub choices: Vec<AutotuneChoice>,
    pub winner: String,
    /// Inductor's decision id (its page `/autotune/{id}`); `None` for Triton rows.
    pub id: Option<i64>,
    /// The `.autotune.json` entry's key (Triton rows); `None` for Inductor rows.
    pub entry: Option<String>,
    /// `"triton"` (a Triton template or config won) or `"aten"` (an extern kernel won).
    pub winner_kind: &'static str,
    /// The fastest timed choice other than the winner; `None` with fewer than two timed choices.
    pub runner_up: Option<String>,
    /// Runner-up's time minus the winner's, in ms.
    pub margin_ms: Option<f64>,
    /// `margin_ms` as a share of the winner's time, in percent (how much slower the runner-up is).
    pub margin_pct: Option<f64>,
}

/// (runner-up, margin in ms, margin in % of the winner's time) of a decision: the runner-up is
/// the fastest timed choice that is not the winner.
pub fn margin(choices: &[AutotuneChoice], winner: &str) -> (Option<String>, Option<f64>, Option<f64>) {
    let Some(w) = choices.iter().find(|c| c.name == winner).and_then(|c| c.ms) else { return (None, None, None) };
    let ru = (choices.iter())
        .filter(|c| c.name != winner)
        .filter_map(|c| Some((c, c.ms?)))
        .min_by(|a, b| a.1.total_cmp(&b.1));
    match ru {
        Some((c, ms)) => (Some(c.name.clone()), Some(ms - w), (w > 0.0).then(|| (ms - w) / w * 100.0)),
        None => (None, None, None),
    }
}

impl AutotuneRow {
    fn new(source: &'static str, machine: String, op: String, key: String, precision: String) -> AutotuneRow {
        AutotuneRow {
            source,
            machine,
            op,
            key,
            precision,
            choices: vec![],
            winner: String::new(),
            id: None,
            entry: None,
            winner_kind: "triton",
            runner_up: None,
            margin_ms: None,
            margin_pct: None,
        }
    }

    /// Set the choices and winner, and what follows from them.
    fn decided(mut self, choices: Vec<AutotuneChoice>, winner: String) -> AutotuneRow {
        (self.runner_up, self.margin_ms, self.margin_pct) = margin(&choices, &winner);
        if self.source == "inductor" {
            self.winner_kind = choice_kind(&winner);
        }
        self.choices = choices;
        self.winner = winner;
        self
    }
}

/// Inductor's decisions (by machine, op and key), then Triton's (by machine, kernel, entry);
/// `kernel` filters on the op (`addmm`) or a choice name (`triton_mm_3`) for Inductor, on the
/// kernel for Triton.
pub async fn rows(
    db: &super::Db,
    machine: Option<&str>,
    kernel: Option<&str>,
    page: Page,
) -> sqlx::Result<Vec<AutotuneRow>> {
    let pool = db.pool();
    let n: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT COUNT(*) {INDUCTOR_WHERE}")))
        .bind(machine)
        .bind(kernel)
        .fetch_one(pool)
        .await?;
    let mut out = inductor_rows(pool, machine, kernel, page).await?;
    let limit = if page.limit < 0 { -1 } else { page.limit - out.len() as i64 };
    if limit != 0 {
        let offset = (page.offset - n).max(0);
        out.extend(triton_rows(db, machine, kernel, Page { limit, offset }).await?);
    }
    Ok(out)
}

/// `?2`, the kernel: the op, a choice's name, or the kernel of an entry a choice was compiled into.
const INDUCTOR_WHERE: &str = "FROM inductor_autotune a JOIN machines m ON m.id = a.machine_id
     WHERE (?1 IS NULL OR m.name = ?1)
       AND (?2 IS NULL OR a.op = ?2
            OR a.id IN (SELECT decision_id FROM inductor_choices WHERE name = ?2)
            OR a.id IN (SELECT c.decision_id FROM entry_rows e JOIN fact_modules fm ON fm.fact_id = e.fact_id
                        JOIN inductor_choices c ON c.machine_id = e.machine_id AND c.module = fm.module
                        WHERE e.kernel = ?2 AND e.removed_at IS NULL))";

/// Triton's `.autotune.json` rows parsed, by the sha256 of their text: what a text parses to
/// depends on the text alone, and a blob's sha256 names its text (`blobs` is content-addressed),
/// so an answer kept here is the one a fresh parse gives, whatever landed since. Parsing 100
/// texts of 30 configs each (and reading their 6 KB each) was most of a page of
/// `/api/v1/autotune` (~30 ms). Bounded: at most [`PARSED_MAX`] texts ([`crate::bounded::Bounded`]).
#[derive(Debug)]
pub struct ParsedAutotune {
    map: crate::bounded::Bounded<String, Option<std::sync::Arc<AutotuneRow>>>,
}

impl Default for ParsedAutotune {
    fn default() -> ParsedAutotune {
        ParsedAutotune { map: crate::bounded::Bounded::entries(PARSED_MAX) }
    }
}

/// Parsed `.autotune.json` texts kept at most (each a few KB: 30 configs of ~200 bytes).
pub const PARSED_MAX: usize = 2048;

impl ParsedAutotune {
    fn get(&self, sha: &str) -> Option<Option<std::sync::Arc<AutotuneRow>>> {
        self.map.get(sha)
    }

    fn put(&self, sha: String, row: Option<std::sync::Arc<AutotuneRow>>) {
        self.map.insert(sha, row);
    }

    /// Texts kept now.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }
}

/// An `.autotune.json` text as a row (machine, op and entry left blank); `None`: not one.
fn parse_triton(text: &str) -> Option<AutotuneRow> {
    let at = crate::scan::autotune::parse_autotune(text).ok()?;
    let ms = |t: &[f64]| t.first().copied().filter(|m| m.is_finite());
    let winner = at.configs.iter().find(|c| c.winner).map(|c| c.config.to_string()).unwrap_or_default();
    let mut choices: Vec<AutotuneChoice> =
        at.configs.iter().map(|c| AutotuneChoice { name: c.config.to_string(), ms: ms(&c.timings_ms) }).collect();
    let at_ms = |c: &AutotuneChoice| c.ms.unwrap_or(f64::INFINITY);
    choices.sort_by(|a, b| at_ms(a).total_cmp(&at_ms(b)).then_with(|| a.name.cmp(&b.name)));
    let row = AutotuneRow::new("triton", String::new(), String::new(), at.key.to_string(), String::new());
    Some(row.decided(choices, winner))
}

/// Triton's `.autotune.json` results: one row per live autotune entry, its choices the configs
/// (named by their JSON, timed by their median), the key Triton's autotune key.
async fn triton_rows(
    db: &super::Db,
    machine: Option<&str>,
    kernel: Option<&str>,
    page: Page,
) -> sqlx::Result<Vec<AutotuneRow>> {
    let pool = db.pool();
    // Read in page order: machines by name, each machine's autotune facts from `facts_autotune`
    // (0047: kernel, key) probing the machine's presence, stopping at the page's end; a filter
    // is spelled out (not `?1 IS NULL OR ...`) so that the planner can use it. The file's sha256
    // is sought in `fact_files`, then in `artifacts` (rows from before facts), not through the
    // view `entry_files` (a UNION ALL, built whole for the fleet when joined). The texts are read
    // only for the sha256s not parsed yet.
    let machine_filter = if machine.is_some() { "m.name = ?1" } else { "?1 IS NULL" };
    let kernel_filter = if kernel.is_some() { "f.kernel = ?2" } else { "?2 IS NULL" };
    let rows: Vec<(String, Option<String>, String, String)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT name, kernel, key, sha FROM (
           SELECT m.name, f.kernel, f.key,
             COALESCE((SELECT ff.sha256 FROM fact_files ff WHERE ff.fact = f.fact AND ff.ext = 'autotune.json'
                       ORDER BY ff.name LIMIT 1),
                      (SELECT a.sha256 FROM artifacts a WHERE a.entry_id = e.id AND a.ext = 'autotune.json'
                       ORDER BY a.name LIMIT 1)) AS sha
           FROM machines m CROSS JOIN facts f INDEXED BY facts_autotune
             CROSS JOIN entries e INDEXED BY entries_fact ON e.fact_id = f.id AND e.machine_id = m.id
           WHERE f.kind = 'autotune' AND e.removed_at IS NULL AND {machine_filter} AND {kernel_filter})
         WHERE sha IS NOT NULL AND EXISTS (SELECT 1 FROM blobs b WHERE b.sha256 = sha)
         ORDER BY name, kernel, key LIMIT ?3 OFFSET ?4"
    )))
    .bind(machine)
    .bind(kernel)
    .bind(page.limit)
    .bind(page.offset)
    .fetch_all(pool)
    .await?;
    let cache = &db.parsed_autotune;
    let mut parsed: std::collections::HashMap<String, Option<std::sync::Arc<AutotuneRow>>> =
        rows.iter().filter_map(|r| Some((r.3.clone(), cache.get(&r.3)?))).collect();
    let missing: Vec<&str> = rows.iter().map(|r| r.3.as_str()).filter(|s| !parsed.contains_key(*s)).collect();
    for part in missing.chunks(500) {
        let sql = format!(
            "SELECT b.sha256, {} FROM blobs b WHERE b.sha256 IN (SELECT value FROM json_each(?))",
            super::blobs::COLUMNS
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(serde_json::to_string(part).unwrap_or_default())
            .fetch_all(pool)
            .await?;
        for r in rows {
            let sha: String = r.try_get(0)?;
            let text = super::blobs::Stored::from_row(&r)?.text()?;
            let row = parse_triton(&text).map(std::sync::Arc::new);
            cache.put(sha.clone(), row.clone());
            parsed.insert(sha, row);
        }
    }
    Ok(rows
        .into_iter()
        .filter_map(|(machine, kernel, entry, sha)| {
            let row = parsed.get(&sha)?.as_deref()?;
            Some(AutotuneRow { machine, op: kernel.unwrap_or_default(), entry: Some(entry), ..row.clone() })
        })
        .collect())
}

async fn inductor_rows(
    pool: &Store,
    machine: Option<&str>,
    kernel: Option<&str>,
    page: Page,
) -> sqlx::Result<Vec<AutotuneRow>> {
    let rows: Vec<(i64, String, String, String, String, String, String)> =
        sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT a.id, m.name, a.op, a.key, a.precision, a.choices_json, a.winner {INDUCTOR_WHERE}
             ORDER BY m.name, a.op, a.key, a.precision, a.id LIMIT ?3 OFFSET ?4"
        )))
        .bind(machine)
        .bind(kernel)
        .bind(page.limit)
        .bind(page.offset)
        .fetch_all(pool)
        .await?;
    Ok(rows
        .into_iter()
        .map(|(id, machine, op, key, precision, choices, winner)| {
            let row = AutotuneRow::new("inductor", machine, op, key, precision);
            AutotuneRow { id: Some(id), ..row.decided(serde_json::from_str(&choices).unwrap_or_default(), winner) }
        })
        .collect())
}

/// The Inductor decision `id`, or `None`.
pub async fn decision(pool: &Store, id: i64) -> sqlx::Result<Option<AutotuneRow>> {
    let row: Option<(String, String, String, String, String, String)> = sqlx::query_as(
        "SELECT m.name, a.op, a.key, a.precision, a.choices_json, a.winner
         FROM inductor_autotune a JOIN machines m ON m.id = a.machine_id WHERE a.id = ?",
    )
    .bind(id)
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|(machine, op, key, precision, choices, winner)| {
        let row = AutotuneRow::new("inductor", machine, op, key, precision);
        AutotuneRow { id: Some(id), ..row.decided(serde_json::from_str(&choices).unwrap_or_default(), winner) }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(name: &str, ms: Option<f64>) -> AutotuneChoice {
        AutotuneChoice { name: name.into(), ms }
    }

    #[test]
    fn margin_over_the_fastest_other_timed_choice() {
        let ch = [c("triton_mm-a", Some(0.02)), c("addmm-x", Some(0.025)), c("bad", None)];
        let (ru, ms, pct) = margin(&ch, "triton_mm-a");
        assert_eq!(ru.as_deref(), Some("addmm-x"));
        assert!((ms.unwrap() - 0.005).abs() < 1e-12 && (pct.unwrap() - 25.0).abs() < 1e-9);
        // Triton's pick need not be the first listed; failed choices are never the runner-up
        assert_eq!(margin(&ch, "addmm-x").0.as_deref(), Some("triton_mm-a"));
        assert_eq!(margin(&ch[..1], "triton_mm-a"), (None, None, None));
        assert_eq!(margin(&[c("a", Some(1.0)), c("b", None)], "a"), (None, None, None));
    }

    #[test]
    fn choice_names() {
        let t = "triton_mm-cga37edsu7gi2jeel6c7efyxmrqio2oe6hqjhcombwn7jirp4nb5";
        assert_eq!(choice_module(t), Some("cga37edsu7gi2jeel6c7efyxmrqio2oe6hqjhcombwn7jirp4nb5"));
        assert_eq!((choice_kind(t), choice_kind("bias_addmm-alpha=1-beta=1-cerh")), ("triton", "aten"));
        assert_eq!(choice_module("triton_mm-cga37"), None);
        assert_eq!(choice_module("addmm"), None);
    }
}
