//! Field rules on real corpus entries edited one field at a time: options that env vars set,
//! `extern_libs` paths per backend and version.

use super::{add_entry, edited};
use crate::explain::*;
use serde_json::{Value, json};

fn row<'a>(c: &'a Comparison, field: &str) -> &'a Row {
    c.components.iter().find(|r| r.field == field).unwrap_or_else(|| panic!("no row {field}: {c:?}"))
}

#[test]
fn env_set_option_is_a_consequence_only_when_the_env_var_differs() {
    // Corpus: TRITON_DEFAULT_FP_FUSION=0, so enable_fp_fusion false.
    let off = add_entry("h100-fpfusion-off-triton-3.6.0", "3.6.0");
    assert_eq!(off.metadata.as_ref().unwrap()["TRITON_DEFAULT_FP_FUSION"], "false");
    // Same env, but a launch passed enable_fp_fusion=True: the option itself is the cause.
    let launch = edited(&off, |m| {
        m.insert("enable_fp_fusion".into(), json!(true));
    });
    let c = compare(&off, &launch);
    assert_eq!(c.cause, Cause::Options, "{}", c.summary);
    assert_eq!(c.summary, "enable_fp_fusion false → true; everything else equal");
    let ff = row(&c, "enable_fp_fusion");
    assert_eq!((ff.component, ff.differs, ff.note.as_deref()), (Cause::Options, true, None));
    assert!(!row(&c, "TRITON_DEFAULT_FP_FUSION").differs);
    // The env var set on one side only: it is the cause, the option its consequence.
    let default = edited(&off, |m| {
        m.remove("TRITON_DEFAULT_FP_FUSION");
        m.insert("enable_fp_fusion".into(), json!(true));
    });
    let c = compare(&default, &off);
    assert_eq!(c.cause, Cause::Env, "{}", c.summary);
    assert_eq!(c.summary, "TRITON_DEFAULT_FP_FUSION=false on B (sets enable_fp_fusion false); everything else equal");
    let ff = row(&c, "enable_fp_fusion");
    assert_eq!((ff.component, ff.differs), (Cause::Env, true));
    assert_eq!(ff.note.as_deref(), Some("set by TRITON_DEFAULT_FP_FUSION"));
}

/// The key's parts as the hook records them, for a side of `env_vars` and `options_hash`
/// (the other parts equal).
fn with_parts(s: &Side, env_vars: &str, options_hash: &str) -> Side {
    let parts = json!({
        "triton_key": "a".repeat(64), "source_hash": "b".repeat(64), "backend_hash": "ptxas ... V12.8.93 ...-90",
        "options_hash": options_hash, "env_vars": env_vars, "python": "3.11.7", "triton_dir": "/venv/triton",
    });
    Side { parts: Some(parts), ..s.clone() }
}

/// With the hook's record on both sides, the env var also changes the recorded options hash
/// (the option it set is hashed there): one change, the env var's, said once, no digest in
/// the summary.
#[test]
fn an_env_var_that_sets_an_option_is_one_cause_with_the_recorded_options_hash() {
    let off = add_entry("h100-fpfusion-off-triton-3.6.0", "3.6.0");
    let default = edited(&off, |m| {
        m.remove("TRITON_DEFAULT_FP_FUSION");
        m.insert("enable_fp_fusion".into(), json!(true));
    });
    let (ha, hb) = ("34624cc52554935d787757d2ac457e37cfe79852081822bab3e31276590d178f", "0".repeat(64));
    let a = with_parts(&default, "[]", ha);
    let b = with_parts(&off, "[('TRITON_DEFAULT_FP_FUSION', 'false')]", &hb);
    let c = compare(&a, &b);
    assert_eq!((c.cause, c.evidence), (Cause::Env, "recorded"), "{}", c.summary);
    assert_eq!(c.summary, "TRITON_DEFAULT_FP_FUSION=false on B (sets enable_fp_fusion false); everything else equal");
    let oh = row(&c, "options_hash");
    assert_eq!(
        (oh.differs, oh.note.as_deref()),
        (true, Some("recorded; follows enable_fp_fusion, which an env var set"))
    );
    // The options hash alone differs (an option not on disk): the cause is options, its digests cut short.
    let c = compare(&with_parts(&off, "[]", ha), &with_parts(&edited(&off, |_| {}), "[]", &hb));
    assert_eq!(c.cause, Cause::Options, "{}", c.summary);
    assert_eq!(c.summary, "options_hash 34624cc525… → 0000000000…; everything else equal");
}

