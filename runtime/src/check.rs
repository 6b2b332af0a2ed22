//! Launch checks that need no GPU: arguments against a [`KernelSignature`], grid and block
//! against device limits. [`plan_launch`] turns a signature, argument descriptions and a grid
//! choice into the launch dimensions, or a [`LaunchError`] naming the kernel and argument.

use thiserror::Error;

use crate::dtype::{DType, ElemType, ScalarValue};
use crate::grid_expr::GridExprError;
use crate::signature::{KernelSignature, ParamKind};

/// Dynamic shared memory above this needs the kernel's opt-in attribute.
pub const DEFAULT_SHARED_LIMIT: u32 = 48 * 1024;

/// The device limits a launch is checked against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceLimits {
    pub max_threads_per_block: u32,
    pub max_block_dims: [u32; 3],
    pub max_grid_dims: [u32; 3],
    /// Shared memory per block including the opt-in carve-out.
    pub max_shared_per_block_optin: u32,
}

/// What the check needs to know about one launch argument.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ArgDesc {
    Buffer {
        elem: DType,
        len: usize,
        mutable: bool,
    },
    Scalar(ScalarValue),
}

/// How the grid is chosen: from the manifest's expressions, or given explicitly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grid {
    Auto,
    Dims([u32; 3]),
}

/// Checked launch dimensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchDims {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub dynamic_shared_bytes: u32,
}

impl LaunchDims {
    /// Whether the kernel must opt in to more than the default dynamic shared memory.
    pub fn needs_shared_opt_in(&self) -> bool {
        self.dynamic_shared_bytes > DEFAULT_SHARED_LIMIT
    }
}

#[derive(Debug, Error, PartialEq)]
pub enum LaunchError {
    #[error("kernel `{kernel}` takes {expected} arguments, got {got}")]
    ArgCount {
        kernel: String,
        expected: usize,
        got: usize,
    },
    #[error(
        "kernel `{kernel}`: argument `{param}` must be a {expected} buffer, got a {got} scalar"
    )]
    ExpectedBuffer {
        kernel: String,
        param: String,
        expected: ElemType,
        got: DType,
    },
    #[error(
        "kernel `{kernel}`: argument `{param}` must be a {expected} scalar, got a {got} buffer"
    )]
    ExpectedScalar {
        kernel: String,
        param: String,
        expected: DType,
        got: DType,
    },
    #[error(
        "kernel `{kernel}`: argument `{param}` must be a {expected} buffer, got a {got} buffer"
    )]
    ElemMismatch {
        kernel: String,
        param: String,
        expected: ElemType,
        got: DType,
    },
    #[error("kernel `{kernel}`: argument `{param}` has {len} elements, not a multiple of the {lanes} lanes of {elem}")]
    RaggedVector {
        kernel: String,
        param: String,
        elem: ElemType,
        len: usize,
        lanes: u8,
    },
    #[error(
        "kernel `{kernel}`: argument `{param}` is written by the kernel; pass the buffer mutably"
    )]
    NotMutable { kernel: String, param: String },
    #[error("kernel `{kernel}`: argument `{param}` must be a {expected} scalar, got {got}")]
    ScalarMismatch {
        kernel: String,
        param: String,
        expected: DType,
        got: DType,
    },
    #[error("kernel `{kernel}`: grid.{axis}: {source}")]
    GridExpr {
        kernel: String,
        axis: char,
        source: GridExprError,
    },
    #[error("kernel `{kernel}`: grid.{axis} = {value} is outside 1..={max}")]
    GridDim {
        kernel: String,
        axis: char,
        value: i128,
        max: u32,
    },
    #[error("kernel `{kernel}`: grid.{axis} = {value} is not a multiple of its clusters' {cluster} blocks")]
    ClusterGrid {
        kernel: String,
        axis: char,
        value: u32,
        cluster: u32,
    },
    #[error("kernel `{kernel}`: block.{axis} = {value} is outside 1..={max}")]
    BlockDim {
        kernel: String,
        axis: char,
        value: u32,
        max: u32,
    },
    #[error("kernel `{kernel}`: {threads} threads per block exceeds the device's {max}")]
    BlockThreads {
        kernel: String,
        threads: u64,
        max: u32,
    },
    #[error(
        "kernel `{kernel}`: {bytes} bytes of shared memory exceeds the device's {max} per block"
    )]
    SharedMemory {
        kernel: String,
        bytes: u64,
        max: u32,
    },
    #[error("kernel `{kernel}`: tensor map over `{param}`: {reason}")]
    TensorMap {
        kernel: String,
        param: String,
        reason: String,
    },
}

