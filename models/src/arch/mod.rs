//! One file per architecture. Each is the one description of its model, written against
//! [`Backend`]: it loads its weights through a [`Loader`] and wires the shared blocks of this
//! module (attention, gated FFN, embedding head) and backend ops into its forward pass.

mod gemma3;
mod gemma4;
mod llama;
mod qwen3;
mod qwen35;
mod qwen3moe;

use std::borrow::Cow;

use crate::backend::{
    Activation, AttentionInputs, AttentionParams, Backend, ExpertMatrices, HostExperts, HostMatrix,
    Logits, Result, RopeTable, ValueSource,
};
use crate::config::Config;
use crate::forward::ModelError;
use crate::gguf::Gguf;

pub(crate) const TOKEN_EMBD: &str = "token_embd.weight";

/// The architectures the forward pass implements, by their `general.architecture` name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arch {
    Gemma3,
    Gemma4,
    Llama,
    Qwen3,
    Qwen3Moe,
    Qwen35,
    Qwen35Moe,
}

impl Arch {
    pub const ALL: &'static [Arch] = &[
        Arch::Gemma3,
        Arch::Gemma4,
        Arch::Llama,
        Arch::Qwen3,
        Arch::Qwen3Moe,
        Arch::Qwen35,
        Arch::Qwen35Moe,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Arch::Gemma3 => "gemma3",
            Arch::Gemma4 => "gemma4",
            Arch::Llama => "llama",
            Arch::Qwen3 => "qwen3",
            Arch::Qwen3Moe => "qwen3moe",
            Arch::Qwen35 => "qwen35",
            Arch::Qwen35Moe => "qwen35moe",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|a| a.name() == name)
    }
}

/// Logits left on backend `B`; None when none were asked for.
type LogitsOn<B> = Result<Option<<B as Backend>::Tensor>>;

/// A loaded network: runs tokens through its layers on backend `B`, filling its cache.
pub(crate) trait Transformer<B: Backend> {
    /// Logits of `tokens` at positions `start..`, on the backend (None for [`Logits::None`]);
    /// the backend's cache holds exactly `start` positions.
    fn forward(&self, b: &mut B, tokens: &[u32], start: usize, which: Logits) -> LogitsOn<B>;
}

pub(crate) fn load<B: Backend + 'static>(
    config: &Config,
    w: &Loader<B>,
) -> Result<Box<dyn Transformer<B>>> {
    Ok(match config.arch {
        Arch::Gemma3 => Box::new(gemma3::Gemma3::load(config, w)?),
        Arch::Gemma4 => Box::new(gemma4::Gemma4::load(config, w)?),
        Arch::Llama => Box::new(llama::load(config, w)?),
        Arch::Qwen3 => Box::new(qwen3::load(config, w, false)?),
        Arch::Qwen3Moe => Box::new(qwen3::load(config, w, true)?),
        Arch::Qwen35 | Arch::Qwen35Moe => Box::new(qwen35::Qwen35::load(config, w)?),
    })
}

/// Tensor access for the architecture loaders: presence and shape checks, then the backend
/// turns each tensor into its own weight form.
pub(crate) struct Loader<'a, B> {
    gguf: &'a Gguf,
    backend: &'a B,
}

impl<'a, B: Backend> Loader<'a, B> {
    pub fn new(gguf: &'a Gguf, backend: &'a B) -> Self {
        Self { gguf, backend }
    }

    pub fn has(&self, name: &str) -> bool {
        self.gguf.tensor(name).is_some()
    }

