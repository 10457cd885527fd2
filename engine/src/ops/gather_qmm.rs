//! Expert-indexed quantized matmul (spec §13's `gather_qmm`): [`StackedExperts`] holds one
//! projection of a MoE layer's experts in MLX's affine layout, and [`gather_qmm`] multiplies
//! each slot's `lhs` row by its expert, `out[s, :] = lhs[lhs_idx[s], :] · Ŵ[rhs_idx[s]]^T`, in
//! f32, rounded to the activation dtype once.
//!
//! Decode runs it unsorted ([`gather_qmm_topk`]: `lhs_idx[s] = s / K` over the top-k ids).
//! Prefill sorts the slots by expert first so a block reads each weight word once for a
//! whole tile of slots: [`gather_sort`] → [`gather_qmm`] with `sorted` → [`scatter_unsort`].
//! The hint is only a hint: unsorted slots with it, or sorted ones without it, give the same
//! bits.

use super::moe::{check_expert_ids, ids_per_token};
use super::QuantizedWeight;
use crate::launch::{launch, Arg, Mode, Ran};
use crate::quant::AffineFormat;
use crate::{Device, PortError, Tensor};
use kiln_math::kernels::gather_qmm::GatherQmmParams;
use kiln_math::kernels::qlinear::scale_code;
use kiln_math::{DType, KernelId, Params};

/// One projection of a MoE layer's experts on a device: `E` experts of `[N, C]` stacked as the
/// `[E·N, C]` [`QuantizedWeight`] (expert `e`'s rows at `e·N ..`), the row-major flattening of
/// MLX's `[E, N, C]` stacked weights.
#[derive(Debug)]
pub struct StackedExperts {
    experts: usize,
    weight: QuantizedWeight,
}

/// The kernel of a bit width.
fn kernel_of(bits: u32) -> Option<KernelId> {
    Some(match bits {
        4 => KernelId::GatherQmm4Bit,
        6 => KernelId::GatherQmm6Bit,
        8 => KernelId::GatherQmm8Bit,
        _ => return None,
    })
}

impl StackedExperts {
    /// Checks the weight against the experts: 4, 6 or 8 bits, `experts ≥ 1` of equal height.
    pub fn new(experts: usize, weight: QuantizedWeight) -> Result<StackedExperts, PortError> {
        let bits = weight.format().bits();
        let Some(kernel) = kernel_of(bits) else {
            return Err(PortError::invalid(
                KernelId::GatherQmm4Bit,
                format!("experts at {bits} bits: gather_qmm reads 4, 6 or 8"),
            ));
        };
        if experts == 0 || weight.rows() == 0 || !weight.rows().is_multiple_of(experts) {
            return Err(PortError::invalid(
                kernel,
                format!(
                    "{} rows are not {experts} experts of equal height",
                    weight.rows()
                ),
            ));
        }
        Ok(StackedExperts { experts, weight })
    }

    /// Experts stacked (E).
    pub fn experts(&self) -> usize {
        self.experts
    }

    /// Rows of each expert (N, the columns of `out`).
    pub fn rows(&self) -> usize {
        self.weight.rows() / self.experts
    }

    /// Columns (C, the columns of `lhs`).
    pub fn cols(&self) -> usize {
        self.weight.cols()
    }

    /// The affine format.
    pub fn format(&self) -> AffineFormat {
        self.weight.format()
    }

    /// The stacked weight.
    pub fn weight(&self) -> &QuantizedWeight {
        &self.weight
    }

    /// The kernel of this weight's bit width (`gather_qmm_<b>bit`).
    pub fn kernel(&self) -> KernelId {
        kernel_of(self.format().bits()).expect("checked at construction")
    }
}

/// How [`gather_qmm`] spreads its slots over blocks; no choice here changes a bit of `out`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GatherTiling {
    /// The slots come sorted by expert: a block takes `rows_per_tile` consecutive slots and
    /// reads a weight word once per run of one expert among them. Any order stays exact.
    pub sorted: bool,
    /// Slots per block when `sorted`, 1..=16.
    pub rows_per_tile: u32,
    /// Expert rows (columns of `out`) per block, 1..=8.
    pub rows_per_block: u32,
}

impl GatherTiling {
    /// One slot per block (decode: few slots, each its own expert).
    pub const UNSORTED: GatherTiling = GatherTiling {
        sorted: false,
        rows_per_tile: 1,
        rows_per_block: 8,
    };
    /// Tiles of 16 slots sorted by expert (prefill after [`gather_sort`]).
    pub const SORTED: GatherTiling = GatherTiling {
        sorted: true,
        rows_per_tile: 16,
        rows_per_block: 8,
    };
}

