//! Resource usage of compiled Triton kernels, read straight from the cache's binaries.
//!
//! Two sources, no GPU and no vendor tool needed:
//!
//! * **CUDA `.cubin`** (ELF, `e_machine == EM_CUDA`). `ptxas` records per-kernel resource
//!   usage in `.nv.info` sections, a sequence of attribute records:
//!
//!   ```text
//!   u8 format   EIFMT_NVAL=1 (no value) | EIFMT_BVAL=2 (u8) | EIFMT_HVAL=3 (u16) | EIFMT_SVAL=4 (sized)
//!   u8 attr     EIATTR_* id (EIATTR_REGCOUNT=0x2f, EIATTR_FRAME_SIZE=0x11, ...)
//!   u16 value   NVAL: unused, BVAL: low byte, HVAL: the value, SVAL: payload size in bytes
//!   [payload]   SVAL only, `size` bytes, little endian
//!   ```
//!
//!   Every record header is 4 bytes. The module-wide `.nv.info` holds function-keyed records
//!   whose SVAL payload is `(u32 symbol index, u32 value)`: `EIATTR_REGCOUNT`,
//!   `EIATTR_FRAME_SIZE`, `EIATTR_MIN_STACK_SIZE`, `EIATTR_MAX_STACK_SIZE`. `.nv.info.<kernel>`
//!   holds the kernel's own records (`EIATTR_MAXREG_COUNT`, `EIATTR_REQNTID`,
//!   `EIATTR_CBANK_PARAM_SIZE`, `EIATTR_KPARAM_INFO`, ...). Static shared memory is the size of
//!   the `NOBITS` section `.nv.shared.<kernel>`, legacy local memory the size of
//!   `.nv.local.<kernel>`, the parameter/constant bank the size of `.nv.constant0.<kernel>`.
//!   With these rules [`from_cubin`] agrees with `cuobjdump -res-usage` (REG, STACK, SHARED,
//!   LOCAL, CONSTANT[0]) on every cubin of the test corpus; `scripts/check-cuobjdump.sh`
//!   prints cuobjdump's view for comparison.
//!
//! * **AMD `.amdgcn`** (the assembly Triton keeps next to the `.hsaco`). LLVM writes the
//!   resource usage three times: a `; Kernel info:` comment block (`NumVgprs`, `TotalNumSgprs`,
//!   `ScratchSize`, `Occupancy`, ...), the `.amdhsa_kernel` descriptor directives, and the
//!   `.amdgpu_metadata` YAML (`.vgpr_count`, `.vgpr_spill_count`, `.sgpr_spill_count`,
//!   `.group_segment_fixed_size`, ...). [`from_amdgcn`] reads all three, preferring the
//!   metadata where they overlap.
//!
//! Shared memory caveat: both backends report *static* shared memory/LDS only. Triton
//! allocates its shared memory dynamically, so the real per-CTA amount is the metadata JSON's
//! `shared` field (plus `shared_bytes` here, e.g. the 1 KiB Hopper kernels reserve statically).

use std::collections::HashMap;

use object::elf;
use object::read::elf::{FileHeader, SectionHeader, Sym};
use object::{Endianness, SymbolIndex};
use serde_json::{Map, Value};

/// Resource usage of one compiled kernel.
///
/// Units and meaning, per backend:
///
/// | field          | CUDA (`.cubin`)                                   | AMD (`.amdgcn`)                                   |
/// |----------------|---------------------------------------------------|---------------------------------------------------|
/// | `registers`    | `EIATTR_REGCOUNT`, = cuobjdump `REG`              | `NumVgprs` (architected VGPRs, AGPRs excluded)    |
/// | `spills`       | `(STACK + LOCAL) / 4`: 4-byte words of per-thread local memory, exactly what Triton reports as `n_spills` (`CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES / 4`) | `.vgpr_spill_count + .sgpr_spill_count` (registers) |
/// | `shared_bytes` | size of `.nv.shared.<kernel>`, = cuobjdump `SHARED` (static only) | `.group_segment_fixed_size` (static LDS only) |
///
/// `extra` carries everything else found (see [`from_cubin`] and [`from_amdgcn`] for the keys).
/// A value is `None` when the binary does not record it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Resources {
    /// CUDA: registers per thread (cuobjdump `REG`). AMD: `NumVgprs`.
    pub registers: Option<i64>,
    /// CUDA: `(stack + local bytes) / 4`, Triton's `n_spills`. AMD: VGPR + SGPR spill count.
    pub spills: Option<i64>,
    /// Static shared memory (CUDA `.nv.shared.<kernel>`) / LDS (AMD group segment), bytes.
    pub shared_bytes: Option<i64>,
    /// Everything else, flat `snake_case` keys with numbers, strings, booleans or arrays.
    pub extra: Map<String, Value>,
}

// ---------------------------------------------------------------------------------------------
// CUDA
// ---------------------------------------------------------------------------------------------

