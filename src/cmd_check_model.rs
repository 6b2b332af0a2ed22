//! `zinc check-model -m FILE.gguf [-p PROMPT] [-n N] [--ctx C] [--tolerance T]`: runs a model on
//! the GPU backend and on the CPU reference, the same tokens through both, and compares their
//! logits at every prefill position and for `N` greedy decode steps.
//!
//! Per position: the relative error `max |gpu - cpu| / max |cpu|` and whether both pick the same
//! top-1 token. A top-1 disagreement fails only when the CPU's own margin between the two picks
//! is larger than the error allowed, since near-ties may legitimately flip.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use zinc_models::forward::Model;
use zinc_models::gguf::Gguf;
use zinc_models::sampler::argmax;
use zinc_models::tokenizer::{Tokenizer, Vocab};

use crate::gpu::{weight_bytes, Gpu};
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
    /// Largest relative logit error that passes.
    #[arg(long, default_value_t = 2e-2)]
    tolerance: f32,
}

/// One position's comparison.
struct Row {
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

    fn passes(&self, tolerance: f32) -> bool {
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

    let n_vocab = cpu.config().n_vocab;
    let (c, g) = (cpu.forward_all(&ids, 0)?, gpu.forward_all(&ids, 0)?);
    let mut rows: Vec<Row> = c
        .chunks_exact(n_vocab)
        .zip(g.chunks_exact(n_vocab))
        .enumerate()
        .map(|(i, (c, g))| Row::new(format!("prefill {i}"), c, g))
        .collect();
    // Both decode the CPU's greedy choice, so they see the same tokens throughout.
    let mut token = argmax(&c[c.len() - n_vocab..]);
    for step in 0..args.n_decode {
        let pos = ids.len() + step;
        let (c, g) = (cpu.forward(&[token], pos)?, gpu.forward(&[token], pos)?);
        rows.push(Row::new(format!("decode {step}"), &c, &g));
        token = argmax(&c);
    }

    println!("| position | rel. error | top-1 cpu | top-1 gpu | verdict |");
    println!("|---|---|---|---|---|");
    for r in &rows {
        let verdict = if !r.passes(args.tolerance) {
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
        "top-1 agreement {agree}/{}, max relative error {worst:.2e} (tolerance {:.0e})",
        rows.len(),
        args.tolerance
    );
    let failed = rows.iter().filter(|r| !r.passes(args.tolerance)).count();
    if failed > 0 {
        bail!(
            "{failed} of {} positions differ beyond the tolerance",
            rows.len()
        );
    }
    Ok(())
}