#[test]
fn f32_default_env_explains_the_precision_only_when_it_differs() {
    let base = add_entry("h100-fpfusion-off-triton-3.6.0", "3.6.0");
    let ieee = edited(&base, |m| {
        m.insert("TRITON_F32_DEFAULT".into(), json!("ieee"));
        m.insert("default_dot_input_precision".into(), json!("ieee"));
    });
    let c = compare(&base, &ieee);
    assert_eq!(c.cause, Cause::Env, "{}", c.summary);
    assert_eq!(
        c.summary,
        "TRITON_F32_DEFAULT=ieee on B (sets default_dot_input_precision ieee); everything else equal"
    );
    assert_eq!(row(&c, "default_dot_input_precision").note.as_deref(), Some("set by TRITON_F32_DEFAULT"));
    // The same env var on both sides: a differing precision is an option of its own.
    let tf32 = edited(&ieee, |m| {
        m.insert("default_dot_input_precision".into(), json!("tf32"));
    });
    let c = compare(&ieee, &tf32);
    assert_eq!(c.cause, Cause::Options, "{}", c.summary);
    assert_eq!(c.summary, "default_dot_input_precision ieee → tf32; everything else equal");
    assert_eq!(row(&c, "default_dot_input_precision").component, Cause::Options);
}

/// `s` with every extern_libs path moved to another install dir (same file names).
fn moved_libs(s: &Side) -> Side {
    edited(s, |m| {
        let libs = m["extern_libs"].as_array().unwrap().iter().map(|l| {
            let file = l[1].as_str().unwrap().rsplit('/').next().unwrap();
            json!([l[0], format!("/opt/other-venv/lib/{file}")])
        });
        m.insert("extern_libs".into(), Value::Array(libs.collect()));
    })
}

#[test]
fn extern_libs_path_is_a_cause_only_where_triton_keys_the_path() {
    // AMD before 3.9 hashes the library paths into the key: a moved install is the cause.
    let amd36 = add_entry("mi300-upgrade-2-triton-3.9.0", "3.6.0");
    let c = compare(&amd36, &moved_libs(&amd36));
    assert_eq!(c.cause, Cause::Options, "{}", c.summary);
    assert!(c.summary.starts_with("extern_libs [[") && c.summary.ends_with("everything else equal"), "{}", c.summary);
    let r = row(&c, "extern_libs");
    assert!(r.differs && r.note.as_deref().unwrap().ends_with("keys these libraries by path: a cause"), "{r:?}");
    // AMD from 3.9 and CUDA hash the contents: the path is shown, no cause; with nothing else
    // differing the new key is put down to the compiler build.
    for (s, who) in [
        (add_entry("mi300-upgrade-2-triton-3.9.0", "3.9.0"), "AMD from 3.9"),
        (add_entry("h100-fpfusion-off-triton-3.6.0", "3.6.0"), "CUDA"),
    ] {
        let c = compare(&s, &moved_libs(&s));
        let r = row(&c, "extern_libs");
        assert!(r.differs && r.component == Cause::Options, "{r:?}");
        assert_eq!(
            r.note.as_deref(),
            Some(format!("path differs but {who} keys these libraries by content: not a cause").as_str())
        );
        assert_eq!(c.cause, Cause::Compiler, "{}", c.summary);
        assert!(c.summary.starts_with("same Triton version, different compiler build (triton_key)"), "{}", c.summary);
    }
}

