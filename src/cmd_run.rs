//! `zinc run [--cpu] [-m FILE.gguf] -p PROMPT [-n N] [--temp T] [--top-k K] [--top-p P] [--seed S]
//! [--chat]`: generate text, streaming tokens to stdout and speeds to stderr.

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use zinc_models::backend::Backend;
use zinc_models::chat::{render_chat, Message};
use zinc_models::forward::{Model, ModelError};
use zinc_models::gguf::Gguf;
use zinc_models::sampler::{Sampler, SamplerConfig};
use zinc_models::tokenizer::{Tokenizer, Vocab};
use zinc_runtime::Device;

use crate::gpu::{expanded_types, weight_bytes, Gpu, GpuError};
use crate::harness;

/// Where scripts/fetch-gemma3-270m.sh puts the project's default model.
pub const DEFAULT_MODEL: &str = ".models/gemma-3-270m-q4_k_m.gguf";

/// Prompt tokens per prefill chunk by default. Longer chunks keep the GEMMs on their large
/// tiles: on the H200, llama3-8b Q4_K_M pp2048 ran at 30,663/30,454 tok/s in chunks of 512,
/// 35,008/35,045 in chunks of 1024 and 35,727/36,034 in one chunk (docs/PERF.md, session 13);
/// the activations of 2048 tokens take a few hundred MB.
pub const DEFAULT_UBATCH: usize = 2048;

#[derive(clap::Args)]
pub struct Args {
    /// Run on the CPU reference forward pass. Without it zinc uses the GPU where there is one
    /// and the model's architecture runs there, else the CPU.
    #[arg(long)]
    cpu: bool,
    /// KV cache positions on the GPU.
    #[arg(long, default_value_t = 4096)]
    ctx: usize,
    /// Prefill the prompt in chunks of this many tokens.
    #[arg(long, default_value_t = DEFAULT_UBATCH)]
    ubatch: usize,
    /// The GGUF model [default: .models/gemma-3-270m-q4_k_m.gguf].
    #[arg(short = 'm', long = "model")]
    model: Option<PathBuf>,
    /// The prompt.
    #[arg(short = 'p', long)]
    prompt: String,
    /// Maximum number of tokens to generate.
    #[arg(short = 'n', long = "n-predict", default_value_t = 128)]
    n_predict: usize,
    /// Sampling temperature; 0 is greedy.
    #[arg(long, default_value_t = 0.0)]
    temp: f32,
    /// Sample among the K most likely tokens only; 0 disables.
    #[arg(long, default_value_t = 0)]
    top_k: usize,
    /// Sample among the most likely tokens whose probabilities sum to P; 1 disables.
    #[arg(long, default_value_t = 1.0)]
    top_p: f32,
    /// Seed of the sampler's random numbers.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Wrap the prompt in the model's chat template as one user turn.
    #[arg(long)]
    chat: bool,
}

pub fn run(args: &Args) -> Result<()> {
    let path = args
        .model
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_MODEL));
    if args.model.is_none() && !path.exists() {
        bail!("the default model {DEFAULT_MODEL} is absent: run scripts/fetch-gemma3-270m.sh, or pass -m FILE.gguf");
    }
    let context = || format!("reading {}", path.display());
    let gguf = Gguf::open(&path).with_context(context)?;
    let tokenizer =
        Tokenizer::new(Vocab::from_gguf(&gguf).with_context(context)?).with_context(context)?;

    let prompt = if args.chat {
        chat_prompt(&gguf, &tokenizer, &args.prompt)?
    } else {
        args.prompt.clone()
    };
    let mut ids = tokenizer.encode(&prompt, true, true);
    // Chat templates write BOS themselves; do not double it.
    if ids.len() > 1 && ids[0] == ids[1] && Some(ids[0]) == tokenizer.bos() {
        ids.remove(0);
    }
    if args.ubatch == 0 {
        bail!("--ubatch must be at least 1");
    }
    match gpu_model(&gguf, args.ctx, args.cpu).with_context(context)? {
        Some((mut model, _)) => {
            if ids.len() > args.ctx {
                bail!(
                    "the prompt is {} tokens, more than the context of {} positions (--ctx)",
                    ids.len(),
                    args.ctx
                );
            }
            generate(&mut model, &tokenizer, &ids, args)
        }
        None => {
            let mut model = Model::from_gguf(&gguf).with_context(context)?;
            generate(&mut model, &tokenizer, &ids, args)
        }
    }
}

