//! `zinc bench [-m FILE.gguf] [-p 512,...] [-n 128,...] [-r 5] [--ubatch 2048] [--json FILE]
//! [--profile] [--cpu]`: llama-bench-style throughput of a whole model. `ppP` prefills P random
//! tokens into an empty cache; `tgN` generates N tokens one at a time from an empty cache. Each
//! test ends every forward pass as greedy generation does: the next token picked on the backend
//! (llama-bench copies the last token's logits to the host instead; at a 128k vocabulary that
//! is 0.5 MB, tens of microseconds). Each test runs once to warm up, then `-r` times; tokens per
//! second as mean and standard deviation.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use zinc_models::backend::Backend;
use zinc_models::forward::Model;
use zinc_models::gguf::Gguf;
use zinc_models::sampler::{Sampler, SamplerConfig};
use zinc_models::summary::summary;

use crate::cmd_info::{human_bytes, human_count};
use crate::cmd_run::{gpu_model, prefill, DEFAULT_MODEL};
use crate::gpu::{Gpu, KernelTimes};

#[derive(clap::Args)]
pub struct Args {
    /// The GGUF model [default: .models/gemma-3-270m-q4_k_m.gguf].
    #[arg(short = 'm', long = "model")]
    model: Option<PathBuf>,
    /// Prompt lengths to prefill (comma-separated); 0 skips the prefill tests.
    #[arg(
        short = 'p',
        long = "n-prompt",
        value_delimiter = ',',
        default_value = "512"
    )]
    n_prompt: Vec<usize>,
    /// Token counts to generate (comma-separated); 0 skips the generation tests.
    #[arg(
        short = 'n',
        long = "n-gen",
        value_delimiter = ',',
        default_value = "128"
    )]
    n_gen: Vec<usize>,
    /// Timed repetitions of each test, after one warm-up run.
    #[arg(short = 'r', long = "repetitions", default_value_t = 5)]
    repetitions: usize,
    /// Prefill in chunks of this many tokens (llama-bench's default is 512).
    #[arg(long, default_value_t = crate::cmd_run::DEFAULT_UBATCH)]
    ubatch: usize,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Time each kernel during one prefill of the first prompt length (GPU only).
    #[arg(long)]
    profile: bool,
    /// Run on the CPU reference forward pass.
    #[arg(long)]
    cpu: bool,
}

/// One test's result, in llama-bench's JSON vocabulary.
#[derive(Serialize)]
struct TestResult {
    model: String,
    backend: String,
    model_size: u64,
    model_n_params: u64,
    n_prompt: usize,
    n_gen: usize,
    n_ubatch: usize,
    test: String,
    samples_ts: Vec<f64>,
    avg_ts: f64,
    stddev_ts: f64,
}

pub fn run(args: &Args) -> Result<()> {
    anyhow::ensure!(args.repetitions > 0, "-r must be at least 1");
    anyhow::ensure!(args.ubatch > 0, "--ubatch must be at least 1");
    let path = args
        .model
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_MODEL));
    let context = || format!("reading {}", path.display());
    let gguf = Gguf::open(&path).with_context(context)?;
    let info = summary(&gguf).with_context(context)?;
    let label = format!(
        "{} {} {}",
        info.architecture.as_deref().unwrap_or("?"),
        human_count(info.parameter_count),
        info.file_type.as_deref().unwrap_or("")
    );
    // The profile generates after its prefill.
    let profiled = args.n_prompt.first().map_or(0, |&p| p + PROFILED_STEPS);
    let ctx = args
        .n_prompt
        .iter()
        .chain(&args.n_gen)
        .chain(args.profile.then_some(&profiled))
        .max()
        .copied()
        .unwrap_or(1)
        .max(1);
    let base = TestResult {
        model: label.trim().to_string(),
        backend: String::new(),
        model_size: info.file_size,
        model_n_params: info.parameter_count,
        n_prompt: 0,
        n_gen: 0,
        n_ubatch: args.ubatch,
        test: String::new(),
        samples_ts: Vec::new(),
        avg_ts: 0.0,
        stddev_ts: 0.0,
    };
    let results = match gpu_model(&gguf, ctx, args.cpu).with_context(context)? {
        Some((mut model, device)) => {
            let backend = format!("zinc ({device})");
            let results = bench(&mut model, args, &TestResult { backend, ..base })?;
            if args.profile {
                profile(&mut model, args)?;
            }
            results
        }
        None => {
            let mut model = Model::from_gguf(&gguf).with_context(context)?;
            let backend = "zinc (CPU reference)".to_string();
            bench(&mut model, args, &TestResult { backend, ..base })?
        }
    };
    if let Some(file) = &args.json {
        std::fs::write(file, serde_json::to_string_pretty(&results)?)
            .with_context(|| format!("writing {}", file.display()))?;
    }
    Ok(())
}

