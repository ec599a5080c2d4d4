//! Metadata fields (`<name>.json`): which component each belongs to, and whether a
//! difference in it is a cause of a different key or only a consequence of another one.

use super::{Cause, Row};
use serde_json::{Map, Value};

/// A row plus whether it counts as a cause (a differing key input) rather than a consequence.
#[derive(Debug, Clone)]
pub(crate) struct Finding {
    pub row: Row,
    pub cause: bool,
}

impl Finding {
    pub fn new(component: Cause, field: &str, a: Value, b: Value) -> Finding {
        let differs = a != b;
        Finding { row: Row { component, field: field.to_string(), a, b, differs, note: None }, cause: differs }
    }
    /// Marks a difference as a consequence of something else (shown, not a cause).
    pub fn consequence(mut self, note: impl Into<String>) -> Finding {
        if self.row.differs {
            self.cause = false;
            self.row.note = Some(note.into());
        }
        self
    }
    pub fn note(mut self, note: impl Into<String>) -> Finding {
        self.row.note = Some(note.into());
        self
    }
}

/// Compile outputs written into the metadata after compiling: never key inputs.
const OUTPUTS: &[&str] = &[
    "shared",
    "tmem_size",
    "global_scratch_size",
    "global_scratch_align",
    "profile_scratch_size",
    "profile_scratch_align",
    "tensordesc_meta",
];

/// Options whose defaults Triton derives from the target (`parse_options` per arch).
const ARCH_DEFAULTS: &[&str] = &[
    "supported_fp8_dtypes",
    "deprecated_fp8_dot_operand_dtypes",
    "default_dot_input_precision",
    "allowed_dot_input_precisions",
    "max_num_imprecise_acc_default",
    "enable_reflect_ftz",
];

/// Options users set per kernel or launch (or through `TRITON_DEBUG`): a difference in one is
/// a cause even across Triton versions. Other options differing across versions are taken
/// for changed defaults.
const USER_OPTIONS: &[&str] = &[
    "num_warps",
    "num_stages",
    "num_ctas",
    "maxnreg",
    "debug",
    "enable_fp_fusion",
    "launch_cooperative_grid",
    "launch_pdl",
    "waves_per_eu",
    "matrix_instr_nonkdim",
    "kpack",
    "sanitize_overflow",
    "ir_override",
];

/// Fields that repeat the target (`target.backend`, `target.arch`, `target.warp_size`).
const TARGET_DUPLICATES: &[&str] = &["backend_name", "arch", "warp_size", "base_arch"];

/// Environment variables that set an option's default: (env var, option).
pub(crate) const ENV_OPTIONS: &[(&str, &str)] =
    &[("TRITON_DEFAULT_FP_FUSION", "enable_fp_fusion"), ("TRITON_F32_DEFAULT", "default_dot_input_precision")];

/// The option an env var sets, if it sets one.
pub(crate) fn option_of_env(env: &str) -> Option<&'static str> {
    ENV_OPTIONS.iter().find(|(e, _)| *e == env).map(|(_, o)| *o)
}

/// Whether `option` is one an env var sets.
pub(crate) fn is_env_option(option: &str) -> bool {
    ENV_OPTIONS.iter().any(|(_, o)| *o == option)
}

/// The note (and summary words) of an env var set to the value Triton uses anyway.
pub(crate) const SET_TO_DEFAULT: &str =
    "set to its default: the option is unchanged, setting it at all changed the key";

/// Whether an env var's value is the option's value (`1`/`true`/`True` for `true`, ...).
/// An equal option alone is no proof: 3.6.0 reads `TRITON_F32_DEFAULT` only where a `tl.dot`
/// is traced, so `=ieee` leaves the option of a kernel without a dot at `tf32`.
fn same_setting(env: &Value, option: &Value) -> bool {
    let norm = |v: &Value| {
        let s = match v {
            Value::String(s) => s.to_ascii_lowercase(),
            other => other.to_string(),
        };
        match s.as_str() {
            "1" | "on" | "yes" => "true".to_string(),
            "0" | "off" | "no" => "false".to_string(),
            _ => s,
        }
    };
    norm(env) == norm(option)
}

/// What both sides' metadata say about the context of a comparison.
pub(crate) struct Context<'a> {
    pub a: &'a Map<String, Value>,
    pub b: &'a Map<String, Value>,
    pub version_a: Option<String>,
    pub version_b: Option<String>,
    pub backend: Option<String>,
    pub target_differs: bool,
}

impl<'a> Context<'a> {
    /// The context of comparing metadata `a` with `b`.
    pub fn of(a: &'a Map<String, Value>, b: &'a Map<String, Value>) -> Context<'a> {
        let version = |m: &Map<String, Value>| m.get("triton_version").and_then(|v| v.as_str()).map(str::to_string);
        let backend = target_ref(a, "backend").as_str().or(target_ref(b, "backend").as_str()).map(str::to_string);
        let target_differs = ["backend", "arch", "warp_size"].iter().any(|t| target_ref(a, t) != target_ref(b, t));
        Context { a, b, version_a: version(a), version_b: version(b), backend, target_differs }
    }

    pub fn versions_differ(&self) -> bool {
        self.version_a != self.version_b
    }
}

