//! The GPU backend's own kernels are checked against their f64 references by `zinc selftest`
//! and, in the CPU interpreter, by `cmd_selftest`'s tests (src/specs.rs declares them). Checked
//! here: that those references compute what the CPU ops the backend replaces compute, with the
//! scalars the specs pass standing for the backend's arguments; and the backend as a whole (KV
//! cache, chunked prefill, the dispatch between matvecs and GEMMs, flash and split attention)
//! on the emulated device against the CPU reference, as `zinc check-model` compares them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use zinc_models::backend::Backend;
use zinc_models::backend::{RopeStyle, RopeTable};
use zinc_models::cpu;
use zinc_models::forward::Model;
use zinc_models::gguf::Gguf;
use zinc_models::quant::GgmlType;
use zinc_models::sampler::{Sampler, SamplerConfig};
use zinc_models::synth::{preset, Synth};

use super::dispatch::{StreamK, MATVEC_MAX_T};
use super::{weight_bytes, Gpu};
use crate::cmd_check_model::{compare, verdict, DEFAULT_TOLERANCE, S8_TOLERANCE};
use crate::harness::random_inputs;
use crate::specs::{attention_params, spec_for, Shape, ROPE_BASE, ROPE_START};

/// The largest difference between an f32 CPU op and an f64 reference, relative to the largest
/// reference magnitude.
fn max_rel(got: &[f32], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    let scale = want.iter().fold(0.0f64, |m, w| m.max(w.abs()));
    let worst = got
        .iter()
        .zip(want)
        .fold(0.0f64, |m, (&g, w)| m.max((f64::from(g) - w).abs()));
    worst / scale
}

#[test]
fn attention_reference_is_the_cpu_op() {
    let spec = spec_for("attention_f32").unwrap();
    for dims in spec.interp_shapes() {
        let shape = Shape(dims.to_vec());
        let inputs = random_inputs(spec, &shape);
        let (p, start) = attention_params(&shape);
        let got = cpu::attention(&inputs[0], &inputs[1], &inputs[2], start, &p);
        let want = spec.reference(&shape, &inputs);
        assert!(max_rel(&got, &want) < 1e-5, "{shape}");
    }
}

#[test]
fn rope_reference_is_the_cpu_op() {
    let spec = spec_for("rope_f32").unwrap();
    for dims in spec.interp_shapes() {
        let shape = Shape(dims.to_vec());
        let (n_tokens, head_dim, n_rot, neox) = (dims[1], dims[2], dims[3], dims[4]);
        let inputs = random_inputs(spec, &shape);
        let style = [RopeStyle::Normal, RopeStyle::Neox][neox];
        let table = RopeTable::new(style, n_rot, ROPE_BASE, 1.0, None);
        let positions: Vec<usize> = (ROPE_START..ROPE_START + n_tokens).collect();
        let mut got = inputs[0].clone();
        cpu::rope(&mut got, head_dim, &positions, &table);
        assert!(
            max_rel(&got, &spec.reference(&shape, &inputs)) < 1e-6,
            "{shape}"
        );
    }
}

/// Prompt tokens of the emulated runs: a first chunk of [`UBATCH`] (flash attention and the
/// fused GEMMs, from position 0), a second one of [`UBATCH`] (flash attention over cached
/// positions), and a last chunk of at most `MATVEC_MAX_T` tokens (batched matvecs and split
/// attention over the cache).
const PROMPT: usize = 2 * UBATCH + 3;
const UBATCH: usize = MATVEC_MAX_T + 2;
/// Single-token decode steps after the prompt.
const N_DECODE: usize = 2;
/// Sliding window of the tiny Gemmas: shorter than the prompt, so that it masks.
const WINDOW: u32 = 16;

/// The tiny synthetic `preset` (`zinc synth --preset P --tiny`, two layers; Gemma's
/// sliding-window period made 2, so one local and one global layer, with a window the prompt
/// overruns).
fn tiny_model(name: &str) -> Gguf {
    written(&tiny_synth(name))
}