/// The model on the first GPU with a KV cache of `ctx` positions, and the GPU's name; or
/// `None` (with a note on stderr) where it runs on the CPU: `cpu`, no GPU, or an architecture
/// the GPU backend does not run yet.
pub fn gpu_model(gguf: &Gguf, ctx: usize, cpu: bool) -> Result<Option<(Model<Gpu>, String)>> {
    if cpu {
        return Ok(None);
    }
    if !harness::emulation_requested() && Device::count().unwrap_or(0) == 0 {
        eprintln!("zinc: no GPU found; running on the CPU reference");
        return Ok(None);
    }
    let device = harness::open_device()?;
    let weights = weight_bytes(gguf);
    for (ty, matrices) in expanded_types(gguf) {
        eprintln!(
            "zinc: {matrices} matrices are {ty}, which has no GPU kernels yet: they run from f16 \
             copies (more memory, slower decode)"
        );
    }
    match Model::with_backend(gguf, |c| Ok(Gpu::new(&device, c, ctx, weights)?)) {
        Ok(model) => Ok(Some((model, device.props().name.clone()))),
        Err(ModelError::Backend(e))
            if matches!(e.downcast_ref(), Some(GpuError::UnsupportedArch(_))) =>
        {
            eprintln!("zinc: {e}; running on the CPU reference");
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

/// Prefills `ids`, then samples and streams up to `n_predict` tokens.
fn generate<B: Backend + 'static>(
    model: &mut Model<B>,
    tokenizer: &Tokenizer,
    ids: &[u32],
    args: &Args,
) -> Result<()> {
    let mut sampler = Sampler::new(SamplerConfig {
        temperature: args.temp,
        top_k: args.top_k,
        top_p: args.top_p,
        seed: args.seed,
    });
    let start = Instant::now();
    let mut token = prefill(model, ids, args.ubatch, &mut sampler)?;
    let prefill = start.elapsed();

    let mut out = std::io::stdout().lock();
    let mut text = Utf8Stream::default();
    let (mut decode, mut decoded) = (Duration::ZERO, 0usize);
    for i in 0..args.n_predict {
        if tokenizer.is_eog(token) {
            break;
        }
        out.write_all(text.push(tokenizer.token_to_piece(token)).as_bytes())?;
        out.flush()?;
        if model.position() >= args.ctx {
            eprintln!(
                "\nzinc: the context of {} positions is full (--ctx)",
                args.ctx
            );
            break;
        }
        if i + 1 < args.n_predict {
            let step = Instant::now();
            token = model.forward_sample(&[token], model.position(), &mut sampler)?;
            decode += step.elapsed();
            decoded += 1;
        }
    }
    writeln!(out, "{}", text.finish())?;
    eprintln!(
        "prefill: {} tokens in {:.2} s ({:.1} tok/s); decode: {decoded} tokens in {:.2} s ({:.1} tok/s)",
        ids.len(),
        prefill.as_secs_f64(),
        ids.len() as f64 / prefill.as_secs_f64(),
        decode.as_secs_f64(),
        decoded as f64 / decode.as_secs_f64().max(f64::MIN_POSITIVE),
    );
    Ok(())
}

/// Runs `ids` from position 0 in chunks of `ubatch` tokens; the token `sampler` picks after
/// the last one.
pub fn prefill<B: Backend + 'static>(
    model: &mut Model<B>,
    ids: &[u32],
    ubatch: usize,
    sampler: &mut Sampler,
) -> Result<u32> {
    let last = ids.len().saturating_sub(1) / ubatch * ubatch;
    for (i, chunk) in ids[..last].chunks(ubatch).enumerate() {
        model.ingest(chunk, i * ubatch)?;
    }
    Ok(model.forward_sample(&ids[last..], last, sampler)?)
}

/// `prompt` as the one user turn of the model's chat template, ready for the reply.
fn chat_prompt(gguf: &Gguf, tokenizer: &Tokenizer, prompt: &str) -> Result<String> {
    let template = gguf
        .get_opt::<&str>("tokenizer.chat_template")?
        .context("the model has no chat template (tokenizer.chat_template); run without --chat")?;
    let text = |id: Option<u32>| {
        id.and_then(|id| tokenizer.token_text(id))
            .unwrap_or_default()
    };
    let rendered = render_chat(
        template,
        &[Message::new("user", prompt)],
        true,
        text(tokenizer.bos()),
        text(tokenizer.eos()),
    )?;
    Ok(rendered)
}

/// Turns token pieces into text as they come: a character split across tokens waits for its
/// remaining bytes; bytes that can never be valid UTF-8 become U+FFFD.
#[derive(Default)]
struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    /// Appends `bytes` and returns all text completed so far.
    fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut text = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    text.push_str(s);
                    self.pending.clear();
                    return text;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    text.push_str(
                        std::str::from_utf8(&self.pending[..valid]).expect("checked prefix"),
                    );
                    match e.error_len() {
                        // An incomplete character at the end: keep it for the next piece.
                        None => {
                            self.pending.drain(..valid);
                            return text;
                        }
                        Some(bad) => {
                            text.push(char::REPLACEMENT_CHARACTER);
                            self.pending.drain(..valid + bad);
                        }
                    }
                }
            }
        }
    }

    /// Whatever is left when generation ends.
    fn finish(self) -> String {
        String::from_utf8_lossy(&self.pending).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::Utf8Stream;

    #[test]
    fn utf8_stream_joins_split_characters() {
        let mut s = Utf8Stream::default();
        let euro = "€".as_bytes(); // three bytes
        assert_eq!(s.push(b"a"), "a");
        assert_eq!(s.push(&euro[..1]), "");
        assert_eq!(s.push(&euro[1..2]), "");
        assert_eq!(s.push(&[euro[2], b'b']), "€b");
        assert_eq!(s.push(&[0xff, b'c']), "\u{fffd}c");
        assert_eq!(s.push(&euro[..2]), "");
        assert_eq!(s.finish(), "\u{fffd}");
    }
}
