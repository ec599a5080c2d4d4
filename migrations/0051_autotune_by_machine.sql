-- The autotune timings' summary rows (`page_autotune_configs`, one per machine already) name
-- their machine, so that a summary update replaces the rows of the machines a landing marked,
-- read from those machines' entries, rather than those of every kernel the landing touched, read
-- from the kernels' autotune entries on every machine (issue 17). The next summary update is the
-- whole build, which fills the column. Never edit once landed.
ALTER TABLE page_autotune_configs ADD COLUMN machine_id INTEGER;
CREATE INDEX page_autotune_configs_machine ON page_autotune_configs(machine_id);
DELETE FROM page_stats_version;
