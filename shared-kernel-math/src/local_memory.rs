//! Which kernels may use per-thread local memory on a GPU, how much, and why: every other entry
//! of the kernel list must keep its state in registers (a PTX `.local` depot or an amdgcn private
//! segment is a stack in slow memory, and usually means a loop stayed rolled over an array).
//! `cargo xtask kernels` refuses an artifact outside these bounds and reports every entry's
//! registers and local bytes; tests/tests/device_checks.rs checks the committed artifacts.

use crate::KernelId;

/// One kernel's declared use of local memory, per thread, in every entry (every dtype).
#[derive(Clone, Copy, Debug)]
pub struct LocalMemory {
    /// The kernel.
    pub kernel: KernelId,
    /// Most bytes of `.local` declared by a PTX entry and the functions it calls.
    pub ptx_bytes: u32,
    /// Most bytes of `.private_segment_fixed_size` of a code object's entry (any arch).
    pub scratch_bytes: u32,
    /// Why the body needs it (a review reads this next to the bytes).
    pub reason: &'static str,
}

/// libm's `expf` raises the IEEE underflow/overflow flags with a volatile store and load
/// of one f32 (`force_eval!`) on its saturating branches: one stack word, touched only there.
const LIBM_FORCE_EVAL: &str = "libm's expf force_eval!: a volatile store and load of one \
    f32 on the underflow/overflow branches only (GPUs have no FP flags to raise)";

/// The qlinear kernels: the PTX holds only libm's flag word; the code objects spill.
const QLINEAR_SPILLS: &str = "PTX: libm's expf force_eval! in the SwiGLU option (act 1), one f32 \
    on the underflow/overflow branches only. Code objects: VGPR spills of the 4- and 8-row \
    instances (two rows of W x 4 or 8 rows of x of accumulators and chunk sums beside a unit's \
    words) under the 128-VGPR (gfx942) and 192-VGPR (gfx1151) budgets of the default \
    1024-thread launch bound; to be removed with a launch-bound primitive (issue 15: no scratch \
    on gfx1151/gfx942)";

