//! SQLite's dialect spelled as PostgreSQL's: what [`super::store`] does to every statement it
//! sends to PostgreSQL. The queries are written once, for SQLite; this turns the parts of that
//! dialect PostgreSQL spells differently, token by token (string literals, quoted names and
//! comments are left as they are):
//!
//! - parameters `?` and `?N` become `$N`;
//! - `temp.` and `main.` become `pg_temp.` and `public.` (and leave index names);
//! - `INSERT OR IGNORE` becomes `INSERT … ON CONFLICT DO NOTHING`;
//! - the type names `INTEGER`, `REAL` and `BLOB` become `BIGINT`, `DOUBLE PRECISION`, `BYTEA`
//!   (SQLite's integers are 64-bit, its reals doubles), and decimal literals doubles;
//! - `a IS b` / `a IS NOT b` (b not NULL) become `IS [NOT] DISTINCT FROM`; `==` becomes `=`;
//!   `LIKE` becomes `ILIKE` (SQLite's LIKE ignores ASCII case);
//! - `json_array(a, …)` becomes `sqlite_json_array(to_json(a), …)` (SQLite's text byte for
//!   byte), `json_group_array(x)` `coalesce(json_agg(x)::text, '[]')`, `group_concat(x[, s])`
//!   `string_agg((x)::text, s)`, `json_object`, `ifnull` and `char` PostgreSQL's
//!   `json_build_object`, `coalesce` and `chr`; a scalar `MAX(a, b)`/`MIN` becomes
//!   `sqlite_max`/`sqlite_min` (NULL when an argument is);
//! - a subquery in FROM or JOIN without a name gets one;
//! - ORDER BY items sort NULLs as SQLite does (first when ascending, last when descending);
//! - a column named `offset` is quoted (PostgreSQL reserves the word);
//! - `CROSS JOIN … ON` (SQLite's inner join in the order written) becomes `JOIN … ON`;
//! - `INDEXED BY name` and `NOT INDEXED` go (PostgreSQL plans for itself);
//! - `BEGIN IMMEDIATE` becomes `BEGIN`, `WITHOUT ROWID` and `STRICT` go, and `PRAGMA`
//!   statements are dropped (a statement of nothing but those answers no row).
//!
//! What it cannot spell (SQLite's bare columns beside an aggregate, integers taken as truth
//! values, `json_each`'s typed values) is written in the queries so that both stores read it
//! alike.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum T {
    Word,
    Quoted,
    Str,
    Num,
    Param,
    Punct,
    Space,
}

#[derive(Debug)]
struct Tok<'a> {
    t: T,
    s: &'a str,
}

fn lex(sql: &str) -> Vec<Tok<'_>> {
    let b = sql.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let start = i;
        let c = b[i];
        let t = if c.is_ascii_whitespace() {
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
            T::Space
        } else if c == b'-' && b.get(i + 1) == Some(&b'-') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            T::Space
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            i += 2;
            while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                i += 1;
            }
            i = (i + 2).min(b.len());
            T::Space
        } else if c == b'\'' || c == b'"' || c == b'`' {
            i += 1;
            loop {
                if i >= b.len() {
                    break;
                }
                if b[i] == c {
                    if b.get(i + 1) == Some(&c) {
                        i += 2;
                        continue;
                    }
                    i += 1;
                    break;
                }
                i += 1;
            }
            if c == b'\'' { T::Str } else { T::Quoted }
        } else if c == b'[' {
            while i < b.len() && b[i] != b']' {
                i += 1;
            }
            i = (i + 1).min(b.len());
            T::Quoted
        } else if c.is_ascii_digit() || (c == b'.' && b.get(i + 1).is_some_and(|d| d.is_ascii_digit())) {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'.' || b[i] == b'_') {
                // an exponent's sign
                if (b[i] == b'e' || b[i] == b'E') && matches!(b.get(i + 1), Some(b'+' | b'-')) {
                    i += 1;
                }
                i += 1;
            }
            T::Num
        } else if c == b'?' || (c == b'$' && b.get(i + 1).is_some_and(|d| d.is_ascii_digit())) {
            i += 1;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            T::Param
        } else if c.is_ascii_alphabetic() || c == b'_' || c >= 0x80 {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'$' || b[i] >= 0x80) {
                i += 1;
            }
            T::Word
        } else {
            let two = &b[i..(i + 2).min(b.len())];
            i += if matches!(two, b"||" | b"==" | b"<=" | b">=" | b"!=" | b"<>" | b"::" | b"->") { 2 } else { 1 };
            if i < b.len() && &b[start..i] == b"->" && b[i] == b'>' {
                i += 1;
            }
            T::Punct
        };
        out.push(Tok { t, s: &sql[start..i] });
    }
    out
}

