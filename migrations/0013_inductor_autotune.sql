-- Inductor's max-autotune decisions (`<inductor dir>/cache/<hash>`), as the latest scan of each
-- root found them: a re-scan of the root replaces its rows. `choices_json`: [{name, ms}],
-- fastest first; `winner` is the first.
CREATE TABLE inductor_autotune (
    id           INTEGER PRIMARY KEY,
    machine_id   INTEGER NOT NULL REFERENCES machines(id),
    root         TEXT NOT NULL,
    path         TEXT NOT NULL,
    op           TEXT NOT NULL,
    key          TEXT NOT NULL,
    precision    TEXT NOT NULL,
    choices_json TEXT NOT NULL,
    winner       TEXT NOT NULL,
    scan_id      INTEGER NOT NULL REFERENCES scans(id)
);
CREATE INDEX inductor_autotune_machine ON inductor_autotune(machine_id, root);
