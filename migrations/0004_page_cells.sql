-- Dashboard at fleet scale (issue #3): more derived tables, rebuilt with the others by
-- `db::pages::refresh_stats`, so that no page aggregates entry rows per request.

-- The kernel page's variants grid, one row per cell: (kernel, backend, arch, version, signature,
-- shapes, num_warps, num_stages); entries without warps/stages (autotune results, launchers) are
-- grouped by kind. Two sample entries per cell (lowest and highest id) link to entry pages.
CREATE TABLE page_variant_cells (
    kernel          TEXT NOT NULL,
    backend         TEXT,
    arch            TEXT,
    triton_version  TEXT,
    signature       TEXT,
    shapes          TEXT,
    num_warps       INTEGER,
    num_stages      INTEGER,
    kind            TEXT NOT NULL,          -- '' for kernel variants, else the entry kind
    entries         INTEGER NOT NULL,
    machines        TEXT NOT NULL,          -- distinct machine names, comma-separated
    reg_min INTEGER, reg_max INTEGER, spill_min INTEGER, spill_max INTEGER,
    shared_min INTEGER, shared_max INTEGER,
    shared_binary   INTEGER NOT NULL,       -- entries whose binary another key of the kernel also has
    best_config     INTEGER NOT NULL,       -- entries an Inductor .best_config names
    sample_min      INTEGER NOT NULL,
    sample_max      INTEGER NOT NULL
);
CREATE INDEX page_variant_cells_kernel ON page_variant_cells(kernel);

-- Entries per kernel whose binary is byte-identical to a live entry of the kernel under another
-- key (the same key on two machines is the same compile, not churn).
CREATE TABLE page_kernel_identical (
    kernel      TEXT PRIMARY KEY,
    identical   INTEGER NOT NULL
) WITHOUT ROWID;

-- Autotune results per kernel and config: runs that measured it, best time, wins.
CREATE TABLE page_autotune_configs (
    kernel      TEXT NOT NULL,
    config_json TEXT NOT NULL,
    num_warps   INTEGER,
    num_stages  INTEGER,
    runs        INTEGER NOT NULL,
    machines    TEXT NOT NULL,
    best_ms     REAL,
    wins        INTEGER NOT NULL
);
CREATE INDEX page_autotune_configs_kernel ON page_autotune_configs(kernel);

-- The machine page: Triton versions and entries compiled per day.
CREATE TABLE page_machine_versions (
    machine_id      INTEGER NOT NULL,
    triton_version  TEXT,
    entries         INTEGER NOT NULL,
    bytes           INTEGER NOT NULL
);
CREATE INDEX page_machine_versions_machine ON page_machine_versions(machine_id);
CREATE TABLE page_machine_days (
    machine_id  INTEGER NOT NULL,
    day         INTEGER NOT NULL,           -- unix days (UTC)
    entries     INTEGER NOT NULL,
    PRIMARY KEY (machine_id, day)
) WITHOUT ROWID;

-- The kernel list's filter choices.
CREATE TABLE page_choices (
    col     TEXT NOT NULL,
    value   TEXT NOT NULL,
    PRIMARY KEY (col, value)
) WITHOUT ROWID;

-- The entry page's "other variants": live entries of a kernel in variant order, read in index order.
CREATE INDEX entries_kernel_variants ON entries(kernel, backend, arch, triton_version, num_warps, num_stages)
    WHERE removed_at IS NULL;

-- The machine page's biggest kernels, read in index order.
CREATE TABLE page_machine_kernels (
    machine_id      INTEGER NOT NULL,
    kernel          TEXT NOT NULL,
    entries         INTEGER NOT NULL,
    bytes           INTEGER NOT NULL,
    last_compiled   INTEGER
);
CREATE INDEX page_machine_kernels_bytes ON page_machine_kernels(machine_id, bytes DESC, kernel);

-- The kernel search filtered by machine reads only this index (no row look-ups).
DROP INDEX page_kernel_stats_machine;
CREATE INDEX page_kernel_stats_machine_cover
    ON page_kernel_stats(machine_id, kernel, backend, arch, triton_version, entries, bytes, last_compiled);

-- The new tables start empty: make the next page load rebuild everything.
DELETE FROM page_stats_version;
