//! Qwen 3 (dense): Llama's pre-norm body with per-head QK RMSNorm before rope and NeoX
//! (split-half) rope; no projection biases.

use super::llama::Llama;
use crate::config::Config;
use crate::cpu::{RopeStyle, RopeTable};
use crate::forward::{ModelError, Weights};

pub fn load(c: &Config, w: &Weights) -> Result<Llama, ModelError> {
    let rope = RopeTable::new(
        RopeStyle::Neox,
        c.n_rot,
        c.rope_base,
        c.rope_freq_scale,
        None,
    );
    Llama::load_with(c, w, rope, true)
}
