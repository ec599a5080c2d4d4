-- A scan starts by reading what the previous scan of its root left (key, dir, change signature,
-- totals). Entry rows are wide (metadata, group and resources JSON spill into overflow pages), so
-- that read touched the whole table: 1 s of a 3 s no-change re-scan of 100,000 entries. This
-- index answers it alone.
CREATE INDEX entries_rescan ON entries(machine_id, root, key, dir, sig, removed_at, bytes, relocated, kind);
