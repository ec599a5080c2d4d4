//! Ingesting a scan: one transaction per scan, so a failed or interrupted scan or upload
//! stores nothing. A scan already stored (same machine and `client_id`) stores nothing again.
//!
//! Entries are upserted by (machine, key): an entry seen in several scans is one row with its
//! first and last scan (for a live row the last scan is the root's latest: see `finish`); entries of the scanned root not seen any more are marked removed, never
//! deleted. Local scans and uploads go through the same [`Ingest`].

use super::Tx;
use crate::model::{BestConfig, Entry, EntryKind, HookEvent, Present, ScanSummary, Skip, SkipKind};
use crate::scan::{FastMap, FastSet, Previous, Tail};
use sqlx::{Any, QueryBuilder, Row};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// What an entry row looked like before this scan.
struct Existing {
    id: i64,
    dir: String,
    sig: String,
    /// The key dir's stamp, as the last scan that trusted it stored it.
    stamp: Option<String>,
    removed: bool,
    /// (bytes, relocated, partial): the scan's totals are summed from these, not from a scan
    /// of the (wide) entries table.
    stats: (i64, bool, bool),
}

/// An ingest in progress (holds the write transaction).
pub struct Ingest {
    tx: Tx<'static>,
    /// This process's turn to write, held until the scan commits ([`super::write`]).
    _turn: super::write::Turn,
    machine_id: i64,
    scan_id: i64,
    root: String,
    root_id: i64,
    now: i64,
    existing: FastMap<String, Existing>, // by key
    seen: FastSet<String>,               // keys seen in this scan
    stored_blobs: HashSet<String>,
    written: FastMap<String, (i64, bool, bool)>, // key -> stats of rows (re)written by this scan
    inserted: FastSet<String>,                   // keys whose row this scan inserted (none before)
    elsewhere: HashMap<String, String>,          // key -> other root of this machine holding its live row
    dup_skips: Vec<Skip>,                        // duplicates found here (a report not deduped by its scanner)
    event_keys: BTreeSet<String>,                // keys whose hook events this scan stored
    decisions_cleared: bool,                     // the root's previous autotune decisions deleted
    newest: super::timeline::Newest,             // the newest compile written (the fleet timeline's)
    summary: ScanSummary,
}

/// Either a fresh ingest, or the id of the identical scan stored before.
pub enum Begin {
    Started(Box<Ingest>),
    AlreadyStored(i64),
}

/// How a scan ends: the scanner's [`Tail`] (what it found besides its entries) and what the writer
/// adds. The tail's records (hook events, best configs, autotune decisions) go in before, through
/// [`Ingest::records`] (`Records::of`), in as many calls as needed: `finish` reads the rest.
#[derive(Default)]
pub struct Finish {
    pub tail: Tail,
    pub duration_ms: i64,
    /// What other tools keep beside the root.
    pub beside: Vec<crate::model::ToolSize>,
    /// The staged upload this scan was assembled from: its parts are deleted in the scan's own
    /// transaction, so a commit killed before its end leaves them for the retry.
    pub staged_upload: Option<i64>,
}

/// Records of a scan besides its entries, stored by [`Ingest::records`].
#[derive(Default)]
pub struct Records<'a> {
    pub best_configs: &'a [BestConfig],
    pub events: &'a [HookEvent],
    pub inductor_autotune: &'a [crate::model::InductorAutotune],
}

impl<'a> Records<'a> {
    /// The records of a scanner's tail.
    pub fn of(t: &'a Tail) -> Self {
        Records { best_configs: &t.best_configs, events: &t.events, inductor_autotune: &t.inductor_autotune }
    }
}

/// Find or create a machine row.
pub async fn machine_id(tx: &mut Tx<'static>, name: &str, now: i64) -> sqlx::Result<i64> {
    sqlx::query("INSERT INTO machines(name, created_at) VALUES (?, ?) ON CONFLICT(name) DO NOTHING")
        .bind(name)
        .bind(now)
        .execute(&mut **tx)
        .await?;
    sqlx::query_scalar("SELECT id FROM machines WHERE name = ?").bind(name).fetch_one(&mut **tx).await
}

