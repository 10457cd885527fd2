//! Element types: `f32`, `F16`, `Bf16` (kernel dtypes) and the fixed scalar types buffers may hold.
//!
//! Conversions round to nearest, ties to even, written in integer arithmetic so every target —
//! host, nvptx, amdgcn, and the WGSL prelude that mirrors them — produces the same bits.

/// The dtype of a buffer or of a kernel instantiation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    F32,
    F16,
    Bf16,
    U32,
    I32,
    U8,
}

impl DType {
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::Bf16 => "bf16",
            DType::U32 => "u32",
            DType::I32 => "i32",
            DType::U8 => "u8",
        }
    }

    pub const fn size(self) -> usize {
        match self {
            DType::F32 | DType::U32 | DType::I32 => 4,
            DType::F16 | DType::Bf16 => 2,
            DType::U8 => 1,
        }
    }

    pub fn parse(s: &str) -> Option<DType> {
        Some(match s {
            "f32" => DType::F32,
            "f16" => DType::F16,
            "bf16" => DType::Bf16,
            "u32" => DType::U32,
            "i32" => DType::I32,
            "u8" => DType::U8,
            _ => return None,
        })
    }

    /// Kernel dtypes are the floating-point ones an activation can have.
    pub const fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::Bf16)
    }
}

/// A plain value a buffer view may hold.
///
/// # Safety
/// Implementors are plain data: any bit pattern of `size_of::<Self>()` bytes is a valid value,
/// there is no padding, and `DTYPE.size() == size_of::<Self>()`.
pub unsafe trait Scalar: Copy + Send + Sync + 'static {
    const DTYPE: DType;
}

/// A kernel element type: stored as `Self`, computed in f32.
pub trait Element: Scalar + PartialEq + core::fmt::Debug {
    fn to_f32(self) -> f32;
    /// The value as f32 for kernels that only propagate NaNs: exact for every number, but a
    /// NaN's payload may differ by target (on GPUs one hardware conversion, no NaN select).
    fn widen(self) -> f32;
    fn from_f32(v: f32) -> Self;
    /// Storage bits, widened; used by tests and poison patterns.
    fn to_bits32(self) -> u32;
    fn from_bits32(b: u32) -> Self;
}

/// IEEE binary16, stored as its bits.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, Debug)]
#[repr(transparent)]
pub struct F16(pub u16);

/// bfloat16 (the high half of an f32), stored as its bits.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, Debug)]
#[repr(transparent)]
pub struct Bf16(pub u16);

unsafe impl Scalar for f32 {
    const DTYPE: DType = DType::F32;
}
unsafe impl Scalar for F16 {
    const DTYPE: DType = DType::F16;
}
unsafe impl Scalar for Bf16 {
    const DTYPE: DType = DType::Bf16;
}
unsafe impl Scalar for u32 {
    const DTYPE: DType = DType::U32;
}
unsafe impl Scalar for i32 {
    const DTYPE: DType = DType::I32;
}
unsafe impl Scalar for u8 {
    const DTYPE: DType = DType::U8;
}

impl Element for f32 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    #[inline(always)]
    fn widen(self) -> f32 {
        self
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        v
    }
    fn to_bits32(self) -> u32 {
        self.to_bits()
    }
    fn from_bits32(b: u32) -> Self {
        f32::from_bits(b)
    }
}

impl Element for F16 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        f16_bits_to_f32(self.0)
    }
    #[inline(always)]
    fn widen(self) -> f32 {
        #[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
        return f16::from_bits(self.0) as f32;
        #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
        return f16_bits_to_f32_soft(self.0);
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        F16(f32_to_f16_bits(v))
    }
    fn to_bits32(self) -> u32 {
        self.0 as u32
    }
    fn from_bits32(b: u32) -> Self {
        F16(b as u16)
    }
}

impl Element for Bf16 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        f32::from_bits((self.0 as u32) << 16)
    }
    #[inline(always)]
    fn widen(self) -> f32 {
        self.to_f32()
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        Bf16(f32_to_bf16_bits(v))
    }
    fn to_bits32(self) -> u32 {
        self.0 as u32
    }
    fn from_bits32(b: u32) -> Self {
        Bf16(b as u16)
    }
}

