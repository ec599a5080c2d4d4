-- SQLite's functions that the queries call (written once, in SQLite's dialect; see
-- backend/db/dialect.rs for what is spelled anew per statement), defined as SQLite answers
-- them. Those named as PostgreSQL's own (sum, avg) come first for the server's connections, whose
-- search_path is `public, pg_catalog` (db::open_postgres).

-- SUM of integers is an integer in SQLite (PostgreSQL's sum(bigint) is numeric, which the
-- server's driver does not read); an overflow is an error in both.
CREATE AGGREGATE sum(BIGINT) (SFUNC = int8pl, STYPE = BIGINT, COMBINEFUNC = int8pl, PARALLEL = SAFE);

-- AVG is a double in SQLite.
CREATE FUNCTION sqlite_avg_step(s DOUBLE PRECISION[], v BIGINT) RETURNS DOUBLE PRECISION[]
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE RETURN float8_accum(s, v::DOUBLE PRECISION);
CREATE AGGREGATE avg(BIGINT) (SFUNC = sqlite_avg_step, STYPE = DOUBLE PRECISION[], FINALFUNC = float8_avg,
    INITCOND = '{0,0,0}', COMBINEFUNC = float8_combine, PARALLEL = SAFE);

-- TOTAL: a double, 0.0 of no row or only NULLs.
CREATE AGGREGATE total(DOUBLE PRECISION) (SFUNC = float8pl, STYPE = DOUBLE PRECISION, INITCOND = '0',
    COMBINEFUNC = float8pl, PARALLEL = SAFE);

-- ROUND(x, n) of a double is a double.
CREATE FUNCTION round(v DOUBLE PRECISION, n INTEGER) RETURNS DOUBLE PRECISION
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE RETURN round(v::NUMERIC, n)::DOUBLE PRECISION;

-- Scalar MIN/MAX of two texts or doubles (of two integers: 0060_baseline.sql).
CREATE FUNCTION sqlite_min(a TEXT, b TEXT) RETURNS TEXT
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE RETURN LEAST(a, b);
CREATE FUNCTION sqlite_max(a TEXT, b TEXT) RETURNS TEXT
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE RETURN GREATEST(a, b);
CREATE FUNCTION sqlite_min(a DOUBLE PRECISION, b DOUBLE PRECISION) RETURNS DOUBLE PRECISION
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE RETURN LEAST(a, b);
CREATE FUNCTION sqlite_max(a DOUBLE PRECISION, b DOUBLE PRECISION) RETURNS DOUBLE PRECISION
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE RETURN GREATEST(a, b);

-- INSTR: where the first occurrence starts, 1-based, 0 if none.
CREATE FUNCTION instr(a TEXT, b TEXT) RETURNS BIGINT
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE RETURN strpos(a, b);

-- HEX of a blob: upper-case digits.
CREATE FUNCTION hex(b BYTEA) RETURNS TEXT
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE RETURN upper(encode(b, 'hex'));

-- json_each over a JSON array given as text (the queries pass lists of ids or names): its
-- elements in order, `value` as text (a string unquoted, a number as written, null as NULL).
-- The queries compare `value` with integers through CAST(value AS BIGINT).
CREATE FUNCTION json_each(j TEXT) RETURNS TABLE(key BIGINT, value TEXT)
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE ROWS 100
    AS $$ SELECT n - 1, e #>> '{}' FROM json_array_elements(j::json) WITH ORDINALITY AS a(e, n) $$;

-- json_extract(text, '$.a.b' | '$[0]' | '$'): the value as text (a string unquoted).
CREATE FUNCTION json_extract(j TEXT, p TEXT) RETURNS TEXT
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN CASE WHEN p = '$' THEN j
                ELSE j::json #>> string_to_array(ltrim(regexp_replace(substr(p, 2), '\[(\d+)\]', '.\1', 'g'), '.'), '.')
           END;
