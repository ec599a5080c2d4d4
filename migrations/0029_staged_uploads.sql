-- Staged uploads (`POST /api/v1/uploads`, `db/staging.rs`): a scan sent in bounded parts,
-- held here until its commit stores them all in the scan's one transaction (which deletes
-- them). Parts hold screened records (gzipped JSON, `model::ScanPart`); blobs the IR text as
-- the client gzipped it, verified against its sha256. Open uploads are bounded per machine and
-- expire (db/staging.rs says how).
CREATE TABLE uploads (
    id INTEGER PRIMARY KEY,
    machine TEXT NOT NULL,
    client_id TEXT NOT NULL,
    root TEXT NOT NULL,
    scanned_at INTEGER NOT NULL,
    started_at INTEGER NOT NULL,
    touched_at INTEGER NOT NULL,
    UNIQUE (machine, client_id)
);

CREATE TABLE upload_parts (
    upload_id INTEGER NOT NULL,
    n INTEGER NOT NULL,
    entries INTEGER NOT NULL,
    skipped INTEGER NOT NULL,
    body BLOB NOT NULL,
    PRIMARY KEY (upload_id, n)
) WITHOUT ROWID;

CREATE TABLE upload_blobs (
    upload_id INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    text_bytes INTEGER NOT NULL,
    gz BLOB NOT NULL,
    PRIMARY KEY (upload_id, sha256)
);