/// Runs every test, printing the table row by row.
fn bench<B: Backend + 'static>(
    model: &mut Model<B>,
    args: &Args,
    base: &TestResult,
) -> Result<Vec<TestResult>> {
    let n_vocab = model.config().n_vocab;
    let mut rng = SmallRng::seed_from_u64(42);
    let mut tokens = |n: usize| -> Vec<u32> {
        (0..n)
            .map(|_| rng.random_range(0..n_vocab as u32))
            .collect()
    };
    println!("| model | size | params | backend | test | t/s |");
    println!("| --- | ---: | ---: | --- | ---: | ---: |");
    let mut results = Vec::new();
    let mut greedy = Sampler::new(SamplerConfig::default());
    let tests = (args.n_prompt.iter().filter(|&&p| p > 0).map(|&p| (p, 0)))
        .chain(args.n_gen.iter().filter(|&&n| n > 0).map(|&n| (0, n)));
    for (n_prompt, n_gen) in tests {
        let ids = tokens(n_prompt.max(n_gen));
        let mut samples = Vec::new();
        for rep in 0..=args.repetitions {
            model.reset();
            let start = Instant::now();
            if n_prompt > 0 {
                prefill(model, &ids, args.ubatch, &mut greedy)?;
            } else {
                for (pos, &id) in ids.iter().enumerate() {
                    model.forward_sample(&[id], pos, &mut greedy)?;
                }
            }
            let secs = start.elapsed().as_secs_f64();
            if rep > 0 {
                samples.push((n_prompt + n_gen) as f64 / secs);
            }
        }
        let (avg, sd) = mean_sd(&samples);
        let test = if n_prompt > 0 {
            format!("pp{n_prompt}")
        } else {
            format!("tg{n_gen}")
        };
        println!(
            "| {} | {} | {} | {} | {test} | {avg:.2} ± {sd:.2} |",
            base.model,
            human_bytes(base.model_size),
            human_count(base.model_n_params),
            base.backend
        );
        std::io::stdout().flush()?;
        results.push(TestResult {
            model: base.model.clone(),
            backend: base.backend.clone(),
            n_prompt,
            n_gen,
            test,
            samples_ts: samples,
            avg_ts: avg,
            stddev_ts: sd,
            ..*base
        });
    }
    Ok(results)
}

/// Steps of generation profiled after the prefill.
const PROFILED_STEPS: usize = 32;

/// Every kernel timed during one prefill of the first prompt length, then during
/// [`PROFILED_STEPS`] generation steps after it: where the time goes.
fn profile(model: &mut Model<Gpu>, args: &Args) -> Result<()> {
    let n = args
        .n_prompt
        .first()
        .copied()
        .filter(|&n| n > 0)
        .unwrap_or(512);
    let n_vocab = model.config().n_vocab as u32;
    let ids: Vec<u32> = (0..(n + PROFILED_STEPS) as u32)
        .map(|i| i * 7919 % n_vocab)
        .collect();
    model.reset();
    let mut greedy = Sampler::new(SamplerConfig::default());
    prefill(model, &ids[..n], args.ubatch, &mut greedy)?;
    model.reset();
    model.backend().start_profile();
    let start = Instant::now();
    prefill(model, &ids[..n], args.ubatch, &mut greedy)?;
    let wall = start.elapsed();
    print_profile(
        &format!("one prefill of {n} tokens (ubatch {})", args.ubatch),
        model.backend().finish_profile()?,
        wall.as_secs_f64() * 1e3,
    );
    model.backend().start_profile();
    let start = Instant::now();
    for (i, &id) in ids[n..].iter().enumerate() {
        model.forward_sample(&[id], n + i, &mut greedy)?;
    }
    let wall = start.elapsed();
    print_profile(
        &format!("{PROFILED_STEPS} generation steps after it"),
        model.backend().finish_profile()?,
        wall.as_secs_f64() * 1e3,
    );
    Ok(())
}

fn print_profile(what: &str, times: KernelTimes, wall_ms: f64) {
    let total: f64 = times.by_kernel.values().map(|&(_, ms)| ms).sum();
    let mut rows: Vec<_> = times.by_kernel.into_iter().collect();
    rows.sort_by(|a, b| b.1 .1.total_cmp(&a.1 .1));
    println!("\nprofile: {what}");
    println!("| kernel | launches | ms | share of kernel time |");
    println!("| --- | ---: | ---: | ---: |");
    for (name, (launches, ms)) in rows {
        println!(
            "| {name} | {launches} | {ms:.3} | {:.1}% |",
            100.0 * ms / total
        );
    }
    println!(
        "| all kernels | | {total:.3} | wall {wall_ms:.3} ms (events add a little; the rest is host work and copies) |"
    );
}

/// Mean and sample standard deviation.
fn mean_sd(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    if v.len() < 2 {
        return (mean, 0.0);
    }
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt())
}

#[cfg(test)]
mod tests {
    use super::mean_sd;

    #[test]
    fn mean_and_sample_deviation() {
        let (m, sd) = mean_sd(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert_eq!(m, 5.0);
        assert!((sd - 2.138_089_935).abs() < 1e-6, "{sd}");
        assert_eq!(mean_sd(&[3.0]), (3.0, 0.0));
    }
}
