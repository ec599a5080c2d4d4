-- What an entry's files say, identified by their content (model::fact_digest: key, kind, every
-- file's name and sha256). An upload sends only this machine's own part of an entry whose facts
-- the server holds (model::Present); the server copies the rest from a row with the same fact.
-- Rows stored before this migration have none and are simply not copied from.
ALTER TABLE entries ADD COLUMN fact TEXT;
CREATE INDEX entries_fact ON entries(fact, relocated);
