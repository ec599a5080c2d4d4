-- A report computation is claimed by one server process at a time, so that several servers on one
-- database never compute the same report twice, and a report whose computing process died is
-- taken over by another (answers/stored.rs, db/leases.rs). A claim lapses at `expires_at` (unix
-- ms) unless its holder renews it while it computes.
CREATE TABLE report_leases (
    name        TEXT PRIMARY KEY,
    gen_a       INTEGER NOT NULL,
    gen_b       INTEGER NOT NULL,
    holder      TEXT NOT NULL,
    expires_at  INTEGER NOT NULL
) WITHOUT ROWID;
