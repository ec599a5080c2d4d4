-- Listings that a fleet of a million entries made slow (issue 14). Never edit once landed.
--
-- A report's sides (`db/explain.rs` light_now / light_at: a machine's kernel entries now, or
-- at a scan, by kernel and key) read from this index alone: the table rows (metadata, JSON)
-- are not touched. 47,800 rows took 1.0-1.4 s through the table on the 1.25M-entry bench.
CREATE INDEX entries_light ON entries(machine_id, root, kernel, key, kind, relocated, first_scan_id, removed_scan_id, removed_at);
-- `/api/v1/entries?machine=M[&kernel=K]`, in its order: a page is read in order and stops at
-- its limit instead of sorting every entry of the machine.
CREATE INDEX entries_listing ON entries(machine_id, kernel, num_warps, num_stages, key);
