//! Shared f32 operations of the CPU reference forward pass.
//!
//! Every architecture in [`crate::arch`] is written in terms of these ops; the GPU kernels are
//! checked against them, so they favour clarity and exactness (f64 where a reduction is long)
//! over speed, with rayon for the two hot spots: matrix products and attention.

mod attention;
mod delta_net;
mod layers;
mod matmul;
mod moe;
mod ops;

pub use attention::{attention, AttentionParams};
pub use delta_net::{causal_conv1d, gated_delta_rule, l2_norm, DeltaNetShape};
pub use layers::{Activation, EmbeddingHead, GatedFfn, Logits, SelfAttention};
pub use matmul::Linear;
pub use moe::{Experts, Gating, MoeFfn, Route, Router, SharedExpert};
pub use ops::{
    add_in_place, dot, gelu_tanh, rms_norm, rope, sigmoid, silu, softcap, softmax, RopeStyle,
    RopeTable,
};

#[cfg(test)]
mod tests;
