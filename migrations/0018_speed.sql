-- Pages that a fleet of a million entries made slow (issue 14). Never edit once landed.
--
-- `/autotune`'s Triton rows (`db/inductor.rs` triton_rows): a machine's live `.autotune.json`
-- entries in page order (kernel, key), read from this small index and stopped at the page's
-- limit. Without it the list joined every artifact of the fleet first (9.3M rows: 58 s for the
-- autotune machine, which has none).
CREATE INDEX entries_autotune ON entries(machine_id, kernel, key) WHERE kind = 'autotune' AND removed_at IS NULL;