const EIFMT_NVAL: u8 = 0x01;
const EIFMT_BVAL: u8 = 0x02;
const EIFMT_HVAL: u8 = 0x03;
const EIFMT_SVAL: u8 = 0x04;

const EIATTR_MAX_THREADS: u8 = 0x05;
const EIATTR_REQNTID: u8 = 0x10;
const EIATTR_FRAME_SIZE: u8 = 0x11;
const EIATTR_MIN_STACK_SIZE: u8 = 0x12;
const EIATTR_KPARAM_INFO: u8 = 0x17;
const EIATTR_CBANK_PARAM_SIZE: u8 = 0x19;
const EIATTR_MAXREG_COUNT: u8 = 0x1b;
const EIATTR_CRS_STACK_SIZE: u8 = 0x1e;
const EIATTR_MAX_STACK_SIZE: u8 = 0x23;
const EIATTR_REGCOUNT: u8 = 0x2f;
const EIATTR_SHARED_SCRATCH: u8 = 0x32;
const EIATTR_CUDA_API_VERSION: u8 = 0x37;
const EIATTR_NUM_MBARRIERS: u8 = 0x38;
const EIATTR_CTA_PER_CLUSTER: u8 = 0x3d;
const EIATTR_EXPLICIT_CLUSTER: u8 = 0x3e;
const EIATTR_MAX_CLUSTER_RANK: u8 = 0x3f;
const EIATTR_NUM_BARRIERS: u8 = 0x4c;

/// One `.nv.info` record.
#[derive(Debug, Clone, Copy)]
struct InfoRecord<'a> {
    format: u8,
    attr: u8,
    /// HVAL/BVAL value (BVAL: low byte); 0 for NVAL/SVAL.
    inline: u16,
    /// SVAL payload; empty otherwise.
    payload: &'a [u8],
}

/// Split an `.nv.info*` section into records. Stops (returning what was read and an error
/// note) at an unknown format byte or a record that runs past the section end.
fn parse_nv_info(data: &[u8]) -> (Vec<InfoRecord<'_>>, Option<String>) {
    let mut out = Vec::new();
    let mut i = 0usize;
    while i < data.len() {
        if data.len() - i < 4 {
            return (out, Some(format!("truncated record header at offset {i}")));
        }
        let format = data[i];
        let attr = data[i + 1];
        let half = u16::from_le_bytes([data[i + 2], data[i + 3]]);
        match format {
            EIFMT_NVAL | EIFMT_BVAL | EIFMT_HVAL => {
                let inline = if format == EIFMT_BVAL {
                    half & 0xff
                } else if format == EIFMT_HVAL {
                    half
                } else {
                    0
                };
                out.push(InfoRecord { format, attr, inline, payload: &[] });
                i += 4;
            }
            EIFMT_SVAL => {
                let size = usize::from(half);
                let start = i + 4;
                let Some(payload) = data.get(start..start + size) else {
                    return (out, Some(format!("record 0x{attr:02x} at offset {i} overruns the section")));
                };
                out.push(InfoRecord { format, attr, inline: 0, payload });
                i = start + size;
            }
            other => {
                return (out, Some(format!("unknown record format 0x{other:02x} at offset {i}")));
            }
        }
    }
    (out, None)
}

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    b.get(off..off + 4).map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

/// Attribute value as a number: HVAL/BVAL inline value, or a 4-byte SVAL payload.
fn record_value(r: &InfoRecord<'_>) -> Option<i64> {
    match r.format {
        EIFMT_HVAL | EIFMT_BVAL => Some(i64::from(r.inline)),
        EIFMT_SVAL if r.payload.len() == 4 => u32_at(r.payload, 0).map(i64::from),
        _ => None,
    }
}

/// An [`InfoRecord`] that owns its payload.
#[derive(Debug, Clone)]
struct OwnedRecord {
    format: u8,
    attr: u8,
    inline: u16,
    payload: Vec<u8>,
}

impl OwnedRecord {
    fn borrow(&self) -> InfoRecord<'_> {
        InfoRecord { format: self.format, attr: self.attr, inline: self.inline, payload: &self.payload }
    }
}

/// Everything gathered from the ELF before picking a kernel.
#[derive(Default)]
struct CubinFacts {
    /// Kernel names in file order (from `.nv.info.<name>`, else FUNC symbols).
    kernels: Vec<String>,
    /// Function-keyed attributes: (function name, attr) -> value.
    by_function: HashMap<(String, u8), i64>,
    /// Per-kernel `.nv.info.<kernel>` records.
    kernel_records: HashMap<String, Vec<OwnedRecord>>,
    /// Section sizes by name.
    section_sizes: Vec<(String, u64)>,
    flags: u32,
    os_abi: u8,
    abi_version: u8,
    warnings: Vec<String>,
}

