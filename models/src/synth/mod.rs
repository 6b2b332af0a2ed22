//! Synthetic models: GGUF files with random but finite weights and the exact tensor names,
//! shapes, metadata and Q4_K_M quantization mix of real models, for measuring speed on real
//! shapes without downloading weights (`zinc synth`).
//!
//! [`Synth::new`] lays out a model from a [`Config`]; [`Synth::write`] streams it to disk,
//! generating data chunk by chunk on all cores in constant memory. Each chunk's random stream is
//! seeded from (seed, tensor, chunk), so a file is byte-identical for a seed whatever the thread
//! count.

mod gen;
mod presets;
mod quant_mix;
mod tensors;
mod vocab;

pub use gen::{WEIGHT_STD, WEIGHT_TYPES};
pub use presets::{preset, presets, Arch, Config, DeltaNet, Moe, Preset, Swa};
pub use tensors::Init;
pub use vocab::{SynthVocab, TokenizerKind};

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;

use rayon::prelude::*;
use thiserror::Error;

use crate::gguf::{Array, GgufWriter, TensorSpec, Value, WriteError, DEFAULT_ALIGNMENT};
use crate::quant::GgmlType;
use gen::WyRand;

#[derive(Debug, Error)]
pub enum SynthError {
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("a model needs at least one layer")]
    NoLayers,
    #[error("cannot write weights as {}; known: {}", .0.name(), type_names(&WEIGHT_TYPES))]
    NoGenerator(GgmlType),
    #[error("tensor `{name}` has rows of {row} weights, not whole {block}-weight blocks")]
    RowsNotBlocks {
        name: String,
        row: u64,
        block: usize,
    },
}

