//! `zinc check-model -m FILE.gguf [-p PROMPT] [-n N] [--ctx C] [--ubatch U] [--tolerance T]`:
//! runs a model on the GPU backend and on the CPU reference, the same tokens through both, and
//! compares their logits at every prefill position and for `N` greedy decode steps. With
//! `--ubatch`, the GPU prefills the prompt in chunks of that many tokens (the CPU in one).
//! `ZINC_DEVICE=emulated` runs the GPU backend on the emulated device (src/emulator.rs).
//!
//! Per position: the relative error `max |gpu - cpu| / max |cpu|` and whether both pick the same
//! top-1 token. A top-1 disagreement fails only when the CPU's own margin between the two picks
//! is larger than the error allowed, since near-ties may legitimately flip.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use zinc_models::backend::Backend;
use zinc_models::forward::Model;
use zinc_models::gguf::Gguf;
use zinc_models::sampler::argmax;
use zinc_models::tokenizer::{Tokenizer, Vocab};

use crate::gpu::{s8_decode_enabled, weight_bytes, Gpu};
use crate::harness;

#[derive(clap::Args)]
pub struct Args {
    /// The GGUF model.
    #[arg(short = 'm', long = "model")]
    model: PathBuf,
    /// The prompt run as the prefill.
    #[arg(
        short = 'p',
        long,
        default_value = "The capital of France is Paris, and the capital of Italy is"
    )]
    prompt: String,
    /// Greedy decode steps compared after the prefill.
    #[arg(short = 'n', long = "n-decode", default_value_t = 8)]
    n_decode: usize,
    /// KV cache positions on the GPU.
    #[arg(long, default_value_t = 4096)]
    ctx: usize,
    /// Prefill the prompt on the GPU in chunks of this many tokens (default: all at once).
    #[arg(long)]
    ubatch: Option<usize>,
    /// Largest relative logit error that passes (default: 2e-2, or 5e-2 where decode-size
    /// products run on int8 activations, the default unless `ZINC_S8=0`).
    #[arg(long)]
    tolerance: Option<f32>,
}

/// The relative logit error `check-model` allows by default.
pub const DEFAULT_TOLERANCE: f32 = 2e-2;

/// The default where decode-size products run on int8 activations: each such product is about
/// 5e-3 off its f32-activation value (docs/PERF.md, session 5), which the positions they serve
/// carry into the logits (the real Gemma 3 270M: 1.7e-2 against 1.5e-3 on f32 activations;
/// tiny synthetic files up to 2.2e-2).
pub const S8_TOLERANCE: f32 = 5e-2;

/// One position's comparison.
pub struct Row {
    what: String,
    rel_err: f32,
    top_cpu: u32,
    top_gpu: u32,
    /// `cpu[top_cpu] - cpu[top_gpu]`, relative to `max |cpu|`.
    margin: f32,
}

impl Row {
    fn new(what: String, cpu: &[f32], gpu: &[f32]) -> Self {
        let scale = cpu
            .iter()
            .fold(0f32, |m, v| m.max(v.abs()))
            .max(f32::MIN_POSITIVE);
        // NaN on either side must fail, so it is carried through `max` explicitly.
        let err = cpu.iter().zip(gpu).fold(0f32, |m, (c, g)| {
            let d = (c - g).abs();
            if d.is_nan() {
                f32::NAN
            } else {
                m.max(d)
            }
        });
        let (top_cpu, top_gpu) = (argmax(cpu), argmax(gpu));
        Self {
            what,
            rel_err: err / scale,
            top_cpu,
            top_gpu,
            margin: (cpu[top_cpu as usize] - cpu[top_gpu as usize]) / scale,
        }
    }

    pub fn passes(&self, tolerance: f32) -> bool {
        self.rel_err <= tolerance && self.margin <= tolerance
    }
}