fn tiny_synth(name: &str) -> Synth {
    let p = preset(name).unwrap();
    let mut config = p.config.tiny();
    config.n_layer = 2;
    if let Some(swa) = &mut config.swa {
        swa.period = 2;
        swa.window = WINDOW;
    }
    Synth::new(p.model, config).unwrap()
}

fn written(synth: &Synth) -> Gguf {
    Gguf::from_bytes(synth.write(0, Vec::new(), &mut |_, _| {}).unwrap()).unwrap()
}

/// Runs [`tiny_model`] of `preset` on the GPU backend over the emulated device and on the CPU
/// reference, and compares the logits at every prompt position and decode step; returns the
/// names of the kernels the GPU backend launched. The decode-size products take f32 activations
/// here, as the CPU reference does; [`S8_TOLERANCE`] bounds the default int8 ones.
fn check_on_emulated_device(name: &str, tolerance: f32) -> Vec<String> {
    check_model_on_emulated_device(name, tiny_model(name), tolerance, f32_decode)
}

/// Decode-size products on f32 activations, as the CPU reference's.
fn f32_decode(gpu: &mut Gpu) {
    gpu.s8_decode = false;
}

/// Decode-size products on int8 activations, the engine's default.
fn int8_decode(gpu: &mut Gpu) {
    gpu.s8_decode = true;
}

/// [`check_on_emulated_device`] of `gguf`, with the backend set up by `configure` before the
/// model loads.
fn check_model_on_emulated_device(
    name: &str,
    gguf: Gguf,
    tolerance: f32,
    configure: fn(&mut Gpu),
) -> Vec<String> {
    let started = Instant::now();
    let launched = compare_on_emulated_device(&gguf, tolerance, configure, PROMPT, UBATCH);
    println!("{name}: {:.1} s", started.elapsed().as_secs_f64());
    launched.into_keys().collect()
}

/// Compares `gguf` on the emulated device (set up by `configure`) and on the CPU, over a prompt
/// of `prompt` tokens in chunks of `ubatch` and [`N_DECODE`] decode steps; returns the launches
/// of each kernel the GPU backend ran.
fn compare_on_emulated_device(
    gguf: &Gguf,
    tolerance: f32,
    configure: fn(&mut Gpu),
    prompt: usize,
    ubatch: usize,
) -> BTreeMap<String, (usize, f64)> {
    checked_on_emulated_device(gguf, tolerance, configure, prompt, ubatch).1
}

/// [`compare_on_emulated_device`], returning the GPU side's model too.
fn checked_on_emulated_device(
    gguf: &Gguf,
    tolerance: f32,
    configure: impl Fn(&mut Gpu),
    prompt: usize,
    ubatch: usize,
) -> (Model<Gpu>, BTreeMap<String, (usize, f64)>) {
    let device = Arc::new(crate::emulator::device());
    let weights = weight_bytes(gguf);
    let mut gpu = Model::with_backend(gguf, |c| {
        let mut gpu = Gpu::new(&device, c, prompt + N_DECODE, weights)?;
        configure(&mut gpu);
        Ok(gpu)
    })
    .unwrap();
    let mut cpu = Model::from_gguf(gguf).unwrap();
    let n_vocab = cpu.config().n_vocab as u32;
    let ids: Vec<u32> = (0..prompt as u32)
        .map(|i| (i * 97 + 13) % n_vocab)
        .collect();
    gpu.backend().start_profile();
    let rows = compare(&mut cpu, &mut gpu, &ids, ubatch, N_DECODE).unwrap();
    let launched = gpu.backend().finish_profile().unwrap().by_kernel;
    verdict(&rows, tolerance).unwrap();
    (gpu, launched)
}

