-- `entry_compiles` kept two indexes on `compiled_at`: all rows (0007) and the rows with an
-- inferred kernel (0015). The aggregates and pages read the table by time only for inferred
-- kernels (the partial index); the one other reader, the reference count the tests compare the
-- aggregates with (`db::history::fresh`), scans it whole, which the table's key does as well.
-- The whole index cost 16 bytes of every machine-entry (270 of them at 40 × 10,000, issue 17)
-- and a write per entry on every upload. Never edit once landed.
DROP INDEX IF EXISTS entry_compiles_at;