/// Ranking (nearest neighbours, invalidation matching) builds only the rows of fields that
/// differ (`metadata_findings(cx, true)`): its differing rows must be exactly those of the full
/// list, on real entries of every corpus release and backend, and on edits of the fields whose
/// rows depend on other fields (env vars and the options they set, `extern_libs`, the target).
#[test]
fn ranking_rows_are_the_differing_rows_of_the_full_list() {
    use crate::explain::fields::{Context, metadata_findings};
    let mut sides: Vec<Side> = [
        "a100-upgrade-1-triton-3.4.0",
        "a100-upgrade-2-triton-3.5.1",
        "mi300-upgrade-1-triton-3.6.0",
        "mi300-upgrade-2-triton-3.9.0",
        "h100-fpfusion-off-triton-3.6.0",
        "h100-jit-3.6.0",
    ]
    .iter()
    .flat_map(|a| super::load_cache("m", &super::corpus(a)).into_iter().filter(|s| s.metadata.is_some()).take(8))
    .collect();
    let base = sides[0].clone();
    sides.push(edited(&base, |m| {
        m.insert("TRITON_DEFAULT_FP_FUSION".into(), json!("false"));
        m.insert("enable_fp_fusion".into(), json!(false));
    }));
    sides.push(edited(&base, |m| {
        m.insert("extern_libs".into(), json!([["libdevice", "/elsewhere/libdevice.10.bc"]]));
    }));
    sides.push(edited(&base, |m| {
        m.remove("num_stages");
        m["target"]["arch"] = json!(80);
    }));
    let rows = |v: Vec<crate::explain::fields::Finding>| -> Vec<(String, String, String, bool, Option<String>, usize)> {
        v.into_iter()
            .filter(|f| f.row.differs)
            .map(|f| {
                let r = f.row;
                (r.field, r.a.to_string(), r.b.to_string(), f.cause, r.note, r.component.rank())
            })
            .collect()
    };
    let (mut pairs, mut left_out) = (0, 0);
    for a in &sides {
        for b in &sides {
            let (ma, mb) =
                (a.metadata.as_ref().unwrap().as_object().unwrap(), b.metadata.as_ref().unwrap().as_object().unwrap());
            let cx = Context::of(ma, mb);
            let (full, only) = (metadata_findings(&cx, false), metadata_findings(&cx, true));
            left_out += full.len() - only.len();
            pairs += 1;
            assert_eq!(rows(only), rows(full), "{} vs {}", a.key, b.key);
        }
    }
    assert!(pairs > 1000 && left_out > 10 * pairs, "{pairs} pairs, {left_out} equal rows left out");
}

/// The full list walks both metadata maps side by side: every field of A once, in A's order,
/// with both values, then every field only B has, in B's order — what two lookups a field
/// gave. Real entries, edited so that B lacks fields of A and has its own before, between and
/// after A's (a map whose iteration were not in key order would break the walk: serde_json's
/// `preserve_order` feature, say).
#[test]
fn the_full_list_has_every_field_of_both_sides_once_in_order() {
    use crate::explain::fields::{Context, metadata_findings};
    let a = add_entry("h100-jit-3.6.0", "3.6.0");
    let b = edited(&a, |m| {
        m.remove("num_stages");
        m.remove("name");
        m.insert("AAA_FIRST".into(), json!("1"));
        m.insert("num_stagez".into(), json!(3));
        m.insert("zzz_last".into(), json!(true));
        m.insert("num_warps".into(), json!(64));
    });
    let (ma, mb) =
        (a.metadata.as_ref().unwrap().as_object().unwrap(), b.metadata.as_ref().unwrap().as_object().unwrap());
    let mut want: Vec<(String, Value, Value)> = vec![];
    let keys = ma.keys().chain(mb.keys().filter(|k| !ma.contains_key(*k)));
    for k in keys.filter(|k| *k != "hash") {
        if k == "target" {
            for t in ["backend", "arch", "warp_size"] {
                let v = |m: &serde_json::Map<String, Value>| m["target"].get(t).cloned().unwrap_or(Value::Null);
                want.push((format!("target.{t}"), v(ma), v(mb)));
            }
        } else {
            let v = |m: &serde_json::Map<String, Value>| m.get(k).cloned().unwrap_or(Value::Null);
            want.push((k.clone(), v(ma), v(mb)));
        }
    }
    let got: Vec<(String, Value, Value)> =
        metadata_findings(&Context::of(ma, mb), false).into_iter().map(|f| (f.row.field, f.row.a, f.row.b)).collect();
    assert_eq!(got, want);
    for f in ["AAA_FIRST", "num_stagez", "zzz_last", "num_stages", "name", "num_warps"] {
        assert!(got.iter().any(|(k, x, y)| k == f && x != y), "{f} differs: {got:?}");
    }
    // B's own fields come after all of A's, in B's order.
    let at = |f: &str| got.iter().position(|(k, ..)| k == f).unwrap();
    assert!(
        at("AAA_FIRST") > at("num_stages") && at("num_stagez") > at("AAA_FIRST") && at("zzz_last") > at("num_stagez")
    );
}
