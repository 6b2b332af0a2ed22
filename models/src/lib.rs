//! GGUF models on the CPU: the file reader and writer ([`gguf`]), ggml quantization formats
//! ([`quant`]), tokenizers and chat templates, model configs, and the f32 reference forward pass
//! ([`forward`], one file per architecture under [`arch`], written against the [`backend`]
//! interface that [`cpu`] implements) that every GPU path is checked against.

pub mod arch;
pub mod backend;
pub mod chat;
pub mod config;
pub mod cpu;
pub mod forward;
pub mod gguf;
pub mod kv_cache;
pub mod quant;
pub mod sampler;
pub mod summary;
pub mod synth;
pub mod tokenizer;
