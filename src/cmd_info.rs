//! `zinc info FILE.gguf [--json]`.

use std::fmt::Display;
use std::path::PathBuf;

use anyhow::{Context, Result};
use zinc_models::gguf::Gguf;
use zinc_models::summary::{summary, Summary};

#[derive(clap::Args)]
pub struct Args {
    /// The GGUF file.
    file: PathBuf,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(args: &Args) -> Result<()> {
    let context = || format!("reading {}", args.file.display());
    let gguf = Gguf::open(&args.file).with_context(context)?;
    let s = summary(&gguf).with_context(context)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&s)?);
    } else {
        print!("{}", table(&s));
    }
    Ok(())
}

fn table(s: &Summary) -> String {
    fn opt<T: Display>(v: &Option<T>) -> String {
        v.as_ref().map_or_else(|| "-".to_string(), T::to_string)
    }
    let rows = [
        ("architecture", opt(&s.architecture)),
        ("name", opt(&s.name)),
        ("file type", opt(&s.file_type)),
        (
            "file size",
            format!("{} ({})", s.file_size, human_bytes(s.file_size)),
        ),
        ("gguf version", s.gguf_version.to_string()),
        (
            "parameters",
            format!("{} ({})", s.parameter_count, human_count(s.parameter_count)),
        ),
        ("tensors", s.tensor_count.to_string()),
        ("context length", opt(&s.context_length)),
        ("embedding size", opt(&s.embedding_length)),
        ("feed-forward size", opt(&s.feed_forward_length)),
        ("layers", opt(&s.block_count)),
        ("heads", opt(&s.head_count)),
        ("kv heads", opt(&s.head_count_kv)),
        ("experts", opt(&s.expert_count)),
        ("experts used", opt(&s.expert_used_count)),
        ("vocabulary size", opt(&s.vocab_size)),
        ("tokenizer", opt(&s.tokenizer_model)),
        ("bos token id", opt(&s.bos_token_id)),
        ("eos token id", opt(&s.eos_token_id)),
        (
            "chat template",
            s.chat_template.as_ref().map_or_else(
                || "none".into(),
                |t| format!("{} chars: {}", t.chars, t.first_line),
            ),
        ),
    ];
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (key, value) in rows {
        out += &format!("{key:<width$}  {value}\n");
    }

    out += "\ntype      tensors    parameters         bytes\n";
    for t in &s.tensor_types {
        out += &format!(
            "{:<8}  {:>7}  {:>12}  {:>12}\n",
            t.type_name,
            t.tensors,
            t.parameters,
            opt(&t.bytes)
        );
    }
    out
}

pub fn human_bytes(n: u64) -> String {
    scaled(n, 1024.0, &["B", "KiB", "MiB", "GiB", "TiB"])
}

pub fn human_count(n: u64) -> String {
    scaled(n, 1000.0, &["", "K", "M", "B", "T"])
}

/// `n` in the largest unit that keeps it at least 1, with two decimals.
fn scaled(n: u64, base: f64, units: &[&str]) -> String {
    let mut v = n as f64;
    let mut unit = 0;
    while v >= base && unit + 1 < units.len() {
        v /= base;
        unit += 1;
    }
    format!("{v:.2} {}", units[unit]).trim_end().to_string()
}
