//! Key parts the hook recorded at compile time (`Side::parts`): what Triton hashed into each
//! key — the `triton_key()` digest, the source, backend and options hashes, the env vars —
//! plus the Python version and Triton's install dir. With a record on both sides the parts
//! that are not on disk are measured, not inferred.

use super::fields::Finding;
use super::{Cause, Side};
use serde_json::Value;

/// The recorded parts, upstream first, and the component each belongs to.
pub(crate) const PARTS: [(&str, Cause); 5] = [
    ("triton_key", Cause::Compiler),
    ("backend_hash", Cause::Backend),
    ("env_vars", Cause::Env),
    ("source_hash", Cause::Source),
    ("options_hash", Cause::Options),
];

/// Both sides carry a record.
pub(crate) fn both(a: &Side, b: &Side) -> bool {
    a.parts.as_ref().is_some_and(Value::is_object) && b.parts.as_ref().is_some_and(Value::is_object)
}

fn part(s: &Side, k: &str) -> Value {
    s.parts.as_ref().and_then(|p| p.get(k)).cloned().unwrap_or(Value::Null)
}

/// Rows for the recorded parts, appended after the on-disk findings `known`. A differing part
/// is a cause unless the on-disk fields of its component already are one (they say it in
/// words), `triton_key` differs too (a new compiler build changes its options class, its
/// bundled ptxas and the Triton callees hashed into the source hash), or, for the options
/// hash, an option differs that a differing env var set (`TRITON_DEFAULT_FP_FUSION=0` turns
/// `enable_fp_fusion` off: one change, the env var's).
pub(crate) fn findings(a: &Side, b: &Side, known: &[Finding]) -> Vec<Finding> {
    if !both(a, b) {
        return Vec::new();
    }
    let compiler_changed = part(a, "triton_key") != part(b, "triton_key");
    let mut out = Vec::new();
    for (k, c) in PARTS {
        let f = Finding::new(c, k, part(a, k), part(b, k)).note("recorded by the hook at compile time");
        let env_set = known.iter().find(|x| {
            x.row.differs && !x.cause && x.row.component == Cause::Env && super::fields::is_env_option(&x.row.field)
        });
        let f = if c != Cause::Compiler && compiler_changed {
            f.consequence("recorded; differs with the compiler build (its options, toolchain and callees)")
        } else if let (Cause::Options, Some(o)) = (c, env_set) {
            f.consequence(format!("recorded; follows {}, which an env var set", o.row.field))
        } else if known.iter().any(|x| x.cause && x.row.differs && x.row.component == c) {
            f.consequence("recorded; agrees with the fields above")
        } else {
            f
        };
        out.push(f);
    }
    for (k, why) in [
        ("python", "libtriton is built per Python ABI: part of triton_key"),
        ("triton_dir", "Triton's install dir (embedded in debug info, not in the key)"),
    ] {
        out.push(Finding::new(Cause::Compiler, k, part(a, k), part(b, k)).consequence(why).note(why));
    }
    out
}

/// The toolchain part of a backend hash, short: CUDA's is `ptxas --version`'s text and the
/// arch (`... release 12.8, V12.8.93 ...-90` → `ptxas 12.8.93, sm90`).
pub(crate) fn short_backend(v: &Value) -> String {
    let Some(s) = v.as_str() else { return "unset".into() };
    let arch = s.rsplit('-').next().unwrap_or("");
    match s.split(", V").nth(1).and_then(|r| r.split_whitespace().next()) {
        Some(ver) => format!("ptxas {ver}, {arch}"),
        None if s.len() > 40 => format!("{}…", &s[..s.char_indices().nth(40).map_or(s.len(), |c| c.0)]),
        None => s.to_string(),
    }
}
