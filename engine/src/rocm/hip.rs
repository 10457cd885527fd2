//! The HIP runtime through a `libloading` table of the few functions kiln calls, so the engine
//! builds and runs where no ROCm exists and says so. `hipGetDeviceProperties` is avoided (its
//! struct changed in ROCm 6); attributes come from `hipDeviceGetAttribute`.

#![allow(non_snake_case)] // the table keeps the runtime's own function names

use libloading::Library;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::path::PathBuf;
use std::sync::OnceLock;

/// `hipError_t`: 0 is success.
pub type HipError = c_int;
/// `hipModule_t`.
pub type HipModule = *mut c_void;
/// `hipFunction_t`.
pub type HipFunction = *mut c_void;
/// `hipStream_t` (null: the default stream).
pub type HipStream = *mut c_void;
/// `hipEvent_t`.
pub type HipEvent = *mut c_void;
/// `hipDeviceptr_t`.
pub type HipDevicePtr = *mut c_void;

/// `hipSuccess`.
pub const HIP_SUCCESS: HipError = 0;
/// `hipErrorNoDevice`.
pub const HIP_ERROR_NO_DEVICE: HipError = 100;
/// `hipErrorInvalidDevice`.
pub const HIP_ERROR_INVALID_DEVICE: HipError = 101;
/// `hipDeviceAttributeWarpSize`, unchanged from ROCm 5.4 through 7.x.
pub const ATTRIBUTE_WARP_SIZE: c_int = 87;
/// `hipDeviceAttributeMaxThreadsPerBlock`.
pub const ATTRIBUTE_MAX_THREADS_PER_BLOCK: c_int = 56;
/// `hipMemcpyKind`.
pub const MEMCPY_HOST_TO_DEVICE: c_int = 1;
/// `hipMemcpyDeviceToHost`.
pub const MEMCPY_DEVICE_TO_HOST: c_int = 2;
/// `extra` keys of `hipModuleLaunchKernel`: the kernarg bytes are passed as one buffer.
pub const LAUNCH_PARAM_BUFFER_POINTER: *mut c_void = std::ptr::without_provenance_mut(1);
/// The `extra` key of the kernarg buffer's size.
pub const LAUNCH_PARAM_BUFFER_SIZE: *mut c_void = std::ptr::without_provenance_mut(2);
/// The end of `extra`.
pub const LAUNCH_PARAM_END: *mut c_void = std::ptr::without_provenance_mut(3);
/// `hipDeviceProp_tR0600` is 1472 bytes with `gcnArchName` (256 chars) at byte 1160.
pub const PROPS_R0600_BYTES: usize = 4096;
/// Byte offset of `gcnArchName` in `hipDeviceProp_tR0600`.
pub const PROPS_R0600_GCN_ARCH_NAME: usize = 1160;

