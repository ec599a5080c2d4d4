-- Nothing on SQLite: migrations-pg/0062_sqlite_functions.sql gives PostgreSQL the functions of
-- SQLite's that the queries call. Both stores keep the same migration numbers.
SELECT 1;
