//! The model shapes `zinc synth` can write: one row per real model, from its public config.json
//! and the GGUF keys llama.cpp's loader reads for its architecture.

use super::vocab::TokenizerKind;

/// An architecture as llama.cpp names it (`general.architecture`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    Llama,
    Qwen3,
    Qwen3Moe,
    Qwen35,
    Qwen35Moe,
    Gemma3,
    Gemma4,
}

impl Arch {
    pub fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Qwen3 => "qwen3",
            Arch::Qwen3Moe => "qwen3moe",
            Arch::Qwen35 => "qwen35",
            Arch::Qwen35Moe => "qwen35moe",
            Arch::Gemma3 => "gemma3",
            Arch::Gemma4 => "gemma4",
        }
    }

    pub(crate) fn is_gemma(self) -> bool {
        matches!(self, Arch::Gemma3 | Arch::Gemma4)
    }
}

/// Routed experts of a mixture-of-experts FFN.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Moe {
    pub n_expert: u32,
    pub n_expert_used: u32,
    /// Hidden size of one expert.
    pub n_ff_exp: u32,
    /// Hidden size of the always-on shared expert (qwen35moe), if any.
    pub n_ff_shexp: Option<u32>,
}

/// Gated delta-net (linear attention) layers of the qwen35 hybrids.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DeltaNet {
    pub conv_kernel: u32,
    /// Head dimension of keys and values (`ssm.state_size`).
    pub state_size: u32,
    /// Key heads (`ssm.group_count`).
    pub n_k_heads: u32,
    /// Value heads (`ssm.time_step_rank`).
    pub n_v_heads: u32,
    /// Every `full_attention_interval`-th layer is full attention, the others delta-net.
    pub full_attention_interval: u32,
}

impl DeltaNet {
    /// `ssm.inner_size`: all value heads together.
    pub fn inner_size(&self) -> u32 {
        self.state_size * self.n_v_heads
    }
}

/// Sliding-window attention: layer `i` is global when `(i + 1) % period == 0`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Swa {
    pub window: u32,
    pub period: u32,
    pub rope_base_swa: f32,
    /// Head dimension of the global layers (gemma4 widens them).
    pub head_dim_global: u32,
    /// KV heads of the global layers.
    pub n_head_kv_global: u32,
    /// Global layers reuse K as V and have no `attn_v` (gemma4's `attention_k_eq_v`).
    pub global_k_eq_v: bool,
}

/// The hyper-parameters of one model shape.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub arch: Arch,
    pub n_embd: u32,
    pub n_layer: u32,
    pub n_head: u32,
    pub n_head_kv: u32,
    /// Head dimension (of the sliding-window layers where they differ).
    pub head_dim: u32,
    pub n_ff: u32,
    pub n_vocab: u32,
    pub n_ctx: u32,
    pub rope_base: f32,
    /// Fraction of each head that is rotated.
    pub rope_fraction: f32,
    pub rms_eps: f32,
    /// The output projection is the token embedding (no `output.weight`).
    pub tied_embeddings: bool,
    pub final_logit_softcap: Option<f32>,
    /// Linear rope scaling factor of the global layers (gemma3).
    pub rope_scale_linear: Option<f32>,
    pub moe: Option<Moe>,
    pub delta_net: Option<DeltaNet>,
    pub swa: Option<Swa>,
    pub tokenizer: TokenizerKind,
}

impl Config {
    /// Whether layer `il` is a sliding-window layer.
    pub fn is_swa(&self, il: u32) -> bool {
        self.swa.is_some_and(|s| !(il + 1).is_multiple_of(s.period))
    }

    /// Whether layer `il` is a gated delta-net layer.
    pub fn is_recurrent(&self, il: u32) -> bool {
        self.delta_net
            .is_some_and(|d| !(il + 1).is_multiple_of(d.full_attention_interval))
    }

    /// Head dimension of layer `il`.
    pub fn head_dim_at(&self, il: u32) -> u32 {
        match self.swa {
            Some(s) if !self.is_swa(il) => s.head_dim_global,
            _ => self.head_dim,
        }
    }

    /// KV heads of layer `il`.
    pub fn n_head_kv_at(&self, il: u32) -> u32 {
        match self.swa {
            Some(s) if !self.is_swa(il) => s.n_head_kv_global,
            _ => self.n_head_kv,
        }
    }

    /// Whether layer `il` has an `attn_v` projection.
    pub fn has_attn_v(&self, il: u32) -> bool {
        !self.swa.is_some_and(|s| s.global_k_eq_v) || self.is_swa(il)
    }

