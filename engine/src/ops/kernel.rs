//! One launcher per kernel of the list, generated from it: the kernel's params struct, then its
//! buffers by the list's names and in the list's order (inputs `&Tensor`, outputs
//! `&mut Tensor`). A launcher validates, takes the fallback when the device has no port, and
//! says which path ran. Swapping an input with an output does not compile; swapping two inputs
//! of different shapes is refused by the kernel's shape binding (`PortError::Shape`).

use crate::launch::{launch, Arg, Mode, Ran};
use crate::{Device, PortError, Tensor};
use kiln_math::{KernelDef, KernelId, Params};

/// The argument type of a buffer of the given access.
macro_rules! buffer_arg {
    (Src) => {
        &Tensor
    };
    (Dst) => {
        &mut Tensor
    };
    (Rw) => {
        &mut Tensor
    };
}

/// The launch argument of a buffer of the given access.
macro_rules! launch_arg {
    (Src, $b:ident) => {
        Arg::In($b)
    };
    (Dst, $b:ident) => {
        Arg::Out($b)
    };
    (Rw, $b:ident) => {
        Arg::Out($b)
    };
}

macro_rules! kernel_launchers {
    ($( $name:ident : $id:ident [$($dt:ident),*] ( $($b:ident : $acc:ident < $e:ident >),* ); )*) => {
        $(
        #[doc = concat!("Launches `", stringify!($name), "` (instances: ", $(stringify!($dt), " ",)* ") with `params` and its buffers ", $("`", stringify!($b), ": ", stringify!($acc), "<", stringify!($e), ">` ",)* "in list order; shape fields of `params` are bound from the buffers.")]
        #[allow(clippy::too_many_arguments)] // one argument per buffer of the list
        pub fn $name(
            dev: &Device,
            params: &<kiln_math::kernels::$name::$id as KernelDef>::Params,
            $($b: buffer_arg!($acc)),*
        ) -> Result<Ran, PortError> {
            let mut args = [$(launch_arg!($acc, $b)),*];
            launch(dev, KernelId::$id, params.words(), &mut args, Mode::Auto)
        }
        )*
    };
}

kiln_math::for_each_kernel!(kernel_launchers);
