//! What `selftest` and `bench-kernels` share: opening the GPU, random inputs, and a kernel's
//! device buffers for one shape, launched in the layout of [`crate::specs`].

use std::cell::OnceCell;
use std::fmt::Display;
use std::sync::Arc;

use crate::gpu::dispatch::device_words;
use anyhow::{anyhow, Result};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use zinc_runtime::half::f16;
use zinc_runtime::{Arg, Device, DeviceBuffer, Grid, Kernel, ScalarValue, Stream};

use crate::reference;
use crate::registry::Registry;
use crate::specs::{spec_for, Elem, Shape, Spec};

/// Whether kernel or variant `name` (`kernel@NAME=VALUE,...`) passes `filter`: it contains the
/// filter, or with a trailing `$` ends with the rest (`gemm_q4k_wg@BT=256$` is that variant
/// alone, `gemm_q4k_wg$` the kernel's default).
pub fn filter_matches(name: &str, filter: &str) -> bool {
    match filter.strip_suffix('$') {
        Some(end) => name.ends_with(end),
        None => name.contains(filter),
    }
}

/// Whether `name` passes one of `filters`; with none, every name does.
pub fn any_filter_matches(name: &str, filters: &[String]) -> bool {
    filters.is_empty() || filters.iter().any(|f| filter_matches(name, f))
}

/// Whether one of `filters` names a variant (`kernel@...`) that `name` passes.
pub fn variant_filter_matches(name: &str, filters: &[String]) -> bool {
    filters
        .iter()
        .any(|f| f.contains('@') && filter_matches(name, f))
}

/// Opens GPU 0, or with `ZINC_DEVICE=emulated` the emulated device, whose kernels the CPU
/// interpreter runs (src/emulator.rs; slow, for tiny models). Errors stay one line ("no CUDA
/// driver ...").
pub fn open_device() -> Result<Arc<Device>> {
    if emulation_requested() {
        return Ok(Arc::new(crate::emulator::device()));
    }
    Device::new(0).map(Arc::new).map_err(one_line)
}

/// Whether `ZINC_DEVICE=emulated` asks for the emulated device.
pub fn emulation_requested() -> bool {
    std::env::var_os("ZINC_DEVICE").is_some_and(|d| d == "emulated")
}

pub fn open_registry(device: &Arc<Device>) -> Result<Registry> {
    Registry::new(device.clone()).map_err(one_line)
}

/// An error as a single line, without anyhow's "Caused by" list.
pub fn one_line(e: impl Display) -> anyhow::Error {
    anyhow!("{e}")
}

/// One line describing a device, printed before tables of results.
pub fn device_line(device: &Device, registry: &Registry) -> String {
    let p = device.props();
    format!(
        "GPU 0: {} ({}, {} SMs, L2 {} MiB), kernels for {}",
        p.name,
        p.arch(),
        p.sm_count,
        p.l2_bytes >> 20,
        registry.arch()
    )
}

/// A kernel's random inputs at a shape, the same in every run of this build.
pub fn random_inputs(spec: &Spec, shape: &Shape) -> Vec<Vec<f32>> {
    let seed = shape.0.iter().fold(0x5eed_u64, |h, &d| {
        h.wrapping_mul(31).wrapping_add(d as u64)
    });
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut inputs: Vec<Vec<f32>> = spec
        .inputs(shape)
        .iter()
        .enumerate()
        .map(|(i, &(len, scale))| match spec.input_elem(i) {
            Elem::U32 => ids(&mut rng, len, scale as u32),
            // The reference then sees exactly the values the kernel reads.
            Elem::F16 => nonzero(&mut rng, len, scale)
                .into_iter()
                .map(|v| f16::from_f32(v).to_f32())
                .collect(),
            Elem::F32 | Elem::ActS8 => nonzero(&mut rng, len, scale),
            Elem::I8 | Elem::I32 => nonzero_ints(&mut rng, len, scale as i32),
        })
        .collect();
    spec.fill_tables(shape, &mut inputs);
    inputs
}

/// What a kernel that adds into its output finds there before it runs: `len` nonzero values, so
/// that one storing its product instead cannot pass.
pub fn addends(len: usize) -> Vec<f32> {
    nonzero(
        &mut SmallRng::seed_from_u64(0xadd_u64 ^ len as u64),
        len,
        1.0,
    )
}

