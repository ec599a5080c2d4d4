-- migrations/0061_report_leases.sql: a report computation claimed by one server process at a time.
CREATE TABLE report_leases (
    name        TEXT PRIMARY KEY,
    gen_a       BIGINT NOT NULL,
    gen_b       BIGINT NOT NULL,
    holder      TEXT NOT NULL,
    expires_at  BIGINT NOT NULL
);
