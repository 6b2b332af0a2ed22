//! The tensor types of a llama.cpp Q4_K_M file (llama-quant.cpp's rules for
//! `LLAMA_FTYPE_MOSTLY_Q4_K_M`, restated for the tensors these architectures have).

use super::tensors::Planned;
use crate::quant::GgmlType;

/// `general.file_type` of a Q4_K_M file.
pub const FILE_TYPE_Q4_K_M: u32 = 15;

/// llama.cpp's `use_more_bits`: the first and last eighth of the layers and every third
/// layer between them get the larger type.
fn use_more_bits(i: u32, n: u32) -> bool {
    i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2
}

/// Only 2-D and 3-D `*weight` tensors are quantized; norms, routers and the delta-net conv
/// kernel stay F32 (as the converter writes them).
fn is_quantizable(t: &Planned) -> bool {
    const KEEP_F32: [&str; 4] = [
        "_norm.weight",
        "ffn_gate_inp.weight",
        "ffn_gate_inp_shexp.weight",
        "ssm_conv1d",
    ];
    t.dims.len() >= 2 && t.name.ends_with("weight") && !KEEP_F32.iter().any(|k| t.name.contains(k))
}

/// Tensors llama.cpp counts as attention-V for the more-bits rule (the delta-net's fused
/// `attn_qkv` included).
fn is_attn_v(name: &str) -> bool {
    name.contains("attn_v.weight") || name.contains("attn_qkv.weight")
}

/// A K-quant needs rows that are whole 256-weight blocks; llama.cpp falls back to a 32-block
/// type of similar size, or to F16 when even that does not fit.
fn fallback(ty: GgmlType, row: u64) -> GgmlType {
    if row.is_multiple_of(ty.block_size() as u64) {
        return ty;
    }
    let smaller = match ty {
        GgmlType::Q4_K => GgmlType::Q5_0,
        GgmlType::Q6_K => GgmlType::Q8_0,
        other => other,
    };
    if row.is_multiple_of(smaller.block_size() as u64) {
        smaller
    } else {
        GgmlType::F16
    }
}

/// The Q4_K_M type of each tensor of `tensors` (a whole model in file order with `n_layer`
/// blocks).
pub fn q4_k_m_types(tensors: &[Planned], n_layer: u32) -> Vec<GgmlType> {
    let has_output = tensors.iter().any(|t| t.name == "output.weight");
    let n_attn_v = tensors.iter().filter(|t| is_attn_v(&t.name)).count() as u32;
    let mut i_attn_v = 0;
    tensors
        .iter()
        .map(|t| {
            if !is_quantizable(t) {
                return GgmlType::F32;
            }
            let row = t.dims[0];
            let is_output =
                t.name == "output.weight" || (!has_output && t.name == "token_embd.weight");
            if is_output {
                // No fallback chain here: a misfit row goes straight to Q8_0.
                return if row.is_multiple_of(256) {
                    GgmlType::Q6_K
                } else {
                    GgmlType::Q8_0
                };
            }
            let more_bits = if is_attn_v(&t.name) {
                i_attn_v += 1;
                use_more_bits(i_attn_v - 1, n_attn_v)
            } else {
                // One ffn_down per layer (or a per-layer expert tensor), so the layer index is
                // llama.cpp's counter.
                t.name.contains("ffn_down") && use_more_bits(t.layer.unwrap_or(0), n_layer)
            };
            let ty = if more_bits {
                GgmlType::Q6_K
            } else {
                GgmlType::Q4_K
            };
            fallback(ty, row)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn more_bits_layers_match_llama_cpp() {
        // 32 layers: 0-3, 28-31 and every third layer from 6.
        let picked: Vec<u32> = (0..32).filter(|&i| use_more_bits(i, 32)).collect();
        assert_eq!(
            picked,
            [0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31]
        );
    }

    #[test]
    fn fallbacks() {
        assert_eq!(fallback(GgmlType::Q4_K, 4096), GgmlType::Q4_K);
        assert_eq!(fallback(GgmlType::Q4_K, 2112), GgmlType::Q5_0);
        assert_eq!(fallback(GgmlType::Q6_K, 704), GgmlType::Q8_0);
        assert_eq!(fallback(GgmlType::Q4_K, 100), GgmlType::F16);
    }
}