fn is(tok: &Tok, word: &str) -> bool {
    tok.t == T::Word && tok.s.eq_ignore_ascii_case(word)
}

/// Words after which a parenthesised subquery's name would be missing.
const AFTER_SUBQUERY: &[&str] = &[
    "WHERE",
    "GROUP",
    "ORDER",
    "LIMIT",
    "OFFSET",
    "JOIN",
    "LEFT",
    "INNER",
    "CROSS",
    "NATURAL",
    "FULL",
    "RIGHT",
    "ON",
    "USING",
    "UNION",
    "EXCEPT",
    "INTERSECT",
    "HAVING",
    "WINDOW",
    "RETURNING",
];

/// Words that end an ORDER BY item list at its depth.
const ENDS_ORDER: &[&str] =
    &["LIMIT", "OFFSET", "UNION", "EXCEPT", "INTERSECT", "RETURNING", "ROWS", "RANGE", "GROUPS", "ON", "FETCH"];

/// What is open at one parenthesis depth.
#[derive(Default)]
struct Level {
    /// This parenthesis opened a subquery after FROM/JOIN (it needs a name when it closes).
    subquery: bool,
    /// Inside an ORDER BY list at this depth: index in `out` where the current item began, and
    /// whether it named its NULLs' place.
    order: Option<(bool, bool)>,
    /// The call this parenthesis holds the arguments of, when they are spelled anew.
    call: Option<Call>,
}

/// Calls whose arguments are spelled anew.
#[derive(Clone, Copy)]
enum Call {
    /// A scalar MAX/MIN: the index in `out` of the function's name, and its commas so far.
    MinMax(usize, usize),
    /// `group_concat(x[, sep])` as `string_agg((x)::text, sep)`: whether the separator came.
    GroupConcat(bool),
    /// `json_array(a, …)` as `sqlite_json_array(to_json(a), …)`: SQLite's text, byte for byte;
    /// an argument that is itself a JSON call is nested as JSON, not quoted as text (as SQLite
    /// does). Whether the argument being read is such a call.
    JsonArray(bool),
    /// `json_group_array(x)` as `coalesce(json_agg(x)::text, '[]')`: text, and `[]` of no row;
    /// whether `x` is a JSON call (nested as JSON).
    JsonGroupArray(bool),
    /// `CAST(x AS INTEGER)` as `sqlite_int(x)` (migration 0063: SQLite's truncation and
    /// saturation): the index in `out` of `CAST`, and where ` AS INTEGER` began once read.
    Cast(usize, Option<usize>),
    /// `x [NOT] IN (SELECT … FROM json_each(?))` as `x = ANY(ARRAY(SELECT …))` (`<> ALL`): a
    /// list bound as one parameter is then a value the planner pushes into views and unions as
    /// an index condition, where a semi-join against it scanned every row (2.6 s against 0.5 ms
    /// for the files of three entries of 600,000). Closes with one more parenthesis.
    AnyArray,
}

