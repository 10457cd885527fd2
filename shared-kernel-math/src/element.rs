//! Element types: `f32`, `F16`, `Bf16` (kernel dtypes) and the fixed scalar types buffers may hold.
//!
//! Conversions round to nearest, ties to even, written in integer arithmetic so every target —
//! host, nvptx, amdgcn, and the WGSL prelude that mirrors them — produces the same bits. GPUs
//! use their hardware conversions where those give the same bits for every number (NaNs take
//! the integer form): on sm_80+ a single f32 → 16-bit conversion is quarter-rate, so streaming
//! kernels round pairs with one packed instruction (`Element::from_f32_pair`).

/// The dtype of a buffer or of a kernel instantiation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// IEEE binary32.
    F32,
    /// IEEE binary16 ([`F16`]).
    F16,
    /// bfloat16 ([`Bf16`]).
    Bf16,
    /// 32-bit unsigned integer (token ids, counts).
    U32,
    /// 32-bit signed integer (page tables, offsets).
    I32,
    /// Byte (packed quantized weights).
    U8,
}

impl DType {
    /// The lowercase name used by the kernel list, artifact symbols and the CLI (`"bf16"`).
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

    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            DType::F32 | DType::U32 | DType::I32 => 4,
            DType::F16 | DType::Bf16 => 2,
            DType::U8 => 1,
        }
    }

    /// The dtype of a [`name`](DType::name); `None` for any other string.
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
    /// The dtype this type stores.
    const DTYPE: DType;
}

