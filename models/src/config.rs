//! Hyper-parameters of a transformer, read from GGUF metadata (`{arch}.*` keys).

use crate::arch::Arch;
use crate::forward::ModelError;
use crate::gguf::{FromValue, Gguf};

/// Gemma 3's default period of sliding-window layers: five local layers, then one global.
const GEMMA3_SWA_PERIOD: u32 = 6;

/// Everything the forward pass needs to know besides the weights.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub arch: Arch,
    pub n_layer: usize,
    pub n_embd: usize,
    pub n_ff: usize,
    pub n_head: usize,
    pub n_head_kv: usize,
    /// Per-head width of queries and keys.
    pub head_dim_k: usize,
    /// Per-head width of values.
    pub head_dim_v: usize,
    /// Dimensions rotated by rope at the start of each head.
    pub n_rot: usize,
    pub n_vocab: usize,
    /// Positions the model was trained for; the KV cache refuses more.
    pub context_length: usize,
    pub rms_eps: f32,
    /// Rope base of global (full-attention) layers.
    pub rope_base: f32,
    /// Rope base of sliding-window layers.
    pub rope_base_swa: f32,
    /// Linear rope position scale of global layers: 1 / `rope.scaling.factor`.
    pub rope_freq_scale: f32,
    /// Window of sliding-window layers, if the model has any.
    pub sliding_window: Option<usize>,
    /// Per layer: whether it uses the sliding window (all false without one).
    pub swa_layers: Vec<bool>,
    pub attn_logit_softcap: Option<f32>,
    pub final_logit_softcap: Option<f32>,
}

impl Config {
    /// Reads the hyper-parameters of `gguf`, whose architecture is `arch`; `n_vocab` comes from
    /// the embedding tensor, which is authoritative.
    pub fn from_gguf(gguf: &Gguf, arch: Arch, n_vocab: usize) -> Result<Self, ModelError> {
        let m = Meta {
            gguf,
            prefix: arch.name(),
        };
        let n_embd = m.req::<u64>("embedding_length")? as usize;
        let n_layer = m.req::<u64>("block_count")? as usize;
        let n_head = m.req::<u64>("attention.head_count")? as usize;
        let n_head_kv = m
            .opt::<u64>("attention.head_count_kv")?
            .map_or(n_head, |v| v as usize);
        let head_dim_k = m
            .opt::<u64>("attention.key_length")?
            .map_or(n_embd / n_head, |v| v as usize);
        let head_dim_v = m
            .opt::<u64>("attention.value_length")?
            .map_or(head_dim_k, |v| v as usize);
        let n_rot = m
            .opt::<u64>("rope.dimension_count")?
            .map_or(head_dim_k, |v| v as usize);

        let scaling = m.opt::<&str>("rope.scaling.type")?.unwrap_or("linear");
        if !matches!(scaling, "none" | "linear") {
            return Err(ModelError::UnsupportedRopeScaling(scaling.into()));
        }
        let factor = match m.opt::<f32>("rope.scaling.factor")? {
            Some(f) => Some(f),
            None => m.opt::<f32>("rope.scale_linear")?,
        };
        let rope_freq_scale = match factor {
            Some(f) if f != 0.0 && scaling == "linear" => 1.0 / f,
            _ => 1.0,
        };

        let sliding_window = m
            .opt::<u64>("attention.sliding_window")?
            .filter(|&w| w > 0)
            .map(|w| w as usize);
        let swa_layers = match (sliding_window, arch) {
            (Some(_), Arch::Gemma3) => m.swa_pattern(n_layer, GEMMA3_SWA_PERIOD)?,
            _ => vec![false; n_layer],
        };

        let config = Self {
            arch,
            n_layer,
            n_embd,
            n_ff: m.req::<u64>("feed_forward_length")? as usize,
            n_head,
            n_head_kv,
            head_dim_k,
            head_dim_v,
            n_rot,
            n_vocab,
            context_length: m.req::<u64>("context_length")? as usize,
            rms_eps: m.req("attention.layer_norm_rms_epsilon")?,
            rope_base: m.opt("rope.freq_base")?.unwrap_or(10_000.0),
            rope_base_swa: m.opt("rope.freq_base_swa")?.unwrap_or(10_000.0),
            rope_freq_scale,
            sliding_window,
            swa_layers,
            attn_logit_softcap: m.opt::<f32>("attn_logit_softcapping")?.filter(|&c| c > 0.0),
            final_logit_softcap: m
                .opt::<f32>("final_logit_softcapping")?
                .filter(|&c| c > 0.0),
        };
        config.validate()?;
        Ok(config)
    }

    /// Whether layer `layer` attends through the sliding window.
    pub fn is_swa(&self, layer: usize) -> bool {
        self.swa_layers[layer]
    }

    fn validate(&self) -> Result<(), ModelError> {
        let bad = |what: &str| Err(ModelError::BadConfig(what.into()));
        if self.n_layer == 0 || self.n_embd == 0 || self.n_head == 0 || self.n_head_kv == 0 {
            return bad("block_count, embedding_length and head counts must be nonzero");
        }
        if !self.n_head.is_multiple_of(self.n_head_kv) {
            return bad("head_count must be a multiple of head_count_kv");
        }
        if self.n_rot > self.head_dim_k || !self.n_rot.is_multiple_of(2) {
            return bad("rope.dimension_count must be even and at most key_length");
        }
        Ok(())
    }
}

/// Typed access to one architecture's keys.
struct Meta<'a> {
    gguf: &'a Gguf,
    prefix: &'a str,
}

impl<'a> Meta<'a> {
    fn opt<T: FromValue<'a>>(&self, key: &str) -> Result<Option<T>, ModelError> {
        Ok(self.gguf.get_opt(&format!("{}.{key}", self.prefix))?)
    }

    fn req<T: FromValue<'a>>(&self, key: &str) -> Result<T, ModelError> {
        Ok(self.gguf.get_as(&format!("{}.{key}", self.prefix))?)
    }

    /// `attention.sliding_window_pattern` is either one flag per layer or a period `n` whose
    /// last layer in each group is global (as llama.cpp reads it), defaulting to `default`.
    fn swa_pattern(&self, n_layer: usize, default: u32) -> Result<Vec<bool>, ModelError> {
        const KEY: &str = "attention.sliding_window_pattern";
        if let Some(Some(flags)) = self
            .gguf
            .get(&format!("{}.{KEY}", self.prefix))
            .map(|v| v.as_array())
        {
            let flags: Option<Vec<bool>> = match flags {
                crate::gguf::Array::Bool(b) => Some(b.clone()),
                other => other
                    .to_i128s()
                    .map(|v| v.into_iter().map(|x| x != 0).collect()),
            };
            return match flags {
                Some(f) if f.len() == n_layer => Ok(f),
                _ => Err(ModelError::BadConfig(format!(
                    "{KEY} must hold one flag per layer"
                ))),
            };
        }
        let period = self.opt::<u32>(KEY)?.unwrap_or(default);
        Ok((0..n_layer as u32)
            .map(|il| period == 0 || il % period < period - 1)
            .collect())
    }
}