/// Scratch bytes a [`gather_qmm`] call over `slots` slots takes (its two index lists), for
/// [`Device::reserve_scratch`].
pub fn gather_qmm_scratch_bytes(slots: usize) -> usize {
    crate::scratch_bytes(&[(DType::U32, slots), (DType::U32, slots)])
}

/// `out[s, :] = rnd(lhs[lhs_idx[s], :] · Ŵ[rhs_idx[s]]^T)` for every slot `s`: `lhs [L, C]`
/// and `out [S, N]` in one activation dtype (f32, f16 or bf16), `lhs_idx` and `rhs_idx` `S`
/// values each; every dot product in f32, only `out` rounded. `sorted` says the slots come
/// sorted by `rhs_idx` ([`GatherTiling::SORTED`], else [`GatherTiling::UNSORTED`]); it never
/// changes a bit. Index lists of other lengths, an expert ≥ E or a row ≥ L are refused before
/// any launch.
pub fn gather_qmm(
    dev: &Device,
    lhs: &Tensor,
    lhs_idx: &[u32],
    rhs_idx: &[u32],
    experts: &StackedExperts,
    sorted: bool,
    out: &mut Tensor,
) -> Result<Ran, PortError> {
    let tiling = if sorted {
        GatherTiling::SORTED
    } else {
        GatherTiling::UNSORTED
    };
    gather_qmm_tiled(dev, lhs, lhs_idx, rhs_idx, experts, tiling, out)
}

/// [`gather_qmm`] with the tiling spelled out (rows per tile and per block out of range are
/// refused).
pub fn gather_qmm_tiled(
    dev: &Device,
    lhs: &Tensor,
    lhs_idx: &[u32],
    rhs_idx: &[u32],
    experts: &StackedExperts,
    tiling: GatherTiling,
    out: &mut Tensor,
) -> Result<Ran, PortError> {
    let kernel = experts.kernel();
    if lhs_idx.is_empty() || lhs_idx.len() != rhs_idx.len() {
        return Err(PortError::invalid(
            kernel,
            format!(
                "{} lhs rows for {} experts: one of each per slot, one slot or more",
                lhs_idx.len(),
                rhs_idx.len()
            ),
        ));
    }
    let rows = check_lhs(lhs, experts)?;
    check_expert_ids(kernel, rhs_idx, experts.experts)?;
    if let Some(position) = lhs_idx.iter().position(|&l| l as usize >= rows) {
        return Err(PortError::LhsRowOutOfRange {
            kernel: kernel.name(),
            position,
            row: lhs_idx[position],
            rows,
        });
    }
    let slots = lhs_idx.len();
    let mut scratch = dev.scratch(gather_qmm_scratch_bytes(slots))?;
    let lhs_idx = scratch.upload(lhs_idx)?;
    let rhs_idx = scratch.upload(rhs_idx)?;
    launch_gather(dev, lhs, &lhs_idx, &rhs_idx, experts, tiling, out)
}

/// MoE decode's gate, up or fc1 through `gather_qmm`: `x [T, C]` and `ids` the top-k expert
/// ids of each token, `T·K` values token by token, into `out [T·K, N]` (slot `t·K + k` is
/// token `t` against expert `ids[t·K + k]`; `lhs_idx[s] = s / K`). K above E, ids not K per
/// token or an id ≥ E are refused before any launch.
pub fn gather_qmm_topk(
    dev: &Device,
    x: &Tensor,
    ids: &[u32],
    experts: &StackedExperts,
    out: &mut Tensor,
) -> Result<Ran, PortError> {
    let kernel = experts.kernel();
    let (_, k) = ids_per_token(kernel, x, ids)?;
    if k > experts.experts {
        return Err(PortError::invalid(
            kernel,
            format!(
                "K = {k} experts per token, more than the {} stacked",
                experts.experts
            ),
        ));
    }
    let lhs_idx: Vec<u32> = (0..ids.len()).map(|s| (s / k) as u32).collect();
    gather_qmm(dev, x, &lhs_idx, ids, experts, false, out)
}

/// [`gather_qmm_tiled`] with the index lists already on the device (`lhs_idx` and `rhs_idx`
/// u32 `[S]`, e.g. from a device router). They cannot be checked before the launch: a slot
/// whose expert is ≥ E or whose row is ≥ L gives zeros (the kernels read nothing for it).
pub fn gather_qmm_indexed(
    dev: &Device,
    lhs: &Tensor,
    lhs_idx: &Tensor,
    rhs_idx: &Tensor,
    experts: &StackedExperts,
    tiling: GatherTiling,
    out: &mut Tensor,
) -> Result<Ran, PortError> {
    check_lhs(lhs, experts)?;
    launch_gather(dev, lhs, lhs_idx, rhs_idx, experts, tiling, out)
}