impl Ingest {
    /// Start ingesting a scan of `root` on `machine`.
    pub async fn begin(
        db: &super::Db,
        machine: &str,
        client_id: &str,
        root: &str,
        scanned_at: i64,
        source: &str,
    ) -> sqlx::Result<Begin> {
        let (turn, mut tx) = super::write::begin(db).await?;
        let now = scanned_at;
        let machine_id = machine_id(&mut tx, machine, super::now_ms()).await?;
        let dup: Option<i64> = sqlx::query_scalar("SELECT id FROM scans WHERE machine_id = ? AND client_id = ?")
            .bind(machine_id)
            .bind(client_id)
            .fetch_optional(&mut *tx)
            .await?;
        if let Some(id) = dup {
            return Ok(Begin::AlreadyStored(id));
        }
        let scan_id: i64 = sqlx::query_scalar(
            "INSERT INTO scans(machine_id, client_id, scanned_at, root, entries, new_entries, changed_entries,
               removed_entries, bytes, skipped, skipped_json, relocated, source)
             VALUES (?, ?, ?, ?, 0, 0, 0, 0, 0, 0, '{}', 0, ?) RETURNING id",
        )
        .bind(machine_id)
        .bind(client_id)
        .bind(scanned_at)
        .bind(root)
        .bind(source)
        .fetch_one(&mut *tx)
        .await?;
        sqlx::query("INSERT INTO roots(path) VALUES (?) ON CONFLICT(path) DO NOTHING")
            .bind(root)
            .execute(&mut *tx)
            .await?;
        let root_id: i64 =
            sqlx::query_scalar("SELECT id FROM roots WHERE path = ?").bind(root).fetch_one(&mut *tx).await?;
        // (key, id, dir, sig, removed, bytes, relocated, kind, stamp), read from the presence
        // rows, their facts' key and kind, as one JSON array: 100,000 rows one by one
        // through sqlx took 1-2 s, most of a no-change re-scan. The array is joined by
        // `group_concat` (`db::json_rows::rows_json` says why); a dir that is its key (every plain
        // cache's) is stored as null.
        type Row = (String, i64, Option<String>, String, i64, i64, i64, EntryKind, Option<String>);
        let rows = super::json_rows::rows_json(
            "json_array(f.key, e.id, e.dir, e.sig, CASE WHEN e.removed_at IS NOT NULL THEN 1 ELSE 0 END, e.bytes,
                        e.relocated, f.kind, e.stamp)",
        );
        let rows: Option<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT {rows} FROM entries e JOIN facts f ON f.id = e.fact_id WHERE e.machine_id = ? AND e.root_id = ?"
        )))
        .bind(machine_id)
        .bind(root_id)
        .fetch_one(&mut *tx)
        .await?;
        let rows: Vec<Row> = serde_json::from_str(rows.as_deref().unwrap_or("[]"))
            .map_err(|e| sqlx::Error::Decode(format!("entries of the root: {e}").into()))?;
        let existing = rows
            .into_iter()
            .map(|(key, id, dir, sig, removed, bytes, relocated, kind, stamp)| {
                let stats = (bytes, relocated != 0, kind == EntryKind::Partial);
                let dir = dir.unwrap_or_else(|| key.clone());
                (key, Existing { id, dir, sig, stamp, removed: removed != 0, stats })
            })
            .collect();
        // One row per (machine, key): a key whose live row belongs to another root stays there
        // (the root that had it first keeps it); this root's copy is a counted duplicate.
        let elsewhere: HashMap<String, String> = sqlx::query_as(
            "SELECT f.key, r.path FROM entries e JOIN facts f ON f.id = e.fact_id JOIN roots r ON r.id = e.root_id
             WHERE e.machine_id = ? AND e.root_id <> ? AND e.removed_at IS NULL",
        )
        .bind(machine_id)
        .bind(root_id)
        .fetch_all(&mut *tx)
        .await?
        .into_iter()
        .collect();
        let summary = ScanSummary { scan_id, machine: machine.into(), root: root.into(), ..Default::default() };
        Ok(Begin::Started(Box::new(Ingest {
            tx,
            _turn: turn,
            machine_id,
            scan_id,
            root: root.into(),
            root_id,
            now,
            existing,
            seen: FastSet::default(),
            stored_blobs: HashSet::new(),
            written: FastMap::default(),
            inserted: FastSet::default(),
            elsewhere,
            dup_skips: vec![],
            event_keys: BTreeSet::new(),
            decisions_cleared: false,
            newest: Default::default(),
            summary,
        })))
    }

    /// What the scanner needs to skip unchanged entries and resume event files.
    pub async fn previous(&mut self) -> sqlx::Result<Previous> {
        let sigs = self.existing.values().filter(|e| !e.removed).map(|e| (e.dir.clone(), e.sig.clone())).collect();
        let stamps = (self.existing.values())
            .filter(|e| !e.removed)
            .filter_map(|e| Some((e.dir.clone(), e.stamp.clone()?)))
            .collect();
        let marks = sqlx::query("SELECT path, inode_sig, \"offset\" FROM event_files WHERE machine_id = ?")
            .bind(self.machine_id)
            .fetch_all(&mut *self.tx)
            .await?
            .into_iter()
            .map(|r| (r.get::<String, _>("path"), (r.get::<String, _>("inode_sig"), r.get::<i64, _>("offset"))))
            .collect();
        Ok(Previous {
            sigs,
            stamps,
            event_marks: marks,
            elsewhere: self.elsewhere.clone(),
            max_event_bytes: None,
            full: false,
            progress: None,
            ..Default::default()
        })
    }

    /// The scan's write transaction, for reads that must see what it sees (a staged upload's
    /// parts, read by its commit).
    pub fn tx(&mut self) -> &mut Tx<'static> {
        &mut self.tx
    }

    /// Store a batch of entries read by the scanner. `blobs` supplies IR text for uploads
    /// (local scans carry it in `Artifact::text`).
    pub async fn entries(&mut self, batch: &[Entry], blobs: &BTreeMap<String, String>) -> sqlx::Result<()> {
        let fresh: Vec<&Entry> = batch.iter().filter(|e| self.is_fresh(&e.key, &e.dir, &e.sig)).collect();
        for e in &fresh {
            self.newest.entry(e.created_at, e.triton_version.as_deref());
            let relocated = e.group.as_ref().is_some_and(|g| g.relocated);
            self.written.insert(e.key.clone(), (e.bytes, relocated, e.kind == EntryKind::Partial));
        }
        for chunk in fresh.chunks(200) {
            self.upsert(chunk, blobs).await?;
        }
        Ok(())
    }

    /// Whether a record of this scan is to be written: not a duplicate (another root's key,
    /// or twice in the scan: those are counted as skips) and new or changed (its signature);
    /// counted on the summary either way.
    fn is_fresh(&mut self, key: &str, dir: &str, sig: &str) -> bool {
        if let Some(other) = self.elsewhere.get(key) {
            let reason = crate::scan::duplicate_key(other);
            self.dup_skips.push(Skip::new(dir.to_string(), SkipKind::Duplicate, reason));
            return false;
        }
        if !self.seen.insert(key.to_string()) {
            // the same key twice in one report: keep the first, count the other
            let reason = "duplicate key (twice in the report)".to_string();
            self.dup_skips.push(Skip::new(dir.to_string(), SkipKind::Duplicate, reason));
            return false;
        }
        match self.existing.get(key) {
            Some(x) if !x.removed && x.sig == sig => {
                self.summary.unchanged_entries += 1;
                false
            }
            Some(x) if !x.removed => {
                self.summary.changed_entries += 1;
                true
            }
            _ => {
                self.summary.new_entries += 1;
                true
            }
        }
    }

    /// Store entries whose facts the server holds ([`Present`] records of an upload): each
    /// row's columns and class are copied from a live or removed row with the same fact,
    /// relocated as it is (its texts and files are the fact's: `fact_texts`, `fact_files`);
    /// what is this machine's own (dir, signature, compile time, dir stamp) comes from the
    /// record. A record whose fact the server does not hold (a row it was told of went
    /// meanwhile) is a skip, and its row, if any, kept as it was.
    pub async fn present(&mut self, batch: &[Present]) -> sqlx::Result<()> {
        let fresh: Vec<&Present> = batch.iter().filter(|p| self.is_fresh(&p.key, p.dir(), &p.sig)).collect();
        for chunk in fresh.chunks(200) {
            // relocated as 0/1, the column's values
            let pairs: BTreeSet<(&str, i64)> =
                chunk.iter().map(|p| (p.fact.as_str(), i64::from(p.relocated))).collect();
            // a row of each (fact, relocation) a record asks for: the first the fact's index
            // gives, not every machine's (a fact on 1,000 machines is one probe, not 1,000 rows);
            // not the other relocation, which no machine may hold (a probe then reads every row
            // of the fact)
            let text: String = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                "SELECT {} FROM (
                   SELECT f.fact, q.v,
                     (SELECT e.id FROM entries e WHERE e.fact_id = f.id AND e.relocated = q.v LIMIT 1) AS donor
                   FROM (SELECT json_extract(value, '$[0]') AS fact, CAST(json_extract(value, '$[1]') AS BIGINT) AS v
                         FROM json_each(?)) q
                   CROSS JOIN facts f ON f.fact = q.fact)
                 WHERE donor IS NOT NULL",
                super::json_rows::rows_json("json_array(fact, v, donor)")
            )))
            .bind(serde_json::to_string(&pairs).unwrap_or_default())
            .fetch_one(&mut *self.tx)
            .await?;
            let donors: HashMap<(String, bool), i64> = super::json_rows::json_rows::<(String, i64, i64)>(text)?
                .into_iter()
                .map(|(fact, relocated, id)| ((fact, relocated != 0), id))
                .collect();
            let donors: HashMap<&str, i64> = chunk
                .iter()
                .filter_map(|p| Some((p.key.as_str(), *donors.get(&(p.fact.clone(), p.relocated))?)))
                .collect();
            let (held, lost): (Vec<&Present>, Vec<&Present>) =
                chunk.iter().partition(|p| donors.contains_key(p.key.as_str()));
            for p in lost {
                let why = "the server no longer holds this entry's facts: sent again by the next scan";
                self.dup_skips.push(Skip::new(p.dir().to_string(), SkipKind::Other, why));
            }
            if !held.is_empty() {
                self.copy_facts(&held, &donors).await?;
            }
        }
        Ok(())
    }

    /// Write the rows of `chunk` (new or changed), each from its donor row (by key).
    async fn copy_facts(&mut self, chunk: &[&Present], donors: &HashMap<&str, i64>) -> sqlx::Result<()> {
        let (scan, now, mid, root, root_id) =
            (self.scan_id, self.now, self.machine_id, self.root.clone(), self.root_id);
        let mut qb: QueryBuilder<Any> = QueryBuilder::new(
            "WITH v(dir, sig, created_at, relocated, donor, stamp, group_at, group_sha256, group_bytes, bytes) AS (SELECT * FROM (VALUES ",
        );
        let mut sep = qb.separated(", ");
        for p in chunk {
            sep.push("(");
            sep.push_bind_unseparated(p.dir().to_string())
                .push_unseparated(", ")
                .push_bind_unseparated(p.sig.clone())
                .push_unseparated(", ")
                .push_bind_unseparated(p.created_at)
                .push_unseparated(", ")
                .push_bind_unseparated(i64::from(p.relocated))
                .push_unseparated(", ")
                .push_bind_unseparated(donors[p.key.as_str()])
                .push_unseparated(", ")
                .push_bind_unseparated(p.stamp.clone())
                .push_unseparated(", ");
            // this machine's own group file, when the fact names it by its children
            let g = p.group.as_ref();
            sep.push_bind_unseparated(g.and_then(|g| own_group_at(&root, p.dir(), &g.at)))
                .push_unseparated(", ")
                .push_bind_unseparated(g.map(|g| g.sha256.clone()))
                .push_unseparated(", ")
                .push_bind_unseparated(g.map(|g| g.bytes))
                .push_unseparated(", ")
                .push_bind_unseparated(g.map(|g| g.entry_bytes))
                .push_unseparated(")");
        }
        qb.push(
            "))
             INSERT INTO entries(machine_id, root_id, key_id, fact_id, dir, sig, bytes, created_at, relocated, stamp,
              group_at, group_sha256, group_bytes, first_scan_id, last_scan_id, first_seen_at, last_seen_at)
             SELECT ",
        );
        qb.push_bind(mid).push(", ").push_bind(root_id).push(
            ", d.key_id, d.fact_id, NULLIF(v.dir, f.key), v.sig, COALESCE(v.bytes, d.bytes), v.created_at, v.relocated,
              v.stamp, v.group_at, v.group_sha256, v.group_bytes, ",
        );
        qb.push_bind(scan).push(", ").push_bind(scan).push(", ").push_bind(now).push(", ").push_bind(now);
        qb.push(" FROM v JOIN entries d ON d.id = v.donor JOIN facts f ON f.id = d.fact_id WHERE true ");
        qb.push(UPSERT_SET);
        qb.push(" RETURNING id, bytes, fact_id, first_scan_id");
        let rows: Vec<(i64, i64, i64, i64)> = qb.build_query_as().fetch_all(&mut *self.tx).await?;
        // (the key and Triton version are the fact's: `RETURNING` reaches no other table)
        let fact_ids: Vec<i64> = rows.iter().map(|r| r.2).collect();
        let text: String = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT {} FROM facts WHERE id IN (SELECT CAST(value AS BIGINT) FROM json_each(?))",
            super::json_rows::rows_json("json_array(id, key, triton_version)")
        )))
        .bind(super::json_rows::json_ids(&fact_ids))
        .fetch_one(&mut *self.tx)
        .await?;
        let of_fact: HashMap<i64, (String, Option<String>)> =
            super::json_rows::json_rows::<(i64, String, Option<String>)>(text)?
                .into_iter()
                .map(|(id, key, version)| (id, (key, version)))
                .collect();
        let by_key: HashMap<&str, &Present> = chunk.iter().map(|p| (p.key.as_str(), *p)).collect();
        let mut ids: Vec<i64> = Vec::with_capacity(rows.len());
        let mut compiled: Vec<(i64, i64)> = vec![];
        for (id, bytes, fact_id, first_scan) in &rows {
            let Some((key, version)) = of_fact.get(fact_id) else { continue };
            let Some(p) = by_key.get(key.as_str()) else { continue };
            if *first_scan == scan {
                self.inserted.insert(key.clone()); // (a row rewritten keeps its first scan)
            }
            self.newest.entry(p.created_at, version.as_deref());
            ids.push(*id);
            self.written.insert(key.clone(), (*bytes, p.relocated, false));
            compiled.extend(p.created_at.map(|t| (*id, t)));
        }
        // (its files, texts, class, autotune rows and module link are its fact's)
        self.clear_rows(&ids).await?;
        store_compiles(&mut self.tx, &compiled).await?;
        same_group_as_fact(&mut self.tx, &ids).await
    }

    /// Drop the files of rows about to be written again that were stored before facts had
    /// files of their own (`artifacts`): the write's fact holds what the scan read.
    async fn clear_rows(&mut self, ids: &[i64]) -> sqlx::Result<()> {
        sqlx::query("DELETE FROM artifacts WHERE entry_id IN (SELECT CAST(value AS BIGINT) FROM json_each(?))")
            .bind(super::json_rows::json_ids(ids))
            .execute(&mut *self.tx)
            .await?;
        Ok(())
    }

    async fn upsert(&mut self, chunk: &[&Entry], blobs: &BTreeMap<String, String>) -> sqlx::Result<()> {
        let (scan, now, mid, root, root_id) =
            (self.scan_id, self.now, self.machine_id, self.root.clone(), self.root_id);
        // The metadata's text, stored and hashed into the entry's class.
        let metadata: Vec<Option<String>> = chunk.iter().map(|e| e.metadata.as_ref().map(|v| v.to_string())).collect();
        // The texts are stored once per fact and relocation (`fact_texts`); the row holds none.
        let facts: Vec<String> = chunk.iter().map(|e| e.fact()).collect();
        store_fact_texts(&mut self.tx, chunk, &metadata, &facts).await?;
        let (fact_ids, new_facts) = store_facts(&mut self.tx, chunk, &facts).await?;
        let key_ids = store_keys(&mut self.tx, chunk).await?;
        let mut qb: QueryBuilder<Any> = QueryBuilder::new(
            "INSERT INTO entries(machine_id, root_id, key_id, fact_id, dir, sig, bytes, created_at, relocated, stamp,
              group_at, group_sha256, group_bytes, first_scan_id, last_scan_id, first_seen_at, last_seen_at) ",
        );
        qb.push_values(chunk.iter().zip(&facts), |mut b, (e, fact)| {
            // its own group file (cleared below where it is the fact's)
            let own = e.group_in_dir();
            b.push_bind(mid)
                .push_bind(root_id)
                .push_bind(key_ids[e.key.as_str()])
                .push_bind(fact_ids[fact.as_str()])
                .push_bind((e.dir != e.key).then(|| e.dir.clone()))
                .push_bind(e.sig.clone())
                .push_bind(e.bytes)
                .push_bind(e.created_at)
                .push_bind(i64::from(e.relocated()))
                .push_bind(e.dir_stamp.clone())
                .push_bind(own.and_then(|(_, at)| own_group_at(&root, &e.dir, at)))
                .push_bind(own.map(|(a, _)| a.sha256.clone()))
                .push_bind(own.map(|(a, _)| a.bytes))
                .push_bind(scan)
                .push_bind(scan)
                .push_bind(now)
                .push_bind(now);
        });
        qb.push(UPSERT_SET);
        qb.push(" RETURNING id, key_id, first_scan_id");
        let key_of: HashMap<i64, &str> = key_ids.iter().map(|(k, id)| (*id, k.as_str())).collect();
        let mut ids: HashMap<&str, i64> = HashMap::with_capacity(chunk.len());
        for (id, key_id, first_scan) in qb.build_query_as::<(i64, i64, i64)>().fetch_all(&mut *self.tx).await? {
            let Some(key) = key_of.get(&key_id) else { continue };
            ids.insert(key, id);
            if first_scan == scan {
                self.inserted.insert(key.to_string()); // (a row rewritten keeps its first scan)
            }
        }
        // `created_at` above is the entry's latest compile (metadata mtime); a recompile in
        // place overwrites it. Every distinct compile time seen is kept for history.
        let compiled: Vec<(i64, i64)> =
            chunk.iter().filter_map(|e| e.created_at.map(|t| (ids[e.key.as_str()], t))).collect();
        store_compiles(&mut self.tx, &compiled).await?;
        // Classes of the entries with a kernel name, once per fact and relocation.
        let classes: Vec<super::classes::Stored> = chunk
            .iter()
            .zip(&metadata)
            .zip(&facts)
            .filter(|((e, _), _)| e.kernel.is_some())
            .map(|((e, m), fact)| super::classes::Stored {
                fact_id: fact_ids[fact.as_str()],
                relocated: e.relocated(),
                class: super::classes::of_entry(e, m.as_deref()),
            })
            .collect();
        super::classes::store(&mut self.tx, &classes).await?;
        let id_list: Vec<i64> = ids.values().copied().collect();
        self.clear_rows(&id_list).await?;
        let arts: Vec<(&str, &crate::model::Artifact)> =
            chunk.iter().zip(&facts).flat_map(|(e, f)| e.artifacts.iter().map(move |a| (f.as_str(), a))).collect();
        super::artifacts::insert(&mut self.tx, &arts, blobs, &mut self.stored_blobs).await?;
        same_group_as_fact(&mut self.tx, &id_list).await?;
        // What is read from a fact's files is stored with the fact, by its first writer: the
        // Inductor module from the TTIR in hand, else read back from the blobs just stored.
        let (mut modules, mut unread, mut linked) = (vec![], vec![], HashSet::new());
        for (e, fact) in chunk.iter().zip(&facts) {
            let id = fact_ids[fact.as_str()];
            if !new_facts.contains(fact) || !linked.insert(id) {
                continue;
            }
            match super::inductor::module_in_hand(e, blobs) {
                Some(m) => modules.extend(m.map(|m| (id, m))),
                None => unread.push(id),
            }
        }
        super::inductor::store_modules(&mut self.tx, &modules).await?;
        super::inductor::link_modules(&mut self.tx, &unread).await?;
        for (e, fact) in chunk.iter().zip(&facts) {
            let Some(at) = &e.autotune else { continue };
            if !new_facts.contains(fact) {
                continue;
            }
            for (i, c) in at.configs.iter().enumerate() {
                sqlx::query(
                    "INSERT INTO fact_autotune(fact_id, idx, config_json, num_warps, num_stages, timings_json, best_ms, winner)
                     VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                )
                .bind(fact_ids[fact.as_str()])
                .bind(i as i64)
                .bind(c.config.to_string())
                .bind(c.num_warps)
                .bind(c.num_stages)
                .bind(serde_json::to_string(&c.timings_ms).unwrap_or_default())
                .bind(c.timings_ms.first().copied())
                .bind(i64::from(c.winner))
                .execute(&mut *self.tx)
                .await?;
            }
        }
        Ok(())
    }

    /// Store hook events, best configs and Inductor's autotune decisions of this scan (any
    /// number of calls, each a share of them). The root's previous decisions are replaced by
    /// this scan's, even by none ([`Ingest::finish`]).
    pub async fn records(&mut self, r: Records<'_>) -> sqlx::Result<()> {
        let (mid, now) = (self.machine_id, self.now);
        for e in r.events {
            self.newest.event(e.ts, e.parts.as_ref());
        }
        self.summary.events += super::events::insert_events(&mut self.tx, mid, r.events, &mut self.event_keys).await?;
        for b in r.best_configs {
            sqlx::query(
                "INSERT INTO best_configs(machine_id, path, triton_cache_hash, num_warps, num_stages, config_json, last_seen_at)
                 VALUES (?, ?, ?, ?, ?, ?, ?)
                 ON CONFLICT(machine_id, path) DO UPDATE SET triton_cache_hash = excluded.triton_cache_hash,
                   num_warps = excluded.num_warps, num_stages = excluded.num_stages,
                   config_json = excluded.config_json, last_seen_at = excluded.last_seen_at",
            )
            .bind(mid)
            .bind(format!("{}/{}", self.root, b.path))
            .bind(&b.triton_cache_hash)
            .bind(b.num_warps)
            .bind(b.num_stages)
            .bind(b.config.to_string())
            .bind(now)
            .execute(&mut *self.tx)
            .await?;
        }
        self.summary.best_configs += r.best_configs.len() as i64;
        if !self.decisions_cleared {
            super::inductor::clear(&mut self.tx, mid, &self.root).await?;
            self.decisions_cleared = true;
        }
        super::inductor::insert(&mut self.tx, mid, &self.root, self.scan_id, r.inductor_autotune).await
    }

    /// Mark unchanged and removed entries, store events and best configs, record the scan's
    /// counts and commit.
    pub async fn finish(mut self, mut f: Finish) -> sqlx::Result<ScanSummary> {
        f.tail.skipped.append(&mut self.dup_skips);
        let by_dir: FastMap<&str, &str> = self.existing.iter().map(|(k, x)| (x.dir.as_str(), k.as_str())).collect();
        for dir in &f.tail.unchanged {
            if let Some(k) = by_dir.get(dir.as_str())
                && self.seen.insert(k.to_string())
            {
                self.summary.unchanged_entries += 1;
            }
        }
        // An entry that is still there but could not be read this time (permission denied, a
        // symlink loop...) is not gone: keep its row as it was. One that vanished or was
        // emptied is gone.
        // A dir that could not be listed (the root itself, an Inductor `triton/<dev>/`) hides
        // its entries: they are kept too.
        let restamped: Vec<(i64, &str)> = f
            .tail
            .stamps
            .iter()
            .filter_map(|(dir, st)| Some((self.existing.get(*by_dir.get(dir.as_str())?)?.id, st.as_str())))
            .collect();
        restamp(&mut self.tx, &restamped).await?;
        let mut unlisted = HashSet::new();
        for sk in &f.tail.skipped {
            let present = !matches!(sk.kind, SkipKind::Vanished | SkipKind::EmptyDir);
            if let (true, Some(k)) = (present, by_dir.get(sk.path.as_str())) {
                self.seen.insert(k.to_string());
            }
            if sk.kind == SkipKind::DirUnreadable {
                unlisted.insert(sk.path.as_str());
            }
        }
        if !unlisted.is_empty() {
            for (dir, k) in &by_dir {
                let mut up = *dir;
                let hidden = loop {
                    up = up.rsplit_once('/').map_or("", |(p, _)| p);
                    if unlisted.contains(up) || up.is_empty() {
                        break unlisted.contains(up);
                    }
                };
                if hidden {
                    self.seen.insert(k.to_string());
                }
            }
        }
        let (mid, scan, now) = (self.machine_id, self.scan_id, self.now);
        let gone: Vec<i64> =
            self.existing.iter().filter(|(k, x)| !x.removed && !self.seen.contains(*k)).map(|(_, x)| x.id).collect();
        // The entry rows are wide (metadata, group, resources JSON): touching every unchanged
        // row on each scan rewrote the whole table (800 MB of WAL and a 500 MB statement
        // journal for 100,000 entries). So `last_scan_id`/`last_seen_at` are written when a row
        // is (re)read and when it is marked removed: a live row (`removed_at IS NULL`) was seen
        // by every scan of its root since `last_scan_id` (a scan marks what it does not see as
        // removed), i.e. last seen = the root's latest scan; a removed row's are the last scan
        // that saw it.
        if !gone.is_empty() {
            let prev: Option<(i64, i64)> = sqlx::query_as(
                "SELECT id, scanned_at FROM scans WHERE machine_id = ? AND root = ? AND id < ? ORDER BY id DESC LIMIT 1",
            )
            .bind(mid)
            .bind(&self.root)
            .bind(scan)
            .fetch_optional(&mut *self.tx)
            .await?;
            for id in &gone {
                sqlx::query(
                    "UPDATE entries SET removed_at = ?, removed_scan_id = ?,
                       last_scan_id = COALESCE(?, last_scan_id), last_seen_at = COALESCE(?, last_seen_at)
                     WHERE id = ?",
                )
                .bind(now)
                .bind(scan)
                .bind(prev.map(|p| p.0))
                .bind(prev.map(|p| p.1))
                .bind(id)
                .execute(&mut *self.tx)
                .await?;
            }
        }
        self.summary.removed_entries = gone.len() as i64;
        if !self.decisions_cleared {
            self.records(Records::default()).await?;
        }
        // History: the keys whose events or compile times changed are counted again.
        let events = std::mem::take(&mut self.event_keys);
        let mut touched: BTreeSet<&str> = events.iter().map(String::as_str).collect();
        touched.extend(self.written.keys().map(String::as_str));
        let touched: Vec<&str> = touched.into_iter().collect();
        // rows new to the machine with no new events: nothing of theirs was counted but their
        // events, which stay as they were
        let added: FastSet<&str> = self.inserted.iter().map(String::as_str).filter(|k| !events.contains(*k)).collect();
        super::history_agg::account(&mut self.tx, mid, &touched, &added).await?;
        super::events::store_marks(&mut self.tx, mid, &f.tail.event_files).await?;
        super::scans::store_beside(&mut self.tx, scan, &f.beside).await?;
        if let Some(id) = f.staged_upload {
            super::staging::drop_upload(&mut self.tx, id).await?;
        }
        // live rows of this root: those it had and did not lose, and those written now
        let mut totals = (0i64, 0i64, 0i64, 0i64);
        let mut add = |(bytes, relocated, partial): (i64, bool, bool)| {
            totals.0 += 1;
            totals.1 = totals.1.saturating_add(bytes); // a client may send any size
            totals.2 += i64::from(relocated);
            totals.3 += i64::from(partial);
        };
        for (k, x) in &self.existing {
            if !x.removed && self.seen.contains(k) && !self.written.contains_key(k) {
                add(x.stats);
            }
        }
        for st in self.written.values() {
            add(*st);
        }
        let s = &mut self.summary;
        (s.entries, s.bytes, s.relocated, s.partial) = totals;
        s.duration_ms = f.duration_ms;
        for sk in &f.tail.skipped {
            *s.skipped.entry(sk.reason.clone()).or_default() += 1;
        }
        super::timeline::on_scan(&mut self.tx, mid, scan, &self.root, now, &self.newest).await?;
        sqlx::query(
            "UPDATE scans SET entries = ?, new_entries = ?, changed_entries = ?, removed_entries = ?, bytes = ?,
               skipped = ?, skipped_json = ?, relocated = ?, duration_ms = ? WHERE id = ?",
        )
        .bind(s.entries)
        .bind(s.new_entries)
        .bind(s.changed_entries)
        .bind(s.removed_entries)
        .bind(s.bytes)
        .bind(f.tail.skipped.len() as i64)
        .bind(serde_json::to_string(&s.skipped).unwrap_or_default())
        .bind(s.relocated)
        .bind(s.duration_ms)
        .bind(scan)
        .execute(&mut *self.tx)
        .await?;
        crate::failpoint::hit("commit-finish");
        self.tx.commit().await?;
        crate::failpoint::hit("commit-done");
        Ok(self.summary)
    }
}

