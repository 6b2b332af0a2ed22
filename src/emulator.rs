//! The emulated device's kernel launcher: the engine's kernels compiled from the sources
//! embedded at build time and run by the zinc interpreter, so that the GPU backend runs, and is
//! tested, on a machine without a GPU (`ZINC_DEVICE=emulated`; see [`zinc_runtime::emulated`]).
//!
//! The interpreter runs every thread of every block and checks bounds (each buffer exactly its
//! `len` elements), divergent barriers and shared-memory races as it goes: slow, so for tiny
//! models only.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use thiserror::Error;
use zinc_dsl::ir::Type;
use zinc_dsl::Compilation;
use zinc_interp::{Arg, Buffer, ErrorKind, Interpreter, Value};
use zinc_runtime::emulated::HostLaunchError;
use zinc_runtime::{Device, HostArg, HostLauncher, LaunchDims, ScalarValue};

use crate::registry::{embedded_module, kernel_source};

#[derive(Debug, Error)]
pub enum EmulatorError {
    #[error("no embedded kernel module `{0}`")]
    NoModule(String),
    #[error("no embedded source `kernels/{0}`")]
    NoSource(String),
    #[error("kernel module `{module}` does not compile to IR:\n{rendered}")]
    Compile { module: String, rendered: String },
    #[error("kernel `{kernel}`: argument {index} is a buffer but the parameter is not a view")]
    NotAView { kernel: String, index: usize },
    #[error("{STEP_LIMIT_VAR}=`{0}` is not a whole number of thread-steps")]
    BadStepLimit(String),
    #[error(
        "kernel `{kernel}` ran past the interpreter's limit of {limit} thread-steps at {at} (an \
         endless loop, or a launch too large to emulate in that many); set {STEP_LIMIT_VAR} to \
         raise it"
    )]
    StepLimit {
        kernel: String,
        limit: u64,
        at: String,
    },
}

/// The environment variable that sets the thread-steps one launch may take (the interpreter's
/// default, 2^28, is about half a minute of interpreting).
const STEP_LIMIT_VAR: &str = "ZINC_EMULATOR_STEP_LIMIT";

/// The step limit [`STEP_LIMIT_VAR`] asks for, if set.
fn step_limit(var: Option<String>) -> Result<Option<u64>, EmulatorError> {
    var.map(|v| {
        v.trim()
            .replace('_', "")
            .parse()
            .map_err(|_| EmulatorError::BadStepLimit(v))
    })
    .transpose()
}

/// Runs launches in the interpreter; modules are compiled on first use and kept.
#[derive(Default)]
pub struct Interpreted {
    modules: Mutex<HashMap<String, Arc<Compilation>>>,
    /// Thread-steps a launch may take; None: [`STEP_LIMIT_VAR`]'s, else the interpreter's default.
    step_limit: Option<u64>,
}

