//! `zinc synth --preset NAME [--layers N] [--tiny] [--seed S] [--retype FROM=TO] -o FILE.gguf`
//! and `zinc synth --list`: synthetic real-shape Q4_K_M models (or other mixes, retyped).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use zinc_models::quant::GgmlType;
use zinc_models::synth::{preset, presets, Config, Preset, Synth, SynthError, WEIGHT_TYPES};

#[derive(clap::Args)]
pub struct Args {
    /// The model shape to write (see --list).
    #[arg(long, required_unless_present = "list")]
    preset: Option<String>,
    /// Override the number of layers (keeps the real widths).
    #[arg(long)]
    layers: Option<u32>,
    /// Same architecture and tensor names at tiny widths, for tests.
    #[arg(long)]
    tiny: bool,
    /// Seed of the random weights; the same seed writes the same bytes.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Store the tensors of type FROM as TO instead, e.g. `Q4_K=Q8_0,Q6_K=Q8_0` for a file
    /// with Q8_0's weights (the metadata keep saying Q4_K_M). TO is one of Q4_K, Q5_K, Q6_K,
    /// Q4_0, Q5_0, IQ4_NL, IQ4_XS, Q8_0, F16.
    #[arg(long, value_name = "FROM=TO", value_delimiter = ',', value_parser = parse_retype)]
    retype: Vec<(GgmlType, GgmlType)>,
    /// Output file.
    #[arg(short, long, required_unless_present = "list")]
    output: Option<PathBuf>,
    /// List the presets with their key figures.
    #[arg(long, conflicts_with_all = ["preset", "output"])]
    list: bool,
}

pub fn run(args: &Args) -> Result<()> {
    if args.list {
        print!("{}", list());
        return Ok(());
    }
    let (Some(name), Some(output)) = (&args.preset, &args.output) else {
        bail!("--preset and -o are required");
    };
    let Some(p) = preset(name) else {
        let names: Vec<&str> = presets().iter().map(|p| p.name).collect();
        bail!("unknown preset `{name}`; known: {}", names.join(", "));
    };
    let mut config = if args.tiny { p.config.tiny() } else { p.config };
    if let Some(n) = args.layers {
        config.n_layer = n;
    }
    let label = format!(
        "{} (synthetic{})",
        p.model,
        if args.tiny { ", tiny" } else { "" }
    );
    let mut synth = Synth::new(&label, config)?;
    for &(from, to) in &args.retype {
        if let Err(e) = synth.retype(from, to) {
            bail!("--retype {}={}: {e}", from.name(), to.name());
        }
    }

    let context = || format!("writing {}", output.display());
    let file = File::create(output).with_context(context)?;
    let out = BufWriter::with_capacity(8 << 20, file);
    let start = Instant::now();
    let mut report = Progress::new(start);
    let out = synth
        .write(args.seed, out, &mut |done, total| {
            report.update(done, total)
        })
        .with_context(context)?;
    let file = out
        .into_inner()
        .map_err(|e| e.into_error())
        .with_context(context)?;
    // Time the bytes onto the disk, not into the page cache (devices such as /dev/null
    // cannot sync).
    if file.metadata().with_context(context)?.is_file() {
        file.sync_all().with_context(context)?;
    }
    let secs = start.elapsed().as_secs_f64();
    let bytes = synth.data_size();
    eprintln!(
        "\nwrote {} ({:.2} GiB, {} tensors) in {secs:.1} s, {:.0} MB/s",
        output.display(),
        bytes as f64 / GIB,
        synth.tensors.len(),
        bytes as f64 / 1e6 / secs,
    );
    Ok(())
}

const GIB: f64 = (1u64 << 30) as f64;

/// `FROM=TO`, two ggml type names (any case).
fn parse_retype(s: &str) -> Result<(GgmlType, GgmlType), String> {
    let ty = |name: &str| {
        GgmlType::ALL
            .iter()
            .copied()
            .find(|t| t.name().eq_ignore_ascii_case(name.trim()))
            .ok_or_else(|| format!("unknown type `{name}`"))
    };
    let (from, to) = s
        .split_once('=')
        .ok_or_else(|| format!("expected FROM=TO (e.g. Q4_K=Q8_0), found `{s}`"))?;
    let (from, to) = (ty(from)?, ty(to)?);
    if !WEIGHT_TYPES.contains(&to) {
        return Err(SynthError::NoGenerator(to).to_string());
    }
    Ok((from, to))
}

/// A one-line progress report on stderr, redrawn at most a few times a second.
struct Progress {
    start: Instant,
    last: Option<Instant>,
}

impl Progress {
    fn new(start: Instant) -> Self {
        Self { start, last: None }
    }

    fn update(&mut self, done: u64, total: u64) {
        let now = Instant::now();
        let recent = self
            .last
            .is_some_and(|t| now - t < Duration::from_millis(250));
        if recent && done < total {
            return;
        }
        self.last = Some(now);
        let secs = (now - self.start).as_secs_f64().max(1e-3);
        let mut err = std::io::stderr().lock();
        // Progress is best effort: a closed stderr must not fail the write.
        let _ = write!(
            err,
            "\r{:>8.0} / {:.0} MB  {:>3.0}%  {:>5.0} MB/s",
            done as f64 / 1e6,
            total as f64 / 1e6,
            100.0 * done as f64 / total.max(1) as f64,
            done as f64 / 1e6 / secs,
        );
        let _ = err.flush();
    }
}