/// `len` values of magnitude in `[scale / 10, scale]` with random signs: never zero, so a kernel
/// that skips work cannot pass by accident, and timings never run on zeros.
fn nonzero(rng: &mut impl Rng, len: usize, scale: f32) -> Vec<f32> {
    (0..len)
        .map(|_| {
            let magnitude = rng.random_range(0.1 * scale..=scale);
            if rng.random() {
                magnitude
            } else {
                -magnitude
            }
        })
        .collect()
}

/// `len` integers in `-bound..=bound` but 0, as f32 (exact below 2^24).
fn nonzero_ints(rng: &mut impl Rng, len: usize, bound: i32) -> Vec<f32> {
    (0..len)
        .map(|_| {
            let magnitude = rng.random_range(1..=bound) as f32;
            if rng.random() {
                magnitude
            } else {
                -magnitude
            }
        })
        .collect()
}

/// Integer outputs have no NaN: they are poisoned with their type's minimum, which no kernel
/// writes (i8 results use the symmetric range -127..=127; i32 sums of i8 products stay far from
/// -2^31, see kernels/gemm_s8.tile), and that value reads back as NaN.
pub fn widen_i32(v: i32) -> f64 {
    if v == i32::MIN {
        f64::NAN
    } else {
        f64::from(v)
    }
}

/// [`widen_i32`] for i8 outputs.
pub fn widen_i8(v: i8) -> f64 {
    if v == i8::MIN {
        f64::NAN
    } else {
        f64::from(v)
    }
}

/// `len` token ids below `vocab`, as f32 (exact below 2^24).
fn ids(rng: &mut impl Rng, len: usize, vocab: u32) -> Vec<f32> {
    (0..len)
        .map(|_| rng.random_range(0..vocab) as f32)
        .collect()
}

/// A kernel's input or output buffer.
pub enum ElemBuf {
    F32(DeviceBuffer<f32>),
    F16(DeviceBuffer<f16>),
    /// Raw GGUF blocks as little-endian u32 words, or token ids.
    Words(DeviceBuffer<u32>),
    I8(DeviceBuffer<i8>),
    I32(DeviceBuffer<i32>),
    /// Activations in quantize_s8's layout ([`Elem::ActS8`]), as u32 words.
    ActS8(DeviceBuffer<u32>),
}

/// `bytes` (a whole number of words) as little-endian u32 words.
pub fn le_words(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect()
}

/// Activations `x` quantized by the host in quantize_s8's layout, as the words a kernel reads.
pub fn act_s8_words(x: &[f32]) -> Vec<u32> {
    le_words(&reference::quantize_acts(x))
}

/// Words of quantize_s8's layout decoded for comparison ([`reference::decode_acts`]).
pub fn decode_act_s8_words(words: &[u32]) -> Vec<f64> {
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    reference::decode_acts(&bytes)
}

/// Weights `w` quantized as `spec`'s weight type (models/src/quant), as the u32 words its
/// kernel reads, laid out as the engine uploads them ([`device_words`]).
pub fn weight_words(spec: &Spec, w: &[f32]) -> Vec<u32> {
    let ty = spec.weight_type();
    device_words(ty, &reference::quantize(ty, w)).expect("whole blocks")
}

impl ElemBuf {
    /// `len` elements with unspecified contents.
    pub fn alloc(stream: &Stream, elem: Elem, len: usize) -> Result<ElemBuf> {
        Ok(match elem {
            Elem::F32 => ElemBuf::F32(stream.alloc(len)?),
            Elem::F16 => ElemBuf::F16(stream.alloc(len)?),
            Elem::U32 => ElemBuf::Words(stream.alloc(len)?),
            Elem::I8 => ElemBuf::I8(stream.alloc(len)?),
            Elem::I32 => ElemBuf::I32(stream.alloc(len)?),
            Elem::ActS8 => ElemBuf::ActS8(stream.alloc(elem.output_bytes(len) / 4)?),
        })
    }

    /// `host` converted to `elem` (exactly, for values drawn by [`random_inputs`]).
    pub fn upload(stream: &Stream, elem: Elem, host: &[f32]) -> Result<ElemBuf> {
        Ok(match elem {
            Elem::F32 => ElemBuf::F32(stream.upload(host)?),
            Elem::F16 => {
                let h: Vec<f16> = host.iter().map(|&v| f16::from_f32(v)).collect();
                ElemBuf::F16(stream.upload(&h)?)
            }
            Elem::U32 => {
                let ids: Vec<u32> = host.iter().map(|&v| v as u32).collect();
                ElemBuf::Words(stream.upload(&ids)?)
            }
            Elem::I8 => {
                let v: Vec<i8> = host.iter().map(|&v| v as i8).collect();
                ElemBuf::I8(stream.upload(&v)?)
            }
            Elem::I32 => {
                let v: Vec<i32> = host.iter().map(|&v| v as i32).collect();
                ElemBuf::I32(stream.upload(&v)?)
            }
            Elem::ActS8 => ElemBuf::ActS8(stream.upload(&act_s8_words(host))?),
        })
    }