/// Parse a cubin (ELF). `kernel` is the kernel name (function symbol) if known; if None or not
/// found, use the first/only kernel.
///
/// `registers`, `shared_bytes` and `spills` are described on [`Resources`]. `extra` keys (each
/// present only when the cubin records it):
///
/// * `kernel` (name used), `kernels` (count in the file), `kernel_not_found` (the requested
///   name, when it was absent and the first kernel was used instead)
/// * `stack_bytes` (= cuobjdump `STACK`: `EIATTR_MIN_STACK_SIZE`, else `EIATTR_FRAME_SIZE`),
///   `frame_size`, `min_stack_size`, `max_stack_size`, `crs_stack_size`,
///   `local_bytes` (= cuobjdump `LOCAL`), `const0_bytes` (= cuobjdump `CONSTANT[0]`),
///   `const<N>_bytes` for other banks of this kernel, `global_bytes` (cuobjdump's module-wide
///   `GLOBAL`), `code_bytes` (SASS size of `.text.<kernel>`)
/// * `max_reg_count` (`EIATTR_MAXREG_COUNT`, the register cap ptxas worked under),
///   `reqntid` (`[x, y, z]`, required block size), `max_threads` (`[x, y, z]`),
///   `param_bytes` (`EIATTR_CBANK_PARAM_SIZE`), `num_params`, `num_barriers`,
///   `num_mbarriers`, `shared_scratch`, `cluster_dims`, `max_cluster_rank`,
///   `explicit_cluster`, `cuda_api_version`
/// * `cuda_arch` (`"sm_90a"`, from the ELF header flags), `cuda_virtual_arch`
///   (`"compute_90"`, old ABI only), `elf_abi_version`, `elf_flags` (hex string)
/// * `warnings` (array of strings) when some section could not be decoded; the rest is
///   still returned.
pub fn from_cubin(bytes: &[u8], kernel: Option<&str>) -> Result<Resources, String> {
    if bytes.len() < 4 || bytes[..4] != elf::ELFMAG {
        return Err(format!("not an ELF file ({} bytes, no \\x7fELF magic)", bytes.len()));
    }
    if bytes.len() < 16 {
        return Err(format!("truncated ELF header ({} bytes)", bytes.len()));
    }
    let facts = match bytes[4] {
        2 => collect_facts::<elf::FileHeader64<Endianness>>(bytes)?,
        1 => collect_facts::<elf::FileHeader32<Endianness>>(bytes)?,
        c => return Err(format!("unsupported ELF class {c}")),
    };
    Ok(resources_from_facts(&facts, kernel))
}

fn collect_facts<Elf: FileHeader<Endian = Endianness>>(data: &[u8]) -> Result<CubinFacts, String> {
    let header = Elf::parse(data).map_err(|e| format!("invalid ELF header: {e}"))?;
    let endian = header.endian().map_err(|e| format!("invalid ELF header: {e}"))?;
    let machine = header.e_machine(endian).0;
    if machine != elf::EM_CUDA.0 {
        return Err(format!("not a CUDA cubin (ELF e_machine {machine}, expected {})", elf::EM_CUDA.0));
    }
    let ident = header.e_ident();
    let mut facts = CubinFacts {
        flags: header.e_flags(endian).0,
        os_abi: ident.os_abi.0,
        abi_version: ident.abi_version,
        ..CubinFacts::default()
    };
    let sections = header.sections(endian, data).map_err(|e| format!("cannot read ELF section headers: {e}"))?;
    if sections.is_empty() {
        return Err("ELF file has no section headers".to_string());
    }
    // A broken symbol table is survivable (we only lose function-keyed attributes).
    let symbols = match sections.symbols(endian, data, elf::SHT_SYMTAB) {
        Ok(s) => Some(s),
        Err(e) => {
            facts.warnings.push(format!("cannot read .symtab: {e}"));
            None
        }
    };
    let symbol_name = |index: u32| -> Option<String> {
        let symbols = symbols.as_ref()?;
        let sym = symbols.symbol(SymbolIndex(index as usize)).ok()?;
        let name = symbols.symbol_name(endian, sym).ok()?;
        Some(String::from_utf8_lossy(name).into_owned())
    };

    let mut names: Vec<String> = Vec::with_capacity(sections.len());
    for section in sections.iter() {
        let name = match sections.section_name(endian, section) {
            Ok(n) => String::from_utf8_lossy(n).into_owned(),
            Err(_) => String::new(),
        };
        let size: u64 = section.sh_size(endian).into();
        facts.section_sizes.push((name.clone(), size));
        names.push(name);
    }

    let mut info_kernels: Vec<String> = Vec::new();
    for (section, name) in sections.iter().zip(names.iter()) {
        let is_global = name == ".nv.info";
        let per_kernel = name.strip_prefix(".nv.info.");
        if !is_global && per_kernel.is_none() {
            continue;
        }
        let content = match section.data(endian, data) {
            Ok(d) => d,
            Err(e) => {
                facts.warnings.push(format!("cannot read {name}: {e}"));
                continue;
            }
        };
        let (records, problem) = parse_nv_info(content);
        if let Some(p) = problem {
            facts.warnings.push(format!("{name}: {p}"));
        }
        if let Some(k) = per_kernel {
            info_kernels.push(k.to_string());
        }
        for r in &records {
            // Function-keyed SVAL (symbol index, value), in .nv.info or a per-kernel section.
            let keyed = matches!(
                r.attr,
                EIATTR_REGCOUNT
                    | EIATTR_FRAME_SIZE
                    | EIATTR_MIN_STACK_SIZE
                    | EIATTR_MAX_STACK_SIZE
                    | EIATTR_CRS_STACK_SIZE
            );
            if keyed
                && r.format == EIFMT_SVAL
                && r.payload.len() == 8
                && let (Some(sym), Some(value)) = (u32_at(r.payload, 0), u32_at(r.payload, 4))
                && let Some(func) = symbol_name(sym)
            {
                facts.by_function.insert((func, r.attr), i64::from(value));
                continue;
            }
            if let Some(k) = per_kernel {
                facts.kernel_records.entry(k.to_string()).or_default().push(OwnedRecord {
                    format: r.format,
                    attr: r.attr,
                    inline: r.inline,
                    payload: r.payload.to_vec(),
                });
            }
        }
    }

    if info_kernels.is_empty() {
        // No per-kernel info sections: fall back to FUNC symbols that own a `.text.<name>`.
        if let Some(symbols) = symbols.as_ref() {
            for sym in symbols.symbols() {
                if sym.st_type() != elf::STT_FUNC {
                    continue;
                }
                if let Ok(n) = symbols.symbol_name(endian, sym) {
                    let n = String::from_utf8_lossy(n).into_owned();
                    if names.iter().any(|s| s.strip_prefix(".text.") == Some(n.as_str())) && !info_kernels.contains(&n)
                    {
                        info_kernels.push(n);
                    }
                }
            }
        }
        if info_kernels.is_empty() {
            for n in &names {
                if let Some(k) = n.strip_prefix(".text.") {
                    info_kernels.push(k.to_string());
                }
            }
        }
    }
    facts.kernels = info_kernels;
    Ok(facts)
}