impl std::fmt::Debug for Interpreted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let modules = self.modules.lock().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("Interpreted")
            .field("modules", &modules.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// The emulated device, its kernels run by [`Interpreted`].
pub fn device() -> Device {
    Device::emulated(Arc::new(Interpreted::default()))
}

impl Interpreted {
    /// Module `name` (the registry's module key, `family` or `family@NAME=VALUE,...`) compiled
    /// to IR from the embedded sources with the variant's defines.
    fn module(&self, name: &str) -> Result<Arc<Compilation>, EmulatorError> {
        let mut modules = self.modules.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(c) = modules.get(name) {
            return Ok(c.clone());
        }
        let embedded = embedded_module(name).ok_or_else(|| EmulatorError::NoModule(name.into()))?;
        let file = format!("{}.tile", embedded.family);
        let text = kernel_source(&file).ok_or_else(|| EmulatorError::NoSource(file.clone()))?;
        let defines: Vec<(String, String)> = embedded
            .defines
            .iter()
            .map(|&(n, v)| (n.to_string(), v.to_string()))
            .collect();
        let load = |path: &str| kernel_source(path).map(str::to_string);
        let compiled =
            zinc_dsl::compile_source(&file, text, &defines, &load).map_err(|failure| {
                EmulatorError::Compile {
                    module: name.into(),
                    rendered: failure.render(),
                }
            })?;
        let compiled = Arc::new(compiled);
        modules.insert(name.to_string(), compiled.clone());
        Ok(compiled)
    }
}

impl HostLauncher for Interpreted {
    fn launch(
        &self,
        module: &str,
        kernel: &str,
        dims: &LaunchDims,
        args: &mut [HostArg<'_>],
    ) -> Result<(), HostLaunchError> {
        let compiled = self.module(module)?;
        let limit = match self.step_limit {
            Some(limit) => limit,
            None => step_limit(std::env::var(STEP_LIMIT_VAR).ok())?
                .unwrap_or(Interpreter::DEFAULT_STEP_LIMIT),
        };
        let interpreter = Interpreter::new(&compiled.module)
            .sources(&compiled.sources)
            .step_limit(limit);
        let function = interpreter.kernel(kernel)?;
        // Each buffer is copied in as the type of the view it binds to and, if the kernel may
        // write it, copied back: in place, as through a device pointer.
        let mut interp_args = Vec::with_capacity(args.len());
        for (index, arg) in args.iter().enumerate() {
            let view_elem = || match function
                .params
                .get(index)
                .map(|p| &function.vars[p.0 as usize].ty)
            {
                Some(Type::View { elem, .. }) => Ok((**elem).clone()),
                _ => Err(EmulatorError::NotAView {
                    kernel: kernel.into(),
                    index,
                }),
            };
            interp_args.push(match arg {
                HostArg::Buffer(bytes) => Arg::ReadOnly(Buffer::new(view_elem()?, bytes.to_vec())),
                HostArg::BufferMut(bytes) => Arg::Buffer(Buffer::new(view_elem()?, bytes.to_vec())),
                HostArg::Scalar(v) => Arg::Scalar(value(*v)),
            });
        }
        interpreter
            .run(kernel, dims.grid, dims.block, &mut interp_args)
            .map_err(|source| match source.kind() {
                ErrorKind::StepLimit { .. } => Box::new(EmulatorError::StepLimit {
                    kernel: kernel.into(),
                    limit,
                    at: source
                        .location()
                        .map_or_else(|| "an unknown place".into(), ToString::to_string),
                }) as HostLaunchError,
                _ => source.into(),
            })?;
        for (arg, ran) in args.iter_mut().zip(&interp_args) {
            if let (HostArg::BufferMut(bytes), Arg::Buffer(buffer)) = (arg, ran) {
                bytes.copy_from_slice(&buffer.bytes);
            }
        }
        Ok(())
    }
}

fn value(v: ScalarValue) -> Value {
    match v {
        ScalarValue::I32(x) => Value::I32(x),
        ScalarValue::I64(x) => Value::I64(x),
        ScalarValue::U32(x) => Value::U32(x),
        ScalarValue::U64(x) => Value::U64(x),
        ScalarValue::F16(x) => Value::F16(x),
        ScalarValue::Bf16(x) => Value::Bf16(x),
        ScalarValue::F32(x) => Value::F32(x),
        ScalarValue::F64(x) => Value::F64(x),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{embedded, parse_manifest};

    #[test]
    fn the_step_limit_comes_from_the_environment_variable() {
        assert_eq!(step_limit(None).unwrap(), None);
        assert_eq!(step_limit(Some("1000".into())).unwrap(), Some(1000));
        assert_eq!(
            step_limit(Some(" 4_000_000_000 ".into())).unwrap(),
            Some(4_000_000_000)
        );
        let err = step_limit(Some("lots".into())).unwrap_err();
        assert!(
            err.to_string().contains("ZINC_EMULATOR_STEP_LIMIT=`lots`"),
            "{err}"
        );
    }

    #[test]
    fn a_launch_past_the_step_limit_names_the_kernel_and_the_variable() {
        let launcher = Interpreted {
            step_limit: Some(100),
            ..Interpreted::default()
        };
        let n = 1000u32;
        let zeros = vec![0u8; 4 * n as usize];
        let mut y = zeros.clone();
        let dims = LaunchDims {
            grid: [4, 1, 1],
            block: [256, 1, 1],
            dynamic_shared_bytes: 0,
        };
        let mut args = [
            HostArg::Buffer(&zeros),
            HostArg::Buffer(&zeros),
            HostArg::BufferMut(&mut y),
            HostArg::Scalar(ScalarValue::U32(n)),
        ];
        let err = launcher
            .launch("elementwise", "add_f32", &dims, &mut args)
            .unwrap_err()
            .to_string();
        assert!(err.contains("kernel `add_f32` ran past"), "{err}");
        assert!(err.contains("elementwise.tile:"), "{err}");
        assert!(err.contains("set ZINC_EMULATOR_STEP_LIMIT"), "{err}");
    }

    /// Every embedded module compiles to IR from the embedded sources with its defines, and has
    /// every kernel its manifests name, so the emulated device can run any registry kernel.
    #[test]
    fn every_embedded_module_compiles_from_the_embedded_sources() {
        let launcher = Interpreted::default();
        // Every arch's modules (sm_90a has the wgmma families besides the others), once each.
        let mut seen = std::collections::BTreeSet::new();
        let modules = embedded().iter().flat_map(|a| a.modules.iter());
        for module in modules.filter(|m| seen.insert(m.name)) {
            let compiled = launcher.module(module.name).unwrap();
            let interpreter = Interpreter::new(&compiled.module);
            for entry in module.kernels {
                let sig = parse_manifest(entry).unwrap();
                let function = interpreter.kernel(&sig.name).unwrap();
                assert_eq!(function.params.len(), sig.params.len(), "{}", entry.name);
                assert_eq!(interpreter.block(&sig.name).unwrap(), sig.block);
            }
        }
    }
}
