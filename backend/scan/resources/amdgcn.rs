//! AMD: resource usage from the `.amdgcn` assembly — `; Kernel info:` comments, `.amdhsa_*`
//! descriptor directives and the `.amdgpu_metadata` YAML (format in the parent module).

use super::Resources;
use serde_json::Value;
use std::collections::HashMap;

#[derive(Default, Debug)]
pub(super) struct AmdKernel {
    /// `; Kernel info:` comment block: key -> raw value text.
    info: Vec<(String, String)>,
    /// `.amdhsa_*` descriptor directives (without the `.amdhsa_` prefix).
    descriptor: Vec<(String, String)>,
    /// `.set <kernel>.<field>, <value>` symbols.
    sets: Vec<(String, String)>,
    /// `amdhsa.kernels` metadata entry (keys without the leading dot), scalars only.
    metadata: Vec<(String, String)>,
}

pub(super) fn lookup<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

/// Leading integer of a value ("0 bytes/workgroup (compile time only)" -> 0). Accepts hex.
pub(super) fn parse_int(s: &str) -> Option<i64> {
    let t = s.trim();
    if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        let digits: String = hex.chars().take_while(|c| c.is_ascii_hexdigit()).collect();
        return i64::from_str_radix(&digits, 16).ok();
    }
    let end = t
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_digit() || (i == 0 && c == '-')))
        .map(|(i, _)| i)
        .unwrap_or(t.len());
    t[..end].parse().ok()
}

pub(super) fn parse_bool(s: &str) -> Option<bool> {
    match s.trim() {
        "true" | "1" => Some(true),
        "false" | "0" => Some(false),
        _ => None,
    }
}

/// Parse AMD `.amdgcn` assembly text.
///
/// `registers`, `spills`, `shared_bytes` are described on [`Resources`]. `extra` keys (present
/// when found): `kernel`, `kernels`, `kernel_not_found`, `target` (e.g.
/// `amdgcn-amd-amdhsa--gfx942`), `arch` (`gfx942`), `sgprs` (`TotalNumSgprs`), `agprs`
/// (`NumAgprs`), `total_vgprs` (`TotalNumVgprs`, VGPRs + AGPRs as allocated), `vgpr_count`
/// and `sgpr_count` (metadata), `vgpr_spill_count`, `sgpr_spill_count`, `scratch_bytes`
/// (`ScratchSize`, per work-item), `private_segment_bytes`, `lds_bytes` (`LDSByteSize`),
/// `occupancy` (waves per SIMD), `code_bytes` (`codeLenInByte`), `sgpr_blocks`, `vgpr_blocks`,
/// `accum_offset`, `max_flat_workgroup_size`, `wavefront_size`, `kernarg_bytes`,
/// `uses_dynamic_stack`, `has_recursion`, `has_indirect_call`, `num_named_barriers`,
/// `memory_bound`, `wave_limiter_hint`, `float_mode`, `ieee_mode`.
///
/// Never fails: unrecognised text yields a `Resources` with `None` fields.
pub fn from_amdgcn(text: &str, kernel: Option<&str>) -> Resources {
    let (order, kernels, target) = scan_amdgcn(text);
    let mut res = Resources::default();
    let extra = &mut res.extra;

    let chosen = match kernel {
        Some(k) if kernels.contains_key(k) => Some(k.to_string()),
        _ => order.first().cloned(),
    };
    if let Some(k) = kernel
        && chosen.as_deref() != Some(k)
    {
        extra.insert("kernel_not_found".into(), Value::from(k));
    }
    extra.insert("kernels".into(), Value::from(order.len() as i64));
    if let Some(t) = &target {
        extra.insert("target".into(), Value::from(t.as_str()));
        if let Some(gfx) = t.rsplit(['-', ':']).find(|p| p.starts_with("gfx")) {
            extra.insert("arch".into(), Value::from(gfx));
        } else if let Some(pos) = t.find("gfx") {
            let gfx: String = t[pos..].chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
            extra.insert("arch".into(), Value::from(gfx));
        }
    }
    let Some(name) = chosen else {
        return res;
    };
    let Some(k) = kernels.get(&name) else {
        return res;
    };
    extra.insert("kernel".into(), Value::from(name.as_str()));

    let info = |key: &str| lookup(&k.info, key).and_then(parse_int);
    let meta = |key: &str| lookup(&k.metadata, key).and_then(parse_int);
    let desc = |key: &str| lookup(&k.descriptor, key).and_then(parse_int);
    let set = |key: &str| lookup(&k.sets, key).and_then(parse_int);

    res.registers = info("NumVgprs").or_else(|| set("num_vgpr"));
    let vspill = meta("vgpr_spill_count");
    let sspill = meta("sgpr_spill_count");
    res.spills = match (vspill, sspill) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
    };
    res.shared_bytes =
        meta("group_segment_fixed_size").or_else(|| desc("group_segment_fixed_size")).or_else(|| info("LDSByteSize"));

    let numbers: [(&str, Option<i64>); 22] = [
        ("sgprs", info("TotalNumSgprs").or_else(|| meta("sgpr_count"))),
        ("agprs", info("NumAgprs").or_else(|| set("num_agpr")).or_else(|| meta("agpr_count"))),
        ("total_vgprs", info("TotalNumVgprs")),
        ("vgpr_count", meta("vgpr_count")),
        ("sgpr_count", meta("sgpr_count")),
        ("vgpr_spill_count", vspill),
        ("sgpr_spill_count", sspill),
        ("scratch_bytes", info("ScratchSize").or_else(|| set("private_seg_size"))),
        ("private_segment_bytes", meta("private_segment_fixed_size").or_else(|| desc("private_segment_fixed_size"))),
        ("lds_bytes", info("LDSByteSize")),
        ("occupancy", info("Occupancy")),
        ("code_bytes", info("codeLenInByte")),
        ("sgpr_blocks", info("SGPRBlocks")),
        ("vgpr_blocks", info("VGPRBlocks")),
        ("accum_offset", info("AccumOffset").or_else(|| desc("accum_offset"))),
        ("max_flat_workgroup_size", meta("max_flat_workgroup_size")),
        ("wavefront_size", meta("wavefront_size")),
        ("kernarg_bytes", meta("kernarg_segment_size").or_else(|| desc("kernarg_size"))),
        ("num_named_barriers", set("num_named_barrier")),
        ("memory_bound", info("MemoryBound")),
        ("wave_limiter_hint", info("WaveLimiterHint")),
        ("float_mode", info("FloatMode")),
    ];
    for (key, v) in numbers {
        if let Some(v) = v {
            extra.insert(key.into(), Value::from(v));
        }
    }
    if let Some(v) = info("IeeeMode") {
        extra.insert("ieee_mode".into(), Value::from(v));
    }
    for (key, v) in [
        (
            "uses_dynamic_stack",
            lookup(&k.metadata, "uses_dynamic_stack")
                .or_else(|| lookup(&k.descriptor, "uses_dynamic_stack"))
                .or_else(|| lookup(&k.sets, "has_dyn_sized_stack"))
                .and_then(parse_bool),
        ),
        ("has_recursion", lookup(&k.sets, "has_recursion").and_then(parse_bool)),
        ("has_indirect_call", lookup(&k.sets, "has_indirect_call").and_then(parse_bool)),
    ] {
        if let Some(v) = v {
            extra.insert(key.into(), Value::from(v));
        }
    }
    res
}