/// Its gate and up matrices are gated pairs (sm_90a's registry): the prompt's chunks take the
/// gated GEMM and the decode-size batches the pairs' matvec and gated product.
#[test]
fn llama3_on_the_emulated_device_matches_the_cpu() {
    let launched = check_on_emulated_device("llama3-8b", DEFAULT_TOLERANCE);
    assert_launched(&launched, &["gemm_q4k_wg_silu", "silu_mul_pairs_f32"]);
}

/// A prompt of 256 tokens in one chunk takes gemm_wg's 256-token tiles; told its device has 6
/// SMs, the backend runs the tiny llama's gated units (8 tiles of 64 outputs) as 6 tiles and
/// then 4 one-warpgroup tiles ([`super::dispatch::wave_tail`]): two launches a layer.
#[test]
fn short_last_waves_on_the_emulated_device_match_the_cpu() {
    assert_eq!(gated_launches_per_layer_on_six_sms(256), 2);
}

/// A prompt of 260 tokens in one chunk: the gated units' 256 tokens as above, and their last 4
/// on the short-batch tiles ([`super::dispatch::token_head`]: 8 tiles in 2 waves instead of 16
/// in 3), so three launches a layer.
#[test]
fn ragged_token_tiles_on_the_emulated_device_match_the_cpu() {
    assert_eq!(gated_launches_per_layer_on_six_sms(260), 3);
}

/// The tiny llama's launches of its gated GEMM per layer for a prompt of `prompt` tokens in one
/// chunk, on a device told it has 6 SMs, after checking its logits against the CPU's.
fn gated_launches_per_layer_on_six_sms(prompt: usize) -> usize {
    let gguf = tiny_model("llama3-8b");
    let six_sms = |gpu: &mut Gpu| {
        gpu.sms = 6;
        gpu.s8_decode = false;
    };
    let launched = compare_on_emulated_device(&gguf, DEFAULT_TOLERANCE, six_sms, prompt, prompt);
    // The profile folds the variants into their kernel.
    let layers = Model::from_gguf(&gguf).unwrap().config().n_layer;
    let launches = launched["gemm_q4k_wg_silu"].0;
    assert_eq!(
        launches % layers,
        0,
        "{launches} launches in {layers} layers"
    );
    launches / layers
}

/// With `ZINC_STREAMK`'s tiles ([`super::dispatch::stream_k`]), the tiny llama's products of a
/// 256-token prompt match the CPU:
/// - all shared out (`1`) on a device told it has 6 SMs: the down projection (256 x 256 x 512:
///   two tiles of two super-blocks) hands partial sums over, with two of the six blocks left
///   without work;
/// - the last waves shared out (`2`) on 2 SMs: the gated unit's 8 tiles (of one super-block)
///   run six whole, then one a block.
#[test]
fn stream_k_products_on_the_emulated_device_match_the_cpu() {
    for (how, sms) in [(StreamK::All, 6), (StreamK::LastWaves, 2)] {
        let stream_k_on = |gpu: &mut Gpu| {
            gpu.sms = sms;
            gpu.s8_decode = false;
            gpu.rewrites.stream_k = Some(how);
        };
        let gguf = tiny_model("llama3-8b");
        let (gpu, _) = checked_on_emulated_device(&gguf, DEFAULT_TOLERANCE, stream_k_on, 256, 256);
        let plans = gpu.backend().gemm_plans.borrow();
        let stream_k = plans
            .values()
            .flat_map(|plan| &plan.launches)
            .filter(|l| {
                let value = l.kernel.signature().specialization_int("STREAMK");
                value == Some(if how == StreamK::All { 1 } else { 2 })
            })
            .map(|l| l.kernel.signature().name.clone())
            .collect::<BTreeSet<_>>();
        assert!(
            stream_k.contains("gemm_q4k_wg_silu"),
            "{how:?}: {stream_k:?}"
        );
        assert!(stream_k.len() >= 2, "{how:?}: {stream_k:?}");
    }
}