/// Whether the parenthesis at `open` holds a `SELECT … FROM json_each(…)` (at its own depth): an
/// uncorrelated list of values bound as one parameter.
fn json_list_at(toks: &[Tok], open: usize) -> bool {
    let mut depth = 0usize;
    let mut significant = (open..toks.len()).filter(|&j| toks[j].t != T::Space);
    let mut prev: Option<usize> = None;
    let first = significant.nth(1);
    if !first.is_some_and(|j| is(&toks[j], "SELECT")) {
        return false;
    }
    for j in open..toks.len() {
        let t = &toks[j];
        if t.t == T::Space {
            continue;
        }
        match t.s {
            "(" => depth += 1,
            ")" => {
                depth -= 1;
                if depth == 0 {
                    return false;
                }
            }
            _ if depth == 1 && is(t, "json_each") && prev.is_some_and(|p| is(&toks[p], "FROM")) => return true,
            _ => {}
        }
        prev = Some(j);
    }
    false
}

/// Whether the expression from `from` on starts with a call of a JSON function (its value JSON,
/// to be nested rather than quoted).
fn json_call_at(toks: &[Tok], from: usize) -> bool {
    let mut sig = toks[from.min(toks.len())..].iter().filter(|t| t.t != T::Space);
    match (sig.next(), sig.next()) {
        (Some(f), Some(p)) => {
            p.s == "("
                && ["json_array", "json_object", "json_group_array", "json"].iter().any(|n| f.s.eq_ignore_ascii_case(n))
        }
        _ => false,
    }
}

/// Whether the join whose table starts at `from` has an ON or USING condition: the first of those
/// or of what ends a table reference at its depth.
fn join_has_condition(toks: &[Tok], from: usize) -> bool {
    let mut depth = 0usize;
    for t in &toks[from..] {
        match t.s {
            "(" => depth += 1,
            ")" if depth == 0 => return false,
            ")" => depth -= 1,
            ";" | "," if depth == 0 => return false,
            _ if depth == 0 && t.t == T::Word => {
                let w = t.s.to_ascii_uppercase();
                if w == "ON" || w == "USING" {
                    return true;
                }
                if matches!(
                    w.as_str(),
                    "JOIN" | "CROSS" | "LEFT" | "INNER" | "NATURAL" | "WHERE" | "GROUP" | "ORDER" | "LIMIT"
                ) || AFTER_SUBQUERY.contains(&w.as_str())
                {
                    return false;
                }
            }
            _ => {}
        }
    }
    false
}