    /// `len` NaNs, so that elements a kernel never writes stand out (integer outputs: the
    /// type's minimum, read back as NaN by [`ElemBuf::download_f64`]; see [`widen_i32`]).
    pub fn poisoned(stream: &Stream, elem: Elem, len: usize) -> Result<ElemBuf> {
        Ok(match elem {
            Elem::F32 => ElemBuf::F32(stream.upload(&vec![f32::NAN; len])?),
            Elem::F16 => ElemBuf::F16(stream.upload(&vec![f16::NAN; len])?),
            Elem::I8 => ElemBuf::I8(stream.upload(&vec![i8::MIN; len])?),
            Elem::I32 => ElemBuf::I32(stream.upload(&vec![i32::MIN; len])?),
            Elem::ActS8 => {
                let words = vec![reference::ACT_S8_POISON; elem.output_bytes(len) / 4];
                ElemBuf::ActS8(stream.upload(&words)?)
            }
            Elem::U32 => anyhow::bail!("no NaN to poison a u32 output with"),
        })
    }

    /// Queues zeroing every element.
    pub fn fill_zeros(&mut self, stream: &Stream) -> zinc_runtime::Result<()> {
        match self {
            ElemBuf::F32(b) => stream.fill_zeros(b),
            ElemBuf::F16(b) => stream.fill_zeros(b),
            ElemBuf::Words(b) | ElemBuf::ActS8(b) => stream.fill_zeros(b),
            ElemBuf::I8(b) => stream.fill_zeros(b),
            ElemBuf::I32(b) => stream.fill_zeros(b),
        }
    }

    /// The contents, widened (waits for the stream); integer poison reads as NaN.
    pub fn download_f64(&self, stream: &Stream) -> Result<Vec<f64>> {
        Ok(match self {
            ElemBuf::F32(b) => stream.download(b)?.into_iter().map(f64::from).collect(),
            ElemBuf::F16(b) => stream.download(b)?.into_iter().map(f64::from).collect(),
            ElemBuf::Words(b) => stream.download(b)?.into_iter().map(f64::from).collect(),
            ElemBuf::I8(b) => stream.download(b)?.into_iter().map(widen_i8).collect(),
            ElemBuf::I32(b) => stream.download(b)?.into_iter().map(widen_i32).collect(),
            ElemBuf::ActS8(b) => decode_act_s8_words(&stream.download(b)?),
        })
    }

    fn arg(&mut self) -> Arg<'_> {
        match self {
            ElemBuf::F32(b) => Arg::from(b),
            ElemBuf::F16(b) => Arg::from(b),
            ElemBuf::Words(b) => Arg::from(b),
            ElemBuf::I8(b) => Arg::from(b),
            ElemBuf::I32(b) => Arg::from(b),
            ElemBuf::ActS8(b) => Arg::from(b),
        }
    }
}

/// A kernel's arguments on the device: inputs, outputs, scalars and the zeroed buffer some
/// kernels take after them ([`Spec::workspace_words`]).
pub struct DeviceCase {
    pub inputs: Vec<ElemBuf>,
    pub outputs: Vec<ElemBuf>,
    pub scalars: Vec<ScalarValue>,
    pub workspace: Option<DeviceBuffer<u32>>,
}

/// A kernel's random inputs at a shape, with what is slow to derive from them made once: the
/// quantized weight as the kernel reads it and, on first use, the f64 reference outputs. The
/// variants of a kernel share one spec, so one case serves all of them at a shape.
pub struct HostCase {
    pub inputs: Vec<Vec<f32>>,
    /// The last input encoded by [`weight_words`], where the spec has a quantized weight.
    weight: Option<Vec<u32>>,
    reference: OnceCell<Vec<f64>>,
}

impl HostCase {
    pub fn random(spec: &Spec, shape: &Shape) -> HostCase {
        let inputs = random_inputs(spec, shape);
        let weight = (spec.weight.is_some()).then(|| weight_words(spec, &inputs[inputs.len() - 1]));
        HostCase {
            inputs,
            weight,
            reference: OnceCell::new(),
        }
    }

