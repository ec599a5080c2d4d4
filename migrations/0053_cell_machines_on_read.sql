-- A grid cell names its variant (`variants`, 0050), and its machines are read from the cell's
-- counters (`variant_machines`) when a page asks, not written into the cell by every summary
-- update: a new node of known kernels joins every cell, and writing every cell's list of
-- machine names again cost cells × machines per landing (issue 17). The next summary update is
-- the whole build, which fills the column. Never edit once landed.
ALTER TABLE page_variant_cells ADD COLUMN variant_id INTEGER;
DELETE FROM page_stats_version;