/// `sql` (one or more statements in SQLite's dialect) in PostgreSQL's.
pub fn to_pg(sql: &str) -> String {
    let toks = lex(sql);
    // the index of the next token that is not space, from i
    let next = |i: usize| (i..toks.len()).find(|&j| toks[j].t != T::Space);
    let mut out: Vec<String> = Vec::with_capacity(toks.len() + 8);
    let mut levels: Vec<Level> = vec![Level::default()];
    let mut params = 0usize;
    let mut on_conflict_nothing = false;
    let mut subqueries = 0usize;
    let mut prev_word: Option<usize> = None; // index in toks of the previous significant token
    let mut pragma = false;
    let mut i = 0;

    // Close an ORDER BY item at the current depth: its NULLs placed as SQLite places them.
    fn end_item(level: &mut Level, out: &mut Vec<String>) {
        if let Some((desc, nulls)) = level.order.as_mut() {
            if !*nulls {
                // before trailing spaces
                let at = out.iter().rposition(|s| !s.trim().is_empty()).map_or(out.len(), |p| p + 1);
                out.insert(at, if *desc { " NULLS LAST".into() } else { " NULLS FIRST".into() });
            }
            *desc = false;
            *nulls = false;
        }
    }
    fn end_statement(out: &mut Vec<String>, on_conflict_nothing: &mut bool) {
        if std::mem::take(on_conflict_nothing) {
            let at = out.iter().rposition(|s| !s.trim().is_empty()).map_or(out.len(), |p| p + 1);
            out.insert(at, " ON CONFLICT DO NOTHING".into());
        }
    }

    while i < toks.len() {
        let tok = &toks[i];
        let prev = prev_word.map(|p| &toks[p]);
        if tok.t != T::Space && pragma {
            if tok.s == ";" {
                pragma = false;
            }
            i += 1;
            continue;
        }
        match tok.t {
            T::Space => {
                // comments go: a `?` or `;` in one must not count
                out.push(if tok.s.starts_with("--") || tok.s.starts_with("/*") { " ".into() } else { tok.s.into() });
                i += 1;
                continue;
            }
            T::Param => {
                let n = match tok.s[1..].parse::<usize>() {
                    Ok(n) => n,
                    Err(_) => params + 1,
                };
                params = params.max(n);
                out.push(format!("${n}"));
            }
            T::Num => {
                if tok.s.contains(['.', 'e', 'E']) && !tok.s.starts_with("0x") {
                    out.push(format!("{}::float8", tok.s));
                } else {
                    out.push(tok.s.into());
                }
            }
            T::Word => {
                let upper = tok.s.to_ascii_uppercase();
                let nx = next(i + 1).map(|j| &toks[j]);
                let followed_by = |s: &str| nx.is_some_and(|n| n.s.eq_ignore_ascii_case(s));
                let depth = levels.len();
                let level = levels.last_mut().expect("a level");
                if level.order.is_some() && ENDS_ORDER.contains(&upper.as_str()) {
                    end_item(level, &mut out);
                    level.order = None;
                }
                if upper == "ORDER" && followed_by("BY") {
                    // an aggregate's own order: the argument's spelling ends before it
                    match level.call.as_mut() {
                        Some(Call::GroupConcat(sep @ false)) => {
                            *sep = true;
                            out.push(")::text, ',' ".into());
                        }
                        Some(Call::JsonGroupArray(nested @ true)) => {
                            *nested = false;
                            out.push(")::json ".into());
                        }
                        _ => {}
                    }
                }
                if upper == "AS"
                    && followed_by("INTEGER")
                    && let Some(Call::Cast(_, at @ None)) = level.call.as_mut()
                {
                    *at = Some(out.iter().rposition(|s| !s.trim().is_empty()).map_or(out.len(), |p| p + 1));
                }
                if upper == "IN" && followed_by("(") && json_list_at(&toks, next(i + 1).expect("(")) {
                    let j = next(i + 1).expect("(");
                    if prev.is_some_and(|p| is(p, "NOT")) {
                        let not = out.iter().rposition(|s| s.eq_ignore_ascii_case("NOT")).expect("NOT");
                        out.truncate(not);
                        out.push("<> ALL(ARRAY(".into());
                    } else {
                        out.push("= ANY(ARRAY(".into());
                    }
                    levels.push(Level { call: Some(Call::AnyArray), ..Level::default() });
                    prev_word = Some(j);
                    i = j + 1;
                    continue;
                }
                match upper.as_str() {
                    "PRAGMA" if prev.is_none_or(|p| p.s == ";") => {
                        pragma = true;
                        i += 1;
                        continue;
                    }
                    "TEMP" | "MAIN" if followed_by(".") => {
                        let j = next(i + 1).expect("a dot");
                        let in_index_name = prev.is_some_and(|p| is(p, "INDEX") || is(p, "EXISTS"));
                        if !in_index_name {
                            out.push(if upper == "TEMP" { "pg_temp.".into() } else { "public.".into() });
                        }
                        prev_word = Some(j);
                        i = j + 1;
                        continue;
                    }
                    "OR" if prev.is_some_and(|p| is(p, "INSERT")) && followed_by("IGNORE") => {
                        on_conflict_nothing = true;
                        i = next(i + 1).expect("IGNORE") + 1;
                        continue;
                    }
                    "RETURNING" if on_conflict_nothing && depth == 1 => {
                        out.push("ON CONFLICT DO NOTHING ".into());
                        on_conflict_nothing = false;
                        out.push(tok.s.into());
                    }
                    "INDEXED" if followed_by("BY") => {
                        // SQLite's index hint: PostgreSQL plans for itself
                        let by = next(i + 1).expect("BY");
                        let name = next(by + 1).unwrap_or(by);
                        prev_word = Some(name);
                        i = name + 1;
                        continue;
                    }
                    "NOT" if followed_by("INDEXED") => {
                        let j = next(i + 1).expect("INDEXED");
                        i = j + 1;
                        continue;
                    }
                    // a column named `offset` (PostgreSQL reserves the word): the clause follows
                    // a LIMIT's number, parameter or parenthesis
                    "OFFSET" if !prev.is_some_and(|p| matches!(p.t, T::Param | T::Num) || p.s == ")") => {
                        out.push(format!("\"{}\"", tok.s.to_ascii_lowercase()))
                    }
                    // SQLite's CROSS JOIN with ON is an inner join (in the order written)
                    "CROSS" if followed_by("JOIN") && join_has_condition(&toks, next(i + 1).expect("JOIN") + 1) => {
                        let j = next(i + 1).expect("JOIN");
                        out.push("JOIN".into());
                        prev_word = Some(j);
                        i = j + 1;
                        continue;
                    }
                    "INTEGER" => out.push("BIGINT".into()),
                    "REAL" => out.push("DOUBLE PRECISION".into()),
                    "BLOB" => out.push("BYTEA".into()),
                    "LIKE" => out.push("ILIKE".into()),
                    "IMMEDIATE" | "DEFERRED" | "EXCLUSIVE" if prev.is_some_and(|p| is(p, "BEGIN")) => {
                        i += 1;
                        continue;
                    }
                    "ROWID" if prev.is_some_and(|p| is(p, "WITHOUT")) => {
                        // drop "WITHOUT" already pushed (and the space after it)
                        let w = out.iter().rposition(|s| s.eq_ignore_ascii_case("WITHOUT")).expect("WITHOUT");
                        out.truncate(w);
                    }
                    "WITHOUT" if followed_by("ROWID") => out.push(tok.s.into()),
                    "STRICT" if prev.is_some_and(|p| p.s == ")" || p.s == ",") && depth == 1 => {}
                    "IS" => {
                        let n = nx.map(|n| n.s.to_ascii_uppercase());
                        match n.as_deref() {
                            Some("NULL" | "TRUE" | "FALSE" | "DISTINCT") => out.push(tok.s.into()),
                            Some("NOT") => {
                                let j = next(i + 1).expect("NOT");
                                let after = next(j + 1).map(|k| toks[k].s.to_ascii_uppercase());
                                if matches!(after.as_deref(), Some("NULL" | "TRUE" | "FALSE" | "DISTINCT")) {
                                    out.push(tok.s.into());
                                } else {
                                    out.push("IS DISTINCT FROM".into());
                                    prev_word = Some(j);
                                    i = j + 1;
                                    continue;
                                }
                            }
                            _ => out.push("IS NOT DISTINCT FROM".into()),
                        }
                    }
                    "BY" if prev.is_some_and(|p| is(p, "ORDER")) => {
                        out.push(tok.s.into());
                        level.order = Some((false, false));
                    }
                    "DESC" if level.order.is_some() => {
                        level.order.as_mut().expect("order").0 = true;
                        out.push(tok.s.into());
                    }
                    "NULLS" if level.order.is_some() => {
                        level.order.as_mut().expect("order").1 = true;
                        out.push(tok.s.into());
                    }
                    _ if followed_by("(") => {
                        let (name, open, call) = match upper.as_str() {
                            "MAX" | "MIN" => (tok.s, "(", Some(Call::MinMax(out.len(), 0))),
                            "CAST" => (tok.s, "(", Some(Call::Cast(out.len(), None))),
                            "GROUP_CONCAT" => ("string_agg", "((", Some(Call::GroupConcat(false))),
                            "JSON_ARRAY" if json_call_at(&toks, next(i + 1).expect("(") + 1) => {
                                ("sqlite_json_array", "((", Some(Call::JsonArray(true)))
                            }
                            "JSON_ARRAY" => ("sqlite_json_array", "(to_json(", Some(Call::JsonArray(false))),
                            "JSON_GROUP_ARRAY" if json_call_at(&toks, next(i + 1).expect("(") + 1) => {
                                ("coalesce(json_agg", "((", Some(Call::JsonGroupArray(true)))
                            }
                            "JSON_GROUP_ARRAY" => ("coalesce(json_agg", "(", Some(Call::JsonGroupArray(false))),
                            "JSON_OBJECT" => ("json_build_object", "(", None),
                            "IFNULL" => ("coalesce", "(", None),
                            "CHAR" => ("chr", "(", None),
                            _ => (tok.s, "(", None),
                        };
                        out.push(name.into());
                        if call.is_some() {
                            let j = next(i + 1).expect("(");
                            out.push(open.into());
                            levels.push(Level { call, ..Level::default() });
                            prev_word = Some(j);
                            i = j + 1;
                            continue;
                        }
                    }
                    _ => out.push(tok.s.into()),
                }
            }
            T::Punct => match tok.s {
                "==" => out.push("=".into()),
                "(" => {
                    let nx = next(i + 1).map(|j| &toks[j]);
                    let subquery = prev.is_some_and(|p| is(p, "FROM") || is(p, "JOIN"))
                        && nx.is_some_and(|n| is(n, "SELECT") || is(n, "VALUES") || is(n, "WITH"));
                    levels.push(Level { subquery, ..Level::default() });
                    out.push("(".into());
                }
                ")" => {
                    let mut level = if levels.len() > 1 { levels.pop().expect("a level") } else { Level::default() };
                    end_item(&mut level, &mut out);
                    match level.call {
                        Some(Call::MinMax(name, commas)) if commas > 0 => {
                            out[name] =
                                if out[name].eq_ignore_ascii_case("max") { "sqlite_max" } else { "sqlite_min" }.into();
                            out.push(")".into());
                        }
                        Some(Call::Cast(name, Some(at))) => {
                            out[name] = "sqlite_int".into();
                            out.truncate(at);
                            out.push(")".into());
                        }
                        Some(Call::AnyArray) => out.push("))".into()),
                        Some(Call::GroupConcat(false)) => out.push(")::text, ',')".into()),
                        Some(Call::JsonArray(false)) => out.push("))".into()),
                        Some(Call::JsonArray(true)) => out.push(")::json)".into()),
                        Some(Call::JsonGroupArray(false)) => out.push(")::text, '[]')".into()),
                        Some(Call::JsonGroupArray(true)) => out.push(")::json)::text, '[]')".into()),
                        _ => out.push(")".into()),
                    }
                    if level.subquery {
                        let nx = next(i + 1).map(|j| &toks[j]);
                        let named = nx.is_some_and(|n| {
                            (n.t == T::Word && !AFTER_SUBQUERY.contains(&n.s.to_ascii_uppercase().as_str()))
                                || n.t == T::Quoted
                        });
                        if !named {
                            subqueries += 1;
                            out.push(format!(" AS _sub{subqueries}"));
                        }
                    }
                }
                "," => {
                    let level = levels.last_mut().expect("a level");
                    end_item(level, &mut out);
                    match level.call.as_mut() {
                        Some(Call::MinMax(_, commas)) => {
                            *commas += 1;
                            out.push(",".into());
                        }
                        Some(Call::GroupConcat(sep @ false)) => {
                            *sep = true;
                            out.push(")::text,".into());
                        }
                        Some(Call::JsonArray(nested)) => {
                            out.push(if *nested { ")::json, " } else { "), " }.into());
                            *nested = json_call_at(&toks, i + 1);
                            out.push(if *nested { "(" } else { "to_json(" }.into());
                        }
                        _ => out.push(",".into()),
                    }
                }
                ";" => {
                    let level = levels.last_mut().expect("a level");
                    end_item(level, &mut out);
                    level.order = None;
                    end_statement(&mut out, &mut on_conflict_nothing);
                    out.push(";".into());
                }
                s => out.push(s.into()),
            },
            T::Quoted | T::Str => out.push(tok.s.into()),
        }
        prev_word = Some(i);
        i += 1;
    }
    if let Some(level) = levels.first_mut() {
        end_item(level, &mut out);
    }
    end_statement(&mut out, &mut on_conflict_nothing);
    let text = out.concat();
    if text.trim().trim_matches(';').trim().is_empty() { "SELECT NULL WHERE false".into() } else { text }
}