fn cuda_arch(flags: u32, abi_version: u8) -> (Option<String>, Option<String>) {
    if abi_version >= 8 {
        // New layout (CUDA 12.8+ "ABI 8"): SM in bits 8..15, arch-specific 'a' at bit 3.
        let sm = (flags >> 8) & 0xff;
        let accel = flags & 0x8 != 0;
        if sm == 0 {
            return (None, None);
        }
        (Some(format!("sm_{sm}{}", if accel { "a" } else { "" })), None)
    } else {
        // Old layout: SM in the low byte, 'a' at bit 11 (0x800), virtual SM in bits 16..23.
        let sm = flags & 0xff;
        let accel = flags & 0x800 != 0;
        let virt = (flags >> 16) & 0xff;
        if sm == 0 {
            return (None, None);
        }
        let arch = format!("sm_{sm}{}", if accel { "a" } else { "" });
        let varch = (virt != 0).then(|| format!("compute_{virt}"));
        (Some(arch), varch)
    }
}

fn resources_from_facts(facts: &CubinFacts, kernel: Option<&str>) -> Resources {
    let mut res = Resources::default();
    let extra = &mut res.extra;

    let chosen: Option<String> = match kernel {
        Some(k) if facts.kernels.iter().any(|n| n == k) => Some(k.to_string()),
        _ => facts.kernels.first().cloned(),
    };
    if let Some(k) = kernel
        && chosen.as_deref() != Some(k)
    {
        extra.insert("kernel_not_found".into(), Value::from(k));
    }
    extra.insert("kernels".into(), Value::from(facts.kernels.len() as i64));

    let (arch, varch) = cuda_arch(facts.flags, facts.abi_version);
    if let Some(a) = arch {
        extra.insert("cuda_arch".into(), Value::from(a));
    }
    if let Some(v) = varch {
        extra.insert("cuda_virtual_arch".into(), Value::from(v));
    }
    extra.insert("elf_abi_version".into(), Value::from(i64::from(facts.abi_version)));
    extra.insert("elf_os_abi".into(), Value::from(i64::from(facts.os_abi)));
    extra.insert("elf_flags".into(), Value::from(format!("0x{:x}", facts.flags)));

    // Module-wide globals, as cuobjdump's "Common: GLOBAL".
    let global: u64 =
        facts.section_sizes.iter().filter(|(n, _)| n == ".nv.global" || n == ".nv.global.init").map(|(_, s)| *s).sum();
    extra.insert("global_bytes".into(), Value::from(global as i64));

    if !facts.warnings.is_empty() {
        extra.insert("warnings".into(), Value::Array(facts.warnings.iter().map(|w| Value::from(w.as_str())).collect()));
    }

    let Some(k) = chosen else {
        return res;
    };
    extra.insert("kernel".into(), Value::from(k.as_str()));

    let section_size =
        |name: &str| -> Option<i64> { facts.section_sizes.iter().find(|(n, _)| n == name).map(|(_, s)| *s as i64) };
    let func_attr = |attr: u8| facts.by_function.get(&(k.clone(), attr)).copied();
    let records = facts.kernel_records.get(&k);
    let kernel_attr = |attr: u8| -> Option<i64> {
        records?.iter().filter(|r| r.attr == attr).find_map(|r| record_value(&r.borrow()))
    };
    let kernel_attr_u32s = |attr: u8| -> Option<Vec<i64>> {
        let r = records?.iter().find(|r| r.attr == attr && r.format == EIFMT_SVAL)?;
        Some(r.payload.chunks_exact(4).map(|c| i64::from(u32::from_le_bytes([c[0], c[1], c[2], c[3]]))).collect())
    };
    let either = |attr: u8| func_attr(attr).or_else(|| kernel_attr(attr));

    res.registers = either(EIATTR_REGCOUNT);

    let frame = either(EIATTR_FRAME_SIZE);
    let min_stack = either(EIATTR_MIN_STACK_SIZE);
    let max_stack = either(EIATTR_MAX_STACK_SIZE);
    let crs_stack = either(EIATTR_CRS_STACK_SIZE);
    let stack = min_stack.or(frame);
    let local = section_size(&format!(".nv.local.{k}")).unwrap_or(0);
    for (key, v) in [
        ("frame_size", frame),
        ("min_stack_size", min_stack),
        ("max_stack_size", max_stack),
        ("crs_stack_size", crs_stack),
        ("stack_bytes", stack),
    ] {
        if let Some(v) = v {
            extra.insert(key.into(), Value::from(v));
        }
    }
    extra.insert("local_bytes".into(), Value::from(local));
    if stack.is_some() || local > 0 {
        res.spills = Some((stack.unwrap_or(0) + local) / 4);
    }

    // Static shared memory: `.nv.shared.<kernel>` (NOBITS; its size is the allocation).
    // A kernel with no such section uses no static shared memory.
    res.shared_bytes = Some(section_size(&format!(".nv.shared.{k}")).unwrap_or(0));

    // Constant banks of this kernel: `.nv.constant<N>.<kernel>`.
    for (name, size) in &facts.section_sizes {
        if let Some(rest) = name.strip_prefix(".nv.constant")
            && let Some((bank, owner)) = rest.split_once('.')
            && owner == k
            && !bank.is_empty()
            && bank.bytes().all(|b| b.is_ascii_digit())
        {
            extra.insert(format!("const{bank}_bytes"), Value::from(*size as i64));
        }
    }
    if let Some(code) = section_size(&format!(".text.{k}")) {
        extra.insert("code_bytes".into(), Value::from(code));
    }

    for (key, attr) in [
        ("max_reg_count", EIATTR_MAXREG_COUNT),
        ("param_bytes", EIATTR_CBANK_PARAM_SIZE),
        ("num_barriers", EIATTR_NUM_BARRIERS),
        ("num_mbarriers", EIATTR_NUM_MBARRIERS),
        ("shared_scratch", EIATTR_SHARED_SCRATCH),
        ("max_cluster_rank", EIATTR_MAX_CLUSTER_RANK),
        ("cuda_api_version", EIATTR_CUDA_API_VERSION),
    ] {
        if let Some(v) = kernel_attr(attr) {
            extra.insert(key.into(), Value::from(v));
        }
    }
    for (key, attr) in
        [("reqntid", EIATTR_REQNTID), ("max_threads", EIATTR_MAX_THREADS), ("cluster_dims", EIATTR_CTA_PER_CLUSTER)]
    {
        if let Some(v) = kernel_attr_u32s(attr)
            && !v.is_empty()
        {
            extra.insert(key.into(), Value::from(v));
        }
    }
    if let Some(recs) = records {
        if recs.iter().any(|r| r.attr == EIATTR_EXPLICIT_CLUSTER) {
            extra.insert("explicit_cluster".into(), Value::from(true));
        }
        let nparams = recs.iter().filter(|r| r.attr == EIATTR_KPARAM_INFO).count();
        if nparams > 0 {
            extra.insert("num_params".into(), Value::from(nparams as i64));
        }
    }
    res
}