macro_rules! hip_api {
    ($( $name:ident : fn($($arg:ty),*) -> $ret:ty; )*) => {
        /// The loaded runtime: every function kiln needs, resolved at load.
        #[allow(non_snake_case)]
        pub struct Hip {
            _lib: Library,
            /// The library's path as found.
            pub path: String,
            /// `hipGetDevicePropertiesR0600` (ROCm 6+), used only to read the arch name.
            pub hipGetDevicePropertiesR0600: Option<unsafe extern "C" fn(*mut c_void, c_int) -> HipError>,
            $( #[doc = concat!("`", stringify!($name), "`.")] pub $name: unsafe extern "C" fn($($arg),*) -> $ret, )*
        }

        impl Hip {
            /// # Safety
            /// `lib` is a HIP runtime: its symbols have the C signatures declared here.
            unsafe fn from_lib(lib: Library, path: String) -> Result<Hip, String> {
                $( let $name = unsafe {
                    *lib.get::<unsafe extern "C" fn($($arg),*) -> $ret>(concat!(stringify!($name), "\0").as_bytes())
                        .map_err(|e| format!("{path}: symbol {} missing: {e}", stringify!($name)))?
                }; )*
                let hipGetDevicePropertiesR0600 = unsafe {
                    lib.get::<unsafe extern "C" fn(*mut c_void, c_int) -> HipError>(b"hipGetDevicePropertiesR0600\0")
                        .ok()
                        .map(|s| *s)
                };
                Ok(Hip { _lib: lib, path, hipGetDevicePropertiesR0600, $($name,)* })
            }
        }
    };
}

hip_api! {
    hipInit: fn(c_uint) -> HipError;
    hipRuntimeGetVersion: fn(*mut c_int) -> HipError;
    hipGetDeviceCount: fn(*mut c_int) -> HipError;
    hipSetDevice: fn(c_int) -> HipError;
    hipDeviceGetName: fn(*mut c_char, c_int, c_int) -> HipError;
    hipDeviceGetAttribute: fn(*mut c_int, c_int, c_int) -> HipError;
    hipGetErrorString: fn(HipError) -> *const c_char;
    hipModuleLoadData: fn(*mut HipModule, *const c_void) -> HipError;
    hipModuleGetFunction: fn(*mut HipFunction, HipModule, *const c_char) -> HipError;
    hipModuleLaunchKernel: fn(
        HipFunction, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint,
        HipStream, *mut *mut c_void, *mut *mut c_void
    ) -> HipError;
    hipMalloc: fn(*mut HipDevicePtr, usize) -> HipError;
    hipFree: fn(HipDevicePtr) -> HipError;
    hipMemcpy: fn(*mut c_void, *const c_void, usize, c_int) -> HipError;
    hipDeviceSynchronize: fn() -> HipError;
    hipStreamSynchronize: fn(HipStream) -> HipError;
    hipEventCreate: fn(*mut HipEvent) -> HipError;
    hipEventRecord: fn(HipEvent, HipStream) -> HipError;
    hipEventSynchronize: fn(HipEvent) -> HipError;
    hipEventElapsedTime: fn(*mut f32, HipEvent, HipEvent) -> HipError;
    hipEventDestroy: fn(HipEvent) -> HipError;
}

/// Library file names, newest soname last-resort order as ROCm ships them.
pub const SONAMES: [&str; 4] = [
    "libamdhip64.so",
    "libamdhip64.so.7",
    "libamdhip64.so.6",
    "libamdhip64.so.5",
];

/// Where the runtime is looked for, in order: `$HIP_PATH/lib`, `$ROCM_PATH/lib`, `/opt/rocm/lib`,
/// then the bare sonames (the dynamic loader's own search, `LD_LIBRARY_PATH` included).
pub fn runtime_candidates() -> Vec<String> {
    let mut dirs: Vec<PathBuf> = ["HIP_PATH", "ROCM_PATH"]
        .iter()
        .filter_map(std::env::var_os)
        .filter(|v| !v.is_empty())
        .map(|v| PathBuf::from(v).join("lib"))
        .collect();
    dirs.push(PathBuf::from("/opt/rocm/lib"));
    dirs.iter()
        .flat_map(|d| SONAMES.iter().map(move |n| d.join(n).display().to_string()))
        .chain(SONAMES.iter().map(|n| n.to_string()))
        .collect()
}

impl Hip {
    /// The process's runtime, loaded on first use.
    pub fn get() -> Result<&'static Hip, String> {
        static HIP: OnceLock<Result<Hip, String>> = OnceLock::new();
        HIP.get_or_init(Hip::load).as_ref().map_err(Clone::clone)
    }

    fn load() -> Result<Hip, String> {
        let candidates = runtime_candidates();
        for c in &candidates {
            // SAFETY: loading the HIP runtime runs its initialisers, which is what it is for.
            if let Ok(lib) = unsafe { Library::new(c) } {
                // SAFETY: a library named libamdhip64 is the HIP runtime.
                return unsafe { Hip::from_lib(lib, c.clone()) };
            }
        }
        Err(format!(
            "no HIP runtime (tried {} paths for libamdhip64)",
            candidates.len()
        ))
    }

    /// `Err` with the runtime's name for a failed call.
    pub fn check(&self, what: &str, e: HipError) -> Result<(), String> {
        if e == HIP_SUCCESS {
            return Ok(());
        }
        // SAFETY: hipGetErrorString returns a static C string for any code.
        let msg = unsafe {
            let p = (self.hipGetErrorString)(e);
            if p.is_null() {
                "unknown error".into()
            } else {
                CStr::from_ptr(p).to_string_lossy().into_owned()
            }
        };
        Err(format!("{what} failed: {msg} (hipError {e})"))
    }
}
