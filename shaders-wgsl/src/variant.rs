//! How a module reaches the device's hardware: subgroups or workgroup memory for wave
//! shuffles, native or packed f16 buffers.

/// How a module reaches the device's hardware.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Variant {
    /// Wave shuffles through subgroup operations (the SUBGROUP feature); otherwise through
    /// workgroup memory, at any `KILN_WAVE`.
    pub subgroups: bool,
    /// f16 buffers as `array<f16>` (`enable f16;`, the SHADER_F16 feature); otherwise packed
    /// in u32 words with atomic stores.
    pub f16_storage: bool,
}

impl Variant {
    pub const ALL: [Variant; 4] = [
        Variant {
            subgroups: true,
            f16_storage: true,
        },
        Variant {
            subgroups: true,
            f16_storage: false,
        },
        Variant {
            subgroups: false,
            f16_storage: true,
        },
        Variant {
            subgroups: false,
            f16_storage: false,
        },
    ];

    /// A short tag used in symbols: `sg`/`wg`, then `h16`/`p16`.
    pub fn tag(self) -> &'static str {
        match (self.subgroups, self.f16_storage) {
            (true, true) => "sg_h16",
            (true, false) => "sg_p16",
            (false, true) => "wg_h16",
            (false, false) => "wg_p16",
        }
    }
}

/// The variant of `dtype` modules a device with these features runs.
pub fn variant_for(dtype: &str, has_fixed_f16: bool, subgroups: bool, f16: bool) -> Variant {
    Variant {
        subgroups,
        f16_storage: f16 && (dtype == "f16" || has_fixed_f16),
    }
}
