-- IR text compressed at rest (issue 32): a row written from now on keeps the text as one zstd
-- frame in `z` and NULL in `content`; a row written before keeps its plain `content` (SQL cannot
-- compress, so old rows are not converted). `bytes` stays the text's length as written. Readers
-- take either form through one function (`db/blobs.rs`). The table is rebuilt because
-- `content` was NOT NULL. Never edit once landed.
CREATE TABLE blobs_z (
    sha256      TEXT PRIMARY KEY,
    bytes       INTEGER NOT NULL,
    content     TEXT,
    z           BLOB,
    CHECK ((content IS NULL) <> (z IS NULL))
);
INSERT INTO blobs_z(sha256, bytes, content) SELECT sha256, bytes, content FROM blobs;
DROP TABLE blobs;
ALTER TABLE blobs_z RENAME TO blobs;