/// The tiny llama's plain products of a 256-token prompt forced onto the K split that needs no
/// zeroed output (a tune table naming `BT=256,SPLITK=2,TMA_STORE=1,FIRST_STORES=1` at every
/// matrix's shape) match the CPU, with plans that skip the output's memset and `ws` sized for
/// their tiles; the second layer's launches find `ws` back at zero after the first's.
#[test]
fn first_stores_splits_on_the_emulated_device_match_the_cpu() {
    let (gpu, _) = plain_products_forced_onto("BT=256,SPLITK=2,TMA_STORE=1,FIRST_STORES=1");
    let plans = gpu.backend().gemm_plans.borrow();
    let ordered: Vec<_> = (plans.values())
        .filter(|plan| {
            (plan.launches.iter())
                .any(|l| l.kernel.signature().specialization_int("FIRST_STORES") == Some(1))
        })
        .collect();
    assert!(
        ordered.len() >= 2,
        "{} plans take FIRST_STORES",
        ordered.len()
    );
    assert!(ordered.iter().all(|plan| !plan.zero_output));
}

/// The tiny llama's plain products of a 256-token prompt forced onto a K split that adds into
/// its output match the CPU, and the products that end a residual branch (the attention's output
/// and the FFN's down projection) add into the residual stream in place: the prompt's norms then
/// have no pending add to fold in, so no `add_rmsnorm_f16` runs (it would run twice a layer),
/// only the norm without an add that writes its products' f16 input alone (`rmsnorm_f16`).
#[test]
fn k_splits_add_into_the_residual_stream_on_the_emulated_device() {
    let (gpu, launched) = plain_products_forced_onto("BT=256,SPLITK=2,TMA_STORE=1");
    let plans = gpu.backend().gemm_plans.borrow();
    assert!(plans.values().any(|plan| plan.adds_everywhere));
    assert!(!launched.contains_key("add_rmsnorm_f16"), "{launched:?}");
    assert!(launched.contains_key("rmsnorm_f16"), "{launched:?}");
}

/// The same with the unsplit tiles' builds that add their product into the output
/// (ADD_OUTPUT: f32 atomics, and TMA reductions), forced onto every plain product.
#[test]
fn add_output_tiles_add_into_the_residual_stream_on_the_emulated_device() {
    for variant in [
        "WG=1,BT=256,STAGES=5,PRODUCER=1,SHFL_SCALES=1,ADD_OUTPUT=1",
        "BT=256,PRODUCER=1,PERSIST=132,TMA_STORE=1,ADD_OUTPUT=1",
    ] {
        let (_, launched) = plain_products_forced_onto(variant);
        assert!(!launched.contains_key("add_rmsnorm_f16"), "{variant}");
        assert!(launched.contains_key("rmsnorm_f16"), "{variant}");
    }
}

/// The tiny llama's check against the CPU for a 256-token prompt in one chunk, int8 decode off,
/// with a tune table naming gemm_wg's `variant` at the shape of every matrix but the gated
/// pairs' (Q4_K and Q6_K alike).
fn plain_products_forced_onto(variant: &str) -> (Model<Gpu>, BTreeMap<String, (usize, f64)>) {
    let gguf = tiny_model("llama3-8b");
    let entries: Vec<_> = (gguf.tensors().iter())
        .filter(|t| t.dims.len() == 2 && !t.name.contains("ffn_gate") && !t.name.contains("ffn_up"))
        .flat_map(|t| {
            let shape = vec![256, t.dims[1] as usize, t.dims[0] as usize];
            ["gemm_q4k_wg", "gemm_q6k_wg"].map(|kernel| super::dispatch::TuneEntry {
                kernel: kernel.to_string(),
                shape: shape.clone(),
                variant: format!("{kernel}@{variant}"),
                median_us: 0.0,
            })
        })
        .collect();
    let tune = super::dispatch::TuneTable {
        arch: "sm_90a".to_string(),
        device: "emulated".to_string(),
        entries,
    };
    let tune = std::cell::RefCell::new(Some(tune));
    let forced = |gpu: &mut Gpu| {
        gpu.s8_decode = false;
        gpu.tune = tune.borrow_mut().take();
    };
    checked_on_emulated_device(&gguf, DEFAULT_TOLERANCE, forced, 256, 256)
}

