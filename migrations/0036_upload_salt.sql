-- A random salt per staged upload: the client proves it holds an IR text the server already
-- has by hashing it with this salt (`POST /api/v1/uploads/{id}/proofs`) instead of sending it.
ALTER TABLE uploads ADD COLUMN salt TEXT;
