-- What `cachelens prune` would free on each machine (prune::advice), as of the machine's last
-- landed scan: written in that scan's transaction, so the overview sums one row per machine
-- instead of classifying the fleet's entries per request. The machine page and the API compute
-- theirs afresh.
CREATE TABLE machine_advice (
    machine_id  INTEGER PRIMARY KEY REFERENCES machines(id),
    computed_at INTEGER NOT NULL,   -- unix ms
    advice_json TEXT NOT NULL       -- prune::advice::Advice
);
