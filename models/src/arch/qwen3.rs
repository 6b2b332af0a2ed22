//! Qwen 3 (dense): Llama's pre-norm body with per-head QK RMSNorm before rope and NeoX
//! (split-half) rope; no projection biases.

use super::llama::Llama;
use super::Loader;
use crate::backend::{Backend, Result, RopeStyle, RopeTable};
use crate::config::Config;

/// Loads Qwen 3, or with `experts` Qwen 3 MoE (the same body with an expert FFN per layer).
pub(super) fn load<B: Backend>(c: &Config, w: &Loader<B>, experts: bool) -> Result<Llama<B>> {
    let rope = RopeTable::new(
        RopeStyle::Neox,
        c.n_rot,
        c.rope_base,
        c.rope_freq_scale,
        None,
    );
    Llama::load_with(c, w, rope, true, experts)
}