    /// Checks that tensor `name` has the ggml shape `dims` (`dims[0]` fastest).
    fn checked(&self, name: &str, dims: &[usize]) -> Result<&'a crate::gguf::TensorInfo> {
        let info = self
            .gguf
            .tensor(name)
            .ok_or_else(|| ModelError::MissingTensor { name: name.into() })?;
        let expected: Vec<u64> = dims.iter().map(|&d| d as u64).collect();
        if info.dims != expected {
            return Err(ModelError::TensorShape {
                name: name.into(),
                expected,
                found: info.dims.clone(),
            });
        }
        Ok(info)
    }

    /// The tensor `name` dequantized to f32, after checking its shape.
    pub fn f32(&self, name: &str, dims: &[usize]) -> Result<Vec<f32>> {
        self.checked(name, dims)?;
        Ok(self.gguf.tensor_f32(name)?)
    }

    /// The `len`-long vector `name` on the backend.
    pub fn vector(&self, name: &str, len: usize) -> Result<B::Vector> {
        self.backend.vector(self.f32(name, &[len])?)
    }

    /// A small vector computed by the loader, on the backend.
    pub fn upload(&self, v: Vec<f32>) -> Result<B::Vector> {
        self.backend.vector(v)
    }

    /// The raw blocks of `name`, `[rows][cols]`, whose ggml shape is `dims`.
    pub fn host(&self, name: &str, dims: &[usize]) -> Result<HostMatrix<'a>> {
        let info = self.checked(name, dims)?;
        let cols = dims[0];
        Ok(HostMatrix {
            name: name.into(),
            ty: info.ggml_type()?,
            rows: dims[1..].iter().product(),
            cols,
            data: Cow::Borrowed(self.gguf.tensor_data(info)?),
        })
    }

    /// An `[out][in]` matrix on the backend, with a bias where given.
    pub fn matrix_from(&self, m: HostMatrix<'_>, bias: Option<Vec<f32>>) -> Result<B::Matrix> {
        self.backend.matrix(m, bias)
    }

    /// The `[out][in]` matrix `name` with its bias (`name` with `.bias` for `.weight`) if the
    /// file has one.
    pub fn matrix(&self, name: &str, out_dim: usize, in_dim: usize) -> Result<B::Matrix> {
        let bias = match bias_name(name) {
            Some(b) if self.has(&b) => Some(self.f32(&b, &[out_dim])?),
            _ => None,
        };
        self.matrix_from(self.host(name, &[in_dim, out_dim])?, bias)
    }

    /// A gated unit's `[out][in]` gate and up matrices: one pair where the backend runs them
    /// together and neither has a bias, else two matrices.
    pub fn gate_up(
        &self,
        gate: &str,
        up: &str,
        out_dim: usize,
        in_dim: usize,
    ) -> Result<GateUp<B::Matrix>> {
        let biased = [gate, up]
            .iter()
            .any(|name| bias_name(name).is_some_and(|b| self.has(&b)));
        if !biased {
            let host = |name| self.host(name, &[in_dim, out_dim]);
            if let Some(pair) = self.backend.gated_pair(&host(gate)?, &host(up)?)? {
                return Ok(GateUp::Paired(pair));
            }
        }
        Ok(GateUp::Separate {
            gate: self.matrix(gate, out_dim, in_dim)?,
            up: self.matrix(up, out_dim, in_dim)?,
        })
    }
}

/// `NAME.bias` for a tensor `NAME.weight`.
fn bias_name(name: &str) -> Option<String> {
    name.strip_suffix(".weight")
        .map(|stem| format!("{stem}.bias"))
}

/// `blk.{layer}.{name}.weight`.
fn layer_tensor(layer: usize, name: &str) -> String {
    format!("blk.{layer}.{name}.weight")
}

/// Where an attention layer's values come from.
enum Values<M> {
    Projection(M),
    /// The projection, RMS-normalized per head without weight (Gemma 4).
    NormedProjection(M),
    /// The key projection before the key norm and rope, RMS-normalized per head (Gemma 4's
    /// global layers without `attn_v`).
    NormedKeys,
}

/// Grouped-query self-attention: projections, optional per-head QK RMSNorm, rotary embedding,
/// cached causal attention and the output projection.
struct Attention<B: Backend> {
    wq: B::Matrix,
    wk: B::Matrix,
    values: Values<B::Matrix>,
    wo: B::Matrix,
    /// Per-head RMSNorm weights of queries and keys, applied before rope (Gemma 3, Qwen 3).
    qk_norm: Option<(B::Vector, B::Vector)>,
    eps: f32,
    rope: RopeTable,
    params: AttentionParams,
}

/// How an architecture configures one layer's attention.
struct AttentionSpec {
    rope: RopeTable,
    window: Option<usize>,
    qk_norm: bool,
    /// Unit-weight RMSNorm of values, and values taken from the key projection in layers
    /// without `attn_v` (Gemma 4).
    gemma4_values: bool,
    scale: f32,
}

