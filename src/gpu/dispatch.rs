//! Which kernel (and variant) the backend runs for a matrix product, by weight type and shape.
//!
//! The choices come from `zinc bench-kernels --tune` on the H200 (docs/PERF.md): for decode-size
//! batches (T <= 8) the quantized matvecs, sized to the batch; above that an f16 tensor-core GEMM
//! on the weights dequantized into a scratch buffer, until the fused quantized GEMMs replace it.

use zinc_models::quant::{planar_fields, to_planar, GgmlType, QuantError};

/// The widest batch the matvec kernels take (their default `TMAX`).
pub const MATVEC_MAX_T: usize = 8;

/// The quantized weight types with device kernels (dequantize and matvec); any other type is
/// dequantized on the host at load and kept in f16.
pub fn has_kernels(ty: GgmlType) -> bool {
    quant_suffix(ty).is_some()
}

/// The kernel-name suffix of a quantized type: `matvec_q4k`, `dequant_q8_0`.
pub fn quant_suffix(ty: GgmlType) -> Option<&'static str> {
    match ty {
        GgmlType::Q4_K => Some("q4k"),
        GgmlType::Q6_K => Some("q6k"),
        GgmlType::Q8_0 => Some("q8_0"),
        GgmlType::Q5_0 => Some("q5_0"),
        _ => None,
    }
}

/// The bytes of a `ty` matrix as every kernel reads them, as little-endian u32 words (the last
/// one zero-padded): GGUF blocks as they are, or, for types whose blocks are not 16-byte
/// multiples (Q6_K), the same bytes grouped by field into aligned planes
/// (models/src/quant/planar.rs).
pub fn device_words(ty: GgmlType, bytes: &[u8]) -> Result<Vec<u32>, QuantError> {
    let planar;
    let bytes = match planar_fields(ty) {
        Some(_) => {
            planar = to_planar(ty, bytes)?;
            &planar[..]
        }
        None => bytes,
    };
    Ok(bytes
        .chunks(4)
        .map(|c| {
            let mut word = [0u8; 4];
            word[..c.len()].copy_from_slice(c);
            u32::from_le_bytes(word)
        })
        .collect())
}

/// The matvec for `t` tokens (1..=MATVEC_MAX_T) of a `ty` matrix with `n` rows and `k` columns.
pub fn matvec(ty: GgmlType, t: usize, n: usize, k: usize) -> String {
    let suffix = quant_suffix(ty).expect("matvec of a type without kernels");
    // One token: Q4_K's 16-byte variants (2 super-blocks in flight and 4 warps per block on long
    // rows, two row groups on short ones); the others have only the batch-sized builds. Small
    // batches get the build whose accumulators fit the batch.
    let variant = match (ty, t) {
        (GgmlType::Q4_K, 1) if k > n => "TMAX=1,SB=2,KW=4",
        (GgmlType::Q4_K, 1) => "TMAX=1,RG=2",
        (_, 1) => "TMAX=1",
        (_, 2) => "TMAX=2",
        (_, 3 | 4) => "TMAX=4",
        _ => return format!("matvec_{suffix}"),
    };
    format!("matvec_{suffix}@{variant}")
}

/// The fused quantized GEMM for `t` tokens (more than [`MATVEC_MAX_T`]) of a `ty` matrix with
/// `k` columns, if there is one (they take 64-column slices); others are dequantized into a
/// scratch f16 matrix for [`gemm_f16`].
pub fn quant_gemm(ty: GgmlType, _t: usize, k: usize) -> Option<&'static str> {
    if !k.is_multiple_of(64) {
        return None;
    }
    match ty {
        GgmlType::Q4_K => Some("gemm_q4k"),
        GgmlType::Q6_K => Some("gemm_q6k"),
        GgmlType::Q8_0 => Some("gemm_q8_0"),
        _ => None,
    }
}

