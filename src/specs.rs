//! What the engine knows about each registered kernel beyond its manifest: the shapes it is tested
//! and timed at, its inputs, its CPU reference and tolerance, its cost and its baseline.
//!
//! Every kernel follows one argument layout: its f32 input views, then its output view, then its
//! scalars. A test checks that layout against every embedded manifest.

use std::fmt;
use std::str::FromStr;

use zinc_runtime::ScalarValue;

use crate::reference;

/// The operation a kernel family computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    RmsNorm,
    Softmax,
    Add,
    SiluMul,
    GeluMul,
    ToF16,
    Gemm,
}

/// The element type of a kernel's input or output buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elem {
    F32,
    F16,
}

impl Elem {
    pub fn size(self) -> usize {
        match self {
            Elem::F32 => 4,
            Elem::F16 => 2,
        }
    }
}

/// The floor a kernel is measured against.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Cost {
    Flops(f64),
    /// The minimal DRAM traffic: every input read once, every output written once.
    Bytes(f64),
}

/// What a kernel's time is compared with in the same run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Baseline {
    /// cuBLAS fp16 GEMM (f32 accumulation) at the same shape.
    CublasF16,
    /// A device-to-device copy moving the kernel's minimal traffic.
    Copy,
}

pub struct Spec {
    /// The kernel's name; its variants (`name@...`) share the spec.
    pub kernel: &'static str,
    pub op: Op,
    /// The element type of every input view (inputs are drawn as f32 and rounded to it).
    pub input: Elem,
    pub out: Elem,
}

pub const SPECS: &[Spec] = &[
    spec("rmsnorm_f32", Op::RmsNorm, Elem::F32, Elem::F32),
    spec("rmsnorm_f16", Op::RmsNorm, Elem::F32, Elem::F16),
    spec("softmax_rows", Op::Softmax, Elem::F32, Elem::F32),
    spec("add_f32", Op::Add, Elem::F32, Elem::F32),
    spec("silu_mul_f32", Op::SiluMul, Elem::F32, Elem::F32),
    spec("gelu_mul_f32", Op::GeluMul, Elem::F32, Elem::F32),
    spec("f32_to_f16", Op::ToF16, Elem::F32, Elem::F16),
    spec("gemm_simt", Op::Gemm, Elem::F32, Elem::F32),
    // f16 x f16 -> f32 on the tensor cores; its 16-byte copies need K % 8 == 0.
    spec("gemm_f16", Op::Gemm, Elem::F16, Elem::F32),
];

const fn spec(kernel: &'static str, op: Op, input: Elem, out: Elem) -> Spec {
    Spec {
        kernel,
        op,
        input,
        out,
    }
}

/// The spec of a registered kernel or variant.
pub fn spec_for(name: &str) -> Option<&'static Spec> {
    let base = name.split('@').next().unwrap_or(name);
    SPECS.iter().find(|s| s.kernel == base)
}

pub const RMS_EPS: f32 = 1e-5;

/// The GEMM shapes of ../shared/ANCHORS.md as T x N x K (N x K is the weight, m x k there).
const ANCHOR_GEMMS: &[&[usize]] = &[
    &[512, 4096, 14336],
    &[512, 14336, 4096],
    &[512, 4096, 4096],
    &[2048, 4096, 14336],
    &[2048, 14336, 4096],
    &[2048, 4096, 4096],
];

