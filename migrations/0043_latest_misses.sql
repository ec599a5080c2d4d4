-- The history page's latest misses (db::misses), newest first, over the fleet, one machine or one
-- kernel: partial indexes holding the hook's miss events only.
CREATE INDEX events_miss_ts ON events(ts) WHERE event = 'miss';
CREATE INDEX events_miss_machine ON events(machine_id, ts) WHERE event = 'miss';
CREATE INDEX events_miss_kernel ON events(kernel, ts) WHERE event = 'miss';
