//! The hand-written WGSL: the `Block` primitives' state, the view accessors' fault path, and
//! the std float helpers that need Rust's semantics (NaN-ignoring max/min, saturating casts).
//! Everything else — collectives, element conversions, libm — is translated Rust.

use std::collections::BTreeSet;

pub(crate) const FAULT: &str = "
// Records the first out-of-bounds access (buffer, index, block); the engine reports it as a
// kernel fault. The access itself is skipped.
fn kiln_fault_at(buf: u32, index: u32) {
    if atomicAdd(&kiln_fault[0], 1u) == 0u {
        atomicStore(&kiln_fault[1], kiln_block.x);
        atomicStore(&kiln_fault[2], kiln_block.y);
        atomicStore(&kiln_fault[3], kiln_block.z);
        atomicStore(&kiln_fault[4], buf);
        atomicStore(&kiln_fault[5], index);
    }
}
";

const PIECES: &[(&str, &str)] = &[
    ("fault", FAULT),
    ("zero_f32", "fn kiln_zero_f32() -> f32 { return 0.0f; }\n"),
    ("zero_u32", "fn kiln_zero_u32() -> u32 { return 0u; }\n"),
    ("zero_i32", "fn kiln_zero_i32() -> i32 { return 0i; }\n"),
    (
        "float_bits",
        "
fn kiln_is_nan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
// Rust's f32::max/min: a NaN operand loses.
fn kiln_fmax(a: f32, b: f32) -> f32 {
    if kiln_is_nan(a) { return b; }
    if kiln_is_nan(b) { return a; }
    return select(a, b, b > a);
}
fn kiln_fmin(a: f32, b: f32) -> f32 {
    if kiln_is_nan(a) { return b; }
    if kiln_is_nan(b) { return a; }
    return select(a, b, b < a);
}
",
    ),
    (
        "f16_storage",
        "
// f16 storage holds values; kernels hold f16 bits. Both directions are exact (every f16 is an
// f32), so no conversion rounding of the device is involved.
fn kiln_f16_value_bits(v: f32) -> u32 {
    let b = bitcast<u32>(v);
    let sign = (b >> 16u) & 0x8000u;
    let e = (b >> 23u) & 0xffu;
    if e == 0xffu {
        return sign | 0x7c00u | select(0u, 0x0200u | ((b & 0x7fffffu) >> 13u), (b & 0x7fffffu) != 0u);
    }
    if e < 113u {
        // zero or subnormal: the value is an integer multiple of 2^-24
        return sign | u32(abs(v) * 16777216.0f);
    }
    return sign | ((e - 112u) << 10u) | ((b & 0x7fffffu) >> 13u);
}
fn kiln_f16_bits_value(h: u32) -> f32 {
    let sign = (h & 0x8000u) << 16u;
    let e = (h >> 10u) & 0x1fu;
    let m = h & 0x3ffu;
    if e == 0u {
        return bitcast<f32>(sign | bitcast<u32>(f32(m) * 5.9604645e-8f));
    }
    if e == 0x1fu {
        return bitcast<f32>(sign | 0x7f800000u | (m << 13u));
    }
    return bitcast<f32>(sign | ((e + 112u) << 23u) | (m << 13u));
}
",
    ),
    (
        "cast",
        "
// Rust's `as` from f32: saturating, NaN to 0.
fn kiln_f32_to_u32(x: f32) -> u32 {
    if !(x > 0.0f) { return 0u; }
    if x >= 4294967296.0f { return 0xffffffffu; }
    return u32(x);
}
fn kiln_f32_to_i32(x: f32) -> i32 {
    if (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u { return 0i; }
    if x >= 2147483648.0f { return 2147483647i; }
    if x < -2147483648.0f { return i32(-2147483647 - 1); }
    return i32(x);
}
",
    ),
    (
        "shuffle_wg",
        "
// Without subgroups a wave is emulated in workgroup memory: every thread publishes its value
// and reads its partner's. Callers are in block-uniform control flow (the Block rules).
var<workgroup> kiln_xchg: array<u32, 1024>;
fn kiln_shuffle_xor(v: u32, mask: u32) -> u32 {
    workgroupBarrier();
    kiln_xchg[kiln_thread] = v;
    workgroupBarrier();
    return kiln_xchg[kiln_thread ^ mask];
}
",
    ),
    (
        "scratch",
        "
// The collectives' scratch: scratch_words(block, wave) = 2 * ceil(block / wave) <= 512 for a
// block of at most 1024 threads and a wave of at least 4.
var<workgroup> kiln_scratch: array<u32, 512>;
const KILN_SCRATCH_WORDS: u32 = 512u;
",
    ),
    (
        "shared",
        "
// Kernel shared memory, sized per pipeline; `offset` is in bytes after the scratch.
var<workgroup> kiln_shared: array<u32, KILN_SHARED_WORDS>;
fn kiln_shared_view(offset: u32, len: u32) -> vec2<u32> { return vec2<u32>(offset / 4u, len); }
",
    ),
];

/// The prelude pieces in `used`, in a fixed order.
pub(crate) fn text(used: &BTreeSet<&'static str>) -> String {
    let mut s = String::new();
    for (name, body) in PIECES {
        if used.contains(name) {
            s.push_str(body);
        }
    }
    s
}
