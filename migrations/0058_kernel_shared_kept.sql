-- The binaries and machine code that two or more live keys of a kernel share, fleet-wide, as the
-- summary update finds them for the kernel's grid (db/rebuild.rs), kept per kernel: a kernel's
-- page for one machine reads them here instead of grouping every live fact of the kernel per
-- request (a kernel of 4,536 live facts: 27 -> 16 ms a page). Every kernel is marked so that the
-- next summary update fills the table.
CREATE TABLE page_kernel_shared (
    kernel  TEXT NOT NULL,
    what    TEXT NOT NULL,      -- 'binary': a binary's sha256; 'code': a machine-code digest
    digest  TEXT NOT NULL,
    PRIMARY KEY (kernel, what, digest)
) WITHOUT ROWID;
INSERT INTO page_dirty_kernels(kernel, gen)
    SELECT DISTINCT kernel, (SELECT gen FROM page_gen WHERE id = 1) FROM variants WHERE true
    ON CONFLICT(kernel) DO NOTHING;
