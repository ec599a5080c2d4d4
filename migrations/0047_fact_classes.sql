-- An entry's class (0025, db/classes.rs) is a digest of what the explainer reads of it but its
-- key and machine: its fact's texts and files and its relocation. It is kept once per
-- (fact, relocation), not once per machine's entry (issue 17); the place (machine, key, kind)
-- a request reads beside it comes from the entry and its fact. Never edit once landed.
CREATE TABLE fact_classes (
    fact_id    INTEGER NOT NULL REFERENCES facts(id) ON DELETE CASCADE,
    relocated  INTEGER NOT NULL,
    class      BLOB NOT NULL,
    PRIMARY KEY (fact_id, relocated)
) WITHOUT ROWID;
INSERT OR IGNORE INTO fact_classes(fact_id, relocated, class)
    SELECT e.fact_id, e.relocated, c.class FROM entry_classes c JOIN entries e ON e.id = c.entry_id
    ORDER BY c.entry_id;
DROP TABLE entry_classes;

-- A machine's Triton autotune results in page order (db/inductor.rs::triton_rows): the autotune
-- facts by kernel and key, each probing the machine's presence (`entries_fact`).
CREATE INDEX facts_autotune ON facts(kernel, key) WHERE kind = 'autotune';