/// The kernels allowed local memory; a kernel not named here must use none.
pub const LOCAL_MEMORY: &[LocalMemory] = &[
    LocalMemory {
        kernel: KernelId::FusedSiluMul,
        ptx_bytes: 4,
        scratch_bytes: 8,
        reason: LIBM_FORCE_EVAL,
    },
    LocalMemory {
        kernel: KernelId::MoeAct,
        ptx_bytes: 4,
        scratch_bytes: 8,
        reason: LIBM_FORCE_EVAL,
    },
    LocalMemory {
        kernel: KernelId::MoeGateup4Bit,
        ptx_bytes: 4,
        scratch_bytes: 56,
        reason: "libm's expf force_eval! (GeGLU's tanhf), one f32 on the saturating branches \
                 only; on gfx942 also 9-21 VGPRs of the 16-bit entries, spilled under the \
                 128-VGPR budget by the two units of gate and up words (and their scale spans) \
                 a lane holds in flight at 4 bits",
    },
    LocalMemory {
        kernel: KernelId::MoeGateup8Bit,
        ptx_bytes: 4,
        scratch_bytes: 8,
        reason: LIBM_FORCE_EVAL,
    },
    LocalMemory {
        kernel: KernelId::MoeRoute,
        ptx_bytes: 4,
        scratch_bytes: 8,
        reason: LIBM_FORCE_EVAL,
    },
    LocalMemory {
        kernel: KernelId::CausalConv1dUpdate,
        ptx_bytes: 8,
        scratch_bytes: 12,
        reason: LIBM_FORCE_EVAL,
    },
    LocalMemory {
        kernel: KernelId::GatedRmsNorm,
        ptx_bytes: 4,
        scratch_bytes: 8,
        reason: LIBM_FORCE_EVAL,
    },
    LocalMemory {
        kernel: KernelId::FusedRopeQkAppend,
        ptx_bytes: 1124,
        scratch_bytes: 568,
        reason: "libm's sinf/cosf: the large-argument reduction (rem_pio2_large, |x| beyond \
                 2^28·π/2) keeps its digit arrays on the stack; rope angles (position × \
                 frequency ≤ 1) stay far below it, so the path never runs",
    },
    LocalMemory {
        kernel: KernelId::PagedAttentionDecode,
        ptx_bytes: 0,
        scratch_bytes: 144,
        reason: "gfx942 (wave64) only: register pressure spills VGPRs and SGPRs to scratch; the \
                 PTX and gfx1151 keep everything in registers",
    },
    LocalMemory {
        kernel: KernelId::PagedAttentionDecodeV2Partial,
        ptx_bytes: 0,
        scratch_bytes: 156,
        reason: "gfx942 (wave64) only: register pressure spills VGPRs and SGPRs to scratch, as \
                 for paged_attention_decode",
    },
    LocalMemory {
        kernel: KernelId::Linear,
        ptx_bytes: 0,
        scratch_bytes: 36,
        reason: "gfx942 f32 only: VGPR spills of the 8-row instance under the 128-VGPR budget of \
                 the default 1024-thread launch bound (to be removed with a launch-bound \
                 primitive); the PTX, gfx1151 and the 16-bit entries keep to registers",
    },
    LocalMemory {
        kernel: KernelId::QLinear2Bit,
        ptx_bytes: 4,
        scratch_bytes: 860,
        reason: QLINEAR_SPILLS,
    },
    LocalMemory {
        kernel: KernelId::QLinear3Bit,
        ptx_bytes: 4,
        scratch_bytes: 864,
        reason: QLINEAR_SPILLS,
    },
    LocalMemory {
        kernel: KernelId::QLinear4Bit,
        ptx_bytes: 4,
        scratch_bytes: 1052,
        reason: QLINEAR_SPILLS,
    },
    LocalMemory {
        kernel: KernelId::QLinear5Bit,
        ptx_bytes: 4,
        scratch_bytes: 916,
        reason: QLINEAR_SPILLS,
    },
    LocalMemory {
        kernel: KernelId::QLinear6Bit,
        ptx_bytes: 4,
        scratch_bytes: 888,
        reason: QLINEAR_SPILLS,
    },
    LocalMemory {
        kernel: KernelId::QLinear8Bit,
        ptx_bytes: 4,
        scratch_bytes: 1048,
        reason: QLINEAR_SPILLS,
    },
    LocalMemory {
        kernel: KernelId::QLinearMma4Bit,
        ptx_bytes: 8,
        scratch_bytes: 1840,
        reason: "PTX: libm's expf force_eval! in the SwiGLU option (act 1), as for qlinear. Code \
                 objects: the wave multiply there is the shuffle version (each lane's partials \
                 against every group's column, folded by butterflies) beside the ring of steps \
                 in flight (8 words a row) and the two blocks of 16-bit scales, which spill \
                 under the 128-VGPR (gfx942) and 192-VGPR (gfx1151) budgets; the host picks this \
                 kernel only where the multiply is hardware (CUDA), so these entries serve parity",
    },
    LocalMemory {
        kernel: KernelId::BitLinear,
        ptx_bytes: 0,
        scratch_bytes: 356,
        reason: "Code objects only (gfx942, and gfx1151's bf16 entry): VGPR spills of the 8-row \
                 instance (32 accumulators, a half-unit's 32 decoded weights and the rows' \
                 chunks of x) under the 128-VGPR (gfx942) and 192-VGPR (gfx1151) budgets of the \
                 default 1024-thread launch bound; to be removed with a launch-bound primitive \
                 (issue 15), as for qlinear",
    },
];

/// The declared local memory of `kernel`, if it has any.
pub fn local_memory(kernel: KernelId) -> Option<&'static LocalMemory> {
    LOCAL_MEMORY.iter().find(|l| l.kernel == kernel)
}