/// Fails unless a kernel (or variant) of each name in `kernels` is in `launched`.
fn assert_launched(launched: &[String], kernels: &[&str]) {
    for kernel in kernels {
        assert!(
            launched
                .iter()
                .any(|name| name.split('@').next() == Some(kernel)),
            "{kernel} never ran: {launched:?}"
        );
    }
}

/// The tiny llama with its Q4_K matrices stored as Q5_K (as a Q5_K_M file has them): matvec_q5k
/// (f32 decode) or matvec_q5k_s8 (int8 decode), gemm_q5k and the Q5_K uploads in the engine.
#[test]
fn llama3_with_q5_k_weights_on_the_emulated_device_matches_the_cpu() {
    let mut synth = tiny_synth("llama3-8b");
    synth.retype(GgmlType::Q4_K, GgmlType::Q5_K).unwrap();
    let gguf = written(&synth);
    assert!(gguf
        .tensors()
        .iter()
        .any(|t| t.ggml_type().ok() == Some(GgmlType::Q5_K)));
    let launched =
        check_model_on_emulated_device("llama3-8b Q5_K", gguf, DEFAULT_TOLERANCE, f32_decode);
    assert_launched(&launched, &["matvec_q5k"]);
    let launched = check_model_on_emulated_device(
        "llama3-8b Q5_K int8",
        written(&synth),
        S8_TOLERANCE,
        int8_decode,
    );
    assert_launched(&launched, &["matvec_q5k_s8"]);
}

/// Without wgmma (the kernels of the RTX 4090 and 5090) the gate and up pairs take gemm_q4k's
/// gated GEMM, the other products gemm_q4k and gemm_q6k.
#[test]
fn gated_pairs_without_wgmma_match_the_cpu() {
    let launched = check_model_on_emulated_device(
        "llama3-8b mma.sync",
        tiny_model("llama3-8b"),
        DEFAULT_TOLERANCE,
        |gpu| {
            gpu.s8_decode = false;
            gpu.wgmma = false;
        },
    );
    assert_launched(
        &launched,
        &["gemm_q4k_silu", "gemm_q4k", "silu_mul_pairs_f32"],
    );
}

#[test]
fn qwen3_on_the_emulated_device_matches_the_cpu() {
    check_on_emulated_device("qwen3-8b", DEFAULT_TOLERANCE);
}

/// Its post-norms leave the residual add pending for the next norm, so each norm before a
/// branch folds an add in: at the prompt's prefill-size chunks in the kernel that writes its
/// products' f16 input alone (`add_rmsnorm_f16`), at decode sizes (f32 activations here) in
/// `add_rmsnorm_f32`.
#[test]
fn gemma3_on_the_emulated_device_matches_the_cpu() {
    let launched = check_on_emulated_device("gemma3-27b", DEFAULT_TOLERANCE);
    assert_launched(
        &launched,
        &[
            "gemm_q4k_wg_gelu",
            "gelu_mul_pairs_f32",
            "add_rmsnorm_f16",
            "add_rmsnorm_f32",
        ],
    );
}

/// The decode-size products on int8 activations (quantize_s8, then matvec_q4k_s8 or
/// matvec_q6k_s8), the engine's default, against check-model's tolerance for them: measured here
/// at the positions those products serve (the prompt's last, 3-token chunk and the decode steps),
/// against at most 2.5e-3 with f32 activations: llama3 and qwen3 1.0e-2 to 1.1e-2, gemma3 up to
/// 2.2e-2.
#[test]
fn int8_decode_products_on_the_emulated_device_stay_near_the_cpu() {
    for name in ["llama3-8b", "qwen3-8b", "gemma3-27b"] {
        let launched =
            check_model_on_emulated_device(name, tiny_model(name), S8_TOLERANCE, int8_decode);
        let gated = match name {
            "gemma3-27b" => "gelu_mul_pairs_f32q",
            _ => "silu_mul_pairs_f32q",
        };
        assert_launched(&launched, &[gated]);
    }
}