impl Spec {
    /// The names of the shape's dimensions.
    pub fn dims(&self) -> &'static [&'static str] {
        match self.op {
            Op::RmsNorm | Op::Softmax => &["rows", "cols"],
            Op::Add | Op::SiluMul | Op::GeluMul | Op::ToF16 => &["n"],
            Op::Gemm => &["T", "N", "K"],
        }
    }

    /// Shapes `zinc selftest` checks: degenerate, ragged and real ones.
    pub fn selftest_shapes(&self) -> &'static [&'static [usize]] {
        match self.op {
            Op::RmsNorm => &[&[1, 1], &[37, 1000], &[512, 4096], &[3, 14336]],
            Op::Softmax => &[&[3, 1], &[1001, 77], &[512, 2048], &[16, 32000]],
            Op::Add | Op::SiluMul | Op::GeluMul | Op::ToF16 => {
                &[&[1], &[1000], &[1_000_003], &[1 << 24]]
            }
            // K a multiple of 8, ragged in every dimension otherwise.
            Op::Gemm if self.input == Elem::F16 => &[
                &[1, 1, 8],
                &[17, 33, 40],
                &[67, 131, 1000],
                &[513, 257, 304],
                &[128, 4096, 4096],
                &[64, 1024, 14336],
            ],
            Op::Gemm => &[
                &[1, 1, 1],
                &[17, 33, 5],
                &[67, 131, 1001],
                &[513, 257, 300],
                &[128, 4096, 4096],
                &[64, 1024, 14336],
            ],
        }
    }

    /// Shapes `zinc bench-kernels` times: prefill-sized activations and the anchor GEMMs.
    pub fn bench_shapes(&self) -> &'static [&'static [usize]] {
        match self.op {
            Op::RmsNorm => &[&[512, 4096], &[2048, 4096]],
            // Attention scores: 32 heads x T queries, T keys.
            Op::Softmax => &[&[32 * 512, 512], &[32 * 2048, 2048]],
            // Residual at T = 512, feed-forward activations at T = 2048.
            Op::Add | Op::SiluMul | Op::GeluMul | Op::ToF16 => &[&[512 * 4096], &[2048 * 14336]],
            Op::Gemm => ANCHOR_GEMMS,
        }
    }

    /// Whether the kernel handles a shape: f16 GEMMs copy K in 16-byte chunks, so they need K
    /// to be a multiple of 8.
    pub fn accepts(&self, s: &Shape) -> bool {
        match (self.op, self.input) {
            (Op::Gemm, Elem::F16) => s.0[2].is_multiple_of(8),
            _ => true,
        }
    }

    /// The input buffers, in argument order: (length, magnitude of the random values).
    pub fn inputs(&self, s: &Shape) -> Vec<(usize, f32)> {
        let d = &s.0;
        match self.op {
            Op::RmsNorm => vec![(d[0] * d[1], 2.0), (d[1], 1.5)],
            Op::Softmax => vec![(d[0] * d[1], 8.0)],
            Op::Add => vec![(d[0], 1.0), (d[0], 1.0)],
            // Activations see both tails of the sigmoid.
            Op::SiluMul | Op::GeluMul => vec![(d[0], 4.0), (d[0], 1.0)],
            // Values across many f16 exponents.
            Op::ToF16 => vec![(d[0], 100.0)],
            Op::Gemm => vec![(d[0] * d[2], 1.0), (d[1] * d[2], 1.0)],
        }
    }

    pub fn output_len(&self, s: &Shape) -> usize {
        let d = &s.0;
        match self.op {
            Op::RmsNorm | Op::Softmax => d[0] * d[1],
            Op::Add | Op::SiluMul | Op::GeluMul | Op::ToF16 => d[0],
            Op::Gemm => d[0] * d[1],
        }
    }

    /// The scalar arguments after the output: the shape (as u32), and eps for the norms.
    pub fn scalars(&self, s: &Shape) -> Vec<ScalarValue> {
        let mut scalars: Vec<ScalarValue> =
            s.0.iter().map(|&d| ScalarValue::U32(d as u32)).collect();
        if self.op == Op::RmsNorm {
            scalars.push(ScalarValue::F32(RMS_EPS));
        }
        scalars
    }

    /// The exact result for `inputs` (as made by [`Spec::inputs`]).
    pub fn reference(&self, s: &Shape, inputs: &[Vec<f32>]) -> Vec<f64> {
        let d = &s.0;
        match self.op {
            Op::RmsNorm => reference::rmsnorm(&inputs[0], &inputs[1], f64::from(RMS_EPS)),
            Op::Softmax => reference::softmax_rows(&inputs[0], d[1]),
            Op::Add => reference::zip_map(&inputs[0], &inputs[1], |a, b| a + b),
            Op::SiluMul => {
                reference::zip_map(&inputs[0], &inputs[1], |a, b| reference::silu(a) * b)
            }
            Op::GeluMul => {
                reference::zip_map(&inputs[0], &inputs[1], |a, b| reference::gelu_tanh(a) * b)
            }
            Op::ToF16 => inputs[0].iter().map(|&v| f64::from(v)).collect(),
            Op::Gemm => reference::gemm_xwt(&inputs[0], &inputs[1], d[1], d[2]),
        }
    }

    /// The largest acceptable error, relative to the largest reference magnitude.
    pub fn tolerance(&self) -> f64 {
        match (self.out, self.op) {
            // Rounding to f16 alone costs up to 2^-11 of the value.
            (Elem::F16, _) => 1e-3,
            // One correctly rounded f32 operation.
            (Elem::F32, Op::Add) => 1e-6,
            // Tensor cores add each k-step's products with truncation, not one rounding.
            (Elem::F32, Op::Gemm) if self.input == Elem::F16 => 1e-4,
            // f32 reductions, fast exp, and K-long f32 sums.
            (Elem::F32, _) => 1e-5,
        }
    }

    pub fn cost(&self, s: &Shape) -> Cost {
        let d = &s.0;
        let out = match self.out {
            Elem::F32 => 4.0,
            Elem::F16 => 2.0,
        };
        if self.op == Op::Gemm {
            return Cost::Flops(2.0 * d[0] as f64 * d[1] as f64 * d[2] as f64);
        }
        let read: usize = self
            .inputs(s)
            .iter()
            .map(|&(len, _)| self.input.size() * len)
            .sum();
        Cost::Bytes(read as f64 + out * self.output_len(s) as f64)
    }

    pub fn baseline(&self) -> Baseline {
        match self.op {
            Op::Gemm => Baseline::CublasF16,
            _ => Baseline::Copy,
        }
    }

    /// "T=512 N=4096 K=4096".
    pub fn describe(&self, s: &Shape) -> String {
        self.dims()
            .iter()
            .zip(&s.0)
            .map(|(name, v)| format!("{name}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// `requested` shapes of this kernel's rank that it accepts, or `defaults` (those it
    /// accepts) when none were requested.
    pub fn shapes(&self, requested: &[Shape], defaults: &[&[usize]]) -> Vec<Shape> {
        if requested.is_empty() {
            defaults
                .iter()
                .map(|d| Shape(d.to_vec()))
                .filter(|s| self.accepts(s))
                .collect()
        } else {
            requested
                .iter()
                .filter(|s| s.0.len() == self.dims().len() && self.accepts(s))
                .cloned()
                .collect()
        }
    }
}

/// A kernel's problem size, written `512x4096x4096`; each dimension fits a u32 and is positive.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Shape(pub Vec<usize>);

impl FromStr for Shape {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let dims = s
            .split('x')
            .map(|d| {
                d.trim()
                    .parse::<u32>()
                    .ok()
                    .filter(|&v| v > 0)
                    .map(|v| v as usize)
                    .ok_or_else(|| {
                        format!("`{s}` is not a shape like 512x4096 (positive u32 dimensions)")
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Shape(dims))
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dims: Vec<String> = self.0.iter().map(usize::to_string).collect();
        f.write_str(&dims.join("x"))
    }
}

#[cfg(test)]
mod tests {
    use zinc_runtime::{plan_launch, ArgDesc, DType, DeviceLimits, Grid};

    use super::*;
    use crate::registry::{parse_manifest, EmbeddedArch};

    /// An H200's limits.
    const LIMITS: DeviceLimits = DeviceLimits {
        max_threads_per_block: 1024,
        max_block_dims: [1024, 1024, 64],
        max_grid_dims: [i32::MAX as u32, 65535, 65535],
        max_shared_per_block_optin: 227 * 1024,
    };

    fn arg_descs(spec: &Spec, shape: &Shape) -> Vec<ArgDesc> {
        let mut args: Vec<ArgDesc> = spec
            .inputs(shape)
            .iter()
            .map(|&(len, _)| ArgDesc::Buffer {
                elem: match spec.input {
                    Elem::F32 => DType::F32,
                    Elem::F16 => DType::F16,
                },
                len,
                mutable: false,
            })
            .collect();
        args.push(ArgDesc::Buffer {
            elem: match spec.out {
                Elem::F32 => DType::F32,
                Elem::F16 => DType::F16,
            },
            len: spec.output_len(shape),
            mutable: true,
        });
        args.extend(spec.scalars(shape).into_iter().map(ArgDesc::Scalar));
        args
    }

    fn embedded() -> &'static [EmbeddedArch] {
        crate::registry::embedded()
    }

    #[test]
    fn every_kernel_has_a_spec_whose_arguments_its_manifest_accepts() {
        for arch in embedded() {
            for entry in arch.modules.iter().flat_map(|m| m.kernels) {
                let spec = spec_for(entry.name).unwrap_or_else(|| {
                    panic!("kernel `{}` has no spec in src/specs.rs", entry.name)
                });
                let sig = parse_manifest(entry).unwrap();
                let shapes = spec.selftest_shapes().iter().chain(spec.bench_shapes());
                for dims in shapes {
                    let shape = Shape(dims.to_vec());
                    assert_eq!(shape.0.len(), spec.dims().len(), "{}", entry.name);
                    let plan = plan_launch(&sig, &arg_descs(spec, &shape), Grid::Auto, &LIMITS);
                    assert!(
                        plan.is_ok(),
                        "{} at {shape} on {}: {plan:?}",
                        entry.name,
                        arch.arch
                    );
                }
            }
        }
    }

    #[test]
    fn every_spec_names_a_kernel() {
        let names: Vec<&str> = embedded()[0]
            .modules
            .iter()
            .flat_map(|m| m.kernels.iter().map(|k| k.name))
            .collect();
        for spec in SPECS {
            assert!(
                names.contains(&spec.kernel),
                "no kernel `{}` is embedded",
                spec.kernel
            );
        }
    }

    #[test]
    fn gemm_grid_covers_ragged_edges() {
        let arch = &embedded()[0];
        let entry = arch
            .modules
            .iter()
            .flat_map(|m| m.kernels)
            .find(|k| k.name == "gemm_simt")
            .unwrap();
        let spec = spec_for("gemm_simt").unwrap();
        let shape: Shape = "513x257x300".parse().unwrap();
        let sig = parse_manifest(entry).unwrap();
        let plan = plan_launch(&sig, &arg_descs(spec, &shape), Grid::Auto, &LIMITS).unwrap();
        // 64 x 64 tiles: 5 column blocks over N = 257, 9 row blocks over T = 513.
        assert_eq!(plan.grid, [5, 9, 1]);
        assert_eq!(plan.block, [16, 16, 1]);
    }

    #[test]
    fn shapes_parse_and_filter_by_rank() {
        let s: Shape = "512x4096x4096".parse().unwrap();
        assert_eq!(s.0, [512, 4096, 4096]);
        assert_eq!(s.to_string(), "512x4096x4096");
        assert!("512x0".parse::<Shape>().is_err());
        assert!("5000000000".parse::<Shape>().is_err());
        assert!("axb".parse::<Shape>().is_err());
        let gemm = spec_for("gemm_simt@BM=128,BN=64").unwrap();
        assert_eq!(gemm.describe(&s), "T=512 N=4096 K=4096");
        let requested = vec![s.clone(), "37x1000".parse().unwrap()];
        assert_eq!(gemm.shapes(&requested, &[]), vec![s]);
        assert_eq!(gemm.shapes(&[], ANCHOR_GEMMS).len(), 6);
    }

    #[test]
    fn costs() {
        let gemm = spec_for("gemm_simt").unwrap();
        assert_eq!(gemm.cost(&Shape(vec![2, 3, 4])), Cost::Flops(48.0));
        let norm = spec_for("rmsnorm_f16").unwrap();
        // x and w read as f32, y written as f16.
        assert_eq!(
            norm.cost(&Shape(vec![2, 8])),
            Cost::Bytes((64 + 32 + 32) as f64)
        );
        assert_eq!(norm.baseline(), Baseline::Copy);
    }

    #[test]
    fn f16_gemm_takes_k_in_whole_16_byte_chunks() {
        let gemm = spec_for("gemm_f16@BM=64,WM=32").unwrap();
        assert_eq!((gemm.input, gemm.out), (Elem::F16, Elem::F32));
        assert!(gemm.accepts(&Shape(vec![7, 9, 16])));
        assert!(!gemm.accepts(&Shape(vec![7, 9, 12])));
        let ragged: Shape = "7x9x12".parse().unwrap();
        assert_eq!(gemm.shapes(&[ragged], &[]), vec![]);
        assert!(gemm.selftest_shapes().iter().all(|d| d[2] % 8 == 0));
    }

    #[test]
    fn references_have_one_value_per_output() {
        for spec in SPECS {
            let shape = Shape(spec.selftest_shapes()[1].to_vec());
            let inputs: Vec<Vec<f32>> = spec
                .inputs(&shape)
                .iter()
                .map(|&(len, scale)| vec![scale * 0.5; len])
                .collect();
            let want = spec.reference(&shape, &inputs);
            assert_eq!(want.len(), spec.output_len(&shape), "{}", spec.kernel);
            assert!(want.iter().all(|v| v.is_finite()), "{}", spec.kernel);
        }
    }
}
