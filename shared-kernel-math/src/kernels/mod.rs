//! The kernel list — the one place that names every kernel — and one module per kernel: its
//! params, its `KernelDef` and its body.
//!
//! Each entry is `name: Id [dtypes] (buffer: Access<Elem>, …);` where `name` is the module here
//! holding the body `name::name` and the descriptor `name::Id: KernelDef`, the dtypes are the
//! element types `T` it is instantiated for, and the buffers are its views in launch order (`T`
//! is the instantiation's element type; other element types are fixed). Vendor crates, the
//! engine, the tests and the CLI expand this list; nothing per-kernel is written anywhere else.

// Shared by the paged decode kernels (not a kernel itself); its docs are its own `//!` (an outer
// doc here would resolve their links from this module).
pub mod decode_attention;
// What the paged decode sweeps share (geometry, slice width); its docs are its own `//!`.
pub mod decode_span;
// The two-pass sweep of `decode_attention` (the GPU path); its docs are its own `//!`.
pub mod decode_two_pass;
// The tensor-core sweep of `decode_attention` (16-bit pools where the wave multiply is
// hardware); its docs are its own `//!`.
pub mod decode_mma;
// How the parts of a decode block merge their softmax states; its docs are its own `//!`.
pub mod decode_parts;
// The body of the `qlinear_<b>bit` entries.
pub mod qlinear;
// The body of `qlinear_mma_4bit`: qlinear on the wave multiply.
pub mod qlinear_mma;
// The body of the MoE expert entries.
pub mod moe_experts;
// The body of the `moe_down_sum_<b>bit` entries: down and the K-sum in one launch.
pub mod moe_down_sum;
// The body of the `gather_qmm_<b>bit` entries.
pub mod gather_qmm;
// Per-element decoding of the affine layout, for `embedding_affine`; its docs are its own `//!`.
pub mod affine_codes;

