-- cachelens schema v1. Times are unix milliseconds (INTEGER). Never edit once landed.
CREATE TABLE machines (
    id          INTEGER PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    created_at  INTEGER NOT NULL
);

CREATE TABLE scans (
    id              INTEGER PRIMARY KEY,
    machine_id      INTEGER NOT NULL REFERENCES machines(id),
    client_id       TEXT NOT NULL,           -- scan id chosen by the scanner; makes uploads idempotent
    scanned_at      INTEGER NOT NULL,
    root            TEXT NOT NULL,
    entries         INTEGER NOT NULL,        -- entries present after this scan
    new_entries     INTEGER NOT NULL,
    changed_entries INTEGER NOT NULL,
    removed_entries INTEGER NOT NULL,
    bytes           INTEGER NOT NULL,
    skipped         INTEGER NOT NULL,
    skipped_json    TEXT NOT NULL,           -- {"reason": count}
    relocated       INTEGER NOT NULL,        -- entries whose group file points elsewhere
    duration_ms     INTEGER,
    source          TEXT NOT NULL,           -- 'local' | 'upload'
    UNIQUE (machine_id, client_id)
);
CREATE INDEX scans_machine ON scans(machine_id, scanned_at);

CREATE TABLE entries (
    id              INTEGER PRIMARY KEY,
    machine_id      INTEGER NOT NULL REFERENCES machines(id),
    root            TEXT NOT NULL,
    dir             TEXT NOT NULL,           -- path of the entry dir relative to root
    key             TEXT NOT NULL,
    kind            TEXT NOT NULL,           -- kernel | binary_only | launcher | autotune | partial | other
    kernel          TEXT,
    backend         TEXT,
    arch            TEXT,
    warp_size       INTEGER,
    num_warps       INTEGER,
    num_stages      INTEGER,
    num_ctas        INTEGER,
    triton_version  TEXT,
    meta_hash       TEXT,
    signature       TEXT,                    -- argument types from the TTIR function signature
    shapes          TEXT,                    -- tensor shapes seen in the TTIR (constexpr evidence)
    created_at      INTEGER,                 -- metadata file mtime = compile time
    bytes           INTEGER NOT NULL,
    registers       INTEGER,
    spills          INTEGER,
    shared_bytes    INTEGER,
    resources_json  TEXT,
    metadata_json   TEXT,
    group_json      TEXT,
    relocated       INTEGER NOT NULL DEFAULT 0,
    partial         TEXT,
    binary_sha256   TEXT,
    sig             TEXT NOT NULL,           -- names, sizes and mtimes of the files: re-read only when it changes
    first_scan_id   INTEGER NOT NULL,
    last_scan_id    INTEGER NOT NULL,
    first_seen_at   INTEGER NOT NULL,
    last_seen_at    INTEGER NOT NULL,
    removed_at      INTEGER,
    removed_scan_id INTEGER,
    UNIQUE (machine_id, key)
);
CREATE INDEX entries_kernel ON entries(kernel, machine_id);
CREATE INDEX entries_machine_root ON entries(machine_id, root);
CREATE INDEX entries_binary ON entries(binary_sha256);
CREATE INDEX entries_created ON entries(machine_id, created_at);

CREATE TABLE artifacts (
    entry_id    INTEGER NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    ext         TEXT NOT NULL,
    bytes       INTEGER NOT NULL,
    sha256      TEXT NOT NULL,
    PRIMARY KEY (entry_id, name)
) WITHOUT ROWID;
CREATE INDEX artifacts_sha ON artifacts(sha256);

-- IR text, content-addressed: identical files across entries and machines are stored once.
CREATE TABLE blobs (
    sha256      TEXT PRIMARY KEY,
    bytes       INTEGER NOT NULL,
    content     TEXT NOT NULL
);

CREATE TABLE autotune (
    entry_id    INTEGER NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
    idx         INTEGER NOT NULL,
    config_json TEXT NOT NULL,
    num_warps   INTEGER,
    num_stages  INTEGER,
    timings_json TEXT NOT NULL,
    best_ms     REAL,
    winner      INTEGER NOT NULL,
    PRIMARY KEY (entry_id, idx)
) WITHOUT ROWID;

CREATE TABLE best_configs (
    id                  INTEGER PRIMARY KEY,
    machine_id          INTEGER NOT NULL REFERENCES machines(id),
    path                TEXT NOT NULL,
    triton_cache_hash   TEXT,
    num_warps           INTEGER,
    num_stages          INTEGER,
    config_json         TEXT NOT NULL,
    last_seen_at        INTEGER NOT NULL,
    UNIQUE (machine_id, path)
);
CREATE INDEX best_configs_key ON best_configs(triton_cache_hash);

-- Hook events (one per Triton cache lookup). The UNIQUE constraint makes re-ingesting harmless.
CREATE TABLE events (
    id          INTEGER PRIMARY KEY,
    machine_id  INTEGER NOT NULL REFERENCES machines(id),
    ts          INTEGER NOT NULL,
    host        TEXT NOT NULL,
    pid         INTEGER NOT NULL,
    key         TEXT NOT NULL,
    kernel      TEXT,
    event       TEXT NOT NULL,           -- hit | miss | compile
    compile_ms  REAL,
    stages_json TEXT,
    UNIQUE (machine_id, host, pid, ts, key, event)
);
CREATE INDEX events_machine_ts ON events(machine_id, ts);
CREATE INDEX events_kernel_ts ON events(kernel, ts);

-- How far each hook event file has been read (so a re-scan reads only what was appended).
CREATE TABLE event_files (
    machine_id  INTEGER NOT NULL REFERENCES machines(id),
    path        TEXT NOT NULL,
    inode_sig   TEXT NOT NULL,
    offset      INTEGER NOT NULL,
    PRIMARY KEY (machine_id, path)
);

CREATE TABLE tokens (
    id          INTEGER PRIMARY KEY,
    machine     TEXT NOT NULL,
    token_hash  TEXT NOT NULL UNIQUE,
    created_at  INTEGER NOT NULL,
    revoked_at  INTEGER,
    last_used_at INTEGER
);
