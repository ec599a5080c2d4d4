//! Machine-code identity of a kernel binary: a digest of the parts of the ELF that the GPU
//! runs, leaving out debug info. Two binaries with the same [`code_digest`] hold the same
//! machine code even when their bytes differ.
//!
//! Why: a binary embeds absolute paths in its debug line info (the kernel's file and Triton's
//! own `language/*.py` install path), so the same kernel compiled by the same Triton release
//! from another install dir (another venv, another Python, a rebuilt package) gives other
//! bytes but the same code. Byte identity (`identical_binary`) misses that; this does not.
//!
//! - **CUDA `.cubin`**: every section named `.text.*` (the SASS), `.nv.info*` (per-kernel
//!   attributes: registers, parameters, barriers), `.nv.constant*` (constant banks) and
//!   `.nv.shared*` (static shared memory, `NOBITS`: its size), by name, size and content.
//!   Debug sections (`.debug_*`, `.nv_debug_*`, their relocations), the symbol and string
//!   tables are left out. `.nv.info` records that refer to a symbol by index are hashed with
//!   the symbol's name instead: debug info adds symbols and so shifts the indices. The rule
//!   holds against `cuobjdump -sass -res-usage` on every cubin of the corpus (same digest ⇔
//!   same SASS and resource usage; the kernel info counts because two releases can give the
//!   same SASS for kernels with other parameters). Checked in `scan/resources/code_tests.rs`.
//! - **AMD `.hsaco`**: the `.text` section and each kernel descriptor (the bytes of every
//!   `*.kd` symbol, in `.rodata`). Debug sections, `.note` (metadata that names the
//!   producer) and `.comment` are left out.

use super::elf::Elf;
use object::Endianness;
use object::elf;
use object::read::elf::{FileHeader, Sym};
use sha2::{Digest, Sha256};

/// Which sections of a cubin hold code or kernel info.
fn cubin_code_section(name: &str) -> bool {
    name.starts_with(".text.")
        || name.starts_with(".nv.info")
        || name.starts_with(".nv.constant")
        || name.starts_with(".nv.shared")
}

/// The hex sha256 of a kernel binary's machine code and kernel info (see the module doc), or
/// why it cannot be read. `ext` is the file's extension: `cubin` or `hsaco`.
pub fn code_digest(ext: &str, bytes: &[u8]) -> Result<String, String> {
    if !matches!(ext, "cubin" | "hsaco") {
        return Err(format!("unknown binary kind {ext:?}: cubin or hsaco"));
    }
    match bytes.get(..5) {
        Some([0x7f, b'E', b'L', b'F', 2]) => digest(&Elf::<elf::FileHeader64<Endianness>>::parse(bytes)?, ext),
        Some([0x7f, b'E', b'L', b'F', 1]) => digest(&Elf::<elf::FileHeader32<Endianness>>::parse(bytes)?, ext),
        _ => Err("not an ELF file".into()),
    }
}

/// [`code_digest`] of a parsed binary.
pub(super) fn digest<'a, H: FileHeader<Endian = Endianness>>(file: &Elf<'a, H>, ext: &str) -> Result<String, String> {
    let symbols = file.symbols.as_ref().map_err(|e| format!("cannot read .symtab: {e}"))?;
    let mut h = Sha256::new();
    let mut put = |tag: &str, name: &str, size: u64, data: &[u8]| {
        for part in [tag.as_bytes(), name.as_bytes()] {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part);
        }
        h.update(size.to_le_bytes());
        h.update((data.len() as u64).to_le_bytes());
        h.update(data);
    };
    let mut n = 0;
    match ext {
        "cubin" => {
            let mut secs: Vec<(&str, u64, &[u8])> = Vec::new();
            for s in file.sections.iter() {
                let name = file.section_name(s)?;
                if cubin_code_section(name) {
                    secs.push((name, file.section_size(s), file.section_data(s)?));
                }
            }
            // Order by name: section order is the linker's choice, not the code.
            secs.sort_by(|a, b| a.0.cmp(b.0));
            for (name, size, data) in &secs {
                if name.starts_with(".nv.info") {
                    put("section", name, *size, &nv_info_by_name(file, *name == ".nv.info", data));
                } else {
                    put("section", name, *size, data);
                }
            }
            n = secs.iter().filter(|s| s.0.starts_with(".text.")).count();
        }
        "hsaco" => {
            let text = file
                .sections
                .iter()
                .find(|s| file.sections.section_name(file.endian, s).is_ok_and(|n| n == b".text"))
                .ok_or("no .text section")?;
            put("section", ".text", file.section_size(text), file.section_data(text)?);
            n += 1;
            let dynamic = file
                .sections
                .symbols(file.endian, file.data, elf::SHT_DYNSYM)
                .map_err(|e| format!("cannot read .dynsym: {e}"))?;
            let mut kds: Vec<(&str, Vec<u8>)> = Vec::new();
            for table in [symbols, &dynamic] {
                for (i, sym) in table.symbols().iter().enumerate().skip(1) {
                    let Some(name) = Elf::symbol_name_in(table, file.endian, i as u32) else { continue };
                    if !name.ends_with(".kd") || kds.iter().any(|k| k.0 == name) {
                        continue;
                    }
                    let index = object::SymbolIndex(i);
                    let Some(idx) = Elf::symbol_section(table, file.endian, sym, index) else { continue };
                    let (addr, size) = (sym.st_value(file.endian).into(), sym.st_size(file.endian).into());
                    kds.push((name, symbol_bytes(file, idx, addr, size)?));
                }
            }
            kds.sort();
            for (name, data) in &kds {
                put("kd", name, data.len() as u64, data);
            }
        }
        other => return Err(format!("unknown binary kind {other:?}: cubin or hsaco")),
    }
    if n == 0 {
        return Err("no code section".into());
    }
    Ok(hex::encode(h.finalize()))
}