    /// The same architecture at test size: tiny widths, a few layers (enough to hold one global
    /// or full-attention layer), a 1024-token vocabulary and four experts. Widths that are not a
    /// multiple of 256 in the real model stay so, keeping llama.cpp's quant-type fallbacks.
    pub fn tiny(&self) -> Config {
        let keep_odd =
            |full: u32, even: u32, odd: u32| if full.is_multiple_of(256) { even } else { odd };
        let n_head = 4;
        let n_head_kv = (n_head * self.n_head_kv / self.n_head).max(1);
        let period = self
            .swa
            .map(|s| s.period)
            .or(self.delta_net.map(|d| d.full_attention_interval))
            .unwrap_or(2);
        Config {
            n_embd: 256,
            n_layer: period.max(2),
            n_head,
            n_head_kv,
            head_dim: 64,
            n_ff: keep_odd(self.n_ff, 512, 352),
            n_vocab: 1024,
            moe: self.moe.map(|m| Moe {
                n_expert: 4,
                n_expert_used: 2,
                n_ff_exp: keep_odd(m.n_ff_exp, 256, 96),
                n_ff_shexp: m.n_ff_shexp.map(|f| keep_odd(f, 256, 96)),
            }),
            delta_net: self.delta_net.map(|d| DeltaNet {
                state_size: 64,
                n_k_heads: 2,
                n_v_heads: 2 * d.n_v_heads / d.n_k_heads,
                ..d
            }),
            swa: self.swa.map(|s| Swa {
                window: 64,
                head_dim_global: 64 * s.head_dim_global / self.head_dim,
                n_head_kv_global: (n_head * s.n_head_kv_global / self.n_head).max(1),
                ..s
            }),
            ..self.clone()
        }
    }
}

/// A named model shape for `zinc synth --preset`.
#[derive(Debug, Clone)]
pub struct Preset {
    pub name: &'static str,
    /// The model it reproduces.
    pub model: &'static str,
    pub config: Config,
    /// Figures recalled rather than checked against a config.json: `n_head`, `n_head_kv`,
    /// `n_ff`, `ssm` (delta-net heads), `window`, `global_kv`, `tokenizer` (special-token ids).
    pub guesses: &'static [&'static str],
    /// Deviations from the real GGUF files.
    pub notes: &'static str,
}

/// Sliding-window pattern of Gemma 3 and 4: five local layers, then one global.
const GEMMA_PERIOD: u32 = 6;

fn dense(arch: Arch, tokenizer: TokenizerKind) -> Config {
    Config {
        arch,
        n_embd: 4096,
        n_layer: 32,
        n_head: 32,
        n_head_kv: 8,
        head_dim: 128,
        n_ff: 14336,
        n_vocab: 0,
        n_ctx: 0,
        rope_base: 10_000.0,
        rope_fraction: 1.0,
        rms_eps: 1e-6,
        tied_embeddings: false,
        final_logit_softcap: None,
        rope_scale_linear: None,
        moe: None,
        delta_net: None,
        swa: None,
        tokenizer,
    }
}

/// Qwen3.5's gated delta-net: 4-tap conv, 128-wide heads, 16 key heads, one full-attention
/// layer in four.
const QWEN35_DELTA_NET: DeltaNet = DeltaNet {
    conv_kernel: 4,
    state_size: 128,
    n_k_heads: 16,
    n_v_heads: 32,
    full_attention_interval: 4,
};

fn qwen35(arch: Arch) -> Config {
    Config {
        n_head: 16,
        n_head_kv: 4,
        head_dim: 256,
        n_vocab: 248_320,
        n_ctx: 262_144,
        rope_base: 10_000_000.0,
        rope_fraction: 0.25,
        delta_net: Some(QWEN35_DELTA_NET),
        ..dense(arch, TokenizerKind::Qwen35)
    }
}

fn gemma4(swa_kv: u32, global_kv: u32) -> Config {
    Config {
        head_dim: 256,
        n_vocab: 262_144,
        n_ctx: 262_144,
        rope_base: 1_000_000.0,
        final_logit_softcap: Some(30.0),
        tied_embeddings: true,
        n_head_kv: swa_kv,
        swa: Some(Swa {
            window: 1024,
            period: GEMMA_PERIOD,
            rope_base_swa: 10_000.0,
            head_dim_global: 512,
            n_head_kv_global: global_kv,
            global_k_eq_v: true,
        }),
        ..dense(Arch::Gemma4, TokenizerKind::Gemma)
    }
}