// ---------------------------------------------------------------------------------------------
// AMD
// ---------------------------------------------------------------------------------------------

/// Per-kernel facts gathered from one `.amdgcn` file.
#[derive(Default, Debug)]
struct AmdKernel {
    /// `; Kernel info:` comment block: key -> raw value text.
    info: Vec<(String, String)>,
    /// `.amdhsa_*` descriptor directives (without the `.amdhsa_` prefix).
    descriptor: Vec<(String, String)>,
    /// `.set <kernel>.<field>, <value>` symbols.
    sets: Vec<(String, String)>,
    /// `amdhsa.kernels` metadata entry (keys without the leading dot), scalars only.
    metadata: Vec<(String, String)>,
}

fn lookup<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

/// Leading integer of a value ("0 bytes/workgroup (compile time only)" -> 0). Accepts hex.
fn parse_int(s: &str) -> Option<i64> {
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

fn parse_bool(s: &str) -> Option<bool> {
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
fn scan_amdgcn(text: &str) -> (Vec<String>, HashMap<String, AmdKernel>, Option<String>) {
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

#[cfg(test)]
mod tests {
    //! Corpus tests read real Triton caches from `$CACHELENS_CORPUS_DIR` (default
    //! `/tmp/corpus`, the extracted corpus archives) and skip with a message when it is absent.
    //! `cubins_match_cuobjdump` also needs `cuobjdump` (see `scripts/check-cuobjdump.sh`).
    use super::*;
    use std::path::{Path, PathBuf};

    fn corpus_dir() -> Option<PathBuf> {
        let dir =
            std::env::var_os("CACHELENS_CORPUS_DIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/tmp/corpus"));
        if dir.is_dir() {
            Some(dir)
        } else {
            eprintln!("skipping: corpus not found at {} (set CACHELENS_CORPUS_DIR)", dir.display());
            None
        }
    }

    fn walk(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, ext, out);
            } else if p.extension().and_then(|e| e.to_str()) == Some(ext) {
                out.push(p);
            }
        }
    }

    fn files(ext: &str) -> Vec<PathBuf> {
        let mut out = Vec::new();
        if let Some(dir) = corpus_dir() {
            walk(&dir, ext, &mut out);
        }
        out
    }

    fn stem(p: &Path) -> String {
        p.file_stem().unwrap().to_string_lossy().into_owned()
    }

    fn int(r: &Resources, key: &str) -> Option<i64> {
        r.extra.get(key).and_then(Value::as_i64)
    }

    /// Deterministic pseudo-random bytes (no rand dependency).
    fn noise(seed: u64, len: usize) -> Vec<u8> {
        let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect()
    }

    // ----- CUDA --------------------------------------------------------------------------

    #[test]
    fn nv_info_record_encoding() {
        // REGCOUNT SVAL (sym 9, 26 regs), MAXREG HVAL 0xff, NVAL, BVAL 1.
        let bytes = [
            0x04, 0x2f, 0x08, 0x00, 9, 0, 0, 0, 26, 0, 0, 0, //
            0x03, 0x1b, 0xff, 0x00, //
            0x01, 0x35, 0x00, 0x00, //
            0x02, 0x4c, 0x01, 0x00,
        ];
        let (recs, err) = parse_nv_info(&bytes);
        assert!(err.is_none());
        assert_eq!(recs.len(), 4);
        assert_eq!((recs[0].attr, u32_at(recs[0].payload, 4)), (EIATTR_REGCOUNT, Some(26)));
        assert_eq!(record_value(&recs[1]), Some(255));
        assert_eq!(recs[2].format, EIFMT_NVAL);
        assert_eq!(record_value(&recs[3]), Some(1));
        // Overrunning SVAL and unknown format stop cleanly.
        let (recs, err) = parse_nv_info(&[0x04, 0x2f, 0xff, 0xff, 1, 2]);
        assert!(recs.is_empty() && err.is_some());
        let (recs, err) = parse_nv_info(&[0x03, 0x1b, 0xff, 0x00, 0x09, 0x00]);
        assert_eq!(recs.len(), 1);
        assert!(err.is_some());
    }

    #[test]
    fn cuda_arch_from_flags() {
        assert_eq!(cuda_arch(0x500550, 7), (Some("sm_80".into()), Some("compute_80".into())));
        assert_eq!(cuda_arch(0x5a0d5a, 7), (Some("sm_90a".into()), Some("compute_90".into())));
        assert_eq!(cuda_arch(0x9005a04, 8).0, Some("sm_90".into()));
        assert_eq!(cuda_arch(0x6006408, 8).0, Some("sm_100a".into()));
    }

    #[test]
    fn corpus_cubins_parse() {
        let cubins = files("cubin");
        if cubins.is_empty() {
            eprintln!("skipping: no .cubin files in the corpus");
            return;
        }
        for path in &cubins {
            let bytes = std::fs::read(path).unwrap();
            let name = stem(path);
            let r = from_cubin(&bytes, Some(&name)).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert_eq!(r.extra.get("kernel").and_then(Value::as_str), Some(name.as_str()), "{}", path.display());
            assert!(!r.extra.contains_key("kernel_not_found"));
            assert!(!r.extra.contains_key("warnings"), "{}: {:?}", path.display(), r.extra.get("warnings"));
            let regs = r.registers.unwrap_or_else(|| panic!("{}: no REGCOUNT", path.display()));
            assert!((1..=255).contains(&regs), "{}: {regs} registers", path.display());
            let stack = int(&r, "stack_bytes").expect("stack_bytes");
            assert_eq!(r.spills, Some((stack + int(&r, "local_bytes").unwrap()) / 4));
            assert!(r.shared_bytes.is_some());
            assert!(r.extra.get("cuda_arch").and_then(Value::as_str).is_some_and(|a| a.starts_with("sm_")));
            // The kernel name is optional for single-kernel cubins.
            assert_eq!(from_cubin(&bytes, None).unwrap(), r);
            let other = from_cubin(&bytes, Some("no_such_kernel")).unwrap();
            assert_eq!(other.registers, r.registers);
            assert_eq!(other.extra.get("kernel_not_found").and_then(Value::as_str), Some("no_such_kernel"));
        }
        eprintln!("parsed {} cubins", cubins.len());
    }

    /// Compare with `cuobjdump -res-usage` through `scripts/check-cuobjdump.sh`.
    #[test]
    fn cubins_match_cuobjdump() {
        let Some(dir) = corpus_dir() else { return };
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/check-cuobjdump.sh");
        let out = match std::process::Command::new("bash").arg(&script).arg(&dir).output() {
            Ok(o) => o,
            Err(e) => {
                eprintln!("skipping: cannot run {}: {e}", script.display());
                return;
            }
        };
        if out.status.code() == Some(2) {
            eprintln!("skipping: {}", String::from_utf8_lossy(&out.stderr).trim());
            return;
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let (mut matched, mut mismatched) = (0, Vec::new());
        for line in text.lines() {
            let mut parts = line.split(' ');
            let file = parts.next().unwrap();
            let kv: HashMap<&str, &str> = parts.filter_map(|p| p.split_once('=')).collect();
            assert!(!kv.contains_key("ERROR"), "cuobjdump failed: {line}");
            let num = |k: &str| kv.get(k).and_then(|v| v.parse::<i64>().ok());
            let bytes = std::fs::read(file).unwrap();
            let r = from_cubin(&bytes, kv.get("KERNEL").copied()).unwrap();
            let ours = (
                r.registers,
                int(&r, "stack_bytes"),
                r.shared_bytes,
                int(&r, "local_bytes"),
                int(&r, "const0_bytes"),
                int(&r, "global_bytes"),
            );
            let theirs = (num("REG"), num("STACK"), num("SHARED"), num("LOCAL"), num("CONST0"), num("GLOBAL"));
            if ours == theirs {
                matched += 1;
            } else {
                mismatched.push(format!("{file}: ours {ours:?} cuobjdump {theirs:?}"));
            }
        }
        eprintln!("{matched} kernels match cuobjdump, {} differ", mismatched.len());
        assert!(mismatched.is_empty(), "{}", mismatched.join("\n"));
        assert!(matched > 0 || text.trim().is_empty());
    }

    #[test]
    fn cubin_garbage_is_an_error_not_a_panic() {
        assert!(from_cubin(&[], None).is_err());
        assert!(from_cubin(b"\x7fELF", None).is_err());
        assert!(from_cubin(b"hello world, definitely not an ELF file", None).is_err());
        for seed in 0..200 {
            let mut junk = noise(seed, (seed as usize * 37) % 4096);
            let _ = from_cubin(&junk, None);
            // Same junk behind a plausible ELF64 header.
            if junk.len() >= 64 {
                junk[..8].copy_from_slice(b"\x7fELF\x02\x01\x01\x33");
                junk[18] = 190;
                junk[19] = 0;
                let _ = from_cubin(&junk, Some("k"));
            }
        }
        let err = from_cubin(b"\x7fELF\x02\x01\x01\x00", None).unwrap_err();
        assert!(err.contains("truncated"), "{err}");
    }

    #[test]
    fn corrupt_real_cubins_do_not_panic() {
        let cubins = files("cubin");
        let Some(path) = cubins.first() else {
            eprintln!("skipping: no .cubin files in the corpus");
            return;
        };
        let bytes = std::fs::read(path).unwrap();
        // Every truncation of the header area, then sparser ones.
        let mut cut = 0;
        while cut < bytes.len() {
            let r = from_cubin(&bytes[..cut], None);
            if cut < 64 {
                assert!(r.is_err());
            }
            cut += if cut < 512 { 1 } else { 257 };
        }
        // Flip bytes all over the file, including the section header table.
        for (i, seed) in (0..bytes.len()).step_by(61).zip(1u64..) {
            let mut b = bytes.clone();
            b[i] ^= noise(seed, 1)[0] | 1;
            let _ = from_cubin(&b, Some("matmul_kernel"));
        }
        // A non-CUDA ELF.
        let mut b = bytes.clone();
        b[18] = 62; // EM_X86_64
        b[19] = 0;
        let err = from_cubin(&b, None).unwrap_err();
        assert!(err.contains("not a CUDA cubin"), "{err}");
    }

    // ----- AMD ---------------------------------------------------------------------------

    #[test]
    fn corpus_amdgcn_parse() {
        let files = files("amdgcn");
        if files.is_empty() {
            eprintln!("skipping: no .amdgcn files in the corpus");
            return;
        }
        for path in &files {
            let text = std::fs::read_to_string(path).unwrap();
            let name = stem(path);
            let r = from_amdgcn(&text, Some(&name));
            let p = path.display();
            assert_eq!(r.extra.get("kernel").and_then(Value::as_str), Some(name.as_str()), "{p}");
            assert!(r.registers.is_some_and(|v| v > 0 && v <= 512), "{p}: {:?}", r.registers);
            assert!(r.spills.is_some(), "{p}");
            assert!(r.shared_bytes.is_some(), "{p}");
            for key in [
                "sgprs",
                "agprs",
                "total_vgprs",
                "vgpr_count",
                "scratch_bytes",
                "occupancy",
                "code_bytes",
                "wavefront_size",
            ] {
                assert!(int(&r, key).is_some(), "{p}: no {key}");
            }
            assert_eq!(r.extra.get("arch").and_then(Value::as_str), Some("gfx942"), "{p}");
            // Consistency between the three sources.
            assert_eq!(int(&r, "total_vgprs"), int(&r, "vgpr_count"), "{p}");
            assert_eq!(int(&r, "sgprs"), int(&r, "sgpr_count"), "{p}");
            assert_eq!(r.spills, Some(int(&r, "vgpr_spill_count").unwrap() + int(&r, "sgpr_spill_count").unwrap()));
            // VGPR spills go to scratch: 4 bytes per spilled VGPR per lane.
            assert!(int(&r, "scratch_bytes").unwrap() >= 4 * int(&r, "vgpr_spill_count").unwrap(), "{p}");
            assert_eq!(from_amdgcn(&text, None), r);
        }
        eprintln!("parsed {} .amdgcn files", files.len());
    }

    #[test]
    fn amdgcn_synthetic() {
        let text = "\t.amdgcn_target \"amdgcn-amd-amdhsa--gfx942\"\n\
            \t.type\tk1,@function\nk1:\n\ts_endpgm\n\
            \t.amdhsa_kernel k1\n\t\t.amdhsa_group_segment_fixed_size 512\n\t\t.amdhsa_next_free_vgpr 40\n\t.end_amdhsa_kernel\n\
            \t.set k1.num_vgpr, 33\n\
            ; Kernel info:\n; codeLenInByte = 100\n; NumVgprs: 33\n; ScratchSize: 8\n; Occupancy: 8\n; COMPUTE_PGM_RSRC2:SCRATCH_EN: 1\n\
            \t.type\tk2,@function\nk2:\n\
            \t.amdhsa_kernel k2\n\t.end_amdhsa_kernel\n\
            ; Kernel info:\n; NumVgprs: 7\n\
            \t.amdgpu_metadata\n---\namdhsa.kernels:\n\
            \x20 - .args:\n      - .offset: 0\n        .size: 8\n\
            \x20   .group_segment_fixed_size: 512\n    .name: k1\n    .sgpr_spill_count: 3\n    .vgpr_spill_count: 2\n\
            \x20 - .name: k2\n    .vgpr_spill_count: 0\n\
            amdhsa.target: amdgcn-amd-amdhsa--gfx942\n...\n\t.end_amdgpu_metadata\n";
        let r = from_amdgcn(text, None);
        assert_eq!(r.registers, Some(33));
        assert_eq!(r.spills, Some(5));
        assert_eq!(r.shared_bytes, Some(512));
        assert_eq!(int(&r, "kernels"), Some(2));
        assert_eq!(int(&r, "occupancy"), Some(8));
        assert_eq!(int(&r, "code_bytes"), Some(100));
        let r2 = from_amdgcn(text, Some("k2"));
        assert_eq!((r2.registers, r2.spills, r2.shared_bytes), (Some(7), Some(0), None));
        let r3 = from_amdgcn(text, Some("nope"));
        assert_eq!(r3.registers, Some(33));
        assert_eq!(r3.extra.get("kernel_not_found").and_then(Value::as_str), Some("nope"));
    }

    #[test]
    fn amdgcn_garbage_does_not_panic() {
        assert_eq!(from_amdgcn("", None).registers, None);
        assert_eq!(from_amdgcn("random text\n; Kernel info:\n; NumVgprs: x\n", None).registers, None);
        for seed in 0..100 {
            let junk = String::from_utf8_lossy(&noise(seed, 2000)).into_owned();
            let _ = from_amdgcn(&junk, Some("k"));
        }
        let pathological = [
            ".amdgpu_metadata\n  - .name:\n  -\n- .name: x\n    .vgpr_spill_count: 99999999999999999999999\n",
            ".amdhsa_kernel\n.amdhsa_\n.end_amdhsa_kernel\n.set ., 1\n.set a.b\n.type ,@function\n",
            "; Kernel info:\n; NumVgprs: 0x\n; : \n;=\n; ScratchSize: -\n",
        ];
        for p in pathological {
            let _ = from_amdgcn(p, None);
            let _ = from_amdgcn(p, Some("x"));
        }
        // Every truncation of a real file (at char boundaries) parses without panicking.
        if let Some(path) = files("amdgcn").first() {
            let text = std::fs::read_to_string(path).unwrap();
            let mut cut = 0;
            while cut < text.len() {
                if text.is_char_boundary(cut) {
                    let _ = from_amdgcn(&text[..cut], None);
                }
                cut += 97;
            }
        }
    }
}