/// `.nv.info` records that name a symbol by its index in `.symtab`: every function-keyed record
/// of the module-wide `.nv.info` (payload `(u32 symbol, value)`), and in a kernel's own
/// `.nv.info.<kernel>` `EIATTR_PARAM_CBANK` (`(u32 symbol, ...)`) and `EIATTR_EXTERNS` (u32
/// symbols). Debug info adds section symbols, which shifts these indices without changing
/// any code: the indices are replaced by the symbols' names (a section symbol by its
/// section's name). A section that does not parse is taken as it is.
fn nv_info_by_name<'a, H: FileHeader<Endian = Endianness>>(
    file: &Elf<'a, H>,
    module_wide: bool,
    data: &[u8],
) -> Vec<u8> {
    const EIATTR_PARAM_CBANK: u8 = 0x0a;
    const EIATTR_EXTERNS: u8 = 0x0f;
    let sym_name = |i: u32| -> Vec<u8> {
        let Ok(table) = file.symbols.as_ref() else {
            return format!("#{i}").into_bytes();
        };
        let Ok(sym) = table.symbol(object::SymbolIndex(i as usize)) else {
            return format!("#{i}").into_bytes();
        };
        match Elf::symbol_name_in(table, file.endian, i) {
            Some(n) if !n.is_empty() => n.as_bytes().to_vec(),
            _ => Elf::symbol_section(table, file.endian, sym, object::SymbolIndex(i as usize))
                .and_then(|x| file.sections.section(x).ok())
                .and_then(|x| file.section_name(x).ok().map(|n| format!("section {n}").into_bytes()))
                .unwrap_or_else(|| format!("#{i}").into_bytes()),
        }
    };
    let mut out = Vec::with_capacity(data.len());
    let mut i = 0;
    while i + 4 <= data.len() {
        let (format, attr) = (data[i], data[i + 1]);
        let len = if format == 0x04 { u16::from_le_bytes([data[i + 2], data[i + 3]]) as usize } else { 0 };
        let Some(payload) = data.get(i + 4..i + 4 + len) else {
            return data.to_vec();
        };
        out.extend_from_slice(&data[i..i + 4]);
        let words =
            if attr == EIATTR_EXTERNS { len / 4 } else { usize::from(module_wide || attr == EIATTR_PARAM_CBANK) };
        let mut rest = payload;
        for _ in 0..words {
            let Some((w, tail)) = rest.split_first_chunk::<4>() else { break };
            let n = sym_name(u32::from_le_bytes(*w));
            out.extend_from_slice(&(n.len() as u32).to_le_bytes());
            out.extend_from_slice(&n);
            rest = tail;
        }
        out.extend_from_slice(rest);
        i += 4 + len;
    }
    if i != data.len() {
        return data.to_vec();
    }
    out
}

/// The bytes of a symbol `[addr, addr + size)` inside its section.
fn symbol_bytes<'a, H: FileHeader<Endian = Endianness>>(
    file: &Elf<'a, H>,
    idx: object::SectionIndex,
    addr: u64,
    size: u64,
) -> Result<Vec<u8>, String> {
    use object::read::elf::SectionHeader;
    let sec = file.sections.section(idx).map_err(|e| e.to_string())?;
    let data = file.section_data(sec)?;
    let start = addr.checked_sub(sec.sh_addr(file.endian).into()).ok_or("symbol before its section")? as usize;
    let end = start.checked_add(size as usize).filter(|&e| e <= data.len()).ok_or("symbol past its section")?;
    Ok(data[start..end].to_vec())
}
