-- 0056 read a kernel's variants grid at request time from the kernel's live facts. On a fleet
-- whose kernels hold thousands of distinct facts (the fleet bench with --variety 1: one kernel of
-- 4,536 live facts) a kernel page then cost ~30 ms of CPU, and under 16 clients its p99 went
-- from 12 to 217 ms. The grid is kept per kernel again (db/rebuild.rs), in the tables as 0053
-- left them, and every kernel is marked so that the next summary update fills them.
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
    machines        TEXT NOT NULL,          -- '' (read from variant_machines, 0053)
    reg_min INTEGER, reg_max INTEGER, spill_min INTEGER, spill_max INTEGER,
    shared_min INTEGER, shared_max INTEGER,
    shared_binary   INTEGER NOT NULL,       -- entries whose binary another key of the kernel also has
    best_config     INTEGER NOT NULL,       -- entries an Inductor .best_config names
    sample_min      INTEGER NOT NULL,
    sample_max      INTEGER NOT NULL,
    shared_code     INTEGER NOT NULL DEFAULT 0,
    sample_min_ref  TEXT,
    sample_max_ref  TEXT,
    variant_id      INTEGER
);
CREATE INDEX page_variant_cells_kernel ON page_variant_cells(kernel);
CREATE TABLE page_kernel_identical (
    kernel      TEXT PRIMARY KEY,
    identical   INTEGER NOT NULL,
    same_code   INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
INSERT INTO page_dirty_kernels(kernel, gen)
    SELECT DISTINCT kernel, (SELECT gen FROM page_gen WHERE id = 1) FROM variants WHERE true
    ON CONFLICT(kernel) DO NOTHING;
