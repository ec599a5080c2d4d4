-- Dashboard pages (issue #3): summary tables derived from `entries`/`artifacts`, rebuilt by
-- `db::pages::refresh_stats` whenever a new scan or entry has landed since the last rebuild, so
-- that the overview and the kernel search never aggregate a million entry rows per request.
CREATE TABLE page_stats_version (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    max_scan_id INTEGER NOT NULL,
    max_entry_id INTEGER NOT NULL,
    built_at    INTEGER NOT NULL
);

-- Live entries grouped by kernel, machine and the filterable columns.
CREATE TABLE page_kernel_stats (
    kernel          TEXT NOT NULL,
    machine_id      INTEGER NOT NULL,
    backend         TEXT,
    arch            TEXT,
    triton_version  TEXT,
    entries         INTEGER NOT NULL,
    bytes           INTEGER NOT NULL,
    last_compiled   INTEGER
);
CREATE INDEX page_kernel_stats_kernel ON page_kernel_stats(kernel);
CREATE INDEX page_kernel_stats_machine ON page_kernel_stats(machine_id, kernel);

-- The same, all filters summed away: what the unfiltered (or name-only) kernel search reads.
CREATE TABLE page_kernel_totals (
    kernel          TEXT PRIMARY KEY,
    entries         INTEGER NOT NULL,
    machines        INTEGER NOT NULL,
    bytes           INTEGER NOT NULL,
    last_compiled   INTEGER
);

-- Per machine: live entries, bytes, relocated entries, Triton versions (comma-separated).
CREATE TABLE page_machine_stats (
    machine_id      INTEGER PRIMARY KEY,
    entries         INTEGER NOT NULL,
    kernels         INTEGER NOT NULL,
    bytes           INTEGER NOT NULL,
    relocated       INTEGER NOT NULL,
    versions        TEXT
);

-- Fleet-wide bytes by artifact type (live entries only).
CREATE TABLE page_ext_stats (
    ext     TEXT PRIMARY KEY,
    files   INTEGER NOT NULL,
    bytes   INTEGER NOT NULL
);

-- The machine page's relocated-entry warning picks one example without scanning the machine.
CREATE INDEX entries_relocated ON entries(machine_id, relocated);