/// Gemma 3 270M's mix: its matrices Q5_0 and its tied embedding and head Q8_0 (the tiny Gemma's
/// Q4_K and Q6_K retyped; its rows are whole 64-groups), so the decode-size products take
/// matvec_q5_0_s8 and matvec_q8_0_s8.
#[test]
fn int8_decode_products_of_32_weight_blocks_stay_near_the_cpu() {
    let mut synth = tiny_synth("gemma3-27b");
    synth.retype(GgmlType::Q4_K, GgmlType::Q5_0).unwrap();
    synth.retype(GgmlType::Q6_K, GgmlType::Q8_0).unwrap();
    let launched = check_model_on_emulated_device(
        "gemma3-27b Q5_0/Q8_0",
        written(&synth),
        S8_TOLERANCE,
        int8_decode,
    );
    assert_launched(&launched, &["matvec_q5_0_s8", "matvec_q8_0_s8"]);
}

/// The tiny Llama with its Q4_K and Q6_K matrices retyped to `ty` (as a file of that type has
/// them) against the CPU, decoding on int8 activations: the matrices stay `ty` on the device, the
/// embedding takes embed_SUFFIX, the prompt's chunks gemm_SUFFIX_wg (the emulated device has
/// sm_90a's wgmma) and its gated units, and the decode-size batches matvec_SUFFIX_s8.
fn check_on_own_kernels(ty: GgmlType) {
    let suffix = crate::gpu::dispatch::quant_suffix(ty).unwrap();
    let mut synth = tiny_synth("llama3-8b");
    synth.retype(GgmlType::Q4_K, ty).unwrap();
    synth.retype(GgmlType::Q6_K, ty).unwrap();
    let gguf = written(&synth);
    assert!(crate::gpu::expanded_types(&gguf).is_empty(), "{ty}");
    let name = format!("llama3-8b {ty}");
    let launched = check_model_on_emulated_device(&name, gguf, S8_TOLERANCE, int8_decode);
    let kernels = [
        format!("embed_{suffix}"),
        format!("gemm_{suffix}_wg"),
        format!("gemm_{suffix}_wg_silu"),
        format!("matvec_{suffix}_s8"),
    ];
    assert_launched(&launched, &kernels.each_ref().map(String::as_str));
}

#[test]
fn q4_0_models_run_on_their_own_kernels() {
    check_on_own_kernels(GgmlType::Q4_0);
}

/// IQ4_NL: Q4_0's kernels with levels for nibbles.
#[test]
fn iq4_nl_models_run_on_their_own_kernels() {
    check_on_own_kernels(GgmlType::IQ4_NL);
}

/// IQ4_XS: the same kernels on its repacked super-blocks (a word of two sub-block scales and d
/// per 64 weights where IQ4_NL has two d).
#[test]
fn iq4_xs_models_run_on_their_own_kernels() {
    check_on_own_kernels(GgmlType::IQ4_XS);
}