#[cfg(test)]
mod tests {
    use super::to_pg;

    fn same(a: &str, b: &str) {
        let norm = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        assert_eq!(norm(&to_pg(a)), norm(b), "from {a}");
    }

    #[test]
    fn parameters_are_numbered() {
        same(
            "SELECT a FROM t WHERE b = ? AND c = ? AND d = '?'",
            "SELECT a FROM t WHERE b = $1 AND c = $2 AND d = '?'",
        );
        same("SELECT ?1, ?2, ?1", "SELECT $1, $2, $1");
        same("SELECT ?2, ?", "SELECT $2, $3");
        same("SELECT a -- why?\nFROM t WHERE b = ?", "SELECT a FROM t WHERE b = $1");
    }

    #[test]
    fn schemas_and_types() {
        same(
            "DELETE FROM temp.x WHERE id IN (SELECT id FROM main.y)",
            "DELETE FROM pg_temp.x WHERE id IN (SELECT id FROM public.y)",
        );
        same("CREATE INDEX IF NOT EXISTS temp.x_i ON x(a)", "CREATE INDEX IF NOT EXISTS x_i ON x(a)");
        same(
            "CREATE TEMP TABLE x(a INTEGER PRIMARY KEY, b REAL, c BLOB) WITHOUT ROWID",
            "CREATE TEMP TABLE x(a BIGINT PRIMARY KEY, b DOUBLE PRECISION, c BYTEA)",
        );
        same("SELECT CAST(a AS INTEGER), a / 1000.0, 1e3", "SELECT sqlite_int(a), a / 1000.0::float8, 1e3::float8");
        same("SELECT CAST(TOTAL(b) AS INTEGER), CAST(v AS BIGINT)", "SELECT sqlite_int(TOTAL(b)), CAST(v AS BIGINT)");
        same("CREATE TABLE t (a INTEGER)", "CREATE TABLE t (a BIGINT)");
    }

