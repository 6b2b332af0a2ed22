//! Which kernel (and variant) the backend runs for a matrix product, by weight type and shape.
//!
//! The choices come from `zinc bench-kernels --tune` on the H200 (docs/PERF.md): for decode-size
//! batches (T <= 8) the quantized matvecs, sized to the batch; above that an f16 tensor-core GEMM
//! on the weights dequantized into a scratch buffer, until the fused quantized GEMMs replace it.

use zinc_models::quant::GgmlType;

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
            names.push(format!("dequant_{}", quant_suffix(ty).unwrap()));
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

    #[test]
    fn other_types_have_no_kernels() {
        assert!(!has_kernels(GgmlType::F16));
        assert!(!has_kernels(GgmlType::Q5_K));
        assert!(has_kernels(GgmlType::Q6_K));
    }
}
