//! Python-written JSON (bare `NaN`/`Infinity`) and Triton's autotuner results
//! (`<fn>.autotune.json`).

use crate::model::{Autotune, AutotuneConfig};
use serde_json::Value;

fn as_i64(v: Option<&Value>) -> Option<i64> {
    v.and_then(|v| v.as_i64().or_else(|| v.as_f64().map(|f| f as i64)))
}

/// Parse JSON as Python's `json` module writes it: bare `NaN`, `Infinity` and `-Infinity`
/// (a failed autotune config is timed as `inf`) become `null`.
pub fn parse_py_json(text: &str) -> Result<Value, String> {
    match serde_json::from_str(text) {
        Ok(v) => Ok(v),
        Err(first) => {
            let mut out = String::with_capacity(text.len());
            let (mut in_str, mut escaped) = (false, false);
            let mut rest = text;
            while let Some(c) = rest.chars().next() {
                if in_str {
                    in_str = escaped || c != '"';
                    escaped = !escaped && c == '\\';
                } else if c == '"' {
                    in_str = true;
                } else if let Some(tok) = ["-Infinity", "Infinity", "NaN"].iter().find(|t| rest.starts_with(**t)) {
                    out.push_str("null");
                    rest = &rest[tok.len()..];
                    continue;
                }
                out.push(c);
                rest = &rest[c.len_utf8()..];
            }
            serde_json::from_str(&out).map_err(|_| first.to_string())
        }
    }
}

/// Parse `<fn>.autotune.json` and mark the config Triton picked: the smallest timings, compared
/// as Python compares lists (the median first), as `builtins.min(timings, key=timings.get)` does.
pub fn parse_autotune(text: &str) -> Result<Autotune, String> {
    let v = parse_py_json(text)?;
    let list = v.get("configs_timings").and_then(Value::as_array).ok_or("no configs_timings")?;
    let mut configs: Vec<AutotuneConfig> = list
        .iter()
        .filter_map(|pair| {
            let pair = pair.as_array()?;
            let config = pair.first()?.clone();
            let timings_ms = match pair.get(1)? {
                Value::Array(a) => a.iter().map(|t| t.as_f64().unwrap_or(f64::INFINITY)).collect(),
                Value::Number(n) => n.as_f64().into_iter().collect(),
                _ => vec![],
            };
            Some(AutotuneConfig {
                num_warps: as_i64(config.get("num_warps")),
                num_stages: as_i64(config.get("num_stages")),
                config,
                timings_ms,
                winner: false,
            })
        })
        .collect();
    let best = configs
        .iter()
        .enumerate()
        .filter(|(_, c)| !c.timings_ms.is_empty())
        .min_by(|(_, a), (_, b)| a.timings_ms.partial_cmp(&b.timings_ms).unwrap_or(std::cmp::Ordering::Equal))
        .map(|(i, _)| i);
    if let Some(i) = best {
        configs[i].winner = true;
    }
    Ok(Autotune { key: v.get("key").cloned().unwrap_or(Value::Null), configs })
}