/// A kernel element type: stored as `Self`, computed in f32.
pub trait Element: Scalar + PartialEq + core::fmt::Debug {
    /// The value as f32, exactly (NaNs stay NaN with the same payload bits where they fit).
    fn to_f32(self) -> f32;
    /// The value as f32 for kernels that only propagate NaNs: exact for every number, but a
    /// NaN's payload may differ by target (on GPUs one hardware conversion, no NaN select).
    fn widen(self) -> f32;
    /// `v` rounded to nearest, ties to even; the same bits on every target.
    fn from_f32(v: f32) -> Self;
    /// `[from_f32(a), from_f32(b)]`, the same bits; one packed conversion where the target has
    /// it (sm_80+ `cvt.rn.{f16,bf16}x2.f32`: single conversions are quarter-rate there and bound
    /// the 16-bit streaming kernels).
    fn from_f32_pair(a: f32, b: f32) -> [Self; 2];
    /// `[a₀·b₀, a₁·b₁]` as operations of the type: the f32 product rounded once, which for f16
    /// and bf16 is the correctly rounded product (f32 holds more than twice their bits). One
    /// packed instruction on nvptx, where a NaN result's payload is the hardware's.
    fn mul_pair(a: [Self; 2], b: [Self; 2]) -> [Self; 2];
    /// `[a₀ + b₀, a₁ + b₁]` as [`Element::mul_pair`] rounds.
    fn add_pair(a: [Self; 2], b: [Self; 2]) -> [Self; 2];
    /// `[a₀ − b₀, a₁ − b₁]` as [`Element::mul_pair`] rounds.
    fn sub_pair(a: [Self; 2], b: [Self; 2]) -> [Self; 2];
    /// Storage bits, widened; used by tests and poison patterns.
    fn to_bits32(self) -> u32;
    /// The value whose storage bits are the low bits of `b` (the inverse of `to_bits32`).
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
    #[inline(always)]
    fn from_f32_pair(a: f32, b: f32) -> [Self; 2] {
        [a, b]
    }
    #[inline(always)]
    fn mul_pair(a: [Self; 2], b: [Self; 2]) -> [Self; 2] {
        [a[0] * b[0], a[1] * b[1]]
    }
    #[inline(always)]
    fn add_pair(a: [Self; 2], b: [Self; 2]) -> [Self; 2] {
        [a[0] + b[0], a[1] + b[1]]
    }
    #[inline(always)]
    fn sub_pair(a: [Self; 2], b: [Self; 2]) -> [Self; 2] {
        [a[0] - b[0], a[1] - b[1]]
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
    #[inline(always)]
    fn from_f32_pair(a: f32, b: f32) -> [Self; 2] {
        #[cfg(target_arch = "nvptx64")]
        {
            let d = nvptx::f32x2_to_f16x2(a, b);
            return [F16(d as u16), F16((d >> 16) as u16)];
        }
        #[cfg(not(target_arch = "nvptx64"))]
        [F16(f32_to_f16_bits(a)), F16(f32_to_f16_bits(b))]
    }
    // The pair operations are written out in each impl, not generated: the WGSL translator
    // reads an impl's method bodies from source.
    #[inline(always)]
    fn mul_pair(a: [Self; 2], b: [Self; 2]) -> [Self; 2] {
        #[cfg(target_arch = "nvptx64")]
        return unpack_f16(nvptx::mul_f16x2(
            pack_pair(a[0].0, a[1].0),
            pack_pair(b[0].0, b[1].0),
        ));
        #[cfg(not(target_arch = "nvptx64"))]
        Self::from_f32_pair(a[0].to_f32() * b[0].to_f32(), a[1].to_f32() * b[1].to_f32())
    }
    #[inline(always)]
    fn add_pair(a: [Self; 2], b: [Self; 2]) -> [Self; 2] {
        #[cfg(target_arch = "nvptx64")]
        return unpack_f16(nvptx::add_f16x2(
            pack_pair(a[0].0, a[1].0),
            pack_pair(b[0].0, b[1].0),
        ));
        #[cfg(not(target_arch = "nvptx64"))]
        Self::from_f32_pair(a[0].to_f32() + b[0].to_f32(), a[1].to_f32() + b[1].to_f32())
    }
    #[inline(always)]
    fn sub_pair(a: [Self; 2], b: [Self; 2]) -> [Self; 2] {
        #[cfg(target_arch = "nvptx64")]
        return unpack_f16(nvptx::sub_f16x2(
            pack_pair(a[0].0, a[1].0),
            pack_pair(b[0].0, b[1].0),
        ));
        #[cfg(not(target_arch = "nvptx64"))]
        Self::from_f32_pair(a[0].to_f32() - b[0].to_f32(), a[1].to_f32() - b[1].to_f32())
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
    #[inline(always)]
    fn from_f32_pair(a: f32, b: f32) -> [Self; 2] {
        #[cfg(target_arch = "nvptx64")]
        {
            let d = nvptx::f32x2_to_bf16x2(a, b);
            return [Bf16(d as u16), Bf16((d >> 16) as u16)];
        }
        #[cfg(not(target_arch = "nvptx64"))]
        [Bf16(f32_to_bf16_bits(a)), Bf16(f32_to_bf16_bits(b))]
    }
    #[inline(always)]
    fn mul_pair(a: [Self; 2], b: [Self; 2]) -> [Self; 2] {
        #[cfg(target_arch = "nvptx64")]
        return unpack_bf16(nvptx::mul_bf16x2(
            pack_pair(a[0].0, a[1].0),
            pack_pair(b[0].0, b[1].0),
        ));
        #[cfg(not(target_arch = "nvptx64"))]
        Self::from_f32_pair(a[0].to_f32() * b[0].to_f32(), a[1].to_f32() * b[1].to_f32())
    }
    #[inline(always)]
    fn add_pair(a: [Self; 2], b: [Self; 2]) -> [Self; 2] {
        #[cfg(target_arch = "nvptx64")]
        return unpack_bf16(nvptx::add_bf16x2(
            pack_pair(a[0].0, a[1].0),
            pack_pair(b[0].0, b[1].0),
        ));
        #[cfg(not(target_arch = "nvptx64"))]
        Self::from_f32_pair(a[0].to_f32() + b[0].to_f32(), a[1].to_f32() + b[1].to_f32())
    }
    #[inline(always)]
    fn sub_pair(a: [Self; 2], b: [Self; 2]) -> [Self; 2] {
        #[cfg(target_arch = "nvptx64")]
        return unpack_bf16(nvptx::sub_bf16x2(
            pack_pair(a[0].0, a[1].0),
            pack_pair(b[0].0, b[1].0),
        ));
        #[cfg(not(target_arch = "nvptx64"))]
        Self::from_f32_pair(a[0].to_f32() - b[0].to_f32(), a[1].to_f32() - b[1].to_f32())
    }
    fn to_bits32(self) -> u32 {
        self.0 as u32
    }
    fn from_bits32(b: u32) -> Self {
        Bf16(b as u16)
    }
}

/// Two 16-bit values in one word, the first in the low half (a packed register's layout).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn pack_pair(lo: u16, hi: u16) -> u32 {
    lo as u32 | (hi as u32) << 16
}

/// The f16 pair of a packed word.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn unpack_f16(d: u32) -> [F16; 2] {
    [F16(d as u16), F16((d >> 16) as u16)]
}

/// The bf16 pair of a packed word.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn unpack_bf16(d: u32) -> [Bf16; 2] {
    [Bf16(d as u16), Bf16((d >> 16) as u16)]
}