/// One pass over the assembly: kernel order, per-kernel facts, target triple.
pub(super) fn scan_amdgcn(text: &str) -> (Vec<String>, HashMap<String, AmdKernel>, Option<String>) {
    let mut order: Vec<String> = Vec::new();
    let mut kernels: HashMap<String, AmdKernel> = HashMap::new();
    let mut target: Option<String> = None;

    fn touch<'m>(
        order: &mut Vec<String>,
        kernels: &'m mut HashMap<String, AmdKernel>,
        name: &str,
    ) -> &'m mut AmdKernel {
        if !kernels.contains_key(name) {
            order.push(name.to_string());
        }
        kernels.entry(name.to_string()).or_default()
    }

    // Function whose body/trailer we are in (for `; Kernel info:` attribution).
    let mut current: Option<String> = None;
    let mut in_descriptor: Option<String> = None;
    let mut in_kernel_info = false;
    let mut in_metadata = false;
    let mut in_kernels_list = false;
    let mut meta_current: Option<String> = None;
    let mut meta_pending: Vec<(String, String)> = Vec::new();

    let flush_meta = |order: &mut Vec<String>,
                      kernels: &mut HashMap<String, AmdKernel>,
                      name: &mut Option<String>,
                      pending: &mut Vec<(String, String)>| {
        if let Some(n) = name.take() {
            touch(order, kernels, &n).metadata.append(pending);
        }
        pending.clear();
    };

    for raw in text.lines() {
        let line = raw.trim_end();
        let trimmed = line.trim_start();

        if in_metadata {
            if trimmed.starts_with(".end_amdgpu_metadata") {
                flush_meta(&mut order, &mut kernels, &mut meta_current, &mut meta_pending);
                in_metadata = false;
                in_kernels_list = false;
                continue;
            }
            let indent = line.len() - trimmed.len();
            if indent == 0 {
                // Top-level key: amdhsa.kernels / amdhsa.target / amdhsa.version.
                if in_kernels_list {
                    flush_meta(&mut order, &mut kernels, &mut meta_current, &mut meta_pending);
                }
                in_kernels_list = trimmed.starts_with("amdhsa.kernels:");
                if let Some(t) = trimmed.strip_prefix("amdhsa.target:") {
                    let t = t.trim().trim_matches(['\'', '"']);
                    if !t.is_empty() {
                        target = Some(t.to_string());
                    }
                }
                continue;
            }
            if !in_kernels_list {
                continue;
            }
            // A kernel entry starts with "  - .key: value" at indent 2; its scalar keys sit
            // at indent 4 ("    .key: value"). Deeper lines are `.args` items.
            let (entry_start, body, key_indent) = if indent == 2 && trimmed.starts_with("- ") {
                (true, trimmed[2..].trim_start(), 4)
            } else {
                (false, trimmed, indent)
            };
            if entry_start {
                flush_meta(&mut order, &mut kernels, &mut meta_current, &mut meta_pending);
            }
            if key_indent != 4 {
                continue;
            }
            if let Some(rest) = body.strip_prefix('.')
                && let Some((key, value)) = rest.split_once(':')
            {
                let value = value.trim().trim_matches(['\'', '"']).to_string();
                if key == "name" {
                    meta_current = Some(value.clone());
                }
                if !value.is_empty() {
                    meta_pending.push((key.to_string(), value));
                }
            }
            continue;
        }

        if in_kernel_info {
            if let Some(c) = trimmed.strip_prefix(';') {
                let c = c.trim();
                if let Some(name) = current.as_deref() {
                    let kv = c.split_once(':').or_else(|| c.split_once('='));
                    if let Some((key, value)) = kv {
                        let key = key.trim();
                        // "COMPUTE_PGM_RSRC2:SCRATCH_EN: 0" -> key "COMPUTE_PGM_RSRC2:SCRATCH_EN"
                        let (key, value) = if key.starts_with("COMPUTE_PGM_RSRC") {
                            match value.split_once(':') {
                                Some((sub, v)) => (format!("{key}:{}", sub.trim()), v.trim().to_string()),
                                None => (key.to_string(), value.trim().to_string()),
                            }
                        } else {
                            (key.to_string(), value.trim().to_string())
                        };
                        let entry = touch(&mut order, &mut kernels, name);
                        if lookup(&entry.info, &key).is_none() {
                            entry.info.push((key, value));
                        }
                    }
                }
                continue;
            }
            in_kernel_info = false;
        }

        if let Some(name) = &in_descriptor {
            if trimmed.starts_with(".end_amdhsa_kernel") {
                in_descriptor = None;
                continue;
            }
            if let Some(rest) = trimmed.strip_prefix(".amdhsa_") {
                let mut parts = rest.splitn(2, char::is_whitespace);
                let key = parts.next().unwrap_or("");
                let value = parts.next().unwrap_or("").trim();
                if !key.is_empty() {
                    let name = name.clone();
                    touch(&mut order, &mut kernels, &name).descriptor.push((key.to_string(), value.to_string()));
                }
            }
            continue;
        }

        if trimmed.starts_with(".amdgpu_metadata") {
            in_metadata = true;
            continue;
        }
        if trimmed.starts_with("; Kernel info:") {
            in_kernel_info = true;
            continue;
        }
        if let Some(rest) = trimmed.strip_prefix(".amdhsa_kernel") {
            if rest.starts_with(char::is_whitespace) {
                let name = rest.trim().to_string();
                if !name.is_empty() {
                    touch(&mut order, &mut kernels, &name);
                    current = Some(name.clone());
                    in_descriptor = Some(name);
                }
            }
            continue;
        }
        if let Some(t) = trimmed.strip_prefix(".amdgcn_target") {
            if target.is_none() {
                let t = t.trim().trim_matches('"');
                if !t.is_empty() {
                    target = Some(t.to_string());
                }
            }
            continue;
        }
        if let Some(rest) = trimmed.strip_prefix(".type") {
            // .type NAME,@function
            if let Some((name, kind)) = rest.trim().split_once(',')
                && kind.trim() == "@function"
            {
                current = Some(name.trim().to_string());
            }
            continue;
        }
        if let Some(rest) = trimmed.strip_prefix(".set ") {
            // .set NAME.field, value   (skip module-wide amdgpu.max_num_* symbols)
            if let Some((sym, value)) = rest.split_once(',') {
                let sym = sym.trim();
                if let Some((name, field)) = sym.rsplit_once('.') {
                    if name != "amdgpu" && !name.is_empty() && kernels.contains_key(name) {
                        if let Some(k) = kernels.get_mut(name) {
                            k.sets.push((field.to_string(), value.trim().to_string()))
                        }
                    } else if name != "amdgpu" && !name.is_empty() {
                        // Functions seen only through .set (e.g. before their descriptor).
                        if current.as_deref() == Some(name) {
                            touch(&mut order, &mut kernels, name)
                                .sets
                                .push((field.to_string(), value.trim().to_string()));
                        }
                    }
                }
            }
            continue;
        }
    }
    if in_metadata {
        // Unterminated metadata block (truncated file): keep what we have.
        flush_meta(&mut order, &mut kernels, &mut meta_current, &mut meta_pending);
    }

    // Only real kernels (with a descriptor, metadata entry or kernel-info block) count.
    order.retain(|n| {
        kernels.get(n).is_some_and(|k| !k.descriptor.is_empty() || !k.metadata.is_empty() || !k.info.is_empty())
    });
    (order, kernels, target)
}
