-- History exactness (events and recompiles). Never edit once landed.
--
-- 1. A hook event line is identified by its full timestamp (the hook writes microseconds) and
--    the hook's per-process line counter `seq`, not by a millisecond timestamp: two lookups of
--    one key in one process within a millisecond are two events. Rows stored before this
--    migration only know the millisecond (`legacy` = 1); when their line is read again (a
--    rotated file read from the start, a re-upload) it claims that row instead of adding one.
CREATE TABLE events_new (
    id          INTEGER PRIMARY KEY,
    machine_id  INTEGER NOT NULL REFERENCES machines(id),
    ts          INTEGER NOT NULL,           -- unix ms (what history buckets by)
    ts_us       INTEGER NOT NULL,           -- unix µs as the hook wrote it (ts * 1000 for legacy rows)
    seq         INTEGER NOT NULL DEFAULT -1, -- the hook's line counter in its process (-1: not written)
    legacy      INTEGER NOT NULL DEFAULT 0,
    host        TEXT NOT NULL,
    pid         INTEGER NOT NULL,
    key         TEXT NOT NULL,
    kernel      TEXT,
    event       TEXT NOT NULL,              -- hit | miss | compile
    compile_ms  REAL,
    stages_json TEXT,
    UNIQUE (machine_id, host, pid, key, event, ts_us, seq)
);
INSERT INTO events_new(id, machine_id, ts, ts_us, seq, legacy, host, pid, key, kernel, event, compile_ms, stages_json)
SELECT id, machine_id, ts, ts * 1000, -1, 1, host, pid, key, kernel, event, compile_ms, stages_json FROM events;
DROP TABLE events;
ALTER TABLE events_new RENAME TO events;
CREATE INDEX events_machine_ts ON events(machine_id, ts);
CREATE INDEX events_kernel_ts ON events(kernel, ts);
-- History: the hook's compile events of an entry's key near a compile time; the lookup before
-- each compile.
CREATE INDEX events_machine_key ON events(machine_id, key, event, ts);
-- The legacy row a re-read line claims (partial: empty once every legacy row is claimed).
CREATE INDEX events_legacy ON events(machine_id, host, pid, key, event, ts) WHERE legacy = 1;

-- 2. Every distinct compile time observed per entry (its metadata mtime, scan after scan). An
--    entry recompiled in place (TRITON_ALWAYS_COMPILE, or evicted and compiled again) gets a new
--    mtime; `entries.created_at` holds the latest, this table all of them.
CREATE TABLE entry_compiles (
    entry_id    INTEGER NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
    compiled_at INTEGER NOT NULL,           -- unix ms
    PRIMARY KEY (entry_id, compiled_at)
) WITHOUT ROWID;
CREATE INDEX entry_compiles_at ON entry_compiles(compiled_at);
INSERT INTO entry_compiles(entry_id, compiled_at) SELECT id, created_at FROM entries WHERE created_at IS NOT NULL;