impl<B: Backend> Attention<B> {
    fn load(c: &Config, w: &Loader<B>, layer: usize, spec: AttentionSpec) -> Result<Self> {
        let t = |name| layer_tensor(layer, name);
        let (n_head_kv, head_dim_k, head_dim_v) = (
            c.n_head_kv_at(layer),
            c.head_dim_k_at(layer),
            c.head_dim_v_at(layer),
        );
        let qk_norm = if spec.qk_norm {
            Some((
                w.vector(&t("attn_q_norm"), head_dim_k)?,
                w.vector(&t("attn_k_norm"), head_dim_k)?,
            ))
        } else {
            None
        };
        let v_name = t("attn_v");
        let values = if !spec.gemma4_values {
            Values::Projection(w.matrix(&v_name, n_head_kv * head_dim_v, c.n_embd)?)
        } else if w.has(&v_name) {
            Values::NormedProjection(w.matrix(&v_name, n_head_kv * head_dim_v, c.n_embd)?)
        } else if head_dim_v == head_dim_k {
            Values::NormedKeys
        } else {
            return Err(ModelError::BadConfig(
                "values taken from keys need value_length == key_length".into(),
            ));
        };
        Ok(Self {
            wq: w.matrix(&t("attn_q"), c.n_head * head_dim_k, c.n_embd)?,
            wk: w.matrix(&t("attn_k"), n_head_kv * head_dim_k, c.n_embd)?,
            values,
            wo: w.matrix(&t("attn_output"), c.n_embd, c.n_head * head_dim_v)?,
            qk_norm,
            eps: c.rms_eps,
            rope: spec.rope,
            params: AttentionParams {
                n_head: c.n_head,
                n_head_kv,
                head_dim_k,
                head_dim_v,
                scale: spec.scale,
                window: spec.window,
                softcap: c.attn_logit_softcap,
            },
        })
    }

    /// Attends the normalized hidden states `x` (`[tokens][n_embd]`, token `t` at position
    /// `start + t`) over layer `layer` of the backend's cache, appending this call's keys and
    /// values.
    fn forward(&self, b: &mut B, x: &B::Tensor, start: usize, layer: usize) -> Result<B::Tensor> {
        self.branch(b, x, start, layer)?.computed(b)
    }

    /// [`Attention::forward`] with the output projection left to the residual stream.
    fn branch(
        &self,
        b: &mut B,
        x: &B::Tensor,
        start: usize,
        layer: usize,
    ) -> Result<Branch<'_, B>> {
        Ok(Branch::Product(self.attend(b, x, start, layer)?, &self.wo))
    }

    /// [`Attention::forward`] before the output projection: `[tokens][n_head * head_dim_v]`,
    /// for architectures that gate the heads before `wo`.
    fn attend(&self, b: &mut B, x: &B::Tensor, start: usize, layer: usize) -> Result<B::Tensor> {
        let q = b.matmul(x, &self.wq)?;
        let k = b.matmul(x, &self.wk)?;
        let v = match &self.values {
            Values::Projection(wv) => ValueSource::Given(b.matmul(x, wv)?),
            Values::NormedProjection(wv) => ValueSource::UnitNormed(b.matmul(x, wv)?),
            Values::NormedKeys => ValueSource::UnitNormedKeys,
        };
        let inputs = AttentionInputs {
            q,
            k,
            v,
            qk_norm: self.qk_norm.as_ref().map(|(qn, kn)| (qn, kn)),
            eps: self.eps,
            rope: &self.rope,
        };
        b.attention_block(layer, inputs, start, &self.params)
    }
}

/// `down(act(gate x) * up x)`.
pub(crate) struct GatedFfn<B: Backend> {
    pub gate_up: GateUp<B::Matrix>,
    pub down: B::Matrix,
    pub activation: Activation,
}

/// A gated unit's gate and up matrices: two, or one the backend multiplies by at once
/// ([`Backend::gated_pair`]).
pub(crate) enum GateUp<M> {
    Separate { gate: M, up: M },
    Paired(M),
}

impl<B: Backend> GatedFfn<B> {
    fn load(c: &Config, w: &Loader<B>, layer: usize, activation: Activation) -> Result<Self> {
        Self::load_named(w, layer, "", c.n_ff, c.n_embd, activation)
    }