/// Every preset, in `--list` order.
pub fn presets() -> Vec<Preset> {
    vec![
        Preset {
            name: "llama3-8b",
            model: "Meta-Llama-3-8B",
            config: Config {
                n_vocab: 128_256,
                n_ctx: 8192,
                rope_base: 500_000.0,
                rms_eps: 1e-5,
                ..dense(Arch::Llama, TokenizerKind::Llama3)
            },
            guesses: &[],
            notes: "",
        },
        Preset {
            name: "qwen3-8b",
            model: "Qwen3-8B",
            config: Config {
                n_layer: 36,
                n_ff: 12288,
                n_vocab: 151_936,
                n_ctx: 40960,
                rope_base: 1_000_000.0,
                ..dense(Arch::Qwen3, TokenizerKind::Qwen2)
            },
            guesses: &[],
            notes: "",
        },
        Preset {
            name: "qwen3-30b-a3b",
            model: "Qwen3-30B-A3B",
            config: Config {
                n_embd: 2048,
                n_layer: 48,
                n_head_kv: 4,
                n_ff: 6144,
                n_vocab: 151_936,
                n_ctx: 40960,
                rope_base: 1_000_000.0,
                moe: Some(Moe {
                    n_expert: 128,
                    n_expert_used: 8,
                    n_ff_exp: 768,
                    n_ff_shexp: None,
                }),
                ..dense(Arch::Qwen3Moe, TokenizerKind::Qwen2)
            },
            guesses: &[],
            notes: "",
        },
        Preset {
            name: "qwen35-9b",
            model: "Qwen3.5-9B",
            config: Config {
                n_ff: 12288,
                ..qwen35(Arch::Qwen35)
            },
            guesses: &["n_ff", "tokenizer"],
            notes: "no MTP block (nextn layers)",
        },
        Preset {
            name: "qwen35-27b",
            model: "Qwen3.5-27B",
            config: Config {
                n_embd: 5120,
                n_layer: 64,
                n_head: 24,
                n_ff: 17408,
                delta_net: Some(DeltaNet {
                    n_v_heads: 48,
                    ..QWEN35_DELTA_NET
                }),
                ..qwen35(Arch::Qwen35)
            },
            guesses: &["n_head", "n_ff", "ssm", "tokenizer"],
            notes: "no MTP block (nextn layers)",
        },
        Preset {
            name: "qwen35-35b-a3b",
            model: "Qwen3.5-35B-A3B",
            config: Config {
                n_embd: 2048,
                n_layer: 40,
                n_head_kv: 2,
                n_ff: 512,
                moe: Some(Moe {
                    n_expert: 256,
                    n_expert_used: 8,
                    n_ff_exp: 512,
                    n_ff_shexp: Some(512),
                }),
                ..qwen35(Arch::Qwen35Moe)
            },
            guesses: &["n_head_kv", "tokenizer"],
            notes: "no MTP block (nextn layers)",
        },
        Preset {
            name: "gemma3-27b",
            model: "gemma-3-27b",
            config: Config {
                n_embd: 5376,
                n_layer: 62,
                n_head: 32,
                n_head_kv: 16,
                n_ff: 21504,
                n_vocab: 262_144,
                n_ctx: 131_072,
                rope_base: 1_000_000.0,
                rope_scale_linear: Some(8.0),
                tied_embeddings: true,
                swa: Some(Swa {
                    window: 1024,
                    period: GEMMA_PERIOD,
                    rope_base_swa: 10_000.0,
                    head_dim_global: 128,
                    n_head_kv_global: 16,
                    global_k_eq_v: false,
                }),
                ..dense(Arch::Gemma3, TokenizerKind::Gemma)
            },
            guesses: &[],
            notes: "",
        },
        Preset {
            name: "gemma4-31b",
            model: "gemma-4-31B",
            config: Config {
                n_embd: 5376,
                n_layer: 60,
                n_ff: 21504,
                ..gemma4(16, 4)
            },
            guesses: &["global_kv", "window", "tokenizer"],
            notes:
                "vocabulary written as SentencePiece (`llama`); real files use the `gemma4` BPE \
                    tokenizer, which zinc's tokenizer does not read yet",
        },
        Preset {
            name: "gemma4-26b-a4b",
            model: "gemma-4-26B-A4B",
            config: Config {
                n_embd: 2816,
                n_layer: 30,
                n_head: 16,
                n_ff: 2112,
                moe: Some(Moe {
                    n_expert: 128,
                    n_expert_used: 8,
                    n_ff_exp: 704,
                    n_ff_shexp: None,
                }),
                ..gemma4(8, 2)
            },
            guesses: &["n_ff", "global_kv", "window", "tokenizer"],
            notes:
                "vocabulary written as SentencePiece (`llama`); real files use the `gemma4` BPE \
                    tokenizer, which zinc's tokenizer does not read yet",
        },
    ]
}

/// The preset called `name`.
pub fn preset(name: &str) -> Option<Preset> {
    presets().into_iter().find(|p| p.name == name)
}