/// The upsert of an entry (presence) row by (machine, key): a row seen again is rewritten whole,
/// live.
const UPSERT_SET: &str = " ON CONFLICT(machine_id, key_id) DO UPDATE SET root_id=excluded.root_id,
      fact_id=excluded.fact_id, dir=excluded.dir, sig=excluded.sig, bytes=excluded.bytes,
      created_at=excluded.created_at, relocated=excluded.relocated, stamp=excluded.stamp, group_at=excluded.group_at,
      group_sha256=excluded.group_sha256, group_bytes=excluded.group_bytes,
      last_scan_id=excluded.last_scan_id, last_seen_at=excluded.last_seen_at, removed_at=NULL,
      removed_scan_id=NULL";

/// The facts of entries, once per fact (the first writer's row stays: the same fact is the
/// same files read the same way, `model::Entry::fact`): their ids by fact, and the facts this
/// call added.
async fn store_facts(
    tx: &mut Tx<'static>,
    chunk: &[&Entry],
    facts: &[String],
) -> sqlx::Result<(HashMap<String, i64>, HashSet<String>)> {
    let mut qb = QueryBuilder::<Any>::new(
        "INSERT INTO facts(fact, key, kind, kernel, backend, arch, warp_size, num_warps, num_stages, num_ctas,
          triton_version, meta_hash, signature, shapes, registers, spills, shared_bytes, partial, binary_sha256,
          files, group_files) ",
    );
    qb.push_values(chunk.iter().zip(facts), |mut b, (e, fact)| {
        // (its files, as `artifacts::insert` stores them in `fact_files`: the fact names them)
        let groups = e.artifacts.iter().filter(|a| a.name.starts_with("__grp__")).count();
        b.push_bind(fact.clone())
            .push_bind(e.key.clone())
            .push_bind(e.kind)
            .push_bind(e.kernel.clone())
            .push_bind(e.backend.clone())
            .push_bind(e.arch.clone())
            .push_bind(e.warp_size)
            .push_bind(e.num_warps)
            .push_bind(e.num_stages)
            .push_bind(e.num_ctas)
            .push_bind(e.triton_version.clone())
            .push_bind(e.meta_hash.clone())
            .push_bind(e.signature.clone())
            .push_bind(e.shapes.clone())
            .push_bind(e.registers)
            .push_bind(e.spills)
            .push_bind(e.shared_bytes)
            .push_bind(e.partial.clone())
            .push_bind(e.binary_sha256().map(str::to_string))
            .push_bind(e.artifacts.len() as i64)
            .push_bind(groups as i64);
    });
    qb.push(" ON CONFLICT(fact) DO NOTHING RETURNING fact");
    let added: HashSet<String> = qb.build_query_scalar().fetch_all(&mut **tx).await?.into_iter().collect();
    let ids = sqlx::query_as("SELECT fact, id FROM facts WHERE fact IN (SELECT value FROM json_each(?))")
        .bind(serde_json::to_string(facts).unwrap_or_default())
        .fetch_all(&mut **tx)
        .await?
        .into_iter()
        .collect();
    Ok((ids, added))
}