/// `(major, minor)` of a version string such as `3.9.0` or `3.6.0+git1234`.
pub(crate) fn version_tuple(v: &str) -> Option<(u32, u32)> {
    let mut it = v.split(|c: char| !c.is_ascii_digit());
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

fn is_env_field(k: &str) -> bool {
    k.chars().any(|c| c.is_ascii_uppercase()) && !k.chars().any(|c| c.is_ascii_lowercase())
}

/// The `target` object's field, or the top-level duplicate.
pub(crate) fn target_field(m: &Map<String, Value>, f: &str) -> Value {
    target_ref(m, f).clone()
}

/// [`target_field`], borrowed.
fn target_ref<'a>(m: &'a Map<String, Value>, f: &str) -> &'a Value {
    m.get("target").and_then(|t| t.get(f)).unwrap_or(&Value::Null)
}

/// Rows for every metadata field of either side (except `hash`, which is the key itself); with
/// `differing_only`, the rows of fields equal on both sides are left out (ranking counts only
/// differing rows, and a field equal on both sides never yields one: every row below is a
/// [`Finding::new`] of the two values, whose notes never mark it differing).
pub(crate) fn metadata_findings(cx: &Context, differing_only: bool) -> Vec<Finding> {
    let mut out = Vec::new();
    // Every field of A in order, then those of B alone: both maps walked once, side by side
    // (they iterate in key order), not two lookups a field (ranking 128 classes made these
    // lookups' string compares ~10 % of a nearest request).
    let (fields, b_only) = fields_of_both(cx.a, cx.b);
    for (k, va, vb) in fields.into_iter().chain(b_only) {
        if differing_only && va.is_some() && va == vb {
            continue;
        }
        let f = |c| Finding::new(c, k, va.cloned().unwrap_or(Value::Null), vb.cloned().unwrap_or(Value::Null));
        match k.as_str() {
            "hash" => {}
            "target" => {
                for t in ["backend", "arch", "warp_size"] {
                    out.push(Finding::new(
                        Cause::Backend,
                        &format!("target.{t}"),
                        target_field(cx.a, t),
                        target_field(cx.b, t),
                    ));
                }
            }
            "triton_version" => out.push(f(Cause::Compiler)),
            "name" => out.push(f(Cause::Source).note("the kernel's name")),
            _ if va.is_none() || vb.is_none() => out.push(one_sided(cx, k, f)),
            _ if OUTPUTS.contains(&k.as_str()) => {
                out.push(f(Cause::None).consequence("output of the compile, not a key input"))
            }
            _ if TARGET_DUPLICATES.contains(&k.as_str()) => {
                let fi = f(Cause::Backend);
                out.push(if cx.a.contains_key("target") { fi.consequence("repeats the target") } else { fi });
            }
            _ if is_env_field(k) => out.push(f(Cause::Env)),
            "extern_libs" => out.push(extern_libs(cx, f(Cause::Options))),
            _ => out.push(option(cx, k, f)),
        }
    }
    out
}

/// A field's values on both sides.
type Both<'a> = (&'a String, Option<&'a Value>, Option<&'a Value>);

/// The fields of `a` in key order with both values, and those only in `b`, in key order: one
/// walk over both maps (a [`Map`] iterates in key order).
fn fields_of_both<'a>(a: &'a Map<String, Value>, b: &'a Map<String, Value>) -> (Vec<Both<'a>>, Vec<Both<'a>>) {
    debug_assert!(a.keys().zip(a.keys().skip(1)).all(|(x, y)| x < y), "a metadata map iterates in key order");
    let (mut fields, mut b_only) = (Vec::with_capacity(a.len()), Vec::new());
    let mut ib = b.iter().peekable();
    for (k, va) in a {
        while let Some((kb, vb)) = ib.next_if(|(kb, _)| *kb < k) {
            b_only.push((kb, None, Some(vb)));
        }
        fields.push((k, Some(va), ib.next_if(|(kb, _)| *kb == k).map(|(_, vb)| vb)));
    }
    b_only.extend(ib.map(|(kb, vb)| (kb, None, Some(vb))));
    (fields, b_only)
}