    /// `ffn_{gate,up,down}{suffix}` of layer `layer`, `ff` wide.
    fn load_named(
        w: &Loader<B>,
        layer: usize,
        suffix: &str,
        ff: usize,
        n_embd: usize,
        activation: Activation,
    ) -> Result<Self> {
        let t = |name: &str| layer_tensor(layer, &format!("{name}{suffix}"));
        Ok(Self {
            gate_up: w.gate_up(&t("ffn_gate"), &t("ffn_up"), ff, n_embd)?,
            down: w.matrix(&t("ffn_down"), n_embd, ff)?,
            activation,
        })
    }

    pub fn forward(&self, b: &B, x: &B::Tensor) -> Result<B::Tensor> {
        self.branch(b, x)?.computed(b)
    }

    /// [`GatedFfn::forward`] with the down projection left to the residual stream.
    pub fn branch(&self, b: &B, x: &B::Tensor) -> Result<Branch<'_, B>> {
        let h = match &self.gate_up {
            GateUp::Separate { gate, up } => {
                b.glu(self.activation, &b.matmul(x, gate)?, &b.matmul(x, up)?)?
            }
            GateUp::Paired(pair) => b.gated(self.activation, x, pair)?,
        };
        Ok(Branch::Product(h, &self.down))
    }
}

/// The routed experts of layer `layer`: `ffn_{gate,up,down}_exps` (`[n_expert]` outermost), gate
/// and up alternatively fused in `ffn_gate_up_exps` (gate rows first). Where the file has
/// per-expert output scales of the separate projections (`ffn_*_exps.scale`, as llama.cpp reads
/// them), the backend folds them into the weights.
fn load_experts<B: Backend>(
    c: &Config,
    w: &Loader<B>,
    layer: usize,
    activation: Activation,
) -> Result<B::Experts> {
    let (n_embd, ff, n_expert) = (c.n_embd, c.n_ff_exp, c.n_expert);
    let t = |name: &str, suffix: &str| format!("blk.{layer}.{name}.{suffix}");
    let load = |name: &str, out: usize, inp: usize| {
        let scale = t(name, "scale");
        Ok::<_, ModelError>(ExpertMatrices {
            weights: w.host(&t(name, "weight"), &[inp, out, n_expert])?,
            scales: if w.has(&scale) {
                Some(w.f32(&scale, &[n_expert])?)
            } else {
                None
            },
        })
    };
    let (gate, up) = if w.has(&t("ffn_gate_up_exps", "weight")) {
        let fused = w.host(
            &t("ffn_gate_up_exps", "weight"),
            &[n_embd, 2 * ff, n_expert],
        )?;
        let half = |first: usize| ExpertMatrices {
            weights: fused.select_rows((0..n_expert).map(|e| {
                let from = (2 * e + first) * ff;
                from..from + ff
            })),
            scales: None,
        };
        (half(0), half(1))
    } else {
        (
            load("ffn_gate_exps", ff, n_embd)?,
            load("ffn_up_exps", ff, n_embd)?,
        )
    };
    let experts = HostExperts {
        n_expert,
        gate,
        up,
        down: load("ffn_down_exps", n_embd, ff)?,
    };
    w.backend.experts(experts, activation)
}

/// Token embedding, final norm and language-model head (the embedding itself when tied).
struct Head<B: Backend> {
    embed: B::Matrix,
    /// `None` when the output projection is tied to the embedding.
    output: Option<B::Matrix>,
    output_norm: B::Vector,
    n_embd: usize,
    eps: f32,
    /// Multiplies embeddings on lookup (Gemma: `sqrt(n_embd)`).
    embed_scale: f32,
    final_softcap: Option<f32>,
}

impl<B: Backend> Head<B> {
    fn load(c: &Config, w: &Loader<B>, embed_scale: f32) -> Result<Self> {
        const OUTPUT: &str = "output.weight";
        let output = if w.has(OUTPUT) {
            Some(w.matrix(OUTPUT, c.n_vocab, c.n_embd)?)
        } else {
            None
        };
        Ok(Self {
            embed: w.matrix_from(w.host(TOKEN_EMBD, &[c.n_embd, c.n_vocab])?, None)?,
            output,
            output_norm: w.vector("output_norm.weight", c.n_embd)?,
            n_embd: c.n_embd,
            eps: c.rms_eps,
            embed_scale,
            final_softcap: c.final_logit_softcap,
        })
    }