pub fn run(args: &Args) -> Result<()> {
    let context = || format!("reading {}", args.model.display());
    let gguf = Gguf::open(&args.model).with_context(context)?;
    let tokenizer =
        Tokenizer::new(Vocab::from_gguf(&gguf).with_context(context)?).with_context(context)?;
    let ids = tokenizer.encode(&args.prompt, true, true);
    let device = harness::open_device()?;
    let weights = weight_bytes(&gguf);
    let mut gpu = Model::with_backend(&gguf, |c| Ok(Gpu::new(&device, c, args.ctx, weights)?))
        .with_context(|| format!("loading {} on the GPU", args.model.display()))?;
    let mut cpu = Model::from_gguf(&gguf).with_context(context)?;
    println!(
        "{}: {} on {}, {} prompt tokens, {} decode steps",
        args.model.display(),
        cpu.config().arch.name(),
        device.props().name,
        ids.len(),
        args.n_decode
    );

    let tolerance = match (args.tolerance, s8_decode_enabled()) {
        (Some(t), _) => t,
        (None, true) => {
            println!(
                "decode-size products on int8 activations (ZINC_S8=0: f32): tolerance {S8_TOLERANCE:.0e}"
            );
            S8_TOLERANCE
        }
        (None, false) => DEFAULT_TOLERANCE,
    };

    let ubatch = args.ubatch.unwrap_or(ids.len());
    anyhow::ensure!(ubatch > 0, "--ubatch must be at least 1");
    let rows = compare(&mut cpu, &mut gpu, &ids, ubatch, args.n_decode)?;
    verdict(&rows, tolerance)
}

/// Runs `ids` from position 0 and then `n_decode` greedy steps through both models and compares
/// their logits at every position. `tested` prefills in chunks of `ubatch` tokens, `reference`
/// in one.
pub fn compare<B: Backend + 'static>(
    reference: &mut Model,
    tested: &mut Model<B>,
    ids: &[u32],
    ubatch: usize,
    n_decode: usize,
) -> Result<Vec<Row>> {
    let n_vocab = reference.config().n_vocab;
    let c = reference.forward_all(ids, 0)?;
    let mut g = Vec::with_capacity(c.len());
    for (i, chunk) in ids.chunks(ubatch).enumerate() {
        g.extend(tested.forward_all(chunk, i * ubatch)?);
    }
    let mut rows: Vec<Row> = c
        .chunks_exact(n_vocab)
        .zip(g.chunks_exact(n_vocab))
        .enumerate()
        .map(|(i, (c, g))| Row::new(format!("prefill {i}"), c, g))
        .collect();
    // Both decode the reference's greedy choice, so they see the same tokens throughout.
    let mut token = argmax(&c[c.len() - n_vocab..]);
    for step in 0..n_decode {
        let pos = ids.len() + step;
        let (c, g) = (
            reference.forward(&[token], pos)?,
            tested.forward(&[token], pos)?,
        );
        rows.push(Row::new(format!("decode {step}"), &c, &g));
        token = argmax(&c);
    }
    Ok(rows)
}

/// Prints the comparison table; fails when a position differs beyond `tolerance`.
pub fn verdict(rows: &[Row], tolerance: f32) -> Result<()> {
    println!("| position | rel. error | top-1 cpu | top-1 gpu | verdict |");
    println!("|---|---|---|---|---|");
    for r in rows {
        let verdict = if !r.passes(tolerance) {
            "FAIL"
        } else if r.top_cpu != r.top_gpu {
            "ok (near-tie)"
        } else {
            "ok"
        };
        println!(
            "| {} | {:.2e} | {} | {} | {verdict} |",
            r.what, r.rel_err, r.top_cpu, r.top_gpu
        );
    }
    let agree = rows.iter().filter(|r| r.top_cpu == r.top_gpu).count();
    let worst = rows.iter().map(|r| r.rel_err).fold(0f32, f32::max);
    println!(
        "top-1 agreement {agree}/{}, max relative error {worst:.2e} (tolerance {tolerance:.0e})",
        rows.len(),
    );
    let failed = rows.iter().filter(|r| !r.passes(tolerance)).count();
    if failed > 0 {
        bail!(
            "{failed} of {} positions differ beyond the tolerance",
            rows.len()
        );
    }
    Ok(())
}
