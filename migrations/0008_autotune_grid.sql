-- The kernel page's autotune timings belong to the grid they were measured in (issue #3): an
-- `.autotune.json` carries no backend, arch or Triton version, but it sits in the cache dir whose
-- entries its run compiled. `db::pages` links each run to the (backend, arch, version) of the
-- kernel's entries in that same cache (machine + root); these columns hold that link.
ALTER TABLE page_autotune_configs ADD COLUMN backend TEXT;
ALTER TABLE page_autotune_configs ADD COLUMN arch TEXT;
ALTER TABLE page_autotune_configs ADD COLUMN triton_version TEXT;

-- The table was built without the link: make the next page load rebuild everything.
DELETE FROM page_stats_version;