    #[test]
    fn insert_or_ignore() {
        same("INSERT OR IGNORE INTO t(a) VALUES (?)", "INSERT INTO t(a) VALUES ($1) ON CONFLICT DO NOTHING");
        same(
            "INSERT OR IGNORE INTO t(a) SELECT a FROM u RETURNING a; SELECT 1",
            "INSERT INTO t(a) SELECT a FROM u ON CONFLICT DO NOTHING RETURNING a; SELECT 1",
        );
    }

    #[test]
    fn is_and_functions() {
        same(
            "SELECT a IS NOT b, a IS c, a IS NOT NULL, a IS NULL",
            "SELECT a IS DISTINCT FROM b, a IS NOT DISTINCT FROM c, a IS NOT NULL, a IS NULL",
        );
        same(
            "SELECT json_array(a, ?), ifnull(a, 0), MAX(a), MAX(a, b), min(x, max(y, 2))",
            "SELECT sqlite_json_array(to_json(a), to_json( $1)), coalesce(a, 0), MAX(a), sqlite_max(a, b), \
             sqlite_min(x, sqlite_max(y, 2))",
        );
        same(
            "SELECT '[' || group_concat(json_array(id, f(k, 1))) || ']', group_concat(k, char(9)), json_group_array(k) FROM t",
            "SELECT '[' || string_agg((sqlite_json_array(to_json(id), to_json( f(k, 1))))::text, ',') || ']', \
             string_agg((k)::text, chr(9)), coalesce(json_agg(k)::text, '[]') FROM t",
        );
        same(
            "SELECT json_array(a, json_array(b), c), json_group_array(json_object('n', n)), \
             json_group_array(json_object('n', n) ORDER BY n)",
            "SELECT sqlite_json_array(to_json(a), ( sqlite_json_array(to_json(b)))::json, to_json( c)), \
             coalesce(json_agg((json_build_object('n', n))::json)::text, '[]'), \
             coalesce(json_agg((json_build_object('n', n) )::json ORDER BY n NULLS FIRST)::text, '[]')",
        );
        same(
            "SELECT group_concat(n ORDER BY n DESC), group_concat(n, ';' ORDER BY n) FROM t",
            "SELECT string_agg((n )::text, ',' ORDER BY n DESC NULLS LAST), string_agg((n)::text, ';' ORDER BY n NULLS FIRST) FROM t",
        );
        same("SELECT 1 WHERE a == b AND c LIKE 'x%'", "SELECT 1 WHERE a = b AND c ILIKE 'x%'");
    }

