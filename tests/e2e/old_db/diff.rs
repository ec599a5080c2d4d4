//! Comparing JSON answers: every difference of a new answer from an old one, at any depth,
//! and which of them a list of differences allowed by design names.
use super::Answer;
use serde_json::Value;

/// How an answer may differ from the old one at a path.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kind {
    /// a field the old release did not give
    Added,
    /// the same field, another value
    Changed,
}

/// One difference allowed by design: on `route` (the path before `?`), at `path` (`[]` for any
/// array index), of `kind`, where `holds` is true of the new object that holds the field.
#[derive(Clone, Copy)]
pub struct Allowed {
    pub route: &'static str,
    pub path: &'static str,
    pub kind: Kind,
    pub holds: fn(&Value) -> bool,
    pub why: &'static str,
}

/// One difference between an old and a new answer.
#[derive(Debug)]
struct Diff {
    /// the path with `[]` for array indexes (what [`Allowed::path`] names)
    path: String,
    /// the path with the indexes (for the message)
    at: String,
    kind: Kind,
    /// the new object holding the field (`Null` at the top)
    parent: Value,
    old: Option<Value>,
    new: Option<Value>,
}

/// Every difference between `old` and `new`, fields at any depth; arrays of unequal length
/// differ as a whole (no element is matched with another).
/// Numbers are equal by value (JSON has one number type: `1` is `1.0`).
fn diff(old: &Value, new: &Value, parent: &Value, path: &str, at: &str, out: &mut Vec<Diff>) {
    let (p, q) = (path.to_string(), at.to_string());
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, va) in a {
                let (p, q) = (format!("{path}.{k}"), format!("{at}.{k}"));
                match b.get(k) {
                    Some(vb) => diff(va, vb, new, &p, &q, out),
                    // a field gone is never by design: the API is stable
                    None => out.push(Diff {
                        path: p,
                        at: q,
                        kind: Kind::Changed,
                        parent: new.clone(),
                        old: Some(va.clone()),
                        new: None,
                    }),
                }
            }
            for (k, vb) in b.iter().filter(|(k, _)| !a.contains_key(*k)) {
                out.push(Diff {
                    path: format!("{path}.{k}"),
                    at: format!("{at}.{k}"),
                    kind: Kind::Added,
                    parent: new.clone(),
                    old: None,
                    new: Some(vb.clone()),
                });
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (va, vb)) in a.iter().zip(b).enumerate() {
                diff(va, vb, new, &format!("{path}[]"), &format!("{at}[{i}]"), out);
            }
        }
        (Value::Number(a), Value::Number(b)) if a.as_f64() == b.as_f64() => {}
        _ if old != new => out.push(Diff {
            path: p,
            at: q,
            kind: Kind::Changed,
            parent: parent.clone(),
            old: Some(old.clone()),
            new: Some(new.clone()),
        }),
        _ => {}
    }
}

/// The differences of `new` from `old` that `allowed` does not name, as lines for a message;
/// `used[i]` is set when `allowed[i]` allowed one.
pub fn unexplained(old: &[Answer], new: &[Answer], allowed: &[Allowed], used: &mut [bool]) -> Vec<String> {
    let mut bad = Vec::new();
    for ((get, s_old, b_old), (_, s_new, b_new)) in old.iter().zip(new) {
        if s_old != s_new {
            bad.push(format!("GET {get}: status {s_old} → {s_new}: {b_new}"));
            continue;
        }
        let route = get.split('?').next().unwrap();
        let mut diffs = Vec::new();
        diff(b_old, b_new, &Value::Null, "", "", &mut diffs);
        for d in diffs {
            let fits = |a: &Allowed| a.route == route && a.path == d.path && a.kind == d.kind && (a.holds)(&d.parent);
            match allowed.iter().position(fits) {
                Some(i) => used[i] = true,
                None => bad.push(format!("GET {get} at `{}` ({:?}): {:?} → {:?}", d.at, d.kind, d.old, d.new)),
            }
        }
    }
    bad
}
