-- Stored invalidation reports become a bounded store (issue 32): any reader could store one
-- report per pair of scans of a machine, and none was ever deleted. `landing` marks the reports
-- computed when a scan landed (the latest few per machine are kept: `machine` names it);
-- every other report is evicted oldest first past a count and a row bound
-- (`db/reports.rs::evict`). `n_rows` is its invalidated, new and removed rows. Never edit once
-- landed.
ALTER TABLE inv_reports ADD COLUMN landing INTEGER NOT NULL DEFAULT 0;
ALTER TABLE inv_reports ADD COLUMN machine TEXT;
ALTER TABLE inv_reports ADD COLUMN n_rows INTEGER NOT NULL DEFAULT 0;
UPDATE inv_reports SET n_rows = (SELECT COUNT(*) FROM inv_rows r WHERE r.report_id = inv_reports.id);
CREATE INDEX inv_reports_landing ON inv_reports(landing, machine, computed_at);