    #[test]
    fn subqueries_get_names() {
        same("SELECT * FROM (SELECT 1) WHERE true", "SELECT * FROM (SELECT 1) AS _sub1 WHERE true");
        same("SELECT * FROM (SELECT 1) s", "SELECT * FROM (SELECT 1) s");
        same("SELECT * FROM (VALUES (1), (2))", "SELECT * FROM (VALUES (1), (2)) AS _sub1");
        same("SELECT * FROM t JOIN (SELECT 1 AS a) ON true", "SELECT * FROM t JOIN (SELECT 1 AS a) AS _sub1 ON true");
        same("SELECT * FROM json_each(?)", "SELECT * FROM json_each($1)");
        same(
            "SELECT a FROM t WHERE id IN (SELECT CAST(value AS BIGINT) FROM json_each(?)) AND b NOT IN (SELECT value FROM json_each(?))",
            "SELECT a FROM t WHERE id = ANY(ARRAY(SELECT CAST(value AS BIGINT) FROM json_each($1))) AND b <> ALL(ARRAY(SELECT value FROM json_each($2)))",
        );
        // a subquery that is not a bound list stays a semi-join
        same(
            "SELECT a FROM t WHERE id IN (SELECT id FROM u WHERE x IN (1, 2))",
            "SELECT a FROM t WHERE id IN (SELECT id FROM u WHERE x IN (1, 2))",
        );
    }

