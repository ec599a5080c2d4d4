-- An entry's metadata, resources and group JSON, stored once per fact (model::fact_digest, the
-- same files on any machine) and relocation (the group's `relocated` flag is where it sits): a
-- row of `entries` with a fact keeps NULL in those three columns and reads them from here
-- (db::entries::FACT_TEXTS). Rows stored before 0032 (no fact) keep their own.
CREATE TABLE fact_texts (
    fact            TEXT NOT NULL,
    relocated       INTEGER NOT NULL,
    metadata_json   TEXT,
    resources_json  TEXT,
    group_json      TEXT,
    PRIMARY KEY (fact, relocated)
);
