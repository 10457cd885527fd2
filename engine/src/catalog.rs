//! The engine's catalog of the kernel list: per kernel, its params plumbing; per kernel × dtype,
//! the host instantiations (cpu, sim at every wave) and the reference chain; with the harness,
//! its parity and bench cases.

use crate::cpu::CpuViews;
use crate::host::{HostData, HostEntry, HostLaunch, HostSlice, ViewSource};
use crate::sim::SimViews;
use crate::DeviceError;
use kiln_math::{
    Block, DType, KernelDef, KernelId, Launch, ParamError, ParamValue, Params, ShapeError,
};

/// Binds shape params into the words and validates; returns the launch geometry.
pub(crate) type BindFn = fn(&mut [u32], &[&[usize]]) -> Result<Launch, ShapeError>;

pub(crate) type ReferenceEntry = fn(&[u32], &mut [HostData]);

/// Per kernel: params plumbing and instances.
pub(crate) struct KernelEntry {
    pub id: KernelId,
    /// Binds shape params into the words and validates; returns the launch geometry.
    pub bind: BindFn,
    pub shared_bytes: fn(&[u32], u32, u32) -> usize,
    pub default_params: fn() -> Vec<u32>,
    pub set_param: fn(&mut [u32], &str, &str) -> Result<(), ParamError>,
    pub get_param: fn(&[u32], &str) -> Option<ParamValue>,
    /// The parity cases its cases module declares.
    #[cfg(feature = "harness")]
    pub cases: fn(DType) -> Vec<crate::case::Case>,
    /// The shapes its cases module says to benchmark at.
    #[cfg(feature = "harness")]
    pub bench_cases: fn(DType) -> Vec<crate::case::Case>,
    pub instances: &'static [Instance],
}

/// Per kernel × dtype.
pub(crate) struct Instance {
    pub dtype: DType,
    pub cpu: HostEntry,
    pub sim: HostEntry,
    pub reference: ReferenceEntry,
}

impl std::fmt::Debug for Instance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Instance({})", self.dtype.name())
    }
}

pub(crate) fn entry(id: KernelId) -> &'static KernelEntry {
    KERNELS
        .iter()
        .find(|k| k.id == id)
        .expect("every listed kernel has an entry")
}

/// Builds the views in list order and calls the body.
macro_rules! call_body {
    ($f:path, $b:expr, $s:expr, $p:expr, ( $($bn:ident : $acc:ident < $e:ident >),* )) => {{
        let mut k = 0usize;
        $( let $bn = $s.view::<kiln_math::$acc<$e>>(k); k += 1; )*
        let _ = k;
        $f($b, $p, $($bn),*)
    }};
}

/// Borrows host slices in list order and calls the reference chain.
macro_rules! call_reference {
    ($f:path, $p:expr, $d:expr, ( $($bn:ident : $acc:ident < $e:ident >),* )) => {{
        let mut it = $d.iter_mut();
        $( let $bn = <kiln_math::$acc<$e> as HostSlice>::slice(it.next().expect("buffer count")); )*
        $f($p, $($bn),*)
    }};
}

/// The sim instantiates the body at every wave it emulates.
macro_rules! sim_waves {
    ($l:expr, $body:ident, $p:expr ; $($w:literal),*) => {
        match $l.wave {
            $( $w => crate::sim::run::<$w, _>($l, |b, s| $body(b, s, $p)), )*
            w => Err(DeviceError::Launch { kernel: $l.kernel, detail: format!("the sim has no wave {w}") }),
        }
    };
}

macro_rules! engine_kernels {
    ($( $name:ident : $id:ident [$($dt:ident),*] $bufs:tt ; )*) => { paste::paste! {
        $(
        #[allow(non_snake_case)]
        mod [<k_ $name>] {
            use super::*;
            type Def = kiln_math::kernels::$name::$id;
            type P = <Def as KernelDef>::Params;

            fn bind(w: &mut [u32], shapes: &[&[usize]]) -> Result<Launch, ShapeError> {
                let mut p = P::from_words(w);
                Def::bind(&mut p, shapes)?;
                w.copy_from_slice(p.words());
                Ok(Def::launch(&p))
            }
            fn shared(w: &[u32], block: u32, wave: u32) -> usize {
                Def::shared_bytes(&P::from_words(w), block, wave)
            }
            fn defaults() -> Vec<u32> {
                P::default().words().to_vec()
            }
            fn set(w: &mut [u32], name: &str, value: &str) -> Result<(), ParamError> {
                let mut p = P::from_words(w);
                p.set(name, value)?;
                w.copy_from_slice(p.words());
                Ok(())
            }
            fn get(w: &[u32], name: &str) -> Option<ParamValue> {
                P::from_words(w).get(name)
            }

            $(
            mod [<i_ $dt>] {
                use super::*;
                type T = kiln_math::elem!($dt);

                fn body<B: Block, S: ViewSource>(b: &B, s: &S, p: &P) {
                    call_body!(kiln_math::kernels::$name::$name::<T, B>, b, s, p, $bufs)
                }
                pub(in super::super) fn cpu(l: &HostLaunch) -> Result<(), DeviceError> {
                    let p = P::from_words(l.params);
                    crate::cpu::run(l, |b, s: &CpuViews| body(b, s, &p))
                }
                pub(in super::super) fn sim(l: &HostLaunch) -> Result<(), DeviceError> {
                    let p = P::from_words(l.params);
                    let p = &p;
                    fn go<B: Block>(b: &B, s: &SimViews, p: &P) { body(b, s, p) }
                    kiln_math::for_each_wave!(sim_waves, l, go, p)
                }
                pub(in super::super) fn reference(w: &[u32], d: &mut [HostData]) {
                    let p = P::from_words(w);
                    call_reference!(crate::reference::$name::$name::<T>, &p, d, $bufs)
                }
            }
            )*

            pub(crate) const ENTRY: KernelEntry = KernelEntry {
                id: KernelId::$id,
                bind,
                shared_bytes: shared,
                default_params: defaults,
                set_param: set,
                get_param: get,
                #[cfg(feature = "harness")]
                cases: crate::reference::cases::$name::cases,
                #[cfg(feature = "harness")]
                bench_cases: crate::reference::cases::$name::bench_cases,
                instances: &[$(Instance {
                    dtype: <kiln_math::elem!($dt) as kiln_math::Scalar>::DTYPE,
                    cpu: [<i_ $dt>]::cpu,
                    sim: [<i_ $dt>]::sim,
                    reference: [<i_ $dt>]::reference,
                }),*],
            };
        }
        )*

        /// Every kernel of the list, in list order.
        pub(crate) static KERNELS: &[KernelEntry] = &[$( [<k_ $name>]::ENTRY ),*];
    } };
}

kiln_math::for_each_kernel!(engine_kernels);