const AXES: [char; 3] = ['x', 'y', 'z'];

/// Checks `args` against `sig` and the launch shape against `limits`.
pub fn plan_launch(
    sig: &KernelSignature,
    args: &[ArgDesc],
    grid: Grid,
    limits: &DeviceLimits,
) -> Result<LaunchDims, LaunchError> {
    check_args(sig, args)?;
    let kernel = || sig.name.clone();

    let threads: u64 = sig.block.iter().map(|&d| u64::from(d)).product();
    for (axis, (&value, &max)) in AXES
        .iter()
        .zip(sig.block.iter().zip(&limits.max_block_dims))
    {
        if value == 0 || value > max {
            return Err(LaunchError::BlockDim {
                kernel: kernel(),
                axis: *axis,
                value,
                max,
            });
        }
    }
    if threads > u64::from(limits.max_threads_per_block) {
        return Err(LaunchError::BlockThreads {
            kernel: kernel(),
            threads,
            max: limits.max_threads_per_block,
        });
    }

    let shared = u64::from(sig.static_shared_bytes) + u64::from(sig.dynamic_shared_bytes);
    if shared > u64::from(limits.max_shared_per_block_optin) {
        return Err(LaunchError::SharedMemory {
            kernel: kernel(),
            bytes: shared,
            max: limits.max_shared_per_block_optin,
        });
    }

    let grid = match grid {
        Grid::Dims(dims) => dims.map(i128::from),
        Grid::Auto => evaluate_grid(sig, args)?,
    };
    let mut dims = [0u32; 3];
    for (i, &value) in grid.iter().enumerate() {
        let max = limits.max_grid_dims[i];
        dims[i] = u32::try_from(value)
            .ok()
            .filter(|&v| v >= 1 && v <= max)
            .ok_or_else(|| LaunchError::GridDim {
                kernel: kernel(),
                axis: AXES[i],
                value,
                max,
            })?;
        if dims[i] % sig.cluster[i] != 0 {
            return Err(LaunchError::ClusterGrid {
                kernel: kernel(),
                axis: AXES[i],
                value: dims[i],
                cluster: sig.cluster[i],
            });
        }
    }

    Ok(LaunchDims {
        grid: dims,
        block: sig.block,
        dynamic_shared_bytes: sig.dynamic_shared_bytes,
    })
}

fn check_args(sig: &KernelSignature, args: &[ArgDesc]) -> Result<(), LaunchError> {
    if args.len() != sig.params.len() {
        return Err(LaunchError::ArgCount {
            kernel: sig.name.clone(),
            expected: sig.params.len(),
            got: args.len(),
        });
    }
    for (param, arg) in sig.params.iter().zip(args) {
        let kernel = sig.name.clone();
        let name = param.name.clone();
        match (&param.kind, *arg) {
            (ParamKind::View { elem, .. }, ArgDesc::Scalar(v)) => {
                return Err(LaunchError::ExpectedBuffer {
                    kernel,
                    param: name,
                    expected: *elem,
                    got: v.dtype(),
                })
            }
            (
                &ParamKind::View { elem, mutable },
                ArgDesc::Buffer {
                    elem: got,
                    len,
                    mutable: is_mut,
                },
            ) => {
                if elem.scalar != got {
                    return Err(LaunchError::ElemMismatch {
                        kernel,
                        param: name,
                        expected: elem,
                        got,
                    });
                }
                if len % usize::from(elem.lanes) != 0 {
                    return Err(LaunchError::RaggedVector {
                        kernel,
                        param: name,
                        elem,
                        len,
                        lanes: elem.lanes,
                    });
                }
                // A read-only view accepts any buffer; a written one needs a mutable borrow.
                if mutable && !is_mut {
                    return Err(LaunchError::NotMutable {
                        kernel,
                        param: name,
                    });
                }
            }
            (&ParamKind::Scalar(expected), ArgDesc::Buffer { elem, .. }) => {
                return Err(LaunchError::ExpectedScalar {
                    kernel,
                    param: name,
                    expected,
                    got: elem,
                })
            }
            (&ParamKind::Scalar(expected), ArgDesc::Scalar(v)) => {
                if v.dtype() != expected {
                    return Err(LaunchError::ScalarMismatch {
                        kernel,
                        param: name,
                        expected,
                        got: v.dtype(),
                    });
                }
            }
        }
    }
    Ok(())
}

