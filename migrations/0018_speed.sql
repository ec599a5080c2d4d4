-- Pages that a fleet of a million entries made slow (issue 14). Never edit once landed.
--
-- `/autotune`'s Triton rows (`db/inductor.rs` triton_rows): a machine's live `.autotune.json`
-- entries in page order (kernel, key), read from this small index and stopped at the page's
-- limit. Without it the list joined every artifact of the fleet first (9.3M rows: 58 s for the
-- autotune machine, which has none).
CREATE INDEX entries_autotune ON entries(machine_id, kernel, key) WHERE kind = 'autotune' AND removed_at IS NULL;

-- `/history`'s fleet chart (`db/history_agg.rs` hours_sql, hour buckets of every machine): the
-- machines' hours summed in hour order from this covering index instead of sorting all of them
-- (14,400 rows on the bench fleet: 7 -> 3.5 ms).
CREATE INDEX history_machine_hours_hour
    ON history_machine_hours(hour, hits, misses, compiles, inferred, compile_ms, timed, hook_events);