/// The flash-attention build for `t` queries of head widths `dk`, `dv`, if one fits: prefill-size
/// batches with equal widths of 64, 128 or 256.
pub fn flash_attention(dk: usize, dv: usize, t: usize) -> Option<&'static str> {
    if dk != dv || t <= MATVEC_MAX_T {
        return None;
    }
    match dk {
        64 => Some("flash_attn_f16@D=64"),
        128 => Some("flash_attn_f16"),
        256 => Some("flash_attn_f16@D=256,BKV=32"),
        _ => None,
    }
}

/// Keys per block of the split attention over `n_kv` keys for `rows` (query, head) pairs:
/// enough blocks to fill the GPU several times over, at least 64 keys each.
pub fn attention_split(n_kv: usize, rows: usize) -> usize {
    const TARGET_BLOCKS: usize = 1024;
    let split = (n_kv * rows).div_ceil(TARGET_BLOCKS).next_multiple_of(64);
    split.max(64)
}

/// The f16 tensor-core GEMM variant for `t` tokens: 256-row tiles of 64 x 64 warps for long
/// prompts, BK = 64 slices for shorter ones (fewer barriers when each SM holds few tiles).
pub fn gemm_f16(t: usize) -> &'static str {
    if t >= 1024 {
        "gemm_f16@BM=256,WM=64,WN=64,FB=2"
    } else {
        "gemm_f16@BK=64"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::embedded;

    /// Every name the dispatch can produce is registered for every embedded arch.
    #[test]
    fn dispatched_kernels_exist() {
        let mut names = vec![gemm_f16(1).to_string(), gemm_f16(4096).to_string()];
        for d in [64, 128, 256] {
            names.push(flash_attention(d, d, 512).unwrap().to_string());
        }
        for ty in [
            GgmlType::Q4_K,
            GgmlType::Q6_K,
            GgmlType::Q8_0,
            GgmlType::Q5_0,
        ] {
            for t in 1..=MATVEC_MAX_T {
                names.push(matvec(ty, t, 4096, 14336));
                names.push(matvec(ty, t, 14336, 4096));
            }
            let suffix = quant_suffix(ty).unwrap();
            names.push(format!("dequant_{suffix}"));
            names.push(format!("embed_{suffix}"));
            names.extend(quant_gemm(ty, 512, 4096).map(String::from));
        }
        for arch in embedded() {
            for name in &names {
                assert!(
                    arch.modules
                        .iter()
                        .any(|m| m.kernels.iter().any(|k| k.name == name)),
                    "{name} is not registered for {}",
                    arch.arch
                );
            }
        }
    }

    /// Q4_K goes up as it is; Q6_K in planes: block 0's first low-nibble bytes first, block 1's
    /// scales after both blocks' 192 bytes of quants.
    #[test]
    fn device_layouts() {
        let bytes = |ty: GgmlType| -> Vec<u8> {
            (0..2 * ty.type_size())
                .map(|i| (i * 7 % 251) as u8)
                .collect()
        };
        let le = |v: &[u32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let q4k = bytes(GgmlType::Q4_K);
        assert_eq!(le(&device_words(GgmlType::Q4_K, &q4k).unwrap()), q4k);
        let raw = bytes(GgmlType::Q6_K);
        let planar = le(&device_words(GgmlType::Q6_K, &raw).unwrap());
        assert_eq!(planar.len(), 420);
        assert_eq!(planar[..128], raw[..128]);
        assert_eq!(planar[128..256], raw[210..338]);
        assert_eq!(
            planar[2 * 192 + 16..2 * 192 + 32],
            raw[210 + 192..210 + 208]
        );
        assert!(device_words(GgmlType::Q6_K, &raw[..300]).is_err());
        let raw = bytes(GgmlType::Q8_0);
        let planar = le(&device_words(GgmlType::Q8_0, &raw).unwrap());
        assert_eq!(planar[..32], raw[2..34]);
        assert_eq!(planar[64..66], raw[..2]);
    }

    #[test]
    fn other_types_have_no_kernels() {
        assert!(!has_kernels(GgmlType::F16));
        assert!(!has_kernels(GgmlType::Q5_K));
        assert!(has_kernels(GgmlType::Q6_K));
    }
}
