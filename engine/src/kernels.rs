//! The engine's expansion of the kernel list: per kernel, its params plumbing; per kernel ×
//! dtype, the host instantiations (cpu, sim at every wave) and the reference chain.

use crate::cpu::CpuViews;
use crate::sim::SimViews;
use crate::DeviceError;
use kiln_math::{
    Block, DType, KernelDef, KernelId, Launch, ParamError, ParamValue, Params, ShapeError, View,
};

/// A host launch: raw buffers, bound params and geometry.
pub(crate) struct HostLaunch<'a> {
    /// The kernel's name, for errors.
    pub kernel: &'static str,
    /// Buffer names in launch order, for the sim's race reports.
    pub buffer_names: &'a [&'static str],
    pub params: &'a [u32],
    pub bufs: &'a [HostBuf],
    pub grid: [u32; 3],
    pub block: u32,
    pub wave: u32,
    /// Total launch-sized shared memory in bytes (collective scratch included).
    pub shared: usize,
    pub sim: Option<&'a crate::SimConfig>,
}

/// One buffer of a host launch: element 0 and the length in elements.
#[derive(Clone, Copy)]
pub(crate) struct HostBuf {
    pub ptr: *mut u8,
    pub len: usize,
}

// SAFETY: device pointers handed to one launch, shared by its blocks as on a GPU.
unsafe impl Send for HostBuf {}
unsafe impl Sync for HostBuf {}

/// Binds shape params into the words and validates; returns the launch geometry.
pub(crate) type BindFn = fn(&mut [u32], &[&[usize]]) -> Result<Launch, ShapeError>;

pub(crate) type HostEntry = fn(&HostLaunch) -> Result<(), DeviceError>;

/// Host bytes of one buffer for the reference chain (8-byte aligned).
pub(crate) struct HostData {
    pub words: Vec<u64>,
    pub len: usize,
}

pub(crate) type ReferenceEntry = fn(&[u32], &mut [HostData]);

/// Where the host launchers get their views from.
pub(crate) trait ViewSource {
    fn view<V: View>(&self, k: usize) -> V;
}

/// Borrowing a reference-chain slice of the right mutability from host data.
pub(crate) trait HostSlice {
    type Out<'a>;
    fn slice(d: &mut HostData) -> Self::Out<'_>;
}

fn elems<E>(d: &HostData) -> usize {
    assert!(d.words.len() * 8 >= d.len * std::mem::size_of::<E>());
    d.len
}

impl<E: kiln_math::Scalar> HostSlice for kiln_math::Src<E> {
    type Out<'a> = &'a [E];
    fn slice(d: &mut HostData) -> &[E] {
        // SAFETY: 8-byte aligned storage of at least len elements of plain data.
        unsafe { std::slice::from_raw_parts(d.words.as_ptr() as *const E, elems::<E>(d)) }
    }
}
impl<E: kiln_math::Scalar> HostSlice for kiln_math::Dst<E> {
    type Out<'a> = &'a mut [E];
    fn slice(d: &mut HostData) -> &mut [E] {
        let n = elems::<E>(d);
        // SAFETY: as above.
        unsafe { std::slice::from_raw_parts_mut(d.words.as_mut_ptr() as *mut E, n) }
    }
}
impl<E: kiln_math::Scalar> HostSlice for kiln_math::Rw<E> {
    type Out<'a> = &'a mut [E];
    fn slice(d: &mut HostData) -> &mut [E] {
        let n = elems::<E>(d);
        // SAFETY: as above.
        unsafe { std::slice::from_raw_parts_mut(d.words.as_mut_ptr() as *mut E, n) }
    }
}

/// Per kernel: params plumbing and instances.
pub(crate) struct KernelEntry {
    pub id: KernelId,
    /// Binds shape params into the words and validates; returns the launch geometry.
    pub bind: BindFn,
    pub shared_bytes: fn(&[u32], u32, u32) -> usize,
    pub default_params: fn() -> Vec<u32>,
    pub set_param: fn(&mut [u32], &str, &str) -> Result<(), ParamError>,
    pub get_param: fn(&[u32], &str) -> Option<ParamValue>,
    /// The parity cases its reference module declares.
    pub cases: fn(DType) -> Vec<crate::parity::Case>,
    /// The shapes its reference module says to benchmark at.
    pub bench_cases: fn(DType) -> Vec<crate::parity::Case>,
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
    ($l:expr, $body:ident, $p:expr, [$($w:literal),*]) => {
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
                    sim_waves!(l, go, p, [1, 2, 4, 8, 16, 32, 64])
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
                cases: crate::reference::$name::cases,
                bench_cases: crate::reference::$name::bench_cases,
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