/// Whether `T` is stored in 16 bits (f16 or bf16): a test on bits that every compiler folds
/// (kernels branch on it where the WGSL subset has no `T::DTYPE`).
#[inline(always)]
pub fn is_16bit<T: Element>() -> bool {
    T::from_bits32(0x1_0000).to_bits32() == 0
}

/// Whether `T` is bf16: `0x3f80` is 1.0 only there.
#[inline(always)]
pub fn is_bf16<T: Element>() -> bool {
    is_16bit::<T>() && T::from_bits32(0x3f80).widen() == 1.0
}

/// f32 → bf16 bits, round to nearest even; NaN stays a quiet NaN with its sign.
#[inline(always)]
pub fn f32_to_bf16_bits(v: f32) -> u16 {
    #[cfg(target_arch = "nvptx64")]
    return nvptx::f32_to_bf16(v);
    #[cfg(not(target_arch = "nvptx64"))]
    {
        // Both candidates are computed so the choice is a select, not a branch (keeps GPU loops
        // over chunks straight-line, so they unroll).
        let b = v.to_bits();
        let quiet_nan = ((b >> 16) | 0x0040) as u16;
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
    #[cfg(target_arch = "nvptx64")]
    return nvptx::f32_to_f16(v);
    #[cfg(target_arch = "amdgpu")]
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
    #[cfg(target_arch = "nvptx64")]
    return nvptx::f16_to_f32(h);
    #[cfg(target_arch = "amdgpu")]
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

/// sm_80+ conversions with the portable NaN bits. The hardware gives a canonical NaN, so a NaN
/// operand branches (inside the asm, where LLVM cannot turn it into a select that costs every
/// element) to the integer form the other targets use; numbers take the conversion alone.
#[cfg(target_arch = "nvptx64")]
// PTX scopes a label to its enclosing `{ }` block, so inlined copies of these blocks never clash.
#[allow(named_asm_labels)]
mod nvptx {
    use core::arch::asm;

    /// PTX that leaves in `%t` the NaN bits the integer conversions give for the f32 bits in
    /// `$src`: bf16 keeps sign and top payload bits, quiet bit set.
    macro_rules! bf16_nan {
        ($src:literal) => {
            concat!("shr.u32 %t, ", $src, ", 16; or.b32 %t, %t, 64;")
        };
    }

    /// As [`bf16_nan`] for f16: sign | 0x7e00 | the top ten payload bits.
    macro_rules! f16_nan {
        ($src:literal) => {
            concat!(
                "shr.u32 %t, ",
                $src,
                ", 16; and.b32 %t, %t, 32768; or.b32 %t, %t, 32256;",
                "and.b32 %m, ",
                $src,
                ", 8388607; shr.u32 %m, %m, 13; or.b32 %t, %t, %m;"
            )
        };
    }

    /// `fn $name(a, b) -> u32`: `[a, b]` rounded by the packed `$cvt`, packed `a | b << 16`.
    macro_rules! pair {
        ($name:ident, $cvt:literal, $nan:ident) => {
            #[inline(always)]
            pub fn $name(a: f32, b: f32) -> u32 {
                let d: u32;
                // SAFETY: register-only instructions; predicates and label are block-scoped.
                unsafe {
                    asm!(
                        "{{ .reg .pred %nan, %na, %nb; .reg .b16 %lo, %hi, %q; .reg .b32 %t, %m;",
                        concat!($cvt, " {d}, {b}, {a};"),
                        "setp.nan.f32 %nan, {a}, {b};",
                        "@!%nan bra kiln_pair_done;",
                        "setp.nan.f32 %na, {a}, {a};",
                        "setp.nan.f32 %nb, {b}, {b};",
                        "mov.b32 {{%lo, %hi}}, {d};",
                        $nan!("{ab}"),
                        "cvt.u16.u32 %q, %t; selp.b16 %lo, %q, %lo, %na;",
                        $nan!("{bb}"),
                        "cvt.u16.u32 %q, %t; selp.b16 %hi, %q, %hi, %nb;",
                        "mov.b32 {d}, {{%lo, %hi}};",
                        "kiln_pair_done: }}",
                        d = out(reg32) d,
                        a = in(reg32) a,
                        b = in(reg32) b,
                        ab = in(reg32) a.to_bits(),
                        bb = in(reg32) b.to_bits(),
                        options(pure, nomem, nostack),
                    );
                }
                d
            }
        };
    }

    /// `fn $name(v) -> u16`: `v` rounded by `$cvt`.
    macro_rules! single {
        ($name:ident, $cvt:literal, $nan:ident) => {
            #[inline(always)]
            pub fn $name(v: f32) -> u16 {
                let r: u16;
                // SAFETY: register-only instructions; predicate and label are block-scoped.
                unsafe {
                    asm!(
                        "{{ .reg .pred %nan; .reg .b32 %t, %m;",
                        concat!($cvt, " {r}, {v};"),
                        "setp.nan.f32 %nan, {v}, {v};",
                        "@!%nan bra kiln_one_done;",
                        $nan!("{vb}"),
                        "cvt.u16.u32 {r}, %t;",
                        "kiln_one_done: }}",
                        r = out(reg16) r,
                        v = in(reg32) v,
                        vb = in(reg32) v.to_bits(),
                        options(pure, nomem, nostack),
                    );
                }
                r
            }
        };
    }

    /// `fn $name(a, b) -> u32`: the packed operation `$op` of two packed pairs.
    macro_rules! packed {
        ($name:ident, $op:literal) => {
            #[inline(always)]
            pub fn $name(a: u32, b: u32) -> u32 {
                let d: u32;
                // SAFETY: one register-only instruction.
                unsafe {
                    asm!(
                        concat!($op, " {d}, {a}, {b};"),
                        d = out(reg32) d,
                        a = in(reg32) a,
                        b = in(reg32) b,
                        options(pure, nomem, nostack),
                    );
                }
                d
            }
        };
    }

    packed!(mul_f16x2, "mul.rn.f16x2");
    packed!(add_f16x2, "add.rn.f16x2");
    packed!(sub_f16x2, "sub.rn.f16x2");

    /// `fma.rn.bf16x2 d, a, b, c` (sm_80; the bf16 `mul`/`add`/`sub` forms need sm_90).
    #[inline(always)]
    fn fma_bf16x2(a: u32, b: u32, c: u32) -> u32 {
        let d: u32;
        // SAFETY: one register-only instruction.
        unsafe {
            asm!(
                "fma.rn.bf16x2 {d}, {a}, {b}, {c};",
                d = out(reg32) d,
                a = in(reg32) a,
                b = in(reg32) b,
                c = in(reg32) c,
                options(pure, nomem, nostack),
            );
        }
        d
    }

    /// `a·b + (−0)`: the product rounded once (−0 keeps a zero product's sign).
    #[inline(always)]
    pub fn mul_bf16x2(a: u32, b: u32) -> u32 {
        fma_bf16x2(a, b, 0x8000_8000)
    }

    /// `a·1 + b`: the sum rounded once.
    #[inline(always)]
    pub fn add_bf16x2(a: u32, b: u32) -> u32 {
        fma_bf16x2(a, 0x3f80_3f80, b)
    }

    /// `b·(−1) + a`: the difference rounded once.
    #[inline(always)]
    pub fn sub_bf16x2(a: u32, b: u32) -> u32 {
        fma_bf16x2(b, 0xbf80_bf80, a)
    }

    pair!(f32x2_to_bf16x2, "cvt.rn.bf16x2.f32", bf16_nan);
    pair!(f32x2_to_f16x2, "cvt.rn.f16x2.f32", f16_nan);
    single!(f32_to_bf16, "cvt.rn.bf16.f32", bf16_nan);
    single!(f32_to_f16, "cvt.rn.f16.f32", f16_nan);

    /// f16 bits → f32; a NaN keeps its payload (`sign | 0x7f800000 | man << 13`).
    #[inline(always)]
    pub fn f16_to_f32(h: u16) -> f32 {
        let f: f32;
        // SAFETY: register-only instructions; the predicate and the label are scoped to the block.
        unsafe {
            asm!(
                "{{ .reg .pred %nan; .reg .b32 %t, %m;",
                "cvt.f32.f16 {f}, {h};",
                "setp.nan.f32 %nan, {f}, {f};",
                "@!%nan bra kiln_f16_widen_done;",
                "cvt.u32.u16 %t, {h};",
                "and.b32 %m, %t, 1023; shl.b32 %m, %m, 13;",
                "and.b32 %t, %t, 32768; shl.b32 %t, %t, 16;",
                "or.b32 %t, %t, %m; or.b32 %t, %t, 2139095040;",
                "mov.b32 {f}, %t;",
                "kiln_f16_widen_done: }}",
                f = out(reg32) f,
                h = in(reg16) h,
                options(pure, nomem, nostack),
            );
        }
        f
    }
}
