-- Nothing on SQLite: migrations-pg/0063_sqlite_cast_integer.sql gives PostgreSQL SQLite's
-- CAST(x AS INTEGER). Both stores keep the same migration numbers.
SELECT 1;