/// The norms and gated products of decode-size batches write the int8 blocks of their output
/// themselves (the `_f32q` kernels): the bits quantize_s8 makes of their f32 output, so the
/// logits are bit for bit those of the same backend quantizing every product input with a
/// quantize_s8 launch; and fewer such launches remain (at most the o projections' inputs, one a
/// layer per decode-size pass). Llama (silu) and Gemma (gelu, its norms after the products).
#[test]
fn fused_int8_blocks_give_the_logits_of_quantize_s8_bit_for_bit() {
    for name in ["llama3-8b", "gemma3-27b"] {
        let gguf = tiny_model(name);
        let device = Arc::new(crate::emulator::device());
        let run = |s8_fused: bool| {
            let mut gpu = Model::with_backend(&gguf, |c| {
                let mut gpu = Gpu::new(&device, c, PROMPT + N_DECODE, weight_bytes(&gguf))?;
                gpu.s8_decode = true;
                gpu.s8_fused = s8_fused;
                Ok(gpu)
            })
            .unwrap();
            let n_vocab = gpu.config().n_vocab as u32;
            let ids: Vec<u32> = (0..(PROMPT + N_DECODE) as u32)
                .map(|i| (i * 97 + 13) % n_vocab)
                .collect();
            gpu.backend().start_profile();
            let mut logits = Vec::new();
            for (i, chunk) in ids[..PROMPT].chunks(UBATCH).enumerate() {
                logits.extend(gpu.forward_all(chunk, i * UBATCH).unwrap());
            }
            for (pos, &token) in ids.iter().enumerate().skip(PROMPT) {
                logits.extend(gpu.forward(&[token], pos).unwrap());
            }
            let times = gpu.backend().finish_profile().unwrap();
            let quantized = times.by_kernel.get("quantize_s8").map_or(0, |&(n, _)| n);
            let bits: Vec<u32> = logits.iter().map(|v| v.to_bits()).collect();
            (bits, quantized, gpu.config().n_layer)
        };
        let (fused, fused_launches, n_layer) = run(true);
        let (separate, separate_launches, _) = run(false);
        println!(
            "{name}: quantize_s8 launches {fused_launches} fused, {separate_launches} without"
        );
        assert!(fused == separate, "{name}: the logits differ");
        // The prompt's last chunk and the decode steps are decode-size passes.
        let decode_passes = 1 + N_DECODE;
        assert!(
            fused_launches < separate_launches && fused_launches <= decode_passes * n_layer,
            "{name}: {fused_launches} quantize_s8 launches fused, {separate_launches} without"
        );
    }
}

/// The tiny Gemma 4's error on the GEMM path (f16 activations) is f16 rounding amplified by its
/// attention at scale 1 on normalized queries and keys (docs/GOLDEN.md, "GPU backend against
/// the CPU reference"): measured here 2.1e-2 at its worst position, the same with the prompt in
/// one chunk, 1.9e-2 with split attention in place of flash attention, and at most 1.8e-3 with
/// every chunk on the matvec path (f32 activations).
const GEMMA4_TOLERANCE: f32 = 5e-2;

#[test]
fn gemma4_on_the_emulated_device_matches_the_cpu() {
    check_on_emulated_device("gemma4-31b", GEMMA4_TOLERANCE);
}

/// The greedy pick after each step of `tokens` (the prompt, then one token per step).
fn greedy_picks<B: Backend + 'static>(model: &mut Model<B>, tokens: &[u32]) -> Vec<u32> {
    let mut greedy = Sampler::new(SamplerConfig::default());
    let mut picks = vec![model
        .forward_sample(&tokens[..PROMPT], 0, &mut greedy)
        .unwrap()];
    for (pos, &token) in tokens.iter().enumerate().skip(PROMPT) {
        picks.push(model.forward_sample(&[token], pos, &mut greedy).unwrap());
    }
    picks
}

/// Greedy decoding in the form CUDA graphs replay (token and position read from device memory,
/// split attention over the graph's key capacity, the argmax left on the device) picks the
/// tokens the CPU reference picks, step after step. The steps are fed fixed tokens, so that the
/// picks differ from step to step.
#[test]
fn replayable_greedy_steps_on_the_emulated_device_match_the_cpu() {
    let gguf = tiny_model("llama3-8b");
    let device = Arc::new(crate::emulator::device());
    let weights = weight_bytes(&gguf);
    let ctx = PROMPT + 4;
    let mut gpu = Model::with_backend(&gguf, |c| {
        let mut gpu = Gpu::new(&device, c, ctx, weights)?;
        gpu.enable_decode_graphs(false)?;
        Ok(gpu)
    })
    .unwrap();
    let mut cpu = Model::from_gguf(&gguf).unwrap();
    let n_vocab = cpu.config().n_vocab as u32;
    let tokens: Vec<u32> = (0..ctx as u32).map(|i| (i * 31 + 7) % n_vocab).collect();
    let picks = greedy_picks(&mut cpu, &tokens);
    assert!(picks.windows(2).any(|w| w[0] != w[1]), "{picks:?}");
    assert_eq!(greedy_picks(&mut gpu, &tokens), picks);
}

