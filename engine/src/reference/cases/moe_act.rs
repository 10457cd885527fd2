//! The parity cases of `moe_act` and the shapes `kiln bench` times it at.

use super::linear_tolerance;
use crate::case::{Case, Check, Fill};
use kiln_math::DType;

fn case(slots: usize, cols: usize, act: u32, gate: Fill) -> Case {
    let names = ["swiglu", "geglu", "relu2"];
    Case {
        label: format!("{slots}x{cols} {}", names[act as usize]),
        shapes: vec![
            vec![slots, cols],
            vec![slots, cols],
            vec![slots],
            vec![slots, cols],
        ],
        params: vec![("act", act.to_string())],
        fill: vec![
            gate,
            Fill::normal(0.0, 1.0),
            Fill::Uniform { lo: 0.0, hi: 1.0 },
            Fill::Output,
        ],
        // The output is f32 whatever T is (the inputs widen exactly): the f32 budget.
        checks: vec![
            Check::None,
            Check::None,
            Check::None,
            linear_tolerance(DType::F32),
        ],
        on_sim: true,
    }
}

/// Every activation over a whole tile and a ragged one; saturated gates both ways.
pub fn cases(_dtype: DType) -> Vec<Case> {
    let mut v = Vec::new();
    for act in 0..3 {
        v.push(case(3, 1536, act, Fill::normal(0.0, 2.0)));
        v.push(case(
            5,
            77,
            act,
            Fill::Uniform {
                lo: -30.0,
                hi: 30.0,
            },
        ));
    }
    v
}

/// A prefill block of 512 tokens at Qwen3-30B-A3B's K 8 and Dff 768.
pub fn bench_cases(dtype: DType) -> Vec<Case> {
    let mut v = cases(dtype);
    let mut c = case(512 * 8, 768, 0, Fill::normal(0.0, 2.0));
    c.label = "qwen3-30b-a3b prefill 512 swiglu".into();
    c.checks = vec![Check::None; 4];
    v.push(c);
    v
}