/// A field present on one side only.
fn one_sided(cx: &Context, k: &str, f: impl Fn(Cause) -> Finding) -> Finding {
    let side = if cx.a.contains_key(k) { "A" } else { "B" };
    if is_env_field(k) {
        // Set on one side to the value Triton uses anyway: the option it sets is the same on
        // both sides, but every set variable enters the key.
        let set = cx.a.get(k).or(cx.b.get(k));
        if let Some((_, o)) = ENV_OPTIONS.iter().find(|(e, _)| *e == k)
            && let (Some(oa), Some(ob), Some(v)) = (cx.a.get(*o), cx.b.get(*o), set)
            && oa == ob
            && same_setting(v, oa)
        {
            return f(Cause::Env)
                .note(format!("set only on {side}, {SET_TO_DEFAULT} ({o} is {} on both sides)", cx.a[*o]));
        }
        return f(Cause::Env).note(format!("set only on {side}"));
    }
    let comp = if TARGET_DUPLICATES.contains(&k) {
        Cause::Backend
    } else if OUTPUTS.contains(&k) {
        Cause::None
    } else {
        Cause::Options
    };
    if cx.versions_differ() {
        let v = if side == "A" { &cx.version_a } else { &cx.version_b };
        let v = v.as_deref().unwrap_or("unknown");
        f(comp).consequence(format!("only in Triton {v}: consequence of the version change"))
    } else if cx.target_differs {
        f(comp).consequence(format!("only on {side}'s backend: consequence of the target change"))
    } else if comp == Cause::None {
        f(comp).consequence("output of the compile, not a key input")
    } else {
        f(comp).note(format!("only on {side}"))
    }
}

/// A compile option present on both sides.
fn option(cx: &Context, k: &str, f: impl Fn(Cause) -> Finding) -> Finding {
    // Only a differing env var explains the option: with the same value on both sides, the
    // option was set per launch (e.g. `enable_fp_fusion=True`) and is a cause itself.
    if let Some((env, _)) = ENV_OPTIONS.iter().find(|(_, o)| *o == k)
        && cx.a.get(*env) != cx.b.get(*env)
    {
        return f(Cause::Env).consequence(format!("set by {env}"));
    }
    let fi = f(Cause::Options);
    if let Some(note) = backend_default(cx, k, &fi) {
        return fi.consequence(note);
    }
    if k == "debug" {
        return fi.note("TRITON_DEBUG=1 sets this option");
    }
    if ARCH_DEFAULTS.contains(&k) && cx.target_differs {
        return fi.consequence("per-target default: consequence of the target change");
    }
    if cx.versions_differ() && !USER_OPTIONS.contains(&k) {
        return fi.consequence("not an option users usually set: a default that changed with the Triton version");
    }
    fi
}

/// Default `num_stages` of each backend (CUDA 3, HIP 2): a difference that is exactly the two
/// backends' defaults follows from the target change.
const BACKEND_DEFAULTS: &[(&str, &str, i64)] = &[("num_stages", "cuda", 3), ("num_stages", "hip", 2)];

fn backends_differ(cx: &Context) -> bool {
    target_field(cx.a, "backend") != target_field(cx.b, "backend")
}

fn backend_default(cx: &Context, k: &str, fi: &Finding) -> Option<&'static str> {
    if !fi.row.differs || !backends_differ(cx) {
        return None;
    }
    let is_default = |m: &Map<String, Value>, v: &Value| {
        let b = target_field(m, "backend");
        BACKEND_DEFAULTS.iter().any(|(o, be, d)| *o == k && b.as_str() == Some(*be) && v.as_i64() == Some(*d))
    };
    (is_default(cx.a, &fi.row.a) && is_default(cx.b, &fi.row.b))
        .then_some("each backend's default: consequence of the target change")
}

/// `extern_libs`: `[[name, path], ...]`. CUDA (and AMD from 3.9) key the libraries by
/// content, so a different install path alone is no cause there; AMD before 3.9 keys the path.
fn extern_libs(cx: &Context, fi: Finding) -> Finding {
    if !fi.row.differs {
        return fi;
    }
    let names = |v: &Value| -> Vec<(String, String)> {
        v.as_array()
            .map(|libs| {
                libs.iter()
                    .filter_map(|l| {
                        let name = l.get(0)?.as_str()?.to_string();
                        let file = l.get(1)?.as_str()?.rsplit(['/', '\\']).next()?.to_string();
                        Some((name, file))
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    if names(&fi.row.a) != names(&fi.row.b) {
        if backends_differ(cx) {
            return fi.consequence("each backend links its own libraries: consequence of the target change");
        }
        return fi.note("different libraries");
    }
    // Each key was computed by its own Triton: the path is a cause only if both keyed it.
    let path_keyed = cx.backend.as_deref() == Some("hip")
        && [&cx.version_a, &cx.version_b]
            .iter()
            .all(|v| v.as_deref().and_then(version_tuple).is_some_and(|t| t < (3, 9)));
    if path_keyed {
        fi.note("path differs: AMD before Triton 3.9 keys these libraries by path: a cause")
    } else {
        let who = if cx.backend.as_deref() == Some("hip") { "AMD from 3.9" } else { "CUDA" };
        fi.consequence(format!("path differs but {who} keys these libraries by content: not a cause"))
    }
}