    #[test]
    fn nulls_sort_as_in_sqlite() {
        same(
            "SELECT a FROM t ORDER BY a, b DESC LIMIT 3",
            "SELECT a FROM t ORDER BY a NULLS FIRST, b DESC NULLS LAST LIMIT 3",
        );
        same(
            "SELECT ROW_NUMBER() OVER (PARTITION BY k ORDER BY n DESC) FROM t ORDER BY f(a, b)",
            "SELECT ROW_NUMBER() OVER (PARTITION BY k ORDER BY n DESC NULLS LAST) FROM t ORDER BY f(a, b) NULLS FIRST",
        );
        same("SELECT a FROM t ORDER BY a NULLS LAST", "SELECT a FROM t ORDER BY a NULLS LAST");
    }

    #[test]
    fn pragmas_and_begin() {
        same("PRAGMA foreign_keys = ON; SELECT 1", "SELECT 1");
        same("PRAGMA optimize", "SELECT NULL WHERE false");
        same("BEGIN IMMEDIATE", "BEGIN");
        same("SELECT a FROM t INDEXED BY t_a JOIN u NOT INDEXED ON true", "SELECT a FROM t JOIN u ON true");
        same(
            "SELECT 1 FROM a CROSS JOIN b INDEXED BY b_i ON b.x = a.x CROSS JOIN c WHERE true",
            "SELECT 1 FROM a JOIN b ON b.x = a.x CROSS JOIN c WHERE true",
        );
        same("SELECT path, offset FROM f LIMIT ? OFFSET ?", "SELECT path, \"offset\" FROM f LIMIT $1 OFFSET $2");
    }
}