/// `lhs [L, C]` against the experts' C; returns L.
fn check_lhs(lhs: &Tensor, experts: &StackedExperts) -> Result<usize, PortError> {
    let &[rows, cols] = lhs.shape() else {
        return Err(PortError::invalid(
            experts.kernel(),
            "lhs must be two-dimensional: [L, C]",
        ));
    };
    if cols != experts.cols() {
        return Err(PortError::invalid(
            experts.kernel(),
            format!(
                "lhs has {cols} columns, the experts read {}",
                experts.cols()
            ),
        ));
    }
    Ok(rows)
}

/// The launch over device index lists (the kernel's binding checks every shape).
fn launch_gather(
    dev: &Device,
    lhs: &Tensor,
    lhs_idx: &Tensor,
    rhs_idx: &Tensor,
    experts: &StackedExperts,
    tiling: GatherTiling,
    out: &mut Tensor,
) -> Result<Ran, PortError> {
    let format = experts.format();
    let p = GatherQmmParams {
        group_size: format.group_size(),
        scale_dtype: scale_code(format.scale_dtype()),
        sorted: tiling.sorted as u32,
        rows_per_tile: tiling.rows_per_tile,
        rows_per_block: tiling.rows_per_block,
        ..GatherQmmParams::default()
    };
    let (_, scales, biases) = experts.weight.buffers();
    let q = experts.weight.stacked_codes(experts.experts)?;
    let mut args = [
        Arg::In(lhs),
        Arg::In(lhs_idx),
        Arg::In(rhs_idx),
        Arg::In(&q),
        Arg::In(scales),
        Arg::In(biases),
        Arg::Out(out),
    ];
    launch(dev, experts.kernel(), p.words(), &mut args, Mode::Auto)
}

/// The prefill order: the slots stably sorted by expert. Returns `order` (`order[i]` is the
/// slot that goes `i`-th; slots of one expert keep their order) and the sorted experts
/// (`rhs_idx[order[i]]`). Gather the lhs rows the same way (`lhs_idx[order[i]]`), run
/// [`gather_qmm`] with `sorted`, and put its rows back with [`scatter_unsort`].
pub fn gather_sort(rhs_idx: &[u32]) -> (Vec<u32>, Vec<u32>) {
    let mut order: Vec<u32> = (0..rhs_idx.len() as u32).collect();
    // `sort_by_key` is stable: equal experts keep their slot order.
    order.sort_by_key(|&s| rhs_idx[s as usize]);
    let sorted = order.iter().map(|&s| rhs_idx[s as usize]).collect();
    (order, sorted)
}

/// Puts the rows of a sorted run back in slot order: `out[order[i], :] = sorted[i, :]` for
/// `sorted` and `out` of one dtype and shape `[S, ..]` and `order` a permutation of `0..S`
/// (from [`gather_sort`]). A host copy: it reads `sorted` back (after the work queued before)
/// and writes `out`.
pub fn scatter_unsort(sorted: &Tensor, order: &[u32], out: &mut Tensor) -> Result<(), PortError> {
    let bad = |msg: String| PortError::InvalidShape {
        kernel: "scatter_unsort",
        msg,
    };
    let slots = order.len();
    if sorted.dtype() != out.dtype() || sorted.shape() != out.shape() {
        return Err(bad(format!(
            "sorted is {} {:?} and out {} {:?}: one dtype and shape expected",
            sorted.dtype().name(),
            sorted.shape(),
            out.dtype().name(),
            out.shape()
        )));
    }
    if sorted.shape().first() != Some(&slots) {
        return Err(bad(format!(
            "{slots} slots in order for rows {:?}",
            sorted.shape()
        )));
    }
    let mut seen = vec![false; slots];
    for &s in order {
        match seen.get_mut(s as usize) {
            Some(v) if !*v => *v = true,
            _ => {
                return Err(bad(format!(
                    "order is not a permutation of 0..{slots}: slot {s} is out of range or repeated"
                )))
            }
        }
    }
    let bytes = sorted.to_bytes()?;
    let row = bytes.len() / slots;
    let mut unsorted = vec![0u8; bytes.len()];
    for (i, &s) in order.iter().enumerate() {
        let s = s as usize;
        unsorted[s * row..(s + 1) * row].copy_from_slice(&bytes[i * row..(i + 1) * row]);
    }
    out.write_bytes(&unsorted)
}