    /// `[tokens][n_embd]` hidden states of `tokens`. Token ids must be below the vocabulary
    /// size (the caller checks).
    fn embed(&self, b: &B, tokens: &[u32]) -> Result<B::Tensor> {
        b.embed(&self.embed, tokens, self.embed_scale)
    }

    /// Logits of the final hidden states `x` (`[tokens][n_embd]`), on the backend.
    fn logits(&self, b: &B, x: &mut Residual<B>, which: Logits) -> LogitsOn<B> {
        let h = match which {
            Logits::None => return Ok(None),
            Logits::Last => {
                let last = b.last_row(x.settle(b)?, self.n_embd)?;
                b.rms_norm(&last, &self.output_norm, self.eps)?
            }
            Logits::All => x.norm(b, &self.output_norm, self.eps)?,
        };
        let mut logits = b.matmul(&h, self.output.as_ref().unwrap_or(&self.embed))?;
        if let Some(cap) = self.final_softcap {
            b.softcap(&mut logits, cap)?;
        }
        Ok(Some(logits))
    }
}

/// The residual stream, with the last branch output still to be added: the add waits for the
/// stream's next norm, so that a backend can do both in one pass ([`Backend::add_rms_norm`]).
struct Residual<B: Backend> {
    x: B::Tensor,
    pending: Option<B::Tensor>,
}

impl<B: Backend> Residual<B> {
    fn new(x: B::Tensor) -> Self {
        Self { x, pending: None }
    }

    /// `x += y`, deferred.
    fn add(&mut self, b: &B, y: B::Tensor) -> Result<()> {
        self.settle(b)?;
        self.pending = Some(y);
        Ok(())
    }

    /// `x += branch`: a last product the backend adds in place ([`Backend::matmul_add`]) goes
    /// into the stream now, anything else as [`Residual::add`].
    fn add_branch(&mut self, b: &B, branch: Branch<'_, B>) -> Result<()> {
        if let Branch::Product(h, w) = &branch {
            if b.matmul_add(self.settle(b)?, h, w)? {
                return Ok(());
            }
        }
        self.add(b, branch.computed(b)?)
    }

    /// RMSNorm of the stream, after the pending add, for the products that read it (a branch's
    /// or the output head's; nothing else may).
    fn norm(&mut self, b: &B, weight: &B::Vector, eps: f32) -> Result<B::Tensor> {
        match self.pending.take() {
            Some(y) => b.add_rms_norm(&mut self.x, &y, weight, eps),
            None => b.rms_norm_for_products(&self.x, weight, eps),
        }
    }

    /// The stream with every add applied.
    fn settle(&mut self, b: &B) -> Result<&mut B::Tensor> {
        if let Some(y) = self.pending.take() {
            b.add(&mut self.x, &y)?;
        }
        Ok(&mut self.x)
    }
}

/// A residual branch's output: computed, or its last product still to do, which the stream may
/// add in place ([`Residual::add_branch`]).
pub(crate) enum Branch<'w, B: Backend> {
    Tensor(B::Tensor),
    /// `x Wᵀ`.
    Product(B::Tensor, &'w B::Matrix),
}

impl<B: Backend> Branch<'_, B> {
    fn computed(self, b: &B) -> Result<B::Tensor> {
        match self {
            Branch::Tensor(y) => Ok(y),
            Branch::Product(x, w) => b.matmul(&x, w),
        }
    }
}

/// `x += branch(norm(x))`: a pre-norm residual branch.
fn pre_norm_residual<'w, B: Backend>(
    b: &mut B,
    x: &mut Residual<B>,
    norm: &B::Vector,
    eps: f32,
    branch: impl FnOnce(&mut B, &B::Tensor) -> Result<Branch<'w, B>>,
) -> Result<()>
where
    B::Matrix: 'w,
{
    let h = x.norm(b, norm, eps)?;
    let y = branch(b, &h)?;
    x.add_branch(b, y)
}
