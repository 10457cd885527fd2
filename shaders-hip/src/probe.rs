//! A kernel that declares itself wave32-only, outside the real kernel list: building it for a
//! wave64 target must fail at compile time with the gate's message (tests/tests/hip_wave_gate.rs).

use kiln_math::{Block, Dst, Element, KernelDef, Launch, ShapeError, Waves};

pub mod wave32_probe {
    use super::*;

    kiln_math::params! {
        /// Params of the probe.
        pub struct ProbeParams {
            pub n: u32,
        }
    }

    pub struct Wave32Probe;

    impl KernelDef for Wave32Probe {
        type Params = ProbeParams;
        const NAME: &'static str = "wave32_probe";
        const WAVES: Waves = Waves::Only(32);
        fn bind(_: &mut ProbeParams, _: &[&[usize]]) -> Result<(), ShapeError> {
            Ok(())
        }
        fn launch(p: &ProbeParams) -> Launch {
            Launch {
                grid: [p.n, 1, 1],
                block: 32,
            }
        }
    }

    /// Writes each thread's lane: the kind of body that hard-wires a width.
    pub fn wave32_probe<T: Element, B: Block>(b: &B, _: &ProbeParams, out: Dst<T>) {
        let i = (b.block_x() * b.size() + b.thread()) as usize;
        if i < out.len() {
            out.set(i, T::from_f32(b.lane() as f32));
        }
    }
}

hip_entries! { probe;
    wave32_probe: Wave32Probe [f32] (out: Dst<T>);
}