/// The ids of the chunk's keys (`keys`, one row per distinct key), added where new.
async fn store_keys(tx: &mut Tx<'static>, chunk: &[&Entry]) -> sqlx::Result<HashMap<String, i64>> {
    let keys = serde_json::to_string(&chunk.iter().map(|e| e.key.as_str()).collect::<Vec<_>>()).unwrap_or_default();
    sqlx::query("INSERT INTO keys(key) SELECT value FROM json_each(?) WHERE true ON CONFLICT(key) DO NOTHING")
        .bind(&keys)
        .execute(&mut **tx)
        .await?;
    sqlx::query_as("SELECT key, id FROM keys WHERE key IN (SELECT value FROM json_each(?))")
        .bind(&keys)
        .fetch_all(&mut **tx)
        .await
        .map(|rows| rows.into_iter().collect())
}

/// The metadata, resources and group JSON of entries, once per (fact, relocated): the first
/// writer's stays (the same files give the same texts).
async fn store_fact_texts(
    tx: &mut Tx<'static>,
    chunk: &[&Entry],
    metadata: &[Option<String>],
    facts: &[String],
) -> sqlx::Result<()> {
    let js = |v: &Option<serde_json::Value>| v.as_ref().map(|v| v.to_string());
    let mut qb = QueryBuilder::<Any>::new(
        "INSERT OR IGNORE INTO fact_texts(fact, relocated, metadata_json, resources_json, group_json) ",
    );
    qb.push_values(chunk.iter().zip(metadata).zip(facts), |mut b, ((e, m), fact)| {
        b.push_bind(fact.clone())
            .push_bind(i64::from(e.relocated()))
            .push_bind(m.clone())
            .push_bind(js(&e.resources))
            .push_bind(e.group.as_ref().map(|g| g.stored_json()));
    });
    qb.build().execute(&mut **tx).await?;
    Ok(())
}

