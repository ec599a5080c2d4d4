//! What leaves the database, so that it stops growing when the fleet stops growing: a machine
//! retired by name ([`retire`], `cachelens machine retire NAME`), and removed entries and stored
//! reports older than the retention window ([`age_out`], `serve --keep-removed`).
//!
//! Retiring deletes every row of the machine in one transaction: its entries (their compile
//! times with them; the facts, keys, texts, files, classes, autotune rows and module links only
//! it held, [`forget_facts`]), scans, hook events and their
//! files, Inductor decisions, summaries, key sets, staged uploads and its landing reports. Its
//! contributions to the fleet's history roll-ups are subtracted first, so the fleet's hour tables
//! stay the sum of the machines that remain. Its tokens are revoked (a node that comes back needs
//! a new one). Its `report_gens` row stays and moves on: generations never go back, so no
//! in-process answer kept for the old machine id can be mistaken for a new machine's.
//!
//! Ageing out deletes entries removed before the window, in batches of [`BATCH`] (each its own
//! short write transaction), and stored reports computed before it (they are computed again when
//! asked). History keeps what aged out: the hour and day roll-ups were counted when the data
//! landed and are not re-counted from deleted rows.

use super::write;
use crate::db::Conn;
use serde::Serialize;

/// Entries deleted per write transaction when ageing out.
const BATCH: i64 = 5_000;

/// What retiring a machine deleted.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct Retired {
    pub machine: String,
    pub entries: u64,
    /// Facts no other machine holds, deleted with their texts, files and classes.
    pub facts: u64,
    pub scans: u64,
    pub events: u64,
    pub reports: u64,
    pub tokens_revoked: u64,
}

