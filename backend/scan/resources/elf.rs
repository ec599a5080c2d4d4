//! The one ELF reader of a kernel binary: a `.cubin` or `.hsaco` is parsed once (header,
//! section table, `.symtab`) and that parse serves both the resources ([`super::cubin`]) and
//! the machine-code digest ([`super::code`]).

use object::elf;
use object::read::elf::{FileHeader, SectionHeader, SectionTable, SymbolTable};
use object::{Endianness, SectionIndex, SymbolIndex};

/// A parsed ELF file of either class (`H`: `FileHeader32` or `FileHeader64`).
pub(super) struct Elf<'a, H: FileHeader<Endian = Endianness>> {
    pub(super) data: &'a [u8],
    pub(super) header: &'a H,
    pub(super) endian: Endianness,
    pub(super) sections: SectionTable<'a, H>,
    /// `.symtab` (empty when there is none), or why it could not be read: a broken symbol
    /// table costs the resources only their function-keyed attributes.
    pub(super) symbols: Result<SymbolTable<'a, H>, String>,
}

impl<'a, H: FileHeader<Endian = Endianness>> Elf<'a, H> {
    pub(super) fn parse(data: &'a [u8]) -> Result<Self, String> {
        let header = H::parse(data).map_err(|e| format!("invalid ELF header: {e}"))?;
        let endian = header.endian().map_err(|e| format!("invalid ELF header: {e}"))?;
        let sections = header.sections(endian, data).map_err(|e| format!("cannot read ELF section headers: {e}"))?;
        let symbols = sections.symbols(endian, data, elf::SHT_SYMTAB).map_err(|e| e.to_string());
        Ok(Elf { data, header, endian, sections, symbols })
    }

    /// A section's name as text (an unreadable or non-UTF-8 name is an error).
    pub(super) fn section_name(&self, s: &'a H::SectionHeader) -> Result<&'a str, String> {
        let n = self.sections.section_name(self.endian, s).map_err(|e| e.to_string())?;
        std::str::from_utf8(n).map_err(|_| "non-UTF-8 ELF section name".to_string())
    }

    /// A section's bytes (empty for `NOBITS`).
    pub(super) fn section_data(&self, s: &'a H::SectionHeader) -> Result<&'a [u8], String> {
        s.data(self.endian, self.data).map_err(|e| e.to_string())
    }

    /// A section's size in the file's header (`NOBITS`: the memory it takes).
    pub(super) fn section_size(&self, s: &H::SectionHeader) -> u64 {
        s.sh_size(self.endian).into()
    }

    /// The name of symbol `index` of `table` as text: `None` for index 0, past the table, or a
    /// name that does not read as UTF-8.
    pub(super) fn symbol_name_in(table: &SymbolTable<'a, H>, endian: Endianness, index: u32) -> Option<&'a str> {
        let sym = table.symbol(SymbolIndex(index as usize)).ok()?;
        std::str::from_utf8(table.symbol_name(endian, sym).ok()?).ok()
    }

    /// The section a symbol is defined in (`None`: undefined, absolute, common or unknown).
    pub(super) fn symbol_section(
        table: &SymbolTable<'a, H>,
        endian: Endianness,
        sym: &H::Sym,
        index: SymbolIndex,
    ) -> Option<SectionIndex> {
        table.symbol_section(endian, sym, index).ok().flatten()
    }
}
