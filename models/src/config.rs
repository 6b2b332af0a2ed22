//! Hyper-parameters of a transformer, read from GGUF metadata (`{arch}.*` keys).

use crate::arch::Arch;
use crate::forward::ModelError;
use crate::gguf::{FromValue, Gguf};

/// Gemma's default period of sliding-window layers: five local layers, then one global.
const GEMMA_SWA_PERIOD: u32 = 6;

/// Everything the forward pass needs to know besides the weights.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub arch: Arch,
    pub n_layer: usize,
    pub n_embd: usize,
    pub n_ff: usize,
    pub n_head: usize,
    /// KV heads of the first layer; [`Config::n_head_kv_at`] gives every layer's.
    pub n_head_kv: usize,
    /// Per layer: KV heads (`attention.head_count_kv` may hold one count per layer: Gemma 4).
    pub n_head_kv_layers: Vec<usize>,
    /// Per-head width of queries and keys (of global layers where sliding-window ones differ).
    pub head_dim_k: usize,
    /// Per-head width of values (of global layers where sliding-window ones differ).
    pub head_dim_v: usize,
    /// Dimensions rotated by rope at the start of each head (of global layers likewise).
    pub n_rot: usize,
    /// `head_dim_k`, `head_dim_v` and `n_rot` of sliding-window layers (`*_swa` keys, Gemma 4).
    pub head_dim_k_swa: usize,
    pub head_dim_v_swa: usize,
    pub n_rot_swa: usize,
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
    /// Routed experts of mixture-of-experts models (0 when dense).
    pub n_expert: usize,
    /// Experts each token is routed to.
    pub n_expert_used: usize,
    /// Hidden width of one expert's FFN.
    pub n_ff_exp: usize,
    /// Hidden width of the shared expert (`expert_shared_feed_forward_length`; 0: `n_ff`).
    pub n_ff_shexp: usize,
    /// Interleaved M-RoPE sections (`rope.dimension_sections`), in rotated pairs.
    pub rope_sections: Option<[usize; 4]>,
    /// The gated delta-net layers of hybrid models (Qwen 3.5).
    pub delta_net: Option<DeltaNetConfig>,
}