/// Why a machine cannot be retired.
#[derive(Debug, thiserror::Error)]
pub enum RetireError {
    #[error(transparent)]
    Db(#[from] sqlx::Error),
    #[error("no machine named {name:?} in this database{}", known_names(.known))]
    Unknown { name: String, known: Vec<String> },
}

fn known_names(known: &[String]) -> String {
    match known {
        [] => " (it holds no machine)".to_string(),
        names => format!(" (machines: {})", names.join(", ")),
    }
}

/// Delete machine `name` and everything that is only its (see the module doc).
pub async fn retire(db: &super::Db, name: &str) -> Result<Retired, RetireError> {
    let (_turn, mut tx) = write::begin(db).await?;
    let Some((id,)) = sqlx::query_as::<_, (i64,)>("SELECT id FROM machines WHERE name = ?")
        .bind(name)
        .fetch_optional(&mut *tx)
        .await?
    else {
        let known: Vec<(String,)> =
            sqlx::query_as("SELECT name FROM machines ORDER BY name LIMIT 20").fetch_all(&mut *tx).await?;
        return Err(RetireError::Unknown { name: name.to_string(), known: known.into_iter().map(|k| k.0).collect() });
    };
    super::history_agg::forget_machine(&mut tx, id).await?;
    let count = |sql: &'static str| sqlx::query_as::<_, (i64,)>(sql).bind(id);
    let (entries,) = count("SELECT COUNT(*) FROM entry_rows WHERE machine_id = ?").fetch_one(&mut *tx).await?;
    let (scans,) = count("SELECT COUNT(*) FROM scans WHERE machine_id = ?").fetch_one(&mut *tx).await?;
    let (events,) = count("SELECT COUNT(*) FROM events WHERE machine_id = ?").fetch_one(&mut *tx).await?;
    delete_entries(&mut tx, "machine_id = ?1", id).await?;
    let facts = forget_facts(&mut tx).await?;
    // children before parents (foreign keys are on); tables without a machine's rows cost an
    // index probe each
    for sql in [
        "DELETE FROM inductor_choices WHERE machine_id = ?1",
        "DELETE FROM inductor_autotune WHERE machine_id = ?1",
        "DELETE FROM best_configs WHERE machine_id = ?1",
        "DELETE FROM events WHERE machine_id = ?1",
        "DELETE FROM kernel_stages WHERE machine_id = ?1",
        "DELETE FROM event_files WHERE machine_id = ?1",
        "DELETE FROM timeline WHERE machine_id = ?1",
        "DELETE FROM scans WHERE machine_id = ?1",
        "DELETE FROM kernel_keysets WHERE machine_id = ?1",
        "DELETE FROM kernel_keysets_gen WHERE machine_id = ?1",
        "DELETE FROM machine_counts WHERE machine_id = ?1",
        "DELETE FROM machine_advice WHERE machine_id = ?1",
        "DELETE FROM root_hazards WHERE machine_id = ?1",
        "DELETE FROM entry_counts WHERE machine_id = ?1",
        "DELETE FROM page_kernel_stats WHERE machine_id = ?1",
        "DELETE FROM page_machine_stats WHERE machine_id = ?1",
        "DELETE FROM page_machine_versions WHERE machine_id = ?1",
        "DELETE FROM page_machine_days WHERE machine_id = ?1",
        "DELETE FROM page_machine_kernels WHERE machine_id = ?1",
        "DELETE FROM machines WHERE id = ?1",
        // generations only move forward (see the module doc)
        "INSERT INTO report_gens(machine_id, gen) VALUES (?1, 1)
         ON CONFLICT(machine_id) DO UPDATE SET gen = report_gens.gen + 1",
    ] {
        sqlx::query(sql).bind(id).execute(&mut *tx).await?;
    }
    for sql in [
        "DELETE FROM upload_parts WHERE upload_id IN (SELECT id FROM uploads WHERE machine = ?1)",
        "DELETE FROM upload_blobs WHERE upload_id IN (SELECT id FROM uploads WHERE machine = ?1)",
        "DELETE FROM uploads WHERE machine = ?1",
    ] {
        sqlx::query(sql).bind(name).execute(&mut *tx).await?;
    }
    let reports = sqlx::query("DELETE FROM inv_reports WHERE machine = ?").bind(name).execute(&mut *tx).await?;
    let tokens = sqlx::query("UPDATE tokens SET revoked_at = ? WHERE machine = ? AND revoked_at IS NULL")
        .bind(super::now_ms())
        .bind(name)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(Retired {
        machine: name.to_string(),
        entries: entries as u64,
        facts,
        scans: scans as u64,
        events: events as u64,
        reports: reports.rows_affected(),
        tokens_revoked: tokens.rows_affected(),
    })
}

/// Delete the entries `filter` selects (`?1` bound to `arg`) with their rows that have no
/// cascade of their own (`entry_classes_pending`); the others go by cascade.
async fn delete_entries(tx: &mut Conn<'_>, filter: &str, arg: i64) -> sqlx::Result<u64> {
    let sql = format!("DELETE FROM entry_classes_pending WHERE entry_id IN (SELECT id FROM entries WHERE {filter})");
    sqlx::query(sqlx::AssertSqlSafe(sql)).bind(arg).execute(&mut *tx).await?;
    let sql = format!("DELETE FROM entries WHERE {filter}");
    Ok(sqlx::query(sqlx::AssertSqlSafe(sql)).bind(arg).execute(&mut *tx).await?.rows_affected())
}

/// Delete the facts no entry holds any more (a machine retired, removed entries aged out), with
/// their texts and files (`fact_texts`, `fact_files`; `fact_classes`, `fact_autotune` and
/// `fact_modules` and `fact_live` by cascade), the grid cells no fact is in (`variants`), and the keys no fact has any more (an entry's key is its fact's,
/// so no entry names them either). Returns how many facts. One pass over `facts` probing `entries_fact`: an hourly age-out or a retire, not a
/// request.
async fn forget_facts(tx: &mut Conn<'_>) -> sqlx::Result<u64> {
    let gone: Vec<(i64, Option<String>, String)> = sqlx::query_as(
        "SELECT f.id, f.fact, f.key FROM facts f WHERE NOT EXISTS (SELECT 1 FROM entries e WHERE e.fact_id = f.id)",
    )
    .fetch_all(&mut *tx)
    .await?;
    for part in gone.chunks(500) {
        let ids: Vec<i64> = part.iter().map(|g| g.0).collect();
        let facts: Vec<&str> = part.iter().filter_map(|g| g.1.as_deref()).collect();
        let facts = serde_json::to_string(&facts).unwrap_or_default();
        sqlx::query("DELETE FROM facts WHERE id IN (SELECT CAST(value AS BIGINT) FROM json_each(?))")
            .bind(super::json_rows::json_ids(&ids))
            .execute(&mut *tx)
            .await?;
        for table in ["fact_texts", "fact_files"] {
            let sql = format!("DELETE FROM {table} WHERE fact IN (SELECT value FROM json_each(?))");
            sqlx::query(sqlx::AssertSqlSafe(sql)).bind(&facts).execute(&mut *tx).await?;
        }
        let keys: Vec<&str> = part.iter().map(|g| g.2.as_str()).collect();
        sqlx::query(
            "DELETE FROM keys WHERE key IN (SELECT value FROM json_each(?))
               AND NOT EXISTS (SELECT 1 FROM facts f WHERE f.key = keys.key)",
        )
        .bind(serde_json::to_string(&keys).unwrap_or_default())
        .execute(&mut *tx)
        .await?;
    }
    if !gone.is_empty() {
        // the grid cells no fact is in any more (their counters went with the facts)
        sqlx::query(
            "DELETE FROM variants WHERE NOT EXISTS (SELECT 1 FROM fact_live l WHERE l.variant_id = variants.id)",
        )
        .execute(&mut *tx)
        .await?;
    }
    Ok(gone.len() as u64)
}

/// What ageing out deleted.
#[derive(Debug, Default, Serialize, PartialEq, Eq)]
pub struct AgedOut {
    pub entries: u64,
    pub facts: u64,
    pub reports: u64,
}

/// Delete entries removed before `before` (unix ms) and stored reports computed before it.
pub async fn age_out(db: &super::Db, before: i64) -> sqlx::Result<AgedOut> {
    let mut out = AgedOut::default();
    loop {
        let (_turn, mut tx) = write::begin(db).await?;
        let filter =
            format!("id IN (SELECT id FROM entries WHERE removed_at IS NOT NULL AND removed_at < ?1 LIMIT {BATCH})");
        // (the summary tables' triggers mark the machines and kernels whose entries went)
        let n = delete_entries(&mut tx, &filter, before).await?;
        out.facts += forget_facts(&mut tx).await?;
        tx.commit().await?;
        out.entries += n;
        if n < BATCH as u64 {
            break;
        }
    }
    let (_turn, mut tx) = write::begin(db).await?;
    out.reports = sqlx::query("DELETE FROM inv_reports WHERE computed_at < ?")
        .bind(before)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    tx.commit().await?;
    Ok(out)
}

/// Age out what is older than `keep`, now and then every `every`, for as long as the server
/// runs (`serve --keep-removed`). A failed pass is logged and tried again at the next.
pub async fn age_out_every(db: super::Db, keep: std::time::Duration, every: std::time::Duration) {
    loop {
        let before = super::now_ms().saturating_sub(keep.as_millis().min(i64::MAX as u128) as i64);
        match age_out(&db, before).await {
            Ok(AgedOut { entries: 0, facts: 0, reports: 0 }) => {}
            Ok(out) => tracing::info!(
                entries = out.entries,
                facts = out.facts,
                reports = out.reports,
                "aged out what was removed before the retention window"
            ),
            Err(e) => tracing::warn!("ageing out removed entries: {e}"),
        }
        tokio::time::sleep(every).await;
    }
}