/// The value of `name` in a manifest expression: an integer scalar argument, else a
/// specialization constant.
fn lookup_name(sig: &KernelSignature, args: &[ArgDesc], name: &str) -> Option<i128> {
    let from_args = sig
        .params
        .iter()
        .zip(args)
        .find(|(p, _)| p.name == name)
        .and_then(|(_, arg)| match arg {
            ArgDesc::Scalar(v) => v.as_integer(),
            ArgDesc::Buffer { .. } => None,
        });
    from_args.or_else(|| sig.specialization_int(name))
}

/// The (offset, rows, columns) of each of the kernel's tensor maps for these arguments (checked
/// by [`plan_launch`]), in elements: each within its buffer, starting at a multiple of 16 bytes
/// into it and with rows a multiple of 16 bytes, as TMA needs.
pub fn tensor_map_extents(
    sig: &KernelSignature,
    args: &[ArgDesc],
) -> Result<Vec<[u64; 3]>, LaunchError> {
    let lookup = |name: &str| lookup_name(sig, args, name);
    let mut out = Vec::with_capacity(sig.tensor_maps.len());
    for m in &sig.tensor_maps {
        let param = &sig.params[m.param].name;
        let bad = |reason: String| LaunchError::TensorMap {
            kernel: sig.name.clone(),
            param: param.clone(),
            reason,
        };
        let mut extent = [0u64; 3];
        for (i, (slot, expr)) in extent
            .iter_mut()
            .zip([&m.offset, &m.rows, &m.cols])
            .enumerate()
        {
            let v = expr.eval(&lookup).map_err(|e| bad(e.to_string()))?;
            let least = u64::from(i > 0);
            *slot = u64::try_from(v)
                .ok()
                .filter(|&v| (least..1 << 32).contains(&v))
                .ok_or_else(|| bad(format!("`{}` is {v}, not {least} to 2^32 - 1", expr.text())))?;
        }
        let [offset, rows, cols] = extent;
        let size = m.elem.size_bytes() as u64;
        let row_bytes = cols * size;
        if !row_bytes.is_multiple_of(16) {
            return Err(bad(format!(
                "rows of {cols} elements are {row_bytes} bytes, not a multiple of 16"
            )));
        }
        if !(offset * size).is_multiple_of(16) {
            return Err(bad(format!(
                "the tensor starts {} bytes into the buffer, not a multiple of 16",
                offset * size
            )));
        }
        let len = match args.get(m.param) {
            Some(ArgDesc::Buffer { len, .. }) => *len as u64,
            _ => 0,
        };
        if offset + rows * cols > len {
            return Err(bad(format!(
                "{rows} x {cols} elements from element {offset} do not fit the buffer's {len}"
            )));
        }
        out.push(extent);
    }
    Ok(out)
}