/// Calls `$m!` with every kernel entry.
#[macro_export]
macro_rules! for_each_kernel {
    ($m:ident) => {
        $m! {
            fused_add_rms_norm: FusedAddRmsNorm [f32, f16, bf16]
                (x: Src<T>, residual: Rw<T>, weight: Src<T>, out: Dst<T>);
            fused_xielu: FusedXielu [f32, f16, bf16]
                (x: Src<T>, out: Dst<T>);
            fused_silu_mul: FusedSiluMul [f32, f16, bf16]
                (gate: Src<T>, up: Src<T>, out: Dst<T>);
            paged_attention_decode: PagedAttentionDecode [f32, f16, bf16]
                (q: Src<f32>, k_pool: Src<T>, v_pool: Src<T>, rows: Src<i32>,
                 row_offsets: Src<i32>, logical_starts: Src<i32>, visible_lens: Src<i32>,
                 out: Dst<f32>);
            paged_attention_decode_v2_partial: PagedAttentionDecodeV2Partial [f32, f16, bf16]
                (q: Src<f32>, k_pool: Src<T>, v_pool: Src<T>, indices: Src<i32>,
                 indptr: Src<i32>, last_page_len: Src<i32>, first_page_offset: Src<i32>,
                 request_indices: Src<i32>, kv_tile_indices: Src<i32>, out_v: Dst<f32>,
                 out_lse: Dst<f32>);
            // The merge reads and writes f32 states only; T is f32.
            paged_attention_merge_states: PagedAttentionMergeStates [f32]
                (v_in: Src<T>, lse_in: Src<T>, o_indptr: Src<i32>, v_out: Dst<T>,
                 lse_out: Dst<T>);
            fused_add3_layer_norm: FusedAdd3LayerNorm [f32, f16, bf16]
                (attn: Src<T>, mlp: Src<T>, residual: Src<T>, weight: Src<T>, bias: Src<T>,
                 x_out: Dst<T>, h_out: Dst<T>);
            fused_rope_qk_append: FusedRopeQkAppend [f32, f16, bf16]
                (qkv: Src<T>, q_out: Dst<T>, k_out: Dst<T>, v_out: Dst<T>);
            gumbel_max_sample: GumbelMaxSample [f32, f16, bf16]
                (logits: Src<T>, vals: Dst<f32>, idxs: Dst<u32>);
            // The splits' partial maxima are f32; T is f32.
            gumbel_max_merge: GumbelMaxMerge [f32]
                (vals: Src<T>, idxs: Src<u32>, index: Dst<u32>);
            // f32 only: the rows are softmax outputs, f32 by spec §6.1.
            rejection_sample: RejectionSample [f32]
                (probs: Src<T>, probs_draw: Src<T>, filters: Src<f32>, ids: Dst<u32>,
                 accepted: Dst<u32>, rounds: Dst<u32>);
            // The same sampler over a row cut into sorted segments, in two launches: the
            // segments (one block each), then the rounds (one block per row).
            rejection_segments: RejectionSegments [f32]
                (probs: Src<T>, probs_draw: Src<T>, seg: Dst<f32>, seg_stats: Dst<f32>,
                 seg_index: Dst<u32>);
            rejection_sample_segmented: RejectionSampleSegmented [f32]
                (probs: Src<T>, probs_draw: Src<T>, filters: Src<f32>, seg: Src<f32>,
                 seg_stats: Src<f32>, seg_index: Src<u32>, ids: Dst<u32>, accepted: Dst<u32>,
                 rounds: Dst<u32>);
            // f32 only: target and draft distributions are softmax outputs, as for rejection.
            speculative_accept: SpeculativeAccept [f32]
                (target_probs: Src<T>, draft_probs: Src<T>, draft_tokens: Src<u32>,
                 tokens: Dst<u32>, emitted: Dst<u32>);
            linear: Linear [f32, f16, bf16] (x: Src<T>, w: Src<T>, bias: Src<T>, y: Dst<T>);
            // MLX affine weights (spec §13), one entry per bit width; the body is `qlinear`.
            qlinear_2bit: QLinear2Bit [f32, f16, bf16]
                (x: Src<T>, w_q: Src<u32>, scales: Src<u32>, biases: Src<u32>, bias: Src<T>,
                 y: Dst<T>);
            qlinear_3bit: QLinear3Bit [f32, f16, bf16]
                (x: Src<T>, w_q: Src<u32>, scales: Src<u32>, biases: Src<u32>, bias: Src<T>,
                 y: Dst<T>);
            qlinear_4bit: QLinear4Bit [f32, f16, bf16]
                (x: Src<T>, w_q: Src<u32>, scales: Src<u32>, biases: Src<u32>, bias: Src<T>,
                 y: Dst<T>);
            qlinear_5bit: QLinear5Bit [f32, f16, bf16]
                (x: Src<T>, w_q: Src<u32>, scales: Src<u32>, biases: Src<u32>, bias: Src<T>,
                 y: Dst<T>);
            qlinear_6bit: QLinear6Bit [f32, f16, bf16]
                (x: Src<T>, w_q: Src<u32>, scales: Src<u32>, biases: Src<u32>, bias: Src<T>,
                 y: Dst<T>);
            qlinear_8bit: QLinear8Bit [f32, f16, bf16]
                (x: Src<T>, w_q: Src<u32>, scales: Src<u32>, biases: Src<u32>, bias: Src<T>,
                 y: Dst<T>);
            // qlinear_4bit on the wave multiply, for 16-bit activations (the host picks it
            // where the multiply is hardware); the body is `qlinear_mma`.
            qlinear_mma_4bit: QLinearMma4Bit [f16, bf16]
                (x: Src<T>, w_q: Src<u32>, scales: Src<u32>, biases: Src<u32>, bias: Src<T>,
                 y: Dst<T>);
            // Rows of an embedding table for a batch of token ids (an id ≥ V gives zeros).
            embedding: Embedding [f32, f16, bf16] (ids: Src<u32>, table: Src<T>, out: Dst<T>);
            // The same over the qlinear kernels' affine layout, dequantized to T (a tied head).
            embedding_affine: EmbeddingAffine [f32, f16, bf16]
                (ids: Src<u32>, w_q: Src<u32>, scales: Src<u32>, biases: Src<u32>,
                 out: Dst<T>);
            // Fused decode MoE (spec §7), one entry per bit width; the body is `moe_experts`.
            // Gate and up with SwiGLU or GeGLU, f32 activations out.
            moe_gateup_4bit: MoeGateup4Bit [f32, f16, bf16]
                (x: Src<T>, indices: Src<u32>, gate_q: Src<u32>, gate_scales: Src<u32>,
                 gate_biases: Src<u32>, up_q: Src<u32>, up_scales: Src<u32>,
                 up_biases: Src<u32>, act_g: Dst<f32>);
            moe_gateup_8bit: MoeGateup8Bit [f32, f16, bf16]
                (x: Src<T>, indices: Src<u32>, gate_q: Src<u32>, gate_scales: Src<u32>,
                 gate_biases: Src<u32>, up_q: Src<u32>, up_scales: Src<u32>,
                 up_biases: Src<u32>, act_g: Dst<f32>);
            // Nemotron-H's one-projection experts with relu².
            moe_fc1_relu2_4bit: MoeFc1Relu24Bit [f32, f16, bf16]
                (x: Src<T>, indices: Src<u32>, fc1_q: Src<u32>, fc1_scales: Src<u32>,
                 fc1_biases: Src<u32>, act_g: Dst<f32>);
            moe_fc1_relu2_8bit: MoeFc1Relu28Bit [f32, f16, bf16]
                (x: Src<T>, indices: Src<u32>, fc1_q: Src<u32>, fc1_scales: Src<u32>,
                 fc1_biases: Src<u32>, act_g: Dst<f32>);
            // Down with the scores applied, f32 partials per slot; every buffer but the
            // weights is f32, T is f32.
            moe_down_4bit: MoeDown4Bit [f32]
                (indices: Src<u32>, down_q: Src<u32>, down_scales: Src<u32>,
                 down_biases: Src<u32>, act_g: Src<T>, scores: Src<T>, partial: Dst<T>);
            moe_down_6bit: MoeDown6Bit [f32]
                (indices: Src<u32>, down_q: Src<u32>, down_scales: Src<u32>,
                 down_biases: Src<u32>, act_g: Src<T>, scores: Src<T>, partial: Dst<T>);
            moe_down_8bit: MoeDown8Bit [f32]
                (indices: Src<u32>, down_q: Src<u32>, down_scales: Src<u32>,
                 down_biases: Src<u32>, act_g: Src<T>, scores: Src<T>, partial: Dst<T>);
            // Down and the K-sum in one launch: `moe_combine(moe_down(…))` bit for bit.
            moe_down_sum_4bit: MoeDownSum4Bit [f32, f16, bf16]
                (indices: Src<u32>, down_q: Src<u32>, down_scales: Src<u32>,
                 down_biases: Src<u32>, act_g: Src<f32>, scores: Src<f32>, out: Dst<T>);
            moe_down_sum_6bit: MoeDownSum6Bit [f32, f16, bf16]
                (indices: Src<u32>, down_q: Src<u32>, down_scales: Src<u32>,
                 down_biases: Src<u32>, act_g: Src<f32>, scores: Src<f32>, out: Dst<T>);
            moe_down_sum_8bit: MoeDownSum8Bit [f32, f16, bf16]
                (indices: Src<u32>, down_q: Src<u32>, down_scales: Src<u32>,
                 down_biases: Src<u32>, act_g: Src<f32>, scores: Src<f32>, out: Dst<T>);
            // Expert-indexed quantized matmul (spec §13's gather_qmm): out[s] = lhs[lhs_idx[s]] ·
            // Ŵ[rhs_idx[s]]^T over stacked affine experts, one entry per bit width; the body is
            // `gather_qmm`. The `sorted` hint tiles slots sorted by expert without changing a bit.
            gather_qmm_4bit: GatherQmm4Bit [f32, f16, bf16]
                (lhs: Src<T>, lhs_idx: Src<u32>, rhs_idx: Src<u32>, w_q: Src<u32>,
                 scales: Src<u32>, biases: Src<u32>, out: Dst<T>);
            gather_qmm_6bit: GatherQmm6Bit [f32, f16, bf16]
                (lhs: Src<T>, lhs_idx: Src<u32>, rhs_idx: Src<u32>, w_q: Src<u32>,
                 scales: Src<u32>, biases: Src<u32>, out: Dst<T>);
            gather_qmm_8bit: GatherQmm8Bit [f32, f16, bf16]
                (lhs: Src<T>, lhs_idx: Src<u32>, rhs_idx: Src<u32>, w_q: Src<u32>,
                 scales: Src<u32>, biases: Src<u32>, out: Dst<T>);
            // Each token's top-k experts and their scores from its router logits.
            moe_route: MoeRoute [f32, f16, bf16]
                (logits: Src<T>, correction_bias: Src<f32>, ids: Dst<u32>, scores: Dst<f32>);
            // The K-sum of the partials in f32, rounded to T once.
            moe_combine: MoeCombine [f32, f16, bf16] (partial: Src<f32>, out: Dst<T>);
            // The gather_qmm chain's activation: score · act(gate, up) in f32 from T rows.
            moe_act: MoeAct [f32, f16, bf16]
                (gate: Src<T>, up: Src<T>, scores: Src<f32>, act_g: Dst<f32>);
            // Mamba2's single-token state update (spec §8); the dtypes of the packed inputs
            // are params, the state is f32.
            ssm_update: SsmUpdate [f32, f16, bf16]
                (x: Src<T>, a_log: Src<u32>, b_in: Src<u32>, c_in: Src<u32>, d: Src<T>,
                 dt: Src<u32>, dt_bias: Src<u32>, state_in: Src<f32>, out: Dst<T>,
                 state_out: Dst<f32>);
            // Mamba's depthwise conv over (conv state, token) + bias + SiLU, and the new state.
            causal_conv1d_update: CausalConv1dUpdate [f32, f16, bf16]
                (x: Src<T>, weight: Src<T>, bias: Src<T>, state_in: Src<T>, out: Dst<T>,
                 state_out: Dst<T>);
            // Mamba2's gated, grouped RMSNorm: weight · rmsnorm_group(y · silu(gate)).
            gated_rms_norm: GatedRmsNorm [f32, f16, bf16]
                (y: Src<T>, gate: Src<T>, weight: Src<T>, out: Dst<T>);
            // BitNet b1.58's ternary GEMV/GEMM (spec §2): the packed 2-bit codes read as u32
            // words, the scale one element of T on the device.
            bitlinear: BitLinear [f32, f16, bf16]
                (x: Src<T>, packed_weights: Src<u32>, weight_scale: Src<T>, y: Dst<T>);
            // Mamba1's selective scan over a sequence (spec §12), float state: A and the state
            // f32, the rest in T.
            mamba1_selective_scan: Mamba1SelectiveScan [f32, f16, bf16]
                (x: Src<T>, dt: Src<T>, b_in: Src<T>, c_in: Src<T>, a: Src<f32>, d: Src<T>,
                 state_in: Src<f32>, y: Dst<T>, state_out: Dst<f32>);
            // Qwen3-Next's Gated DeltaNet recurrence over T steps (spec §14), state in T; the
            // optional mask is u32 words (or bytes in words), read as mask_kind says.
            gated_delta_step: GatedDeltaStep [f32, f16, bf16]
                (q: Src<T>, k: Src<T>, v: Src<T>, g: Src<T>, beta: Src<T>, mask: Src<u32>,
                 state_in: Src<T>, y: Dst<T>, state_out: Dst<T>);
        }
    };
}