/// f32 → bf16 bits, round to nearest even; NaN stays a quiet NaN with its sign.
#[inline(always)]
pub fn f32_to_bf16_bits(v: f32) -> u16 {
    let b = v.to_bits();
    // Both candidates are computed so the choice is a select, not a branch (keeps GPU loops
    // over chunks straight-line, so they unroll).
    let quiet_nan = ((b >> 16) | 0x0040) as u16;
    // sm_80+ rounds in one instruction (the integer form is ~9); the NaN select sits inside the
    // asm so LLVM cannot turn it into a branch around the conversion.
    #[cfg(target_arch = "nvptx64")]
    {
        let r: u16;
        // SAFETY: register-only instructions; the predicate is scoped to the block.
        unsafe {
            core::arch::asm!(
                "{{ .reg .pred %isnan; cvt.rn.bf16.f32 {r}, {v}; setp.nan.f32 %isnan, {v}, {v}; \
                 selp.b16 {r}, {q}, {r}, %isnan; }}",
                r = out(reg16) r,
                v = in(reg32) v,
                q = in(reg16) quiet_nan,
                options(pure, nomem, nostack),
            );
        }
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let rounded = (b.wrapping_add(0x7fff + ((b >> 16) & 1)) >> 16) as u16;
        if (b & 0x7fff_ffff) > 0x7f80_0000 {
            quiet_nan
        } else {
            rounded
        }
    }
}

/// f32 → f16 bits, round to nearest even, overflow to ±inf, gradual underflow.
///
/// On nvptx and amdgpu the hardware conversion (`cvt.rn.f16.f32` / `v_cvt_f16_f32`, IEEE round
/// to nearest even with f16 subnormals kept) gives the same bits for every non-NaN input (and
/// keeps the chunked bodies in registers: the software path spilled to scratch on gfx1151); NaNs take the software path so
/// their payload is kept the same way on every target.
#[inline(always)]
pub fn f32_to_f16_bits(v: f32) -> u16 {
    #[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
    {
        let hw = (v as f16).to_bits();
        // The software path's NaN (sign, quiet bit, top payload bits), as a select.
        let b = v.to_bits();
        let nan = ((b >> 16) & 0x8000) as u16 | 0x7e00 | ((b & 0x007f_ffff) >> 13) as u16;
        if v.is_nan() {
            nan
        } else {
            hw
        }
    }
    #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
    f32_to_f16_bits_soft(v)
}

/// The integer-only f32 → f16 conversion every target agrees with.
#[inline(always)]
pub fn f32_to_f16_bits_soft(v: f32) -> u16 {
    let b = v.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32;
    let man = b & 0x007f_ffff;
    if exp == 0xff {
        let nan = if man != 0 {
            0x0200 | (man >> 13) as u16
        } else {
            0
        };
        return sign | 0x7c00 | nan;
    }
    let e = exp - 112; // rebias 127 → 15
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let m = man | 0x0080_0000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let rem = m & ((1u32 << shift) - 1);
        let mut r = m >> shift;
        if rem > half || (rem == half && (r & 1) == 1) {
            r += 1;
        }
        return sign | r as u16;
    }
    let mut r = ((e as u32) << 10) | (man >> 13);
    let rem = man & 0x1fff;
    // A carry out of the mantissa correctly bumps the exponent (and reaches inf at the top).
    if rem > 0x1000 || (rem == 0x1000 && (r & 1) == 1) {
        r += 1;
    }
    sign | r as u16
}

/// f16 bits → f32 (exact). On nvptx and amdgpu non-NaN inputs use the hardware conversion
/// (exact); NaNs keep their payload through the software path.
#[inline(always)]
pub fn f16_bits_to_f32(h: u16) -> f32 {
    #[cfg(any(target_arch = "nvptx64", target_arch = "amdgpu"))]
    {
        let hw = f16::from_bits(h) as f32;
        // The software path's NaN (payload kept), as a select.
        let nan = f32::from_bits(
            (((h & 0x8000) as u32) << 16) | 0x7f80_0000 | (((h & 0x03ff) as u32) << 13),
        );
        if (h & 0x7fff) > 0x7c00 {
            nan
        } else {
            hw
        }
    }
    #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
    f16_bits_to_f32_soft(h)
}

/// The integer-only f16 → f32 conversion every target agrees with.
#[inline(always)]
pub fn f16_bits_to_f32_soft(h: u16) -> f32 {
    let sign = ((h & 0x8000) as u32) << 16;
    let exp = ((h >> 10) & 0x1f) as u32;
    let man = (h & 0x03ff) as u32;
    let bits = if exp == 0 {
        if man == 0 {
            sign
        } else {
            let mut e = 113u32;
            let mut m = man;
            while m & 0x0400 == 0 {
                m <<= 1;
                e -= 1;
            }
            sign | (e << 23) | ((m & 0x03ff) << 13)
        }
    } else if exp == 0x1f {
        sign | 0x7f80_0000 | (man << 13)
    } else {
        sign | ((exp + 112) << 23) | (man << 13)
    };
    f32::from_bits(bits)
}
