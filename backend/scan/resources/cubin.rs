//! CUDA: resource usage from a `.cubin` (ELF) — the `.nv.info` attribute records and the
//! per-kernel `.nv.shared`/`.nv.local`/`.nv.constant0` sections (format in the parent module).

use super::Resources;
use super::elf::Elf;
use object::elf;
use object::read::elf::{FileHeader, SectionHeader, Sym};
use object::{Endianness, SymbolIndex};
use serde_json::Value;
use std::collections::HashMap;

pub(super) const EIFMT_NVAL: u8 = 0x01;
pub(super) const EIFMT_BVAL: u8 = 0x02;
pub(super) const EIFMT_HVAL: u8 = 0x03;
pub(super) const EIFMT_SVAL: u8 = 0x04;

pub(super) const EIATTR_MAX_THREADS: u8 = 0x05;
pub(super) const EIATTR_REQNTID: u8 = 0x10;
pub(super) const EIATTR_FRAME_SIZE: u8 = 0x11;
pub(super) const EIATTR_MIN_STACK_SIZE: u8 = 0x12;
pub(super) const EIATTR_KPARAM_INFO: u8 = 0x17;
pub(super) const EIATTR_CBANK_PARAM_SIZE: u8 = 0x19;
pub(super) const EIATTR_MAXREG_COUNT: u8 = 0x1b;
pub(super) const EIATTR_CRS_STACK_SIZE: u8 = 0x1e;
pub(super) const EIATTR_MAX_STACK_SIZE: u8 = 0x23;
pub(super) const EIATTR_REGCOUNT: u8 = 0x2f;
pub(super) const EIATTR_SHARED_SCRATCH: u8 = 0x32;
pub(super) const EIATTR_CUDA_API_VERSION: u8 = 0x37;
pub(super) const EIATTR_NUM_MBARRIERS: u8 = 0x38;
pub(super) const EIATTR_CTA_PER_CLUSTER: u8 = 0x3d;
pub(super) const EIATTR_EXPLICIT_CLUSTER: u8 = 0x3e;
pub(super) const EIATTR_MAX_CLUSTER_RANK: u8 = 0x3f;
pub(super) const EIATTR_NUM_BARRIERS: u8 = 0x4c;

/// One `.nv.info` record.
#[derive(Debug, Clone, Copy)]
pub(super) struct InfoRecord<'a> {
    pub(super) format: u8,
    pub(super) attr: u8,
    /// HVAL/BVAL value (BVAL: low byte); 0 for NVAL/SVAL.
    pub(super) inline: u16,
    /// SVAL payload; empty otherwise.
    pub(super) payload: &'a [u8],
}

/// Split an `.nv.info*` section into records. Stops (returning what was read and an error
/// note) at an unknown format byte or a record that runs past the section end.
pub(super) fn parse_nv_info(data: &[u8]) -> (Vec<InfoRecord<'_>>, Option<String>) {
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

pub(super) fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    b.get(off..off + 4).map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

/// Attribute value as a number: HVAL/BVAL inline value, or a 4-byte SVAL payload.
pub(super) fn record_value(r: &InfoRecord<'_>) -> Option<i64> {
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
    read_cubin(bytes, kernel).0
}

/// [`from_cubin`] and the machine-code digest ([`super::code_digest`]) from one parse of the
/// file: the resources, and the digest where the file has one.
pub fn read_cubin(bytes: &[u8], kernel: Option<&str>) -> (Result<Resources, String>, Option<String>) {
    if bytes.len() < 4 || bytes[..4] != elf::ELFMAG {
        return (Err(format!("not an ELF file ({} bytes, no \\x7fELF magic)", bytes.len())), None);
    }
    if bytes.len() < 16 {
        return (Err(format!("truncated ELF header ({} bytes)", bytes.len())), None);
    }
    match bytes[4] {
        2 => both(Elf::<elf::FileHeader64<Endianness>>::parse(bytes), kernel),
        1 => both(Elf::<elf::FileHeader32<Endianness>>::parse(bytes), kernel),
        c => (Err(format!("unsupported ELF class {c}")), None),
    }
}

fn both<H: FileHeader<Endian = Endianness>>(
    file: Result<Elf<'_, H>, String>,
    kernel: Option<&str>,
) -> (Result<Resources, String>, Option<String>) {
    match file {
        Ok(f) => {
            (collect_facts(&f).map(|facts| resources_from_facts(&facts, kernel)), super::code::digest(&f, "cubin").ok())
        }
        Err(e) => (Err(e), None),
    }
}

fn collect_facts<H: FileHeader<Endian = Endianness>>(file: &Elf<'_, H>) -> Result<CubinFacts, String> {
    let (header, endian, data) = (file.header, file.endian, file.data);
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
    let sections = &file.sections;
    if sections.is_empty() {
        return Err("ELF file has no section headers".to_string());
    }
    // A broken symbol table is survivable (we only lose function-keyed attributes).
    let symbols = match &file.symbols {
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

pub(super) fn cuda_arch(flags: u32, abi_version: u8) -> (Option<String>, Option<String>) {
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