/// The `--list` table: key figures of every preset, guesses marked with `*`.
fn list() -> String {
    let mut s = String::new();
    for p in presets() {
        let size = Synth::new(p.model, p.config.clone())
            .map(|synth| synth.data_size() as f64 / GIB)
            .unwrap_or(0.0);
        s += &format!(
            "{:<16} {:<10} {} ({size:.2} GiB Q4_K_M)\n",
            p.name,
            p.config.arch.name(),
            p.model
        );
        s += &format!("    {}\n", figures(&p));
        if !p.notes.is_empty() {
            s += &format!("    note: {}\n", p.notes);
        }
    }
    s += "* recalled rather than checked against the model's config.json\n";
    s
}

fn figures(p: &Preset) -> String {
    let c: &Config = &p.config;
    let mark = |field: &str| if p.guesses.contains(&field) { "*" } else { "" };
    let mut f = vec![
        format!("embd {}", c.n_embd),
        format!("layers {}", c.n_layer),
        format!(
            "heads {}{}/{}{}",
            c.n_head,
            mark("n_head"),
            c.n_head_kv,
            mark("n_head_kv")
        ),
        format!("head_dim {}", c.head_dim),
        format!("ffn {}{}", c.n_ff, mark("n_ff")),
        format!("vocab {}", c.n_vocab),
        format!("rope {}", c.rope_base),
        format!("ctx {}", c.n_ctx),
    ];
    if let Some(m) = c.moe {
        f.push(format!(
            "experts {}x{} top-{}{}",
            m.n_expert,
            m.n_ff_exp,
            m.n_expert_used,
            m.n_ff_shexp
                .map_or(String::new(), |s| format!(" + shared {s}"))
        ));
    }
    if let Some(d) = c.delta_net {
        f.push(format!(
            "delta-net conv {} state {} k-heads {} v-heads {}{} inner {} (full attn every {})",
            d.conv_kernel,
            d.state_size,
            d.n_k_heads,
            d.n_v_heads,
            mark("ssm"),
            d.inner_size(),
            d.full_attention_interval
        ));
    }
    if let Some(s) = c.swa {
        f.push(format!(
            "swa window {}{} 1 global in {}; global head_dim {} kv {}{}{}",
            s.window,
            mark("window"),
            s.period,
            s.head_dim_global,
            s.n_head_kv_global,
            mark("global_kv"),
            if s.global_k_eq_v { " (K = V)" } else { "" }
        ));
    }
    if c.tied_embeddings {
        f.push("tied embeddings".into());
    }
    f.push(format!("tokenizer {:?}{}", c.tokenizer, mark("tokenizer")));
    f.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retype_pairs_parse_and_bad_ones_say_why() {
        assert_eq!(
            parse_retype("q4_k=Q8_0"),
            Ok((GgmlType::Q4_K, GgmlType::Q8_0))
        );
        assert_eq!(
            parse_retype("Q6_K = q8_0"),
            Ok((GgmlType::Q6_K, GgmlType::Q8_0))
        );
        assert!(parse_retype("Q4_K").unwrap_err().contains("FROM=TO"));
        assert!(parse_retype("Q4_K=Q9_9")
            .unwrap_err()
            .contains("unknown type `Q9_9`"));
        let err = parse_retype("Q4_K=IQ2_XS").unwrap_err();
        assert!(err.contains("cannot write weights as IQ2_XS"), "{err}");
    }

    fn tiny(preset: &str, retype: Vec<(GgmlType, GgmlType)>, output: PathBuf) -> Args {
        Args {
            preset: Some(preset.into()),
            layers: None,
            tiny: true,
            seed: 0,
            retype,
            output: Some(output),
            list: false,
        }
    }

    #[test]
    fn retyped_files_hold_the_new_types_and_blocks_must_fit_the_rows() {
        let dir = std::env::temp_dir().join(format!("zinc-synth-retype-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let types = |path: &PathBuf| -> Vec<GgmlType> {
            let gguf = zinc_models::gguf::Gguf::open(path).unwrap();
            gguf.tensors()
                .iter()
                .map(|t| t.ggml_type().unwrap())
                .collect()
        };
        let plain = dir.join("plain.gguf");
        run(&tiny("llama3-8b", vec![], plain.clone())).unwrap();
        let q8 = dir.join("q8_0.gguf");
        let to_q8 = vec![
            (GgmlType::Q4_K, GgmlType::Q8_0),
            (GgmlType::Q6_K, GgmlType::Q8_0),
        ];
        run(&tiny("llama3-8b", to_q8, q8.clone())).unwrap();
        let (before, after) = (types(&plain), types(&q8));
        assert!(before.contains(&GgmlType::Q4_K) && before.contains(&GgmlType::Q6_K));
        for (b, a) in before.iter().zip(&after) {
            match b {
                GgmlType::Q4_K | GgmlType::Q6_K => assert_eq!(*a, GgmlType::Q8_0),
                _ => assert_eq!(a, b),
            }
        }
        // Qwen 3.5's convolution weights are rows of 4: not whole Q8_0 blocks, and nothing is
        // written.
        let bad = dir.join("bad.gguf");
        let to_q8 = vec![(GgmlType::F32, GgmlType::Q8_0)];
        let err = run(&tiny("qwen35-9b", to_q8, bad.clone()))
            .unwrap_err()
            .to_string();
        let written = bad.exists();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            err.contains("rows of 4 weights, not whole 32-weight blocks"),
            "{err}"
        );
        assert!(!written);
    }
}
