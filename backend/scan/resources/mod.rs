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

use serde_json::{Map, Value};

mod amdgcn;
mod code;
#[cfg(test)]
mod code_tests;
mod cubin;
mod elf;
#[cfg(test)]
mod tests;

pub use amdgcn::from_amdgcn;
pub use code::code_digest;
pub use cubin::{from_cubin, read_cubin};

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