    /// [`Spec::reference`] on these inputs, computed once.
    pub fn reference(&self, spec: &Spec, shape: &Shape) -> &[f64] {
        self.reference
            .get_or_init(|| spec.reference(shape, &self.inputs))
    }
}

/// The [`HostCase`] of the last (kernel spec, shape) asked for: callers that visit a kernel's
/// variants one after another at each shape (see [`grouped_by_shape`]) make each case once.
#[derive(Default)]
pub struct LastCase {
    key: Option<(&'static str, Shape)>,
    case: Option<HostCase>,
}

impl LastCase {
    pub fn get(&mut self, spec: &'static Spec, shape: &Shape) -> &HostCase {
        let key = (spec.kernel, shape.clone());
        if self.key.as_ref() != Some(&key) {
            // Drop the old case before drawing the new one: at real shapes each holds
            // hundreds of MB.
            self.case = None;
            self.case = Some(HostCase::random(spec, shape));
            self.key = Some(key);
        }
        self.case.as_ref().expect("just made")
    }
}

/// `names` with their specs and shapes (`shapes_of`) as (kernel, spec, shape) work items, each
/// base kernel's variants next to each other at each of its shapes (in the order the names and
/// shapes come), so that [`LastCase`] makes each case once. Names without a spec are left out.
pub fn grouped_by_shape<'a>(
    names: &[&'a str],
    shapes_of: impl Fn(&str, &'static Spec) -> Vec<Shape>,
) -> Vec<(&'a str, &'static Spec, Shape)> {
    let mut bases: Vec<&'static Spec> = Vec::new();
    let mut items: Vec<(&'a str, &'static Spec, Vec<Shape>)> = Vec::new();
    for &name in names {
        let Some(spec) = spec_for(name) else {
            continue;
        };
        if !bases.iter().any(|b| std::ptr::eq(*b, spec)) {
            bases.push(spec);
        }
        items.push((name, spec, shapes_of(name, spec)));
    }
    let mut work = Vec::new();
    for base in bases {
        let family: Vec<_> = items
            .iter()
            .filter(|(_, s, _)| std::ptr::eq(*s, base))
            .collect();
        let mut shapes: Vec<&Shape> = Vec::new();
        for shape in family.iter().flat_map(|(_, _, shapes)| shapes) {
            if !shapes.contains(&shape) {
                shapes.push(shape);
            }
        }
        for shape in shapes {
            for (name, spec, own) in &family {
                if own.contains(shape) {
                    work.push((*name, *spec, shape.clone()));
                }
            }
        }
    }
    work
}

impl DeviceCase {
    /// `host`'s inputs as `spec` lays them out for kernel `name`: the quantized weight last
    /// (already encoded), the others as [`Spec::input_elem`].
    pub fn upload(
        stream: &Stream,
        spec: &Spec,
        name: &str,
        host: &HostCase,
        shape: &Shape,
        outputs: Vec<ElemBuf>,
    ) -> Result<DeviceCase> {
        let scalars = spec.scalars(shape);
        let inputs = host
            .inputs
            .iter()
            .enumerate()
            .map(|(i, values)| match &host.weight {
                Some(words) if i == host.inputs.len() - 1 => {
                    Ok(ElemBuf::Words(stream.upload(words)?))
                }
                _ => ElemBuf::upload(stream, spec.input_elem(i), values),
            })
            .collect::<Result<_>>()?;
        let workspace = (spec.workspace_words(name, shape))
            .map(|words| stream.alloc_zeros(words))
            .transpose()?;
        Ok(DeviceCase {
            inputs,
            outputs,
            scalars,
            workspace,
        })
    }

    /// Queues one launch with the grid from the kernel's manifest.
    pub fn launch(&mut self, kernel: &Kernel, stream: &Stream) -> zinc_runtime::Result<()> {
        let mut args: Vec<Arg> = self.inputs.iter_mut().map(ElemBuf::arg).collect();
        args.extend(self.outputs.iter_mut().map(ElemBuf::arg));
        args.extend(self.scalars.iter().map(|&s| Arg::from(s)));
        args.extend(self.workspace.as_mut().map(Arg::from));
        kernel.launch(stream, Grid::Auto, &mut args).map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_match_parts_or_endings() {
        let names = [
            "gemm_q4k_wg",
            "gemm_q4k_wg@BT=256",
            "gemm_q4k_wg@BT=256,PRODUCER=1",
            "gemm_q6k_wg@BT=256",
        ];
        let passing = |filters: &[&str]| {
            let filters: Vec<String> = filters.iter().map(|f| f.to_string()).collect();
            (names.iter().copied())
                .filter(|n| any_filter_matches(n, &filters))
                .collect::<Vec<_>>()
        };
        assert_eq!(passing(&[]), names);
        assert_eq!(passing(&["q4k_wg@BT=256"]), names[1..3]);
        assert_eq!(passing(&["gemm_q4k_wg@BT=256$"]), ["gemm_q4k_wg@BT=256"]);
        assert_eq!(passing(&["gemm_q4k_wg$"]), ["gemm_q4k_wg"]);
        assert_eq!(
            passing(&["q4k_wg@BT=256$", "PRODUCER"]),
            ["gemm_q4k_wg@BT=256", "gemm_q4k_wg@BT=256,PRODUCER=1"]
        );
        assert_eq!(
            passing(&["@BT=256$"]),
            ["gemm_q4k_wg@BT=256", "gemm_q6k_wg@BT=256"]
        );
        assert!(passing(&["gemm_q5k$"]).is_empty());
    }

    #[test]
    fn variants_take_turns_at_each_shape() {
        let names = [
            "matvec_q4k",
            "no_such_kernel",
            "matvec_q6k",
            "matvec_q4k@TMAX=1",
        ];
        let (a, b) = (Shape(vec![1, 8, 256]), Shape(vec![2, 8, 512]));
        let work = grouped_by_shape(&names, |name, _| match name {
            // A variant may take fewer shapes than its base.
            "matvec_q4k@TMAX=1" => vec![b.clone()],
            _ => vec![a.clone(), b.clone()],
        });
        let order: Vec<(&str, &Shape)> = work.iter().map(|(n, _, s)| (*n, s)).collect();
        assert_eq!(
            order,
            [
                ("matvec_q4k", &a),
                ("matvec_q4k", &b),
                ("matvec_q4k@TMAX=1", &b),
                ("matvec_q6k", &a),
                ("matvec_q6k", &b),
            ]
        );
    }

    #[test]
    fn a_case_is_remade_only_for_another_kernel_or_shape() {
        let spec = spec_for("matvec_q4k").unwrap();
        let other = spec_for("matvec_q6k").unwrap();
        let (a, b) = (Shape(vec![1, 8, 256]), Shape(vec![1, 16, 256]));
        let mut last = LastCase::default();
        let first: *const HostCase = last.get(spec, &a);
        assert!(std::ptr::eq(first, last.get(spec, &a)));
        assert_eq!(last.get(spec, &b).inputs[1].len(), 16 * 256);
        assert_eq!(last.get(other, &b).inputs[1].len(), 16 * 256);
        assert!(last.get(other, &b).weight.is_some());
    }

    #[test]
    fn random_values_are_nonzero_in_range_and_reproducible() {
        let draw = || nonzero(&mut SmallRng::seed_from_u64(7), 10_000, 2.0);
        let v = draw();
        assert!(v.iter().all(|x| (0.2..=2.0).contains(&x.abs())));
        assert!(v.iter().any(|&x| x < 0.0) && v.iter().any(|&x| x > 0.0));
        assert_eq!(v, draw());
    }

    #[test]
    fn random_ints_are_nonzero_in_range_and_reach_both_ends() {
        let v = nonzero_ints(&mut SmallRng::seed_from_u64(7), 10_000, 127);
        assert!(v
            .iter()
            .all(|x| x.fract() == 0.0 && (1.0..=127.0).contains(&x.abs())));
        assert!(v.contains(&127.0) && v.contains(&-127.0));
        assert!(v.contains(&1.0) && v.contains(&-1.0));
    }

    #[test]
    fn integer_poison_reads_back_as_nan() {
        assert!(widen_i32(i32::MIN).is_nan() && widen_i8(i8::MIN).is_nan());
        assert_eq!(widen_i32(-(1 << 30)), -f64::from(1 << 30));
        assert_eq!(widen_i8(-127), -127.0);
    }

    #[test]
    fn no_gpu_is_a_one_line_error() {
        if zinc_runtime::driver_present() {
            return;
        }
        let msg = format!("{:#}", open_device().unwrap_err());
        assert_eq!(msg.lines().count(), 1, "{msg}");
        assert!(msg.starts_with("no CUDA driver"), "{msg}");
    }
}