/// Where an entry's group children sit, as its row keeps it: nothing when that is where the
/// entry sits (`root/dir`, as read back by `db::entries::entry_detail`), else the dir they name
/// (a cache written through a symlinked path).
fn own_group_at(root: &str, dir: &str, at: &str) -> Option<String> {
    (at != crate::model::entry_path(root, dir)).then(|| at.to_string())
}

/// Rows whose own group file is the one their fact's file list holds keep none of their own
/// (`entry_files` reads the fact's): only a machine whose group names another path keeps its
/// file's sha256 and size.
async fn same_group_as_fact(tx: &mut Tx<'static>, ids: &[i64]) -> sqlx::Result<()> {
    sqlx::query(
        "UPDATE entries SET group_sha256 = NULL, group_bytes = NULL
         WHERE id IN (SELECT CAST(value AS BIGINT) FROM json_each(?)) AND group_sha256 IS NOT NULL
           AND EXISTS (SELECT 1 FROM facts t JOIN fact_files f ON f.fact = t.fact
                       WHERE t.id = entries.fact_id AND f.ext = 'grp'
                       AND f.sha256 = entries.group_sha256 AND f.bytes = entries.group_bytes)",
    )
    .bind(super::json_rows::json_ids(ids))
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Keep every distinct compile time seen of each entry (`created_at` is its latest: a
/// recompile in place overwrites it), for history.
async fn store_compiles(tx: &mut Tx<'static>, compiled: &[(i64, i64)]) -> sqlx::Result<()> {
    for chunk in compiled.chunks(400) {
        let mut qb = QueryBuilder::<Any>::new("INSERT OR IGNORE INTO entry_compiles(entry_id, compiled_at) ");
        qb.push_values(chunk, |mut b, (id, t)| {
            b.push_bind(*id).push_bind(*t);
        });
        qb.build().execute(&mut **tx).await?;
    }
    Ok(())
}

/// Give unchanged rows their dir's new stamp (a stamp alone marks no summary: migration 0048).
async fn restamp(tx: &mut Tx<'static>, stamps: &[(i64, &str)]) -> sqlx::Result<()> {
    for chunk in stamps.chunks(400) {
        let mut qb = QueryBuilder::<Any>::new("WITH v(id, stamp) AS (");
        qb.push_values(chunk, |mut b, (id, st)| {
            b.push_bind(*id).push_bind(*st);
        });
        qb.push(") UPDATE entries SET stamp = v.stamp FROM v WHERE entries.id = v.id");
        qb.build().execute(&mut **tx).await?;
    }
    Ok(())
}