/// Top-k sampling on the GPU backend selects its candidates on the device (`top_k_rows`) and
/// draws what the host sampler draws from the backend's own downloaded logits, seed for seed.
/// Against the GPU's logits, not the CPU's: the two differ in the last bits, which can move a
/// candidate across the k-th place or a draw across a boundary of the cumulative
/// distribution; the selection itself is exact, so on the same logits the draws are the same.
#[test]
fn top_k_sampling_on_the_emulated_device_draws_what_the_host_draws() {
    let gguf = tiny_model("llama3-8b");
    let device = Arc::new(crate::emulator::device());
    let weights = weight_bytes(&gguf);
    let mut gpu = Model::with_backend(&gguf, |c| Ok(Gpu::new(&device, c, 1, weights)?)).unwrap();
    let tokens = [7];
    let logits = gpu.forward(&tokens, 0).unwrap();
    let mut picks = Vec::new();
    for (temperature, top_k, top_p, seed) in [
        (1.0, 40, 1.0, 1),
        (1.5, 3, 0.95, 2),
        (0.8, 256, 0.9, 3),
        (2.0, 1, 1.0, 4),
    ] {
        let config = SamplerConfig {
            temperature,
            top_k,
            top_p,
            seed,
        };
        let (mut on_host, mut on_device) = (Sampler::new(config), Sampler::new(config));
        for _ in 0..2 {
            let want = on_host.sample(&logits);
            let got = gpu.forward_sample(&tokens, 0, &mut on_device).unwrap();
            assert_eq!(got, want, "{config:?}");
            picks.push(got);
        }
    }
    assert!(picks.windows(2).any(|w| w[0] != w[1]), "{picks:?}");
}

/// Matrices of quantized types without kernels are counted per type (they go up as f16);
/// vectors, float matrices and types with kernels are not.
#[test]
fn matrices_without_kernels_are_counted_per_type() {
    use zinc_models::gguf::{write, TensorSpec};
    let spec = |name: &str, dims: &[u64], ty| TensorSpec {
        name: name.into(),
        dims: dims.to_vec(),
        ty,
    };
    let q4_1 = [0u8; 2 * 20];
    let q4_k = [0u8; 144];
    let f16s = [0u8; 2 * 64];
    let tensors = [
        (spec("a", &[32, 2], GgmlType::Q4_1), &q4_1[..]),
        (spec("b", &[64, 1], GgmlType::Q4_1), &q4_1[..]),
        (spec("c", &[64], GgmlType::Q4_1), &q4_1[..]),
        (spec("d", &[256, 1], GgmlType::Q4_K), &q4_k[..]),
        (spec("e", &[64, 1], GgmlType::F16), &f16s[..]),
    ];
    let bytes = write(Vec::new(), &[], &tensors).unwrap();
    let gguf = Gguf::from_bytes(bytes).unwrap();
    let expanded = crate::gpu::expanded_types(&gguf);
    assert_eq!(expanded.into_iter().collect::<Vec<_>>(), [("Q4_1", 2)]);
}

/// A gated GEMM's output exists in f16 only; reading it as f32 is an error, not a panic.
#[test]
fn an_activation_held_in_f16_only_refuses_f32_reads() {
    let device = crate::emulator::device();
    let stream = device.default_stream();
    let act = super::Act::half_only(stream.alloc::<zinc_runtime::half::f16>(8).unwrap());
    assert_eq!(act.len(), 8);
    let error = act.f32().map(|_| ()).unwrap_err().to_string();
    assert!(error.contains("held in f16 only"), "{error}");
}
