//! Inductor's local autotune cache: `<inductor dir>/cache/<64 hex>` files, JSON
//! `{"system": {...}, "cache": {op: {shape key: {precision: {choice: ms}}}}}` (one per
//! system hash), written by max-autotune with each benchmarked choice's time. Python's `json`
//! writes a choice that failed to benchmark as `Infinity` (not JSON): such tokens are read as
//! `null`, and the choice is kept with no time, after the timed ones.

use crate::model::{AutotuneChoice, InductorAutotune};
use serde_json::Value;

/// The decisions in one file's JSON text (`path`: the file, relative to the root). A choice
/// whose time is not a finite number (failed) has `ms: None`; a decision with no timed choice
/// is left out.
pub fn parse(path: &str, text: &str) -> Result<Vec<InductorAutotune>, String> {
    let v = super::autotune::parse_py_json(text).map_err(|e| format!("corrupt Inductor autotune JSON: {e}"))?;
    let cache = v.get("cache").and_then(Value::as_object).ok_or("Inductor autotune JSON without a \"cache\" object")?;
    let mut out = vec![];
    for (op, keys) in cache {
        for (key, precs) in keys.as_object().into_iter().flatten() {
            for (precision, choices) in precs.as_object().into_iter().flatten() {
                let mut choices: Vec<AutotuneChoice> = choices
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(name, ms)| AutotuneChoice { name: name.clone(), ms: ms.as_f64().filter(|m| m.is_finite()) })
                    .collect();
                if choices.iter().all(|c| c.ms.is_none()) {
                    continue;
                }
                let at = |c: &AutotuneChoice| c.ms.unwrap_or(f64::INFINITY);
                choices.sort_by(|a, b| at(a).total_cmp(&at(b)).then_with(|| a.name.cmp(&b.name)));
                out.push(InductorAutotune {
                    path: path.into(),
                    op: op.clone(),
                    key: key.clone(),
                    precision: precision.clone(),
                    choices,
                });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn decisions_fastest_first() {
        let t = r#"{"system": {"x": "NaN \" Infinity"}, "cache": {"addmm": {"k1": {"highest": {"triton_mm_1": 0.02, "addmm": 0.01, "bad": Infinity}}, "k2": {"highest": {"f": NaN}}}}}"#;
        let r = super::parse("cache/x", t).unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!((r[0].op.as_str(), r[0].key.as_str(), r[0].precision.as_str()), ("addmm", "k1", "highest"));
        let names: Vec<(&str, Option<f64>)> = r[0].choices.iter().map(|c| (c.name.as_str(), c.ms)).collect();
        assert_eq!(names, [("addmm", Some(0.01)), ("triton_mm_1", Some(0.02)), ("bad", None)]);
        assert!(super::parse("cache/x", "{").is_err());
    }
}
