-- SQLite's CAST(x AS INTEGER), which db::dialect spells `sqlite_int(x)`: a double is truncated
-- toward zero (PostgreSQL's cast rounds) and saturates at the ends of a 64-bit integer
-- (PostgreSQL's cast fails: a sum of sizes past i64::MAX, summed with TOTAL(), must read as
-- i64::MAX); a text reads its leading integer, 0 if none.
CREATE FUNCTION sqlite_int(v BIGINT) RETURNS BIGINT
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE RETURN v;
CREATE FUNCTION sqlite_int(v DOUBLE PRECISION) RETURNS BIGINT
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN CASE WHEN v >= 9223372036854775807 THEN 9223372036854775807
                WHEN v <= -9223372036854775808 THEN -9223372036854775808
                WHEN v <> v THEN 0
                ELSE trunc(v)::BIGINT END;
CREATE FUNCTION sqlite_int(v NUMERIC) RETURNS BIGINT
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN CASE WHEN v >= 9223372036854775807 THEN 9223372036854775807
                WHEN v <= -9223372036854775808 THEN -9223372036854775808
                ELSE trunc(v)::BIGINT END;
CREATE FUNCTION sqlite_int(v TEXT) RETURNS BIGINT
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN coalesce(sqlite_int(substring(v FROM '^\s*([+-]?[0-9]+)')::NUMERIC), 0);
