//! Loading PTX modules (JIT-compiled by the driver for the device's arch) and looking up kernels.

use std::ffi::{c_void, CString};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, PoisonError};

use cudarc::driver::sys::{self, CUjit_option, CUresult};
use cudarc::driver::{CudaContext, CudaFunction, CudaModule};
use cudarc::nvrtc::Ptx;

use crate::check::DeviceLimits;
use crate::device::{Device, DeviceKind};
use crate::emulated::HostLauncher;
use crate::error::{Result, RuntimeError};
use crate::signature::KernelSignature;

/// Size of the buffer the JIT writes its error log into.
const JIT_LOG_BYTES: usize = 16 * 1024;

/// A kernel ready to launch: its function handle and the signature launches are checked against.
#[derive(Debug)]
pub struct Kernel {
    pub(crate) func: KernelFunc,
    pub(crate) sig: KernelSignature,
    pub(crate) limits: DeviceLimits,
    /// Whether the dynamic-shared-memory opt-in attribute has been set.
    pub(crate) shared_opt_in_done: AtomicBool,
}

/// What a launch runs: a loaded CUDA function, or the emulated device's launcher with the names
/// it knows the kernel by.
#[derive(Debug)]
pub(crate) enum KernelFunc {
    Cuda(CudaFunction),
    Emulated {
        launcher: Arc<dyn HostLauncher>,
        module: String,
    },
}

impl Kernel {
    pub fn signature(&self) -> &KernelSignature {
        &self.sig
    }

    pub fn name(&self) -> &str {
        &self.sig.name
    }
}

impl Device {
    /// Loads PTX text as module `name`, or returns the module already loaded under that name
    /// (the name identifies the PTX; its text is not compared). A JIT failure carries the
    /// driver's error log. `Emulated` on the emulated device, which runs no PTX (see
    /// [`Device::load_kernel`]).
    pub fn load_module(&self, name: &str, ptx: &str) -> Result<Arc<CudaModule>> {
        let DeviceKind::Cuda { ctx, modules } = &self.kind else {
            return Err(RuntimeError::Emulated("loading a PTX module"));
        };
        let mut modules = modules.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(module) = modules.get(name) {
            return Ok(module.clone());
        }
        // cudarc unwraps the CString conversion, so a NUL would panic there.
        if ptx.contains('\0') {
            return Err(RuntimeError::PtxNul(name.to_string()));
        }
        let module =
            ctx.load_module(Ptx::from_src(ptx))
                .map_err(|source| RuntimeError::ModuleLoad {
                    module: name.to_string(),
                    source,
                    log: jit_error_log(ctx, ptx),
                })?;
        modules.insert(name.to_string(), module.clone());
        Ok(module)
    }

    /// Loads `ptx` as module `module` and looks up the kernel `sig` describes. On the emulated
    /// device the PTX is not used: launches go to its launcher by module and kernel name.
    pub fn load_kernel(&self, module: &str, ptx: &str, sig: KernelSignature) -> Result<Kernel> {
        let func = match &self.kind {
            DeviceKind::Cuda { .. } => {
                let loaded = self.load_module(module, ptx)?;
                let func = loaded.load_function(&sig.name).map_err(|source| {
                    RuntimeError::KernelNotFound {
                        module: module.to_string(),
                        kernel: sig.name.clone(),
                        source,
                    }
                })?;
                KernelFunc::Cuda(func)
            }
            DeviceKind::Emulated(launcher) => KernelFunc::Emulated {
                launcher: launcher.clone(),
                module: module.to_string(),
            },
        };
        Ok(Kernel {
            func,
            sig,
            limits: self.props().limits(),
            shared_opt_in_done: AtomicBool::new(false),
        })
    }

    /// Loads kernel `name` from the compiler's output directory: `NAME.ptx` and its manifest
    /// `NAME.json`.
    pub fn load_kernel_from_dir(&self, dir: &Path, name: &str) -> Result<Kernel> {
        let ptx_path = dir.join(format!("{name}.ptx"));
        let ptx = std::fs::read_to_string(&ptx_path).map_err(|source| RuntimeError::Io {
            path: ptx_path.display().to_string(),
            source,
        })?;
        let sig = KernelSignature::from_file(dir.join(format!("{name}.json")))?;
        self.load_kernel(name, &ptx, sig)
    }
}

/// Loads the PTX again with an error-log buffer to learn why the JIT rejected it; cudarc's
/// loader does not ask for the log.
fn jit_error_log(ctx: &CudaContext, ptx: &str) -> String {
    let Ok(src) = CString::new(ptx) else {
        return String::new();
    };
    if ctx.bind_to_thread().is_err() {
        return String::new();
    }
    let mut log = vec![0u8; JIT_LOG_BYTES];
    let mut options = [
        CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
        CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
    ];
    // The driver reads option values as pointer-sized slots; the size is passed by value.
    let mut values: [*mut c_void; 2] = [log.as_mut_ptr().cast(), JIT_LOG_BYTES as *mut c_void];
    let mut module: sys::CUmodule = std::ptr::null_mut();
    // SAFETY: `src` is NUL-terminated, the option arrays have the length passed, and `log`
    // outlives the call.
    let result = unsafe {
        sys::cuModuleLoadDataEx(
            &mut module,
            src.as_ptr().cast(),
            options.len() as u32,
            options.as_mut_ptr(),
            values.as_mut_ptr(),
        )
    };
    if result == CUresult::CUDA_SUCCESS {
        // SAFETY: the module was just loaded and nothing else refers to it.
        unsafe { sys::cuModuleUnload(module) };
        return String::new();
    }
    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
    String::from_utf8_lossy(&log[..end]).trim_end().to_string()
}