/// Evaluates the manifest's grid expressions with names bound to the integer scalar arguments,
/// falling back to the specialization constants.
fn evaluate_grid(sig: &KernelSignature, args: &[ArgDesc]) -> Result<[i128; 3], LaunchError> {
    let lookup = |name: &str| lookup_name(sig, args, name);
    let mut out = [0i128; 3];
    for (i, expr) in sig.grid.iter().enumerate() {
        out[i] = expr.eval(&lookup).map_err(|source| LaunchError::GridExpr {
            kernel: sig.name.clone(),
            axis: AXES[i],
            source,
        })?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::tests::VECTOR_ADD;

    const H200: DeviceLimits = DeviceLimits {
        max_threads_per_block: 1024,
        max_block_dims: [1024, 1024, 64],
        max_grid_dims: [i32::MAX as u32, 65535, 65535],
        max_shared_per_block_optin: 232_448,
    };

    fn sig() -> KernelSignature {
        KernelSignature::from_json(VECTOR_ADD).unwrap()
    }

    fn buf(elem: DType, len: usize, mutable: bool) -> ArgDesc {
        ArgDesc::Buffer { elem, len, mutable }
    }

    fn good_args(n: u32) -> Vec<ArgDesc> {
        vec![
            buf(DType::F32, n as usize, false),
            // A mutable buffer may be passed where a read-only view is expected.
            buf(DType::F32, n as usize, true),
            buf(DType::F32, n as usize, true),
            ArgDesc::Scalar(n.into()),
        ]
    }

    fn plan(args: &[ArgDesc]) -> Result<LaunchDims, LaunchError> {
        plan_launch(&sig(), args, Grid::Auto, &H200)
    }

    #[test]
    fn auto_grid_from_scalar_arguments() {
        let dims = plan(&good_args(1_000_003)).unwrap();
        assert_eq!(dims.grid, [3907, 1, 1]);
        assert_eq!(dims.block, [256, 1, 1]);
        assert!(!dims.needs_shared_opt_in());
    }

    #[test]
    fn explicit_grid_is_checked_against_limits() {
        let dims = plan_launch(&sig(), &good_args(10), Grid::Dims([7, 2, 1]), &H200).unwrap();
        assert_eq!(dims.grid, [7, 2, 1]);
        let err = plan_launch(&sig(), &good_args(10), Grid::Dims([1, 70_000, 1]), &H200);
        assert!(matches!(
            err,
            Err(LaunchError::GridDim {
                axis: 'y',
                value: 70_000,
                ..
            })
        ));
    }

    #[test]
    fn a_clustered_kernels_grid_must_be_whole_clusters() {
        let mut clustered = sig();
        clustered.cluster = [2, 1, 1];
        let dims = plan_launch(&clustered, &good_args(10), Grid::Dims([6, 3, 1]), &H200);
        assert_eq!(dims.unwrap().grid, [6, 3, 1]);
        let err = plan_launch(&clustered, &good_args(10), Grid::Dims([7, 2, 1]), &H200);
        assert!(matches!(
            err,
            Err(LaunchError::ClusterGrid {
                axis: 'x',
                value: 7,
                cluster: 2,
                ..
            })
        ));
    }

    #[test]
    fn empty_grid_is_an_error() {
        assert!(matches!(
            plan(&good_args(0)),
            Err(LaunchError::GridDim {
                axis: 'x',
                value: 0,
                ..
            })
        ));
    }

    #[test]
    fn argument_errors_name_kernel_and_parameter() {
        let mut args = good_args(8);
        args.pop();
        let err = plan(&args).unwrap_err();
        assert_eq!(
            err.to_string(),
            "kernel `vector_add` takes 4 arguments, got 3"
        );

        let mut args = good_args(8);
        args[2] = buf(DType::F32, 8, false);
        let err = plan(&args).unwrap_err();
        assert_eq!(
            err.to_string(),
            "kernel `vector_add`: argument `c` is written by the kernel; pass the buffer mutably"
        );

        let mut args = good_args(8);
        args[1] = buf(DType::F16, 8, false);
        assert!(
            matches!(plan(&args), Err(LaunchError::ElemMismatch { param, .. }) if param == "b")
        );

        let mut args = good_args(8);
        args[0] = ArgDesc::Scalar(1.0f32.into());
        assert!(
            matches!(plan(&args), Err(LaunchError::ExpectedBuffer { param, .. }) if param == "a")
        );

        let mut args = good_args(8);
        args[3] = buf(DType::U32, 1, false);
        assert!(
            matches!(plan(&args), Err(LaunchError::ExpectedScalar { param, .. }) if param == "n")
        );

        let mut args = good_args(8);
        args[3] = ArgDesc::Scalar(8i32.into());
        let err = plan(&args).unwrap_err();
        assert_eq!(
            err.to_string(),
            "kernel `vector_add`: argument `n` must be a u32 scalar, got i32"
        );
    }

    #[test]
    fn vector_views_need_whole_vectors() {
        let mut s = sig();
        s.params[0].kind = ParamKind::View {
            elem: ElemType::parse("f32x4").unwrap(),
            mutable: false,
        };
        let mut args = good_args(8);
        assert!(plan_launch(&s, &args, Grid::Auto, &H200).is_ok());
        args[0] = buf(DType::F32, 6, false);
        assert!(matches!(
            plan_launch(&s, &args, Grid::Auto, &H200),
            Err(LaunchError::RaggedVector {
                len: 6,
                lanes: 4,
                ..
            })
        ));
    }

    #[test]
    fn block_and_shared_memory_limits() {
        let mut s = sig();
        s.block = [32, 33, 1];
        assert!(matches!(
            plan_launch(&s, &good_args(8), Grid::Auto, &H200),
            Err(LaunchError::BlockThreads { threads: 1056, .. })
        ));
        s.block = [1, 1, 65];
        assert!(matches!(
            plan_launch(&s, &good_args(8), Grid::Auto, &H200),
            Err(LaunchError::BlockDim { axis: 'z', .. })
        ));
        s.block = [0, 1, 1];
        assert!(matches!(
            plan_launch(&s, &good_args(8), Grid::Auto, &H200),
            Err(LaunchError::BlockDim { axis: 'x', .. })
        ));

        let mut s = sig();
        s.dynamic_shared_bytes = 200 * 1024;
        let dims = plan_launch(&s, &good_args(8), Grid::Auto, &H200).unwrap();
        assert!(dims.needs_shared_opt_in());
        s.static_shared_bytes = 40 * 1024;
        assert!(matches!(
            plan_launch(&s, &good_args(8), Grid::Auto, &H200),
            Err(LaunchError::SharedMemory { bytes, .. }) if bytes == 240 * 1024
        ));
    }

    #[test]
    fn grid_expressions_can_fail_at_launch() {
        let text = VECTOR_ADD.replace("((n + 255) / 256)", "cdiv(n, n - 8)");
        let s = KernelSignature::from_json(&text).unwrap();
        assert!(matches!(
            plan_launch(&s, &good_args(8), Grid::Auto, &H200),
            Err(LaunchError::GridExpr {
                axis: 'x',
                source: GridExprError::DivideByZero { .. },
                ..
            })
        ));
    }

    #[test]
    fn tensor_maps_are_sized_from_the_arguments_and_checked() {
        let maps = r#"[{"param": "a", "elem": "f32", "rows": "n / 8", "cols": "BLOCK / 32",
                        "box": [4, 8], "swizzle": 32}]"#;
        let mut v: serde_json::Value = serde_json::from_str(VECTOR_ADD).unwrap();
        v["tensor_maps"] = serde_json::from_str(maps).unwrap();
        let s = KernelSignature::from_json(&v.to_string()).unwrap();
        assert_eq!(s.tensor_maps[0].param, 0);
        assert_eq!(s.tensor_maps[0].box_dims, [4, 8]);
        assert_eq!(s.tensor_maps[0].swizzle, 32);
        // n = 64: 8 rows of 8 f32 (32 bytes) in the 64 elements of `a`, from its start.
        assert_eq!(tensor_map_extents(&s, &good_args(64)), Ok(vec![[0, 8, 8]]));
        let reason = |n: u32, len: usize| {
            let mut args = good_args(n);
            args[0] = buf(DType::F32, len, false);
            match tensor_map_extents(&s, &args) {
                Err(LaunchError::TensorMap { param, reason, .. }) if param == "a" => reason,
                other => panic!("{other:?}"),
            }
        };
        assert!(reason(64, 63).contains("do not fit"));
        assert!(reason(7, 64).contains("not 1 to"));
        let odd = v.to_string().replace("BLOCK / 32", "3");
        let s = KernelSignature::from_json(&odd).unwrap();
        assert!(matches!(
            tensor_map_extents(&s, &good_args(64)),
            Err(LaunchError::TensorMap { reason, .. }) if reason.contains("multiple of 16")
        ));
        // An offset of n / 16 f32: 16 bytes when n = 64, 12 (misaligned) when n = 48; the
        // tensor must still fit after it.
        let mut shifted = v.clone();
        shifted["tensor_maps"][0]["offset"] = "n / 16".into();
        let s = KernelSignature::from_json(&shifted.to_string()).unwrap();
        let extents = |n: u32, len: usize| {
            let mut args = good_args(n);
            args[0] = buf(DType::F32, len, false);
            tensor_map_extents(&s, &args)
        };
        assert_eq!(extents(64, 68), Ok(vec![[4, 8, 8]]));
        assert!(matches!(
            extents(64, 67),
            Err(LaunchError::TensorMap { reason, .. }) if reason.contains("from element 4 do not fit")
        ));
        assert!(matches!(
            extents(48, 64),
            Err(LaunchError::TensorMap { reason, .. }) if reason.contains("12 bytes into the buffer")
        ));
        let mut bad_swizzle = v.clone();
        bad_swizzle["tensor_maps"][0]["swizzle"] = 48.into();
        assert!(matches!(
            KernelSignature::from_json(&bad_swizzle.to_string()),
            Err(crate::SignatureError::TensorMap { reason, .. }) if reason.contains("swizzle 48")
        ));
        let unbound = v.to_string().replace("n / 8", "m");
        assert!(matches!(
            KernelSignature::from_json(&unbound),
            Err(crate::SignatureError::TensorMap { .. })
        ));
        let scalar = v.to_string().replace(r#""param":"a""#, r#""param":"n""#);
        assert!(matches!(
            KernelSignature::from_json(&scalar),
            Err(crate::SignatureError::TensorMap { .. })
        ));
    }

    /// A map over the kernel's output (what `tma_store` writes through) is parsed and sized as
    /// an input's; the launch encodes it from the output's buffer.
    #[test]
    fn tensor_maps_over_outputs_are_sized_like_inputs() {
        let maps = r#"[{"param": "c", "elem": "f32", "rows": "n / 32", "cols": "32",
                        "box": [16, 32], "swizzle": 128}]"#;
        let mut v: serde_json::Value = serde_json::from_str(VECTOR_ADD).unwrap();
        v["tensor_maps"] = serde_json::from_str(maps).unwrap();
        let s = KernelSignature::from_json(&v.to_string()).unwrap();
        assert_eq!(s.tensor_maps[0].param, 2);
        assert!(matches!(
            s.params[2].kind,
            ParamKind::View { mutable: true, .. }
        ));
        assert_eq!(tensor_map_extents(&s, &good_args(64)), Ok(vec![[0, 2, 32]]));
        let mut args = good_args(64);
        args[2] = buf(DType::F32, 63, true);
        assert!(matches!(
            tensor_map_extents(&s, &args),
            Err(LaunchError::TensorMap { param, reason, .. })
                if param == "c" && reason.contains("do not fit")
        ));
    }

    #[test]
    fn grid_beyond_u32_is_reported() {
        let text = VECTOR_ADD.replace("((n + 255) / 256)", "n * n");
        let s = KernelSignature::from_json(&text).unwrap();
        let err = plan_launch(&s, &good_args(1 << 20), Grid::Auto, &H200).unwrap_err();
        assert!(matches!(err, LaunchError::GridDim { value, .. } if value == 1 << 40));
    }
}