macro_rules! kernel_modules {
    ($( $name:ident : $id:ident $dtypes:tt $buffers:tt ; )*) => {
        $( pub mod $name; )*
    };
}
crate::for_each_kernel!(kernel_modules);

macro_rules! define_kernel_ids {
    ($( $name:ident : $id:ident [$($dt:ident),*] ( $($b:ident : $acc:ident < $e:ident >),* ); )*) => {
        /// Every kernel in the list.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum KernelId {
            $(
                #[doc = concat!(
                    "The [`", stringify!($name), "`](crate::kernels::", stringify!($name), ") kernel."
                )]
                $id,
            )*
        }

        impl KernelId {
            /// Every kernel, in list order.
            pub const ALL: &'static [KernelId] = &[$(KernelId::$id),*];

            /// The kernel's name in the list (its module in `kernels`, its op, `kiln run`'s name).
            pub const fn name(self) -> &'static str {
                match self { $(KernelId::$id => stringify!($name)),* }
            }

            /// The kernel named `name` in the list, if any.
            pub fn from_name(name: &str) -> Option<KernelId> {
                $( if name == stringify!($name) { return Some(KernelId::$id); } )*
                None
            }

            /// The entry symbol of the kernel's `dtype` instance in every compiled artifact
            /// (`<kernel>_<dtype>`: the PTX entries, the code objects' kernels, the WGSL module
            /// table); `None` when the list has no such instance.
            pub const fn symbol(self, dtype: $crate::DType) -> Option<&'static str> {
                match self {
                    $(KernelId::$id => {
                        $(if dtype as u8 == <$crate::elem!($dt) as $crate::Scalar>::DTYPE as u8 {
                            return Some(concat!(stringify!($name), "_", stringify!($dt)));
                        })*
                        None
                    }),*
                }
            }

            /// The element types the kernel is instantiated for.
            pub const fn dtypes(self) -> &'static [$crate::DType] {
                match self {
                    $(KernelId::$id => &[$(<$crate::elem!($dt) as $crate::Scalar>::DTYPE),*]),*
                }
            }

            /// The buffers in launch order.
            pub const fn buffers(self) -> &'static [$crate::BufferDesc] {
                match self {
                    $(KernelId::$id => &[$($crate::BufferDesc {
                        name: stringify!($b),
                        access: <$crate::$acc<u8> as $crate::View>::ACCESS,
                        elem: $crate::elem_kind!($e),
                    }),*]),*
                }
            }

            /// The params fields.
            pub const fn params(self) -> &'static [$crate::ParamField] {
                match self {
                    $(KernelId::$id => <<$crate::kernels::$name::$id as $crate::KernelDef>::Params
                        as $crate::Params>::FIELDS),*
                }
            }

            /// Wave sizes the body is correct for.
            pub const fn waves(self) -> $crate::Waves {
                match self {
                    $(KernelId::$id => <$crate::kernels::$name::$id as $crate::KernelDef>::WAVES),*
                }
            }

            /// The kernel's launch bound, if its block is fixed.
            pub const fn launch_bound(self) -> Option<$crate::LaunchBound> {
                match self {
                    $(KernelId::$id =>
                        <$crate::kernels::$name::$id as $crate::KernelDef>::LAUNCH_BOUND),*
                }
            }
        }
    };
}

for_each_kernel!(define_kernel_ids);