/// Shape of the gated delta-net (linear attention) layers of a hybrid model.
#[derive(Clone, Debug, PartialEq)]
pub struct DeltaNetConfig {
    /// Taps of the causal convolution (`ssm.conv_kernel`).
    pub conv_kernel: usize,
    /// Width of a key head and of a value head (`ssm.state_size`).
    pub head_dim: usize,
    /// Key heads (`ssm.group_count`).
    pub n_k_heads: usize,
    /// Value heads, each with its own state (`ssm.time_step_rank`).
    pub n_v_heads: usize,
    /// Per layer of the main stack: whether it is a delta-net layer rather than full attention.
    /// Shorter than `block_count` by the multi-token-prediction layers stored after the stack
    /// (`nextn_predict_layers`), which the forward pass does not run.
    pub layers: Vec<bool>,
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
        let n_head_kv_layers = m
            .per_layer("attention.head_count_kv", n_layer)?
            .unwrap_or_else(|| vec![n_head; n_layer]);
        let head_dim_k = m
            .opt::<u64>("attention.key_length")?
            .map_or(n_embd / n_head, |v| v as usize);
        let head_dim_v = m
            .opt::<u64>("attention.value_length")?
            .map_or(head_dim_k, |v| v as usize);
        let n_rot = m
            .opt::<u64>("rope.dimension_count")?
            .map_or(head_dim_k, |v| v as usize);
        let swa_or = |key: &str, global: usize| -> Result<usize, ModelError> {
            Ok(m.opt::<u64>(key)?.map_or(global, |v| v as usize))
        };

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
            (Some(_), Arch::Gemma3 | Arch::Gemma4) => m.swa_pattern(n_layer, GEMMA_SWA_PERIOD)?,
            _ => vec![false; n_layer],
        };

        let config = Self {
            arch,
            n_layer,
            n_embd,
            n_ff: m.req::<u64>("feed_forward_length")? as usize,
            n_head,
            n_head_kv: n_head_kv_layers[0],
            n_head_kv_layers,
            head_dim_k,
            head_dim_v,
            n_rot,
            head_dim_k_swa: swa_or("attention.key_length_swa", head_dim_k)?,
            head_dim_v_swa: swa_or("attention.value_length_swa", head_dim_v)?,
            n_rot_swa: swa_or("rope.dimension_count_swa", n_rot)?,
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
            n_expert: m.opt::<u64>("expert_count")?.unwrap_or(0) as usize,
            n_expert_used: m.opt::<u64>("expert_used_count")?.unwrap_or(0) as usize,
            n_ff_exp: m.opt::<u64>("expert_feed_forward_length")?.unwrap_or(0) as usize,
            n_ff_shexp: m
                .opt::<u64>("expert_shared_feed_forward_length")?
                .unwrap_or(0) as usize,
            rope_sections: m.rope_sections()?,
            delta_net: match arch {
                Arch::Qwen35 | Arch::Qwen35Moe => Some(m.delta_net(n_layer)?),
                _ => None,
            },
        };
        config.validate()?;
        if arch == Arch::Gemma4 {
            // The small Gemma 4 models (E2B, E4B) add per-layer token embeddings and layers that
            // reuse earlier layers' KV cache; the CPU reference does not implement them.
            for key in [
                "embedding_length_per_layer_input",
                "attention.shared_kv_layers",
            ] {
                if m.opt::<u64>(key)?.is_some_and(|v| v > 0) {
                    return Err(ModelError::BadConfig(format!(
                        "gemma4 with {key} > 0 (E2B/E4B) is not supported"
                    )));
                }
            }
        }
        Ok(config)
    }

    /// Whether layer `layer` attends through the sliding window.
    pub fn is_swa(&self, layer: usize) -> bool {
        self.swa_layers[layer]
    }

    pub fn n_head_kv_at(&self, layer: usize) -> usize {
        self.n_head_kv_layers[layer]
    }

    pub fn head_dim_k_at(&self, layer: usize) -> usize {
        self.pick(layer, self.head_dim_k, self.head_dim_k_swa)
    }

    pub fn head_dim_v_at(&self, layer: usize) -> usize {
        self.pick(layer, self.head_dim_v, self.head_dim_v_swa)
    }

    pub fn n_rot_at(&self, layer: usize) -> usize {
        self.pick(layer, self.n_rot, self.n_rot_swa)
    }

    fn pick(&self, layer: usize, global: usize, swa: usize) -> usize {
        if self.is_swa(layer) {
            swa
        } else {
            global
        }
    }

    fn validate(&self) -> Result<(), ModelError> {
        let bad = |what: &str| Err(ModelError::BadConfig(what.into()));
        if self.n_layer == 0 || self.n_embd == 0 || self.n_head == 0 {
            return bad("block_count, embedding_length and head_count must be nonzero");
        }
        for il in 0..self.n_layer {
            let n_head_kv = self.n_head_kv_at(il);
            if n_head_kv == 0 || !self.n_head.is_multiple_of(n_head_kv) {
                return bad("head_count must be a nonzero multiple of head_count_kv");
            }
            let n_rot = self.n_rot_at(il);
            if n_rot > self.head_dim_k_at(il) || !n_rot.is_multiple_of(2) {
                return bad("rope.dimension_count must be even and at most key_length");
            }
        }
        if self.n_expert_used > self.n_expert {
            return bad("expert_used_count must be at most expert_count");
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

    /// A count that is either one number for every layer or an array of one per layer (as
    /// llama.cpp's `get_key_or_arr` reads it).
    fn per_layer(&self, key: &str, n_layer: usize) -> Result<Option<Vec<usize>>, ModelError> {
        let array = self
            .gguf
            .get(&format!("{}.{key}", self.prefix))
            .and_then(|v| v.as_array());
        let Some(array) = array else {
            return Ok(self.opt::<u64>(key)?.map(|v| vec![v as usize; n_layer]));
        };
        match array.to_i128s() {
            Some(v) if v.len() == n_layer => v
                .into_iter()
                .map(|x| usize::try_from(x).ok())
                .collect::<Option<Vec<_>>>()
                .map(Some)
                .ok_or_else(|| ModelError::BadConfig(format!("{key} has a negative count"))),
            _ => Err(ModelError::BadConfig(format!(
                "{key} must hold one count per layer"
            ))),
        }
    }

    /// `rope.dimension_sections`: up to four section sizes, zero-padded.
    fn rope_sections(&self) -> Result<Option<[usize; 4]>, ModelError> {
        const KEY: &str = "rope.dimension_sections";
        let Some(array) = self.opt::<&crate::gguf::Array>(KEY)? else {
            return Ok(None);
        };
        let mut sections = [0; 4];
        match array.to_i128s() {
            Some(v) if v.len() <= 4 && v.iter().all(|&x| x >= 0) => {
                for (s, x) in sections.iter_mut().zip(v) {
                    *s = x as usize;
                }
                Ok(Some(sections))
            }
            _ => Err(ModelError::BadConfig(format!(
                "{KEY} must hold at most four sizes"
            ))),
        }
    }

    /// The `ssm.*` keys and which layers are recurrent: `attention.recurrent_layers` (one flag
    /// per layer) or else every layer but each `full_attention_interval`-th (default 4).
    fn delta_net(&self, block_count: usize) -> Result<DeltaNetConfig, ModelError> {
        let nextn = self.opt::<u64>("nextn_predict_layers")?.unwrap_or(0) as usize;
        let n_layer = block_count
            .checked_sub(nextn)
            .filter(|&n| n > 0)
            .ok_or_else(|| ModelError::BadConfig("nextn_predict_layers >= block_count".into()))?;
        let get = |key: &str| -> Result<usize, ModelError> { Ok(self.req::<u64>(key)? as usize) };
        let (head_dim, n_v_heads) = (get("ssm.state_size")?, get("ssm.time_step_rank")?);
        if get("ssm.inner_size")? != head_dim * n_v_heads {
            return Err(ModelError::BadConfig(
                "ssm.inner_size must be ssm.state_size * ssm.time_step_rank".into(),
            ));
        }
        const KEY: &str = "attention.recurrent_layers";
        let layers = match self.opt::<&crate::gguf::Array>(KEY)? {
            Some(crate::gguf::Array::Bool(flags)) if flags.len() == block_count => {
                flags[..n_layer].to_vec()
            }
            Some(_) => {
                return Err(ModelError::BadConfig(format!(
                    "{KEY} must hold one flag per layer"
                )))
            }
            None => {
                let interval = self.opt::<u64>("full_attention_interval")?.unwrap_or(4) as usize;
                if interval == 0 {
                    return Err(ModelError::BadConfig(
                        "full_attention_interval must be nonzero".into(),
                    ));
                }
                (0..n_layer).map(|il| (il + 1) % interval != 0).collect()
            }
        };
        let config = DeltaNetConfig {
            conv_kernel: get("ssm.conv_kernel")?,
            head_dim,
            n_k_heads: get("ssm.group_count")?,
            n_v_heads,
            layers,
        };
        if config.conv_kernel == 0
            || config.n_k_heads == 0
            || !config.n_v_heads.is_multiple_of(config.n_k_heads)
        {
            return Err(ModelError::BadConfig(
                "ssm.conv_kernel must be nonzero and ssm.time_step_rank a multiple of \
                 ssm.group_count"
                    .into(),
            ));
        }
        Ok(config)
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