fn type_names(types: &[GgmlType]) -> String {
    types
        .iter()
        .map(|t| t.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// One tensor of a synthetic model.
#[derive(Debug, Clone, PartialEq)]
pub struct SynthTensor {
    pub spec: TensorSpec,
    pub init: Init,
}

/// A synthetic model laid out: its metadata and tensors, ready to write.
#[derive(Debug, Clone)]
pub struct Synth {
    pub config: Config,
    pub metadata: Vec<(String, Value)>,
    pub tensors: Vec<SynthTensor>,
}

/// Data is generated in chunks of about this many bytes, one rayon task each.
const CHUNK_BYTES: usize = 1 << 20;
/// Chunks generated per batch handed to the writer thread; bounds memory to a few batches.
const BATCH_CHUNKS: usize = 32;

impl Synth {
    /// Lays out the model `config` under the name `name`.
    pub fn new(name: &str, config: Config) -> Result<Self, SynthError> {
        if config.n_layer == 0 {
            return Err(SynthError::NoLayers);
        }
        let planned = tensors::tensor_list(&config);
        let types = quant_mix::q4_k_m_types(&planned, config.n_layer);
        let tensors = planned
            .into_iter()
            .zip(types)
            .map(|(t, ty)| SynthTensor {
                spec: TensorSpec {
                    name: t.name,
                    dims: t.dims,
                    ty,
                },
                init: t.init,
            })
            .collect();
        let metadata = metadata(name, &config);
        Ok(Self {
            config,
            metadata,
            tensors,
        })
    }

    /// Stores the tensors of type `from` as `to` instead, e.g. Q4_K as Q5_K for a file like a
    /// Q5_K_M one (the metadata keep saying Q4_K_M). `to` must be one of [`WEIGHT_TYPES`], and
    /// the retyped tensors' rows whole blocks of it; otherwise nothing changes.
    pub fn retype(&mut self, from: GgmlType, to: GgmlType) -> Result<(), SynthError> {
        if !WEIGHT_TYPES.contains(&to) {
            return Err(SynthError::NoGenerator(to));
        }
        let block = to.block_size();
        let retyped = self.tensors.iter().filter(|t| t.spec.ty == from);
        if let Some(t) = retyped.clone().find(|t| t.spec.dims[0] % block as u64 != 0) {
            return Err(SynthError::RowsNotBlocks {
                name: t.spec.name.clone(),
                row: t.spec.dims[0],
                block,
            });
        }
        for t in self.tensors.iter_mut().filter(|t| t.spec.ty == from) {
            t.spec.ty = to;
        }
        Ok(())
    }

    /// Bytes of tensor data, alignment padding included (the file adds its header).
    pub fn data_size(&self) -> u64 {
        self.tensors
            .iter()
            .map(|t| padded(tensor_bytes(&t.spec)))
            .sum()
    }

    /// Writes the GGUF file to `out`, calling `progress(written, total)` (data bytes) as it goes.
    pub fn write<W: Write + Send>(
        &self,
        seed: u64,
        mut out: W,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<W, SynthError> {
        let specs: Vec<TensorSpec> = self.tensors.iter().map(|t| t.spec.clone()).collect();
        // The header comes from the GGUF writer; the data is streamed below, in chunks, with
        // the same alignment, since the writer takes each tensor's data in one slice.
        GgufWriter::new(&mut out, &self.metadata, &specs)?;

        let jobs: Vec<Chunk> = self.chunks();
        let total = self.data_size();
        let written = AtomicU64::new(0);
        std::thread::scope(|s| {
            let (tx, rx) = mpsc::sync_channel::<Vec<Vec<u8>>>(1);
            let writer = s.spawn(|| -> std::io::Result<W> {
                for batch in rx {
                    for buf in batch {
                        out.write_all(&buf)?;
                        written.fetch_add(buf.len() as u64, Ordering::Relaxed);
                    }
                }
                out.flush()?;
                Ok(out)
            });
            for batch in jobs.chunks(BATCH_CHUNKS) {
                let bufs = batch.par_iter().map(|c| self.generate(seed, c)).collect();
                if tx.send(bufs).is_err() {
                    break; // The writer failed; its error is returned below.
                }
                progress(written.load(Ordering::Relaxed), total);
            }
            drop(tx);
            let out = writer
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
            progress(total, total);
            Ok(out)
        })
    }

    /// Every chunk of every tensor, in file order.
    fn chunks(&self) -> Vec<Chunk> {
        let mut chunks = Vec::new();
        for (tensor, t) in self.tensors.iter().enumerate() {
            let ty = t.spec.ty;
            let n_blocks = tensor_bytes(&t.spec) / ty.type_size() as u64;
            let per_chunk = (CHUNK_BYTES / ty.type_size()).max(1) as u64;
            let n_chunks = n_blocks.div_ceil(per_chunk);
            for index in 0..n_chunks {
                let first_block = index * per_chunk;
                chunks.push(Chunk {
                    tensor,
                    index,
                    first_block,
                    n_blocks: per_chunk.min(n_blocks - first_block),
                    last: index + 1 == n_chunks,
                });
            }
        }
        chunks
    }

    /// The bytes of one chunk, followed by the tensor's padding if it is the last.
    fn generate(&self, seed: u64, c: &Chunk) -> Vec<u8> {
        let t = &self.tensors[c.tensor];
        let ty = t.spec.ty;
        let len = c.n_blocks as usize * ty.type_size();
        let mut buf = vec![0u8; len];
        let mut rng = WyRand::for_chunk(seed, c.tensor as u64, c.index);
        let first = c.first_block * ty.block_size() as u64;
        gen::fill(ty, t.init, first, &mut buf, &mut rng);
        if c.last {
            let size = tensor_bytes(&t.spec);
            buf.resize(len + (padded(size) - size) as usize, 0);
        }
        buf
    }
}

/// A piece of one tensor's data.
struct Chunk {
    tensor: usize,
    index: u64,
    first_block: u64,
    n_blocks: u64,
    last: bool,
}

fn tensor_bytes(t: &TensorSpec) -> u64 {
    let n: u64 = t.dims.iter().product();
    n / t.ty.block_size() as u64 * t.ty.type_size() as u64
}

fn padded(size: u64) -> u64 {
    size.next_multiple_of(DEFAULT_ALIGNMENT)
}

/// The GGUF metadata llama.cpp's loader reads for the architecture, as its converter writes it.
fn metadata(name: &str, c: &Config) -> Vec<(String, Value)> {
    let arch = c.arch.name();
    let mut m: Vec<(String, Value)> = vec![
        ("general.architecture".into(), Value::String(arch.into())),
        ("general.name".into(), Value::String(name.into())),
        (
            "general.file_type".into(),
            Value::U32(quant_mix::FILE_TYPE_Q4_K_M),
        ),
        ("general.quantization_version".into(), Value::U32(2)),
    ];
    let mut put = |key: &str, v: Value| m.push((format!("{arch}.{key}"), v));
    put("vocab_size", Value::U32(c.n_vocab));
    put("context_length", Value::U32(c.n_ctx));
    put("embedding_length", Value::U32(c.n_embd));
    put("block_count", Value::U32(c.n_layer));
    put("feed_forward_length", Value::U32(c.n_ff));
    put("attention.head_count", Value::U32(c.n_head));
    put("rope.freq_base", Value::F32(c.rope_base));
    put("attention.layer_norm_rms_epsilon", Value::F32(c.rms_eps));
    if let Some(softcap) = c.final_logit_softcap {
        put("final_logit_softcapping", Value::F32(softcap));
    }
    if let Some(factor) = c.rope_scale_linear {
        put("rope.scaling.type", Value::String("linear".into()));
        put("rope.scaling.factor", Value::F32(factor));
    }
    let rot = |head_dim: u32| (head_dim as f32 * c.rope_fraction) as u32;
    match c.swa {
        // Gemma 4: per-layer pattern and KV heads; the plain keys describe the global layers.
        Some(s) if c.arch == Arch::Gemma4 => {
            let layers = 0..c.n_layer;
            let kv = layers.clone().map(|il| c.n_head_kv_at(il) as i32).collect();
            let pattern = layers.map(|il| c.is_swa(il)).collect();
            put("attention.head_count_kv", Value::Array(Array::I32(kv)));
            put("attention.sliding_window", Value::U32(s.window));
            put(
                "attention.sliding_window_pattern",
                Value::Array(Array::Bool(pattern)),
            );
            put("attention.key_length", Value::U32(s.head_dim_global));
            put("attention.value_length", Value::U32(s.head_dim_global));
            put("attention.key_length_swa", Value::U32(c.head_dim));
            put("attention.value_length_swa", Value::U32(c.head_dim));
            put("rope.dimension_count", Value::U32(s.head_dim_global));
            put("rope.dimension_count_swa", Value::U32(rot(c.head_dim)));
            put("rope.freq_base_swa", Value::F32(s.rope_base_swa));
            put("attention.shared_kv_layers", Value::U32(0));
            put("embedding_length_per_layer_input", Value::U32(0));
        }
        _ => {
            put("attention.head_count_kv", Value::U32(c.n_head_kv));
            put("attention.key_length", Value::U32(c.head_dim));
            put("attention.value_length", Value::U32(c.head_dim));
            put("rope.dimension_count", Value::U32(rot(c.head_dim)));
            if let Some(s) = c.swa {
                put("attention.sliding_window", Value::U32(s.window));
            }
        }
    }
    if let Some(moe) = c.moe {
        put("expert_count", Value::U32(moe.n_expert));
        put("expert_used_count", Value::U32(moe.n_expert_used));
        put("expert_feed_forward_length", Value::U32(moe.n_ff_exp));
        if let Some(f) = moe.n_ff_shexp {
            put("expert_shared_feed_forward_length", Value::U32(f));
        }
    }
    if let Some(d) = c.delta_net {
        // Interleaved M-RoPE sections over the rotated half-dims, in Qwen3.5's 11:11:10 split.
        let half = rot(c.head_dim) / 2;
        let t = half * 11 / 32;
        let sections = vec![t as i32, t as i32, (half - 2 * t) as i32, 0];
        put(
            "rope.dimension_sections",
            Value::Array(Array::I32(sections)),
        );
        put("ssm.conv_kernel", Value::U32(d.conv_kernel));
        put("ssm.state_size", Value::U32(d.state_size));
        put("ssm.group_count", Value::U32(d.n_k_heads));
        put("ssm.time_step_rank", Value::U32(d.n_v_heads));
        put("ssm.inner_size", Value::U32(d.inner_size()));
        put(
            "full_attention_interval",
            Value::U32(d.full_attention_interval),
        );
    }
    m.extend(SynthVocab::new(c.tokenizer, c.n_vocab).metadata());
    m
}
