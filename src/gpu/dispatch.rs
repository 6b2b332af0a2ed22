//! Which kernel (and variant) the backend runs for a matrix product, by weight type and shape.
//!
//! The built-in choices are the fastest variants of `zinc bench-kernels --tune` on the H200
//! (docs/PERF.md): for decode-size batches (T <= 8) the quantized matvecs, sized to the batch;
//! above that the fused quantized GEMMs, or for types without one an f16 tensor-core GEMM on the
//! weights dequantized into a scratch buffer. A [`TuneTable`] written by `zinc bench-kernels
//! --tune --table FILE` on the user's GPU overrides them where it has a matching entry.

use std::path::Path;

use serde::{Deserialize, Serialize};
use thiserror::Error;
use zinc_models::quant::{has_planar, to_planar, GgmlType, QuantError};

/// The fastest variant of each kernel at each timed shape, from `bench-kernels --tune`.
#[derive(Debug, Serialize, Deserialize)]
pub struct TuneTable {
    /// The embedded arch the variants were timed on.
    pub arch: String,
    pub device: String,
    pub entries: Vec<TuneEntry>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct TuneEntry {
    /// The base kernel, e.g. `gemm_q4k`.
    pub kernel: String,
    /// The kernel's dimensions (T x N x K for products).
    pub shape: Vec<usize>,
    /// The registry name of the fastest variant.
    pub variant: String,
    pub median_us: f64,
}

#[derive(Debug, Error)]
pub enum TuneError {
    #[error("reading the dispatch table {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error(
        "the dispatch table {path} is not one `zinc bench-kernels --tune --table` writes: {source}"
    )]
    Parse {
        path: String,
        source: serde_json::Error,
    },
    #[error("ZINC_TUNE names no file")]
    NoFile,
}

impl TuneTable {
    pub fn load(path: &Path) -> Result<Self, TuneError> {
        let text = std::fs::read_to_string(path).map_err(|source| TuneError::Read {
            path: path.display().to_string(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|source| TuneError::Parse {
            path: path.display().to_string(),
            source,
        })
    }

    /// The tables in `paths` (as `ZINC_TUNE` lists them, separated like PATH) as one: their
    /// entries together, from runs that each timed some kernels (`scripts/gpu-run.sh FILTER...`).
    pub fn load_all(paths: &std::ffi::OsStr) -> Result<Self, TuneError> {
        let mut tables = std::env::split_paths(paths).map(|path| Self::load(&path));
        let mut table = tables.next().transpose()?.ok_or(TuneError::NoFile)?;
        for other in tables {
            table.entries.extend(other?.entries);
        }
        Ok(table)
    }

    /// The timed variant of `kernel` for a product of `t` tokens with an `n` x `k` matrix: an
    /// entry at the same N and K, with T equal for decode sizes (<= MATVEC_MAX_T) and within a
    /// factor of two above them (the nearest one).
    pub fn pick(&self, kernel: &str, t: usize, n: usize, k: usize) -> Option<&str> {
        let distance = |e: &TuneEntry| (e.shape[0] as f64 / t as f64).log2().abs();
        self.entries
            .iter()
            .filter(|e| e.kernel == kernel && e.shape.len() == 3 && e.shape[1..] == [n, k])
            .filter(|e| {
                if t <= MATVEC_MAX_T || e.shape[0] <= MATVEC_MAX_T {
                    e.shape[0] == t
                } else {
                    distance(e) <= 1.0
                }
            })
            .min_by(|a, b| distance(a).total_cmp(&distance(b)))
            .map(|e| e.variant.as_str())
    }
}

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
        GgmlType::Q5_K => Some("q5k"),
        GgmlType::Q6_K => Some("q6k"),
        GgmlType::Q8_0 => Some("q8_0"),
        GgmlType::Q5_0 => Some("q5_0"),
        GgmlType::Q4_0 => Some("q4_0"),
        GgmlType::IQ4_NL => Some("iq4_nl"),
        GgmlType::IQ4_XS => Some("iq4_xs"),
        _ => None,
    }
}

/// The bytes of a `ty` matrix as every kernel reads them, as little-endian u32 words
/// zero-padded to whole 16-byte units (kernels view them as `u32x4`): GGUF blocks as they are
/// (Q4_K, Q5_K), or, for types whose blocks are not 16-byte multiples (Q6_K, Q8_0, Q5_0, Q4_0,
/// IQ4_NL), the same bytes grouped by field into aligned planes, and IQ4_XS repacked into
/// IQ4_NL's geometry (models/src/quant/planar.rs).
pub fn device_words(ty: GgmlType, bytes: &[u8]) -> Result<Vec<u32>, QuantError> {
    let planar;
    let bytes = if has_planar(ty) {
        planar = to_planar(ty, bytes)?;
        &planar[..]
    } else {
        bytes
    };
    let mut words: Vec<u32> = bytes
        .chunks(4)
        .map(|c| {
            let mut word = [0u8; 4];
            word[..c.len()].copy_from_slice(c);
            u32::from_le_bytes(word)
        })
        .collect();
    words.resize(words.len().next_multiple_of(4), 0);
    Ok(words)
}

/// Blocks that keep an H200's 132 SMs busy in a memory-bound kernel of one wave: about one each.
const FULL_GRID: usize = 120;

/// The matvec for `t` tokens (1..=MATVEC_MAX_T) of a `ty` matrix with `n` rows and `k` columns.
pub fn matvec(ty: GgmlType, t: usize, n: usize, k: usize) -> String {
    let suffix = quant_suffix(ty).expect("matvec of a type without kernels");
    // At one token, the H200's fastest (docs/PERF.md, session 4): Q4_K and Q5_K (one body) with
    // 16 warps on blocks of 32 long rows (Q4_K 4096 x 14336: 21.8 us against 24.4 with 8) and X
    // staged in shared memory for short rows (14336 x 4096: 20.4 against 21.7); Q6_K and Q8_0
    // (one body) with 8 warps on blocks of 16 long rows (24.4 against 25.6 with 32) and 4 warps
    // on 32 short ones. Fewer rows per block where that would leave SMs idle: the 1024-row key
    // and value projections of an 8B model take 8 rows per block (128 blocks for 132 SMs).
    // Batches take two row groups of 8 warps. Q5_0, Q4_0, IQ4_NL and IQ4_XS (one body) have
    // the batch-sized builds only.
    let kquant = matches!(ty, GgmlType::Q4_K | GgmlType::Q5_K);
    let rows_of_32 = kquant || matches!(ty, GgmlType::Q6_K | GgmlType::Q8_0);
    let blocks_of = |rows_per_block: usize| n.div_ceil(rows_per_block);
    let long_rows = if kquant && blocks_of(32) >= FULL_GRID {
        "TMAX=1,RG=4,KW=16"
    } else if blocks_of(16) >= FULL_GRID {
        "TMAX=1,RG=2,KW=8"
    } else {
        "TMAX=1,RG=1,KW=8"
    };
    let short_rows = if kquant {
        "TMAX=1,RG=4,KW=4,XS=1"
    } else {
        "TMAX=1,RG=4,KW=4"
    };
    let variant = match (rows_of_32, t) {
        (true, 1) if k >= n => long_rows,
        (true, 1) => short_rows,
        (true, 2) => "TMAX=2,RG=2,KW=8",
        (true, _) => "TMAX=4,RG=2,KW=8",
        (_, 1) => "TMAX=1",
        (_, 2) => "TMAX=2",
        (_, 3 | 4) => "TMAX=4",
        _ => return format!("matvec_{suffix}"),
    };
    format!("matvec_{suffix}@{variant}")
}

/// The integer matvec for `t` tokens (1..=MATVEC_MAX_T) of a `ty` matrix with `n` rows and `k`
/// columns, on quantize_s8's int8 activations, if the type has one (Q4_K, Q5_K, Q6_K, Q8_0,
/// Q5_0, Q4_0). At
/// one token, the H200's fastest builds (docs/PERF.md, session 5): Q4_K with one row group of 8
/// warps on long rows (4096 x 14336: 14.7 us, at the copy's bandwidth), four on short ones
/// (14336 x 4096: 14.1 us); Q6_K with four row groups of 16 warps on long rows (18.5 us) and of 4
/// warps on short ones (18.8 us; the 128256-row head of an 8B model 109.9 us).
///
/// Q8_0 and Q5_0 (one block of 32 per activation block; matvec_q6k_s8's layout of work), timed
/// on Gemma 3 270M's shapes: on long rows 8 warps (a warp per 256-weight unit of its 2048-long
/// rows; 640 x 2048 Q5_0: 4.9 us against matvec_q5_0's 6.8); on short rows one row group of 4
/// warps (2048 x 640: 5.2 us, where four groups took 7.1; its 262144-row Q8_0 head: 49.1 us
/// against matvec_q8_0's 68.2, at the copy's bandwidth). On an 8B model's Q8_0 rows (session 10)
/// two row groups of 8 warps do better on both: 4096 x 14336 in 23.0 us against 31.4 with four,
/// 14336 x 4096 in 22.8 against 25.8 with one group of 4 (the 128256-row head ties, 131.6
/// against 131.4). On its Q5_0 and Q4_0 rows (session 15) one row group of 8 warps: 4096 x 14336
/// in 17.9 and 15.6 us (Q4_0 with four groups: 22.5), 14336 x 4096 in 17.0 and 15.2 (4 warps:
/// 18.6 and 15.9), 4096 x 4096 in 8.9 and 8.0 (four groups: 12.3 and 9.7). Q5_K's short rows
/// take two row groups (14336 x 4096: 17.1 us against 21.0 with Q4_K's four). The int8
/// activations come in groups of 64, so `k` must be a multiple of 64 (Q8_0 and Q5_0 rows may end
/// mid-group; the f32 matvecs take those).
pub fn matvec_s8(ty: GgmlType, t: usize, n: usize, k: usize) -> Option<String> {
    if !k.is_multiple_of(64) {
        return None;
    }
    let many_rows = n.div_ceil(32) >= FULL_GRID;
    let block32_long_rows = "@TMAX=1,RG=1,KW=8";
    // The rows of an 8B model (K >= 4096) against Gemma 3 270M's.
    let wide = k >= 4096;
    let block32_short_rows = match wide {
        true => "@TMAX=1,RG=1,KW=8",
        false => "@TMAX=1",
    };
    let q8_0_long_rows = match wide && many_rows {
        true => "@TMAX=1,RG=2,KW=8",
        false => block32_long_rows,
    };
    let q8_0_short_rows = match wide {
        true => "@TMAX=1,RG=2,KW=8",
        false => "@TMAX=1",
    };
    let (kernel, long_rows, short_rows) = match ty {
        GgmlType::Q4_K => ("matvec_q4k_s8", "@TMAX=1,RG=1,KW=8", "@TMAX=1,RG=4,KW=8"),
        // Q4_K's kernel with the fifth bits.
        GgmlType::Q5_K => ("matvec_q5k_s8", "@TMAX=1,RG=1,KW=8", "@TMAX=1,RG=2,KW=8"),
        GgmlType::Q6_K => ("matvec_q6k_s8", "@TMAX=1,RG=4,KW=16", "@TMAX=1,RG=4,KW=4"),
        GgmlType::Q8_0 => ("matvec_q8_0_s8", q8_0_long_rows, q8_0_short_rows),
        GgmlType::Q5_0 => ("matvec_q5_0_s8", block32_long_rows, block32_short_rows),
        // Q5_0's kernel without the fifth bits.
        GgmlType::Q4_0 => ("matvec_q4_0_s8", block32_long_rows, block32_short_rows),
        // Q4_0's kernel and builds with levels for nibbles; not timed on its own.
        GgmlType::IQ4_NL => ("matvec_iq4_nl_s8", block32_long_rows, block32_short_rows),
        GgmlType::IQ4_XS => ("matvec_iq4_xs_s8", block32_long_rows, block32_short_rows),
        _ => return None,
    };
    let variant = match t {
        1 if k >= n => long_rows,
        1 => short_rows,
        2 => "@TMAX=2,RG=2,KW=8",
        3 | 4 => "@TMAX=4,RG=2,KW=8",
        _ => "",
    };
    Some(format!("{kernel}{variant}"))
}

/// The fused quantized GEMM for `t` tokens (more than [`MATVEC_MAX_T`]) of a `ty` matrix with
/// `n` rows and `k` columns, if there is one (they take 64-column slices); others are
/// dequantized into a scratch f16 matrix for [`gemm_f16`]. The variants are the H200's fastest
/// at the anchor shapes (docs/PERF.md): 256-row tiles for long prompts, and for Q4_K 64-column
/// tiles (twice the blocks) for shorter ones, and 64 x 64 tiles where even those make fewer
/// blocks than SMs; Q5_K (Q4_K's kernel with fifth bits) takes Q4_K's choices until a tune run
/// says otherwise. With `wgmma` (the device has sm_90a's warpgroup MMA) and K a multiple of 256,
/// Q4_K takes gemm_q4k_wg, and Q5_K, Q6_K, Q8_0 and Q4_0 the same kernel on their own weights.
pub fn quant_gemm(ty: GgmlType, t: usize, n: usize, k: usize, wgmma: bool) -> Option<String> {
    quant_gemm_into(ty, t, n, k, wgmma, false)
}

/// [`quant_gemm`] for a product that adds into its output (`Backend::matmul_add`, the residual
/// stream): it differs where gemm_wg's K split, which adds anyway and then needs no zeroed
/// output, beats the plain product's choice ([`wgmma_tiles`]).
pub fn quant_gemm_adding(
    ty: GgmlType,
    t: usize,
    n: usize,
    k: usize,
    wgmma: bool,
) -> Option<String> {
    quant_gemm_into(ty, t, n, k, wgmma, true)
}

fn quant_gemm_into(
    ty: GgmlType,
    t: usize,
    n: usize,
    k: usize,
    wgmma: bool,
    adds: bool,
) -> Option<String> {
    if !k.is_multiple_of(64) {
        return None;
    }
    if wgmma && k.is_multiple_of(256) {
        if let Some(kernel) = wgmma_kernel(ty) {
            return Some(wgmma_tiles(kernel, t, n, k, adds));
        }
    }
    let kernel = match ty {
        GgmlType::Q4_K => "gemm_q4k",
        GgmlType::Q5_K => "gemm_q5k",
        GgmlType::Q6_K => "gemm_q6k",
        GgmlType::Q8_0 => "gemm_q8_0",
        GgmlType::Q5_0 => "gemm_q5_0",
        GgmlType::Q4_0 => "gemm_q4_0",
        GgmlType::IQ4_NL => "gemm_iq4_nl",
        GgmlType::IQ4_XS => "gemm_iq4_xs",
        _ => return None,
    };
    // 128 x 64 tiles leave SMs idle on short matrices (an 8B model's 1024-row key and value
    // projections make 64 blocks at T = 512): 64 x 64 tiles double the blocks (H200: 56.3 ->
    // 39.3 us at T=512 N=1024 K=4096, docs/PERF.md).
    let short = t.div_ceil(128) * n.div_ceil(64) < FULL_GRID;
    // Q6_K's 128 x 128 tiles with K split in two (each half adds into the zeroed output; two
    // halves add in either order to the same floats) where they make under two blocks per SM:
    // H200, T=512: 319.7 -> 280.5 us at N=4096 K=14336, and with 128 x 64 tiles 109.5 -> 43.3 at
    // N=1024 K=4096 (docs/PERF.md, session 5). Q4_K's 128 x 64 tiles tie with its split (210.2
    // against 208.3 us), so it keeps the plain stores.
    let q6k_split = k >= 512 && t.div_ceil(128) * n.div_ceil(128) < 2 * FULL_GRID;
    let variant = match ty {
        _ if t >= 1024 => "@BM=256,STAGES=2",
        GgmlType::Q4_K | GgmlType::Q5_K if short => "@BM=64,BN=64,WM=64,WN=32",
        GgmlType::Q4_K | GgmlType::Q5_K => "@BN=64",
        GgmlType::Q6_K if q6k_split && short => "@BN=64,SPLITK=2",
        GgmlType::Q6_K if q6k_split => "@SPLITK=2",
        _ if n > k => "@BM=256,STAGES=2",
        _ => "",
    };
    Some(format!("{kernel}{variant}"))
}

/// The gated-unit GEMM for `t` tokens (more than [`MATVEC_MAX_T`]) of a gated pair of `ty` gate
/// and up matrices of `n` rows and `k` columns each, with SiLU or (`gelu`) GELU, if there is one.
/// It needs K in whole super-blocks and N in whole pair groups. With `wgmma`, gemm_wg's GLU
/// (kernels/gemm_wg_glu.tile) on the plain GEMM's two-warpgroup tiles: 256 tokens, 128 for
/// batches of 65 to 128, and for Q5_K the producer warpgroup; one warpgroup on 32 or 64 tokens
/// for batches that fit them (H200, 2N = 28672 x 4096, session 18: at T = 16 39.2 us against
/// 107.4 on two warpgroups of 128; at T = 64 44.5 against 79.5; at T = 128 the two warpgroups
/// win, 58.9 against 72.5 on one of 128, 82.1 on two of 64). Without, gemm_q4k's GLU
/// (kernels/gemm_q4k_glu.tile, Q4_K and Q5_K) on gemm_q4k's tiles for the pair's 2N rows.
pub fn gated_gemm(
    ty: GgmlType,
    gelu: bool,
    t: usize,
    n: usize,
    k: usize,
    wgmma: bool,
) -> Option<String> {
    if !k.is_multiple_of(256) || !n.is_multiple_of(crate::specs::PAIR_GROUP) {
        return None;
    }
    let activation = if gelu { "gelu" } else { "silu" };
    if !wgmma {
        let kernel = match ty {
            GgmlType::Q4_K => "gemm_q4k",
            GgmlType::Q5_K => "gemm_q5k",
            _ => return None,
        };
        let variant = match quant_gemm(ty, t, 2 * n, k, false)?.split_once('@') {
            Some((_, v)) if !v.contains("SPLITK") => format!("@{v}"),
            _ => String::new(),
        };
        return Some(format!("{kernel}_{activation}{variant}"));
    }
    let kernel = wgmma_kernel(ty)?;
    let variant = match ty {
        _ if t <= 128 => match short_batch_tile(t, true) {
            32 => "@WG=1,BT=32",
            64 => "@WG=1,BT=64",
            _ => "",
        },
        _ if t.div_ceil(256) * n.div_ceil(64) > WGMMA_SMS => &format!("@{PERSISTENT_TILE}"),
        GgmlType::Q5_K => "@BT=256,PRODUCER=1",
        _ => "@BT=256",
    };
    Some(format!("{kernel}_{activation}{variant}"))
}

/// gemm_wg's kernel for `ty` weights (kernels/gemm_wg.tile), if it has one.
fn wgmma_kernel(ty: GgmlType) -> Option<&'static str> {
    match ty {
        GgmlType::Q4_K => Some("gemm_q4k_wg"),
        GgmlType::Q5_K => Some("gemm_q5k_wg"),
        GgmlType::Q6_K => Some("gemm_q6k_wg"),
        GgmlType::Q8_0 => Some("gemm_q8_0_wg"),
        GgmlType::Q4_0 => Some("gemm_q4_0_wg"),
        GgmlType::IQ4_NL => Some("gemm_iq4_nl_wg"),
        GgmlType::IQ4_XS => Some("gemm_iq4_xs_wg"),
        _ => None,
    }
}

/// How gemm_wg's stream-K tiles (kernels/gemm_wg.tile, STREAMK) share a product out: the
/// persistent two-warpgroup tile on 256 tokens, with the product's super-blocks shared out
/// evenly over the blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamK {
    /// All of them (STREAMK=1).
    All,
    /// Whole tiles in waves, but the last one to two waves' worth (STREAMK=2).
    LastWaves,
}

impl StreamK {
    /// The variant of a gemm_wg kernel that shares its products out this way.
    pub fn tile(self) -> &'static str {
        match self {
            StreamK::All => "BT=256,PRODUCER=1,PERSIST=132,STREAMK=1",
            StreamK::LastWaves => "BT=256,PRODUCER=1,PERSIST=132,STREAMK=2",
        }
    }

    /// `ZINC_STREAMK`'s value: 1 shares all of a product out, 2 its last waves; anything else
    /// (unset) none.
    pub fn from_env_value(value: &str) -> Option<StreamK> {
        match value {
            "1" => Some(StreamK::All),
            "2" => Some(StreamK::LastWaves),
            _ => None,
        }
    }
}

/// `kernel` (a gemm_wg kernel and variant, as [`quant_gemm`] and [`gated_gemm`] name it) on
/// the stream-K tile for a `t` x `n` x `k` product (`gated`: of a gated pair's 2n rows) on a
/// device of `sms` SMs and `l2_bytes` of L2: whatever tile, K split or short last wave the
/// dispatch chose becomes work shared out evenly over the SMs, and a split's zeroed output
/// unneeded. Only where
/// - `t` fills a 256-token tile;
/// - the tiles are at least a third of the SMs, so that the block finishing a tile reads back
///   at most about two other blocks' parts (128 KiB each, through the L2): the short products
///   of prefill (k and v projections at T = 512: 16 tiles) keep their small split tiles;
/// - the f16 input fits a third of the L2. Blocks of whole tiles go through K together, so the
///   tiles of a wave share each slice of X as it comes; stream-K's blocks are all at different
///   K, and every block reads its tiles' whole X rows. Read from DRAM each time, those would
///   outweigh the tensor cores (a tile's 256 rows of X are 512 bytes per K against its 65,536
///   flops per K: 5.1 TB/s at the 650 TFLOP/s cuBLAS reaches on the H200, past the ~4 TB/s
///   of its device copy): at T = 2048 the down projection's X of 56 MiB keeps the persistent
///   tile.
///
/// Sharing only the last waves out ([`StreamK::LastWaves`]) takes the same products: its
/// blocks sit at different K for those waves just the same.
///
/// The engine's choice with `ZINC_STREAMK=1` or `2`. On the H200 (session 22) it lost to the
/// tiles it replaces at the anchors (Q4_K 512 x 14336 x 4096 96.0 -> 99.6 us, 2048 x 14336 x 4096
/// 376.4 -> 392.9; pp512 -2 to -7%, pp2048 -3 to -4%); [`split_stream_k`] keeps where it won.
pub fn stream_k(
    kernel: &str,
    [t, n, k]: [usize; 3],
    gated: bool,
    sms: usize,
    l2_bytes: usize,
    how: StreamK,
) -> Option<String> {
    let base = kernel.split('@').next()?;
    let columns = if gated { 64 } else { 128 };
    let tiles = t.div_ceil(256) * n.div_ceil(columns);
    let fits = 3 * (2 * t * k) <= l2_bytes;
    (base.contains("_wg") && t >= 256 && 3 * tiles >= sms && fits)
        .then(|| format!("{base}@{}", how.tile()))
}

/// `kernel` on the stream-K tile ([`StreamK::All`]) where it is gemm_wg's two-warpgroup tile
/// split over K (`BT=256,SPLITK=s`) into more blocks than the `sms` SMs with a last wave at
/// most half full: the engine's default. H200 (session 22, Q4_K and Q6_K against the dispatch's
/// split tile): 4096 x 14336 at T = 640 169.3 -> 142.9 us, at T = 768 167.9 -> 148.5 (Q6_K
/// 182.5 -> 158.2), where 96 tiles make 192 blocks; where the blocks fill a wave (64 tiles, T =
/// 384 and 512) the split tile stays ahead (90.6 against 94.8 us at T = 512). Elsewhere
/// stream-K lost to the tiles it would replace (docs/PERF.md, session 22).
pub fn split_stream_k(kernel: &str, [t, n, _]: [usize; 3], sms: usize) -> Option<String> {
    let (base, variant) = kernel.split_once('@')?;
    let splits = crate::specs::variant_param(kernel, crate::specs::SPLIT_K)?;
    let two_warpgroups = variant == format!("BT=256,{}={splits}", crate::specs::SPLIT_K);
    let blocks = t.div_ceil(256) * n.div_ceil(128) * splits;
    let last_wave = blocks % sms;
    (base.contains("_wg")
        && two_warpgroups
        && blocks > sms
        && last_wave > 0
        && 2 * last_wave <= sms)
        .then(|| format!("{base}@{}", StreamK::All.tile()))
}

/// Words of gemm_wg's `ws` for a stream-K launch (STREAMK=1 or 2) of `blocks` blocks: each block's
/// flags (one per consumer warp, eight at most) and then its partial sums (those of the largest
/// tile: 128 a thread of two warpgroups' 256).
pub fn stream_k_workspace_words(blocks: usize) -> usize {
    blocks * (8 + 128 * 256)
}

/// gemm_wg's two-warpgroup tile on 256 tokens where its tiles outnumber the SMs: persistent
/// blocks, one an SM, which overlap a tile's first copies with the last tile's stores (H200,
/// session 20: Q4_K 2048 x 4096 x 14336 359.6 -> 347.9 us, 2048 x 14336 x 4096 382.0 -> 371.6,
/// Q6_K 396.5 -> 381.4 there; 512 x 14336 x 4096 within 1-2%).
pub const PERSISTENT_TILE: &str = "BT=256,PRODUCER=1,PERSIST=132";

/// [`PERSISTENT_TILE`] on a 5-deep ring: Q4_K's and Q6_K's products of K up to 4096 into a new
/// output where a block runs fewer than two tiles. There the deeper ring was ahead in all ten
/// pairs measured (H200, session 43, three rounds: Q4_K 0.4-1.3%, Q6_K 0.9-2.9% at T = 512, N =
/// 14336 and 11008, T = 1024, N = 6144; H100, session 42: 1.7% and 3.6% at 512 x 14336); at 2.5
/// tiles a block it was level or 1.3% behind, and at T = 2048, K = 14336 2-5% behind (H100).
pub const PERSISTENT_TILE_DEEP: &str = "BT=256,PRODUCER=1,PERSIST=132,STAGES=5";

/// The K split in two of gemm_wg's two-warpgroup tile on 256 tokens, and the same adding its
/// halves into the output with TMA reductions (kernels/gemm_wg.tile, TMA_STORE): 2-4% faster on
/// the H200 at 512 x 4096 x 14336 (session 25: Q4_K 92.3 -> 90.2 us, Q6_K 98.6 -> 95.3).
/// The persistent tile's TMA-store build lost 0.4-4.4% at its anchors, so the dispatch leaves
/// it out.
const SPLIT_TILE: &str = "BT=256,SPLITK=2";
const SPLIT_TMA_STORE_TILE: &str = "BT=256,SPLITK=2,TMA_STORE=1";

/// `kernel` (a gemm_wg kernel and variant, as [`quant_gemm`] names them) on its TMA-store
/// build where it is on the two-warpgroup K split in two. (Products whose N is not a multiple
/// of 8 store with atomics in that build too: the output's tensor map needs rows of whole
/// 16-byte units.) The engine's choice unless `ZINC_TMA_STORE=0`.
pub fn tma_store(kernel: &str) -> Option<String> {
    let (base, variant) = kernel.split_once('@')?;
    (variant == SPLIT_TILE).then(|| format!("{base}@{SPLIT_TMA_STORE_TILE}"))
}

/// How a product that ends a residual branch goes into the residual stream
/// (`Backend::matmul_add`): `Off` (`ZINC_ADD_OUTPUT=0`) always as a product and then an add
/// (folded into the next norm); `Splits` (`splits`) added in place where the product's kernel
/// adds into its output anyway (K splits: no memset, no add); `Atomics` (`atomics`) and `Tma`
/// (`tma`) also where the unsplit tile has an ADD_OUTPUT build (kernels/gemm_wg.tile), which
/// adds with f32 atomics or with TMA reductions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddOutput {
    Off,
    Splits,
    Atomics,
    Tma,
}

impl AddOutput {
    /// `ZINC_ADD_OUTPUT`'s value: `0`, `splits`, `atomics` or `tma`; None for anything else.
    pub fn from_env_value(value: &str) -> Option<Self> {
        match value {
            "0" => Some(AddOutput::Off),
            "splits" => Some(AddOutput::Splits),
            "atomics" => Some(AddOutput::Atomics),
            "tma" => Some(AddOutput::Tma),
            _ => None,
        }
    }

    /// The build of `kernel` (a kernel and variant, as [`quant_gemm`] names them) that adds its
    /// product into its output: `kernel` itself where it adds already, else (`Atomics`, `Tma`)
    /// the ADD_OUTPUT build of gemm_wg's one-warpgroup or persistent tile. None where there is
    /// none, and with `Off`.
    pub fn kernel(self, kernel: &str) -> Option<String> {
        if self == AddOutput::Off {
            return None;
        }
        if crate::specs::adds_into_output(kernel) {
            return Some(kernel.to_string());
        }
        let (base, variant) = kernel.split_once('@')?;
        let tma = match self {
            AddOutput::Atomics => "",
            AddOutput::Tma => ",TMA_STORE=1",
            AddOutput::Off | AddOutput::Splits => return None,
        };
        let adding = match variant {
            ONE_WARPGROUP | ONE_WARPGROUP_DEEP => ONE_WARPGROUP,
            PERSISTENT_TILE | PERSISTENT_TILE_DEEP => PERSISTENT_TILE,
            _ => return None,
        };
        base.ends_with("_wg")
            .then(|| format!("{base}@{adding}{tma},{}=1", crate::specs::ADD_OUTPUT))
    }
}

/// The engine's settings that replace the dispatch's gemm_wg tile ([`quant_gemm`],
/// [`gated_gemm`]) with another build: stream-K ([`stream_k`], [`split_stream_k`]) and TMA
/// reductions ([`tma_store`]). `zinc bench-kernels --dispatch` applies them as the engine does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rewrites {
    /// Whether (and how) gemm_wg's products take a stream-K tile where [`stream_k`] says: with
    /// `ZINC_STREAMK=1` or `2`.
    pub stream_k: Option<StreamK>,
    /// Whether K-split products with a short last wave take the stream-K tile
    /// ([`split_stream_k`]): unless `ZINC_STREAMK=0`.
    pub split_stream_k: bool,
    /// Whether two-way K-split products add their halves with TMA reductions ([`tma_store`]):
    /// unless `ZINC_TMA_STORE=0`.
    pub tma_store: bool,
}

impl Rewrites {
    /// The kernel the engine runs for `pick`, the dispatch's choice for a `t` x `n` x `k`
    /// product (`gated`: of a gated pair's 2n rows), on a device of `sms` SMs and `l2_bytes` of
    /// L2: a stream-K tile where one is asked for or a split takes it, else the TMA-store build,
    /// else `pick`. A build `registered` does not know is not taken.
    pub fn kernel(
        &self,
        pick: String,
        dims: [usize; 3],
        gated: bool,
        sms: usize,
        l2_bytes: usize,
        registered: impl Fn(&str) -> bool,
    ) -> String {
        let shared_out = match self.stream_k {
            Some(how) => stream_k(&pick, dims, gated, sms, l2_bytes, how),
            None if self.split_stream_k => split_stream_k(&pick, dims, sms),
            None => None,
        };
        (shared_out.or_else(|| self.tma_store.then(|| tma_store(&pick)).flatten()))
            .filter(|v| registered(v))
            .unwrap_or(pick)
    }
}

/// gemm_wg's one-warpgroup tile on 256 tokens, with the producer warp and shared chunk scales.
const ONE_WARPGROUP: &str = "WG=1,BT=256,STAGES=5,PRODUCER=1,SHFL_SCALES=1";

/// [`ONE_WARPGROUP`] with a 6-deep ring, for Q4_K and Q6_K unsplit: about 2% faster at T = 384
/// and 512, N = 4096, K = 4096 and 14336 (H100, docs/PERF.md session 33: Q4_K 30.0 -> 29.3 us
/// at 512 x 4096 x 4096, Q6_K 32.7 -> 32.0); Q8_0 ran level or slower. Each slice decoded
/// before its X tile is waited for (`DECODE_FIRST`): 0-4% faster in 8 of 8 pairs (H100,
/// session 35: Q4_K 86.0 -> 84.5 us at 512 x 4096 x 14336, Q6_K 95.3 -> 91.8), where on the
/// 5-deep ring it was 2-4% slower at K = 4096. Its build that adds into the output stays on
/// [`ONE_WARPGROUP`]'s ring: a sixth slot and the staging area of its TMA reductions do not
/// fit in shared memory together.
const ONE_WARPGROUP_DEEP: &str = "WG=1,BT=256,STAGES=6,PRODUCER=1,SHFL_SCALES=1,DECODE_FIRST=1";

/// SMs of the GPUs that run gemm_wg (sm_90a: H100 SXM and H200; an H100 PCIe has 114).
const WGMMA_SMS: usize = 132;

/// gemm_wg's tiles (`kernel` is gemm_q4k_wg, gemm_q5k_wg, gemm_q6k_wg or gemm_q8_0_wg; Q6_K's tune
/// agreed with Q4_K's choices at every anchor) for a `t` x `n` x `k` product, the H200's fastest
/// (docs/PERF.md, sessions 6 and 8). Two warpgroups (128 weight rows) on 256 tokens where that
/// makes a block per SM (T=512 N=14336 K=4096: 102.0 us), the same with K split in two where the
/// split does and K is long (T=512 N=4096 K=14336: 100.9). Below that, one warpgroup on 256 tokens
/// with a 5-deep ring where its twice as many blocks fill exactly one wave (T=512 N=4096 K=4096,
/// 128 blocks: 31.0 against 46.2 for two warpgroups), fed by a producer warp (29.8: session 11) and
/// sharing the chunk scales within row groups (29.2: session 12), two warpgroups where one
/// warpgroup's blocks would need a second wave (one partial wave of 64 to 96 blocks takes 45-47 us
/// at K=4096 and T=512, against 55 for one warpgroup's 144 to 192), one warpgroup with K split
/// where even that leaves SMs idle (T=512 N=1024 K=4096: 27.2). Short batches take
/// [`short_batch_tiles`]. Q5_K's two-warpgroup tiles take a producer warpgroup, which
/// gains it 3-7% (its decode is the longest; Q4_K and Q8_0 gained nothing: session 12), and so do
/// Q6_K's unsplit ones from T = 1024 (1-4% in each of seven pairs at T = 1024 and 2048; -8 to +2%
/// at T = 512: session 16). The one-warpgroup split tile has a producer warp too (5-12% at N = 1024
/// to 2048: session 16). Where even the split leaves SMs idle and 128-token tiles split in four
/// make at most two blocks per SM, those (T=512 N=1024 K=4096, the key and value products of an
/// 8B model: Q4_K 22.8 -> 18.8 us, Q6_K 23.7 -> 19.3; at T=768, or N=2048, the split 256-token
/// tiles stay as fast or faster: session 19).
/// Where the one-warpgroup tile makes one full wave and the two-warpgroup one would be split
/// (T = 512, N = 4096, K = 14336: an 8B model's down projection), Q4_K and Q6_K take the former
/// on its 6-deep ring for a new output (`adds` false): it needs no zeroed output and ran 2-5%
/// ahead of the split with its memset (H100, sessions 33 and 34: Q4_K 89.4-90.4 -> 85.5-85.7 us,
/// Q6_K 96.5-97.0 -> 93.1-95.9). A product that adds into its output (`adds`) keeps the split,
/// which adds as it is; the one-warpgroup tile's adding build reads the output back (session
/// 31: ~3.5 us more at T = 512, N = 4096) on a 5-deep ring. Where the two-warpgroup tiles
/// outnumber the SMs, persistent blocks take them ([`PERSISTENT_TILE`], or
/// [`PERSISTENT_TILE_DEEP`] where each block runs fewer than two).
fn wgmma_tiles(kernel: &str, t: usize, n: usize, k: usize, adds: bool) -> String {
    let blocks = |rows: usize, tokens: usize| t.div_ceil(tokens) * n.div_ceil(rows);
    let (wide, narrow) = (blocks(128, 256), blocks(64, 256));
    let q4k_or_q6k = matches!(kernel, "gemm_q4k_wg" | "gemm_q6k_wg");
    let deep = q4k_or_q6k && k >= 4096;
    let one_wave = (FULL_GRID..=WGMMA_SMS).contains(&narrow);
    let two_warpgroups = |split: &str| {
        if split.is_empty() && wide > WGMMA_SMS {
            let deep_ring = q4k_or_q6k && !adds && k <= 4096 && wide < 2 * WGMMA_SMS;
            let tile = if deep_ring {
                PERSISTENT_TILE_DEEP
            } else {
                PERSISTENT_TILE
            };
            return tile.to_string();
        }
        let producer =
            kernel == "gemm_q5k_wg" || (kernel == "gemm_q6k_wg" && split.is_empty() && t >= 1024);
        let producer = if producer { ",PRODUCER=1" } else { "" };
        format!("BT=256{split}{producer}")
    };
    let variant = if t < SHORT_BATCH_TOKENS {
        short_batch_tiles(t, n, k, kernel == "gemm_q6k_wg")
    } else if wide >= FULL_GRID {
        two_warpgroups("")
    } else if 2 * wide >= FULL_GRID && k >= 8192 && (adds || !(deep && one_wave)) {
        two_warpgroups(",SPLITK=2")
    } else if narrow > WGMMA_SMS {
        two_warpgroups("")
    } else if narrow >= FULL_GRID || k < 512 {
        (if deep {
            ONE_WARPGROUP_DEEP
        } else {
            ONE_WARPGROUP
        })
        .to_string()
    } else if 2 * narrow < WGMMA_SMS && 4 * blocks(64, 128) <= 2 * WGMMA_SMS && k >= 2048 {
        "WG=1,BT=128,SPLITK=4".to_string()
    } else {
        format!("{ONE_WARPGROUP},SPLITK=2")
    };
    format!("{kernel}@{variant}")
}

/// Batches below this many tokens take [`short_batch_tiles`]: they fill a 256-token tile less
/// than seven eighths, and two 128-token tiles did better (H200, session 18: at T = 200, Q4_K
/// 4096 x 4096 25.0 us split in two against 28.0 on 256-token tiles, 1024 x 4096 15.4 against
/// 21.3, 4096 x 14336 60.9 against 66.4).
const SHORT_BATCH_TOKENS: usize = 224;

/// gemm_wg's tiles for a batch of fewer than [`SHORT_BATCH_TOKENS`], the H200's fastest
/// (docs/PERF.md, session 18): one warpgroup on [`short_batch_tile`]'s tiles (128 tokens only
/// where the matrix has at least 64 tiles of 64 rows; with fewer, 64-token tiles split further
/// do better), with K split in 2, 4 or 8 (at most 4 on 128-token tiles) as far as the blocks
/// stay within what the SMs hold at once ([`short_batch_blocks_per_sm`]) and every split keeps
/// two super-blocks.
/// A short batch's product streams its weights, and the tiles of a short N alone (64 at
/// N = 4096, 16 at N = 1024) leave most SMs idle: at T = 64, Q4_K 4096 x 4096 took 26.0 us
/// unsplit and 15.9 split in four, 1024 x 4096 11.0 split in eight; past what the SMs hold the
/// splits lose again (4096 x 4096 in eight: 16.2). The 64-token tiles split in four or eight
/// take the producer warp (Q4_K and Q6_K 1-12% faster in 22 of 24 pairs), with a 6-deep ring
/// on long K (4096 x 14336: 26.6 against 28.2 us with four stages, 31.9 without the producer).
fn short_batch_tiles(t: usize, n: usize, k: usize, q6k: bool) -> String {
    let tile = short_batch_tile(t, n.div_ceil(64) >= 64);
    let tiles = t.div_ceil(tile) * n.div_ceil(64);
    let held = short_batch_blocks_per_sm(tile, q6k) * WGMMA_SMS;
    let split = [8, 4, 2]
        .into_iter()
        .filter(|&s| tile < 128 || s <= 4)
        .find(|&s| tiles * s <= held && k / 256 >= 2 * s)
        .unwrap_or(1);
    match (tile, split) {
        (_, 1) => format!("WG=1,BT={tile}"),
        (64, 4) if k >= 8192 => "WG=1,BT=64,STAGES=6,PRODUCER=1,SPLITK=4".to_string(),
        (64, 4 | 8) => format!("WG=1,BT=64,PRODUCER=1,SPLITK={split}"),
        _ => format!("WG=1,BT={tile},SPLITK={split}"),
    }
}

/// The token tile of a short batch of `t` tokens: the largest of 32, 64 and (`wide`) 128 that
/// the batch fills more than half, else 32. A tile's rows past T cost throughput when every SM
/// streams (the TMA unit fills them with zeros), more the more of them there are: at T = 16,
/// Q4_K 4096 x 14336 took 23.3 us on 32-token tiles and 37.5 on 64-token ones, the gated units
/// 39.2 and 87.6; but at T = 40 the 64-token tiles won (28.0 against 35.6 on two 32-token
/// tiles), and at T = 100 the 128-token ones (37.8 against 42.4 on two of 64; H200, session
/// 18). A batch longer than its tile runs on several, the last moved back to end at T.
fn short_batch_tile(t: usize, wide: bool) -> usize {
    [128, 64, 32]
        .into_iter()
        .filter(|&tile| wide || tile < 128)
        .find(|&tile| 2 * t > tile)
        .unwrap_or(32)
}

/// The one-warpgroup blocks of `tile` tokens an SM holds at once, with the producer warp where
/// [`short_batch_tiles`] gives it one: shared memory and registers allow four Q4_K blocks of 64
/// tokens (about 50 KB and 90 registers a thread) but two of Q6_K's (58 KB, 141 registers for
/// 160 threads; three of its 128-thread blocks), two of 128 tokens (82 KB), four of 32. At
/// T = 64, Q6_K 6144 x 4096 took 24.6 us split in four with the producer (384 blocks) and 22.5
/// split in two without (192; H200, session 18).
fn short_batch_blocks_per_sm(tile: usize, q6k: bool) -> usize {
    match tile {
        ..=32 => 4,
        33..=64 if q6k => 2,
        33..=64 => 3,
        _ => 2,
    }
}

/// A gemm_wg product whose last wave of two-warpgroup tiles is short enough for one-warpgroup
/// tiles (half the rows, twice the blocks) to finish it in one wave: the engine launches the full
/// waves (`head` tiles from tile 0, on the product's kernel) and then `tail` over the rest, which
/// are its tiles `tail_first` to `tail_first + tail_tiles`. H200, gated units at T = 512 (session
/// 16): 2N = 28672 rows took 218.4 us whole, against 172.8 for three full waves and 31.6 for the
/// 52-tile rest on one-warpgroup tiles.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WaveTail {
    pub head: usize,
    pub tail: String,
    pub tail_first: usize,
    pub tail_tiles: usize,
}

/// The tile offset of the WaveTail's launches needs tile ids to run over whole row tiles: true
/// while the token tiles fit one rasterization group (gemm_wg's GROUP).
const WG_GROUP: usize = 8;

/// `kernel` (a gemm_wg kernel and variant, as [`quant_gemm`] and [`gated_gemm`] name them) on a
/// `t` x `n` product (`gated`: of a gated pair's 2n rows) on a device of `sms` SMs split as
/// [`WaveTail`] says, where its variant is the unsplit two-warpgroup tile on 256 tokens, at least
/// one wave is full and the rest would fill at most half of the SMs on one-warpgroup tiles. Only
/// where `t` fills its token tiles: on the H200 (session 16) the split gained pp512 0.8-2.6% on
/// the llama3-8b shape but lost pp300 3.5%, for reasons not yet known.
pub fn wave_tail(kernel: &str, t: usize, n: usize, gated: bool, sms: usize) -> Option<WaveTail> {
    let (base, variant) = kernel.split_once('@')?;
    let two_warpgroups = matches!(
        variant,
        "BT=256" | "BT=256,PRODUCER=1" | PERSISTENT_TILE | PERSISTENT_TILE_DEEP
    );
    if !two_warpgroups || !base.contains("_wg") || !t.is_multiple_of(256) {
        return None;
    }
    let token_tiles = t / 256;
    // Output columns of a two-warpgroup tile (128 weight rows: 64 gated units).
    let columns = if gated { 64 } else { 128 };
    let tiles = token_tiles * n.div_ceil(columns);
    // The full waves, in whole row tiles (tile ids run over the token tiles of a row tile).
    let head = tiles / sms * sms / token_tiles * token_tiles;
    let rest = tiles - head;
    if token_tiles > WG_GROUP || head < sms || rest == 0 || 2 * rest > sms {
        return None;
    }
    Some(WaveTail {
        head,
        tail: format!("{base}@{ONE_WARPGROUP}"),
        tail_first: 2 * head,
        tail_tiles: token_tiles * n.div_ceil(columns / 2) - 2 * head,
    })
}

/// The tokens of a gemm_wg product of `t` tokens on `kernel` (as [`quant_gemm`] and
/// [`gated_gemm`] name it; `gated`: of a gated pair's 2n rows) that run on its 256-token tiles
/// where its last token tile would hold at most 128 of them and the rest of its tiles take
/// fewer waves on `sms` SMs: the engine runs the last tile's rows on the tiles the dispatch
/// gives a batch of their size. A 256-token tile costs the same however many of its tokens are
/// real (H200, 14336 x 4096: T = 300 took 100.0 us, T = 512 102.1), but dropping one saves
/// nothing where the waves stay as many, and the short batch's launch costs: splitting every
/// product lost pp300 9%, while pp1033 gained 12.5% (session 17).
pub fn token_head(kernel: &str, t: usize, n: usize, gated: bool, sms: usize) -> Option<usize> {
    let (base, variant) = kernel.split_once('@')?;
    let params: Vec<&str> = variant.split(',').collect();
    let rest = t % 256;
    if !base.contains("_wg") || !params.contains(&"BT=256") || t <= 256 || rest > 128 {
        return None;
    }
    let rows = if params.contains(&"WG=1") { 64 } else { 128 };
    let columns = if gated { rows / 2 } else { rows };
    let splits = params
        .iter()
        .find_map(|p| p.strip_prefix("SPLITK="))
        .map_or(Some(1), |s| s.parse::<usize>().ok())?;
    let waves = |token_tiles: usize| (token_tiles * n.div_ceil(columns) * splits).div_ceil(sms);
    (rest > 0 && waves(t / 256) < waves(t.div_ceil(256))).then_some(t - rest)
}

/// The copy of a product input that the kernel producing it writes besides its f32 output, for
/// the products reading it next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputCopy {
    None,
    /// f16, for the tensor-core GEMMs of prefill-size batches (the `_f32h` kernels).
    Half,
    /// int8 blocks (kernels/quant/act_s8.tile), for the int8 matvecs of decode-size batches (the
    /// `_f32q` kernels): bit for bit what quantize_s8 makes of the f32 output.
    Int8,
}

/// The RMS norm for `rows` rows of `cols` values (a multiple of 4), in f32 and, with `copy`, also
/// in f16 (prefill-size batches) or as int8 blocks (decode-size ones). One block a row, each
/// thread holding VEC groups of four of it in registers (kernels/norm.tile): 1024 threads for
/// decode-size batches, whose few blocks must have as many loads in flight as they can, else
/// 256; VEC the least power of two that covers the row, as far as the builds go
/// (kernels/variants.txt).
pub fn rmsnorm(rows: usize, cols: usize, copy: InputCopy) -> String {
    let name = match copy {
        InputCopy::None => "rmsnorm_f32",
        InputCopy::Half => "rmsnorm_f32h",
        InputCopy::Int8 => "rmsnorm_f32q",
    };
    norm_build(name, rows, cols)
}

/// The RMS norm for `rows` rows of `cols` values that writes its output in f16 alone, for the
/// tensor-core GEMMs of prefill-size batches when nothing else reads it.
pub fn rmsnorm_half_only(rows: usize, cols: usize) -> String {
    norm_build("rmsnorm_f16", rows, cols)
}

/// The residual add and the RMS norm of its sum in one pass, for `rows` rows of `cols` values,
/// the sum in f32 (the residual stream). Only products read the norm (`Backend::add_rms_norm`):
/// where they read f16 (`copy`) it is written in f16 alone, else in f32 with `copy`.
pub fn add_rmsnorm(rows: usize, cols: usize, copy: InputCopy) -> String {
    let name = match copy {
        InputCopy::None => "add_rmsnorm_f32",
        InputCopy::Half => "add_rmsnorm_f16",
        InputCopy::Int8 => "add_rmsnorm_f32q",
    };
    norm_build(name, rows, cols)
}

/// The build of norm kernel `name` for `rows` rows of `cols` values (as [`rmsnorm`] picks it).
fn norm_build(name: &str, rows: usize, cols: usize) -> String {
    let (block, most) = match rows <= MATVEC_MAX_T {
        true => (1024, 4),
        false => (256, 16),
    };
    let vec = cols.div_ceil(4 * block).next_power_of_two().min(most);
    match (block, vec) {
        (256, 4) => name.to_string(),
        (256, vec) => format!("{name}@VEC={vec}"),
        (block, vec) => format!("{name}@BLOCK={block},VEC={vec}"),
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
/// enough blocks to fill the GPU several times over, in whole trips of the kernel's block (4
/// warps of 4 keys). Short contexts get one trip per block: with 64-key splits a decode step at
/// depth 100 ran 64 blocks of 32 heads x 2 splits, each up to 4 dependent trips long.
pub fn attention_split(n_kv: usize, rows: usize) -> usize {
    const TARGET_BLOCKS: usize = 1024;
    const TRIP_KEYS: usize = 16;
    (n_kv * rows)
        .div_ceil(TARGET_BLOCKS)
        .next_multiple_of(TRIP_KEYS)
        .max(TRIP_KEYS)
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
    use crate::specs::variant_param;
    use zinc_models::quant::from_planar;

    /// Every name the dispatch can produce is registered for every embedded arch.
    #[test]
    fn attention_splits_are_whole_trips_and_fill_the_gpu() {
        // Decode of 32 heads: one trip per block at short depths, ~1024 blocks at long ones.
        assert_eq!(attention_split(100, 32), 16);
        assert_eq!(attention_split(256, 32), 16);
        assert_eq!(attention_split(4096, 32), 128);
        for (n_kv, rows) in [(1, 1), (37, 8), (4096, 32), (32768, 8)] {
            let split = attention_split(n_kv, rows);
            assert_eq!(split % 16, 0);
            assert!(
                n_kv.div_ceil(split) * rows <= 1024 + rows,
                "{n_kv} keys, {rows} rows"
            );
        }
    }

    #[test]
    fn int8_matvecs_need_whole_activation_groups() {
        // Gemma 3 270M's widths take the int8 path; a K of whole 32-blocks but not 64 does not.
        assert!(matvec_s8(GgmlType::Q8_0, 1, 262144, 640).is_some());
        // Q8_0: Gemma 3 270M's rows keep their builds; an 8B model's take two row groups.
        let q8_0 = |n, k| matvec_s8(GgmlType::Q8_0, 1, n, k).unwrap();
        assert_eq!(q8_0(262144, 640), "matvec_q8_0_s8@TMAX=1");
        assert_eq!(q8_0(640, 2048), "matvec_q8_0_s8@TMAX=1,RG=1,KW=8");
        assert_eq!(q8_0(4096, 14336), "matvec_q8_0_s8@TMAX=1,RG=2,KW=8");
        assert_eq!(q8_0(14336, 4096), "matvec_q8_0_s8@TMAX=1,RG=2,KW=8");
        assert!(matvec_s8(GgmlType::Q5_0, 1, 640, 2048).is_some());
        // Q5_0 and Q4_0: one row group of 8 warps, but for Gemma 3 270M's short rows; Q5_K's
        // short rows two groups.
        let one = |ty, n, k| matvec_s8(ty, 1, n, k).unwrap();
        assert_eq!(one(GgmlType::Q5_0, 2048, 640), "matvec_q5_0_s8@TMAX=1");
        assert_eq!(
            one(GgmlType::Q5_0, 640, 2048),
            "matvec_q5_0_s8@TMAX=1,RG=1,KW=8"
        );
        for (n, k) in [(4096, 14336), (14336, 4096), (4096, 4096)] {
            assert_eq!(one(GgmlType::Q4_0, n, k), "matvec_q4_0_s8@TMAX=1,RG=1,KW=8");
        }
        assert_eq!(
            one(GgmlType::Q5_K, 14336, 4096),
            "matvec_q5k_s8@TMAX=1,RG=2,KW=8"
        );
        assert_eq!(matvec_s8(GgmlType::Q5_0, 1, 37, 96), None);
        assert_eq!(matvec_s8(GgmlType::Q8_0, 2, 37, 544), None);
        assert_eq!(matvec_s8(GgmlType::F16, 1, 37, 640), None);
    }

    #[test]
    fn dispatched_kernels_exist() {
        let mut names = vec![gemm_f16(1).to_string(), gemm_f16(4096).to_string()];
        // Llama 3 8B's rows, Gemma 3 270M's, Gemma 3 27B's, one wider than the builds.
        let widths = [4096, 640, 5376, 70_000];
        for cols in widths {
            for copy in [InputCopy::None, InputCopy::Half, InputCopy::Int8] {
                names.extend([1, 512].map(|rows| rmsnorm(rows, cols, copy)));
                names.extend([1, 512].map(|rows| add_rmsnorm(rows, cols, copy)));
            }
            names.push(rmsnorm_half_only(512, cols));
        }
        for d in [64, 128, 256] {
            names.push(flash_attention(d, d, 512).unwrap().to_string());
        }
        for ty in [
            GgmlType::Q4_K,
            GgmlType::Q5_K,
            GgmlType::Q6_K,
            GgmlType::Q8_0,
            GgmlType::Q5_0,
            GgmlType::Q4_0,
            GgmlType::IQ4_NL,
            GgmlType::IQ4_XS,
        ] {
            for t in 1..=MATVEC_MAX_T {
                // An 8B model's shapes, then Gemma 3 270M's (K = 640: 2.5 super-blocks).
                for (n, k) in [
                    (4096, 14336),
                    (14336, 4096),
                    (2048, 4096),
                    (1024, 4096),
                    (2048, 640),
                    (640, 2048),
                    (262144, 640),
                ] {
                    names.push(matvec(ty, t, n, k));
                    names.extend(matvec_s8(ty, t, n, k));
                }
            }
            let suffix = quant_suffix(ty).unwrap();
            names.push(format!("dequant_{suffix}"));
            names.push(format!("embed_{suffix}"));
            for (t, n, k) in [
                (512, 4096, 14336),
                (512, 14336, 4096),
                (2048, 4096, 4096),
                (512, 1024, 4096),
            ] {
                names.extend(quant_gemm(ty, t, n, k, false));
            }
        }
        let mut wgmma_names = vec![];
        for t in [9, 100, 200, 512, 2048] {
            for (n, k) in [
                (1024, 4096),
                (4096, 4096),
                (4096, 14336),
                (14336, 4096),
                (4096, 256),
            ] {
                for ty in [
                    GgmlType::Q4_K,
                    GgmlType::Q5_K,
                    GgmlType::Q6_K,
                    GgmlType::Q8_0,
                ] {
                    wgmma_names.extend(quant_gemm(ty, t, n, k, true));
                    for gelu in [false, true] {
                        wgmma_names.extend(gated_gemm(ty, gelu, t, n, k, true));
                        names.extend(gated_gemm(ty, gelu, t, n, k, false));
                    }
                }
            }
        }
        // The one-warpgroup tiles of short last waves, plain and gated.
        for ty in [
            GgmlType::Q4_K,
            GgmlType::Q5_K,
            GgmlType::Q6_K,
            GgmlType::Q8_0,
            GgmlType::Q4_0,
            GgmlType::IQ4_NL,
            GgmlType::IQ4_XS,
        ] {
            let plain = quant_gemm(ty, 1024, 4600, 4096, true).unwrap();
            let tail = wave_tail(&plain, 1024, 4600, false, WGMMA_SMS);
            wgmma_names.push(tail.expect("a short last wave").tail);
            for gelu in [false, true] {
                let gated = gated_gemm(ty, gelu, 512, 14336, 4096, true).unwrap();
                let tail = wave_tail(&gated, 512, 14336, true, WGMMA_SMS);
                wgmma_names.push(tail.expect("a short last wave").tail);
            }
        }
        for arch in embedded() {
            let sm90a = arch.arch == "sm_90a";
            for name in names.iter().chain(wgmma_names.iter().filter(|_| sm90a)) {
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

    /// The gated GEMM needs K in whole super-blocks and N in whole pair groups, and has no
    /// kernel for Q5_0 (nor, without wgmma, for Q6_K, Q8_0 and Q4_0).
    #[test]
    fn gated_gemms_take_whole_super_blocks_and_pair_groups() {
        // Persistent blocks where the tiles outnumber the SMs (448 here, 128 at N = 4096).
        assert_eq!(
            gated_gemm(GgmlType::Q4_K, false, 512, 14336, 4096, true).as_deref(),
            Some("gemm_q4k_wg_silu@BT=256,PRODUCER=1,PERSIST=132")
        );
        assert_eq!(
            gated_gemm(GgmlType::Q4_K, false, 512, 4096, 4096, true).as_deref(),
            Some("gemm_q4k_wg_silu@BT=256")
        );
        // Short batches: one warpgroup on the 32- or 64-token tile they fill more than half,
        // two warpgroups on 128 tokens beyond.
        for (t, want) in [
            (16, "gemm_q4k_wg_silu@WG=1,BT=32"),
            (40, "gemm_q4k_wg_silu@WG=1,BT=64"),
            (100, "gemm_q4k_wg_silu"),
            (128, "gemm_q4k_wg_silu"),
        ] {
            let name = gated_gemm(GgmlType::Q4_K, false, t, 14336, 4096, true);
            assert_eq!(name.as_deref(), Some(want), "T = {t}");
        }
        assert_eq!(
            gated_gemm(GgmlType::Q4_0, false, 512, 14336, 4096, true).as_deref(),
            Some("gemm_q4_0_wg_silu@BT=256,PRODUCER=1,PERSIST=132")
        );
        // Without wgmma: gemm_q4k's tiles for 2N rows, never its K split.
        assert_eq!(
            gated_gemm(GgmlType::Q4_K, false, 512, 14336, 4096, false).as_deref(),
            Some("gemm_q4k_silu@BN=64")
        );
        assert_eq!(
            gated_gemm(GgmlType::Q5_K, true, 2048, 14336, 4096, false).as_deref(),
            Some("gemm_q5k_gelu@BM=256,STAGES=2")
        );
        assert_eq!(
            gated_gemm(GgmlType::Q6_K, false, 512, 14336, 4096, false),
            None
        );
        assert_eq!(
            gated_gemm(GgmlType::Q4_K, false, 512, 2048, 640, true),
            None
        );
        assert_eq!(
            gated_gemm(GgmlType::Q4_K, false, 512, 2044, 4096, true),
            None
        );
        assert_eq!(
            gated_gemm(GgmlType::Q5_0, false, 512, 2048, 4096, true),
            None
        );
    }

    /// gemm_wg's producer (kernels/gemm_wg.tile) issues TMA copies only, and refills the weight
    /// ring safely only with at most 6 stages; its persistent blocks (PERSIST) need the producer,
    /// which carries the ring from tile to tile, and its stream-K blocks (STREAMK) are persistent
    /// ones that split K themselves. The language cannot say so, the list must.
    #[test]
    fn producer_variants_keep_tma_and_at_most_six_stages() {
        let listed = crate::variants::parse(include_str!("../../kernels/variants.txt")).unwrap();
        let gemm_wg = || listed.iter().filter(|v| v.family.starts_with("gemm_wg"));
        for v in gemm_wg().filter(|v| v.defines.contains("PERSIST=")) {
            assert!(v.defines.contains("PRODUCER=1"), "line {}", v.line);
        }
        let stream_k: Vec<_> = gemm_wg()
            .filter(|v| v.defines.contains("STREAMK="))
            .collect();
        assert!(!stream_k.is_empty());
        for v in stream_k {
            assert!(v.defines.contains("PERSIST="), "line {}", v.line);
            assert!(!v.defines.contains("SPLITK="), "line {}", v.line);
        }
        let producers: Vec<_> = gemm_wg()
            .filter(|v| v.defines.contains("PRODUCER=1"))
            .collect();
        assert!(!producers.is_empty());
        for v in producers {
            let pairs = v.define_pairs();
            let value = |name: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, x)| x.as_str())
            };
            assert_ne!(value("TMA"), Some("0"), "line {}", v.line);
            let stages: u32 = value("STAGES").unwrap_or("4").parse().unwrap();
            assert!(stages <= 6, "line {}: STAGES={stages}", v.line);
        }
    }

    #[test]
    fn add_output_builds_are_registered_for_the_residual_products_tiles() {
        let listed = crate::variants::parse(include_str!("../../kernels/variants.txt")).unwrap();
        let listed = |name: &str| {
            let (_, defines) = name.split_once('@').unwrap();
            listed
                .iter()
                .any(|v| v.family == "gemm_wg" && v.defines == defines)
        };
        // T = 512 (the one-warpgroup tile at 4096 x 4096, whose adding builds keep the 5-deep
        // ring: [`ONE_WARPGROUP_DEEP`]) and 2048 (the persistent tile).
        for (t, k) in [(512, 4096), (2048, 4096), (2048, 14336)] {
            let plain = quant_gemm(GgmlType::Q6_K, t, 4096, k, true).unwrap();
            assert_eq!(AddOutput::Splits.kernel(&plain), None, "{plain}");
            assert_eq!(AddOutput::Off.kernel(&plain), None, "{plain}");
            let atomics = AddOutput::Atomics.kernel(&plain).unwrap();
            let tma = AddOutput::Tma.kernel(&plain).unwrap();
            let adding = plain
                .replace(ONE_WARPGROUP_DEEP, ONE_WARPGROUP)
                .replace(PERSISTENT_TILE_DEEP, PERSISTENT_TILE);
            assert_eq!(atomics, format!("{adding},ADD_OUTPUT=1"));
            assert_eq!(tma, format!("{adding},TMA_STORE=1,ADD_OUTPUT=1"));
            assert!(listed(&atomics) && listed(&tma), "{atomics} / {tma}");
            assert!(crate::specs::adds_into_output(&atomics));
        }
        // A K split adds already, with or without the tiles' builds; gated units never do.
        let split = quant_gemm_adding(GgmlType::Q4_K, 512, 4096, 14336, true).unwrap();
        for how in [AddOutput::Splits, AddOutput::Atomics, AddOutput::Tma] {
            assert_eq!(how.kernel(&split), Some(split.clone()));
        }
        assert_eq!(AddOutput::Off.kernel(&split), None);
        let silu = gated_gemm(GgmlType::Q4_K, false, 2048, 14336, 4096, true).unwrap();
        assert_eq!(AddOutput::Atomics.kernel(&silu), None);
        assert_eq!(AddOutput::Atomics.kernel("gemm_q4k_wg@BT=256"), None);
        assert_eq!(AddOutput::from_env_value("tma"), Some(AddOutput::Tma));
        assert_eq!(AddOutput::from_env_value("1"), None);
    }

    #[test]
    fn tma_store_takes_the_k_split_in_two_alone() {
        let listed = crate::variants::parse(include_str!("../../kernels/variants.txt")).unwrap();
        let split = quant_gemm_adding(GgmlType::Q4_K, 512, 4096, 14336, true).unwrap();
        assert_eq!(split, format!("gemm_q4k_wg@{SPLIT_TILE}"));
        assert_eq!(
            tma_store(&split).unwrap(),
            format!("gemm_q4k_wg@{SPLIT_TMA_STORE_TILE}")
        );
        assert!(listed
            .iter()
            .any(|v| v.family == "gemm_wg" && v.defines == SPLIT_TMA_STORE_TILE));
        // The persistent tile keeps its direct stores (its TMA-store build lost on the H200),
        // and other tiles have no such build.
        let plain = quant_gemm(GgmlType::Q4_K, 2048, 14336, 4096, true).unwrap();
        assert_eq!(plain, format!("gemm_q4k_wg@{PERSISTENT_TILE}"));
        assert_eq!(tma_store(&plain), None);
        let silu = gated_gemm(GgmlType::Q4_K, false, 2048, 14336, 4096, true).unwrap();
        assert_eq!(tma_store(&silu), None);
        assert_eq!(tma_store("gemm_q4k_wg@BT=256"), None);
        assert_eq!(tma_store("gemm_q4k_wg@BT=256,SPLITK=4"), None);
        assert_eq!(tma_store("gemm_q4k_wg"), None);
    }

    #[test]
    fn short_last_waves_run_on_one_warpgroup_tiles() {
        // llama3-8b's gated units at T = 512: 448 tiles, three full waves (396) and 52 more,
        // which are 104 one-warpgroup tiles from tile 792.
        let silu = gated_gemm(GgmlType::Q4_K, false, 512, 14336, 4096, true).unwrap();
        assert_eq!(
            wave_tail(&silu, 512, 14336, true, WGMMA_SMS),
            Some(WaveTail {
                head: 396,
                tail: "gemm_q4k_wg_silu@WG=1,BT=256,STAGES=5,PRODUCER=1,SHFL_SCALES=1".into(),
                tail_first: 792,
                tail_tiles: 104,
            })
        );
        // 2N = 43008 (gemma3-27b) at T = 512: 672 tiles, 660 in five waves.
        let tail = wave_tail("gemm_q6k_wg_gelu@BT=256", 512, 21504, true, WGMMA_SMS).unwrap();
        assert_eq!(
            (tail.head, tail.tail_first, tail.tail_tiles),
            (660, 1320, 24)
        );
        // A plain product with ragged rows: T = 1024 (4 token tiles) x N = 4600 (36 row tiles,
        // the last of 120 rows) is 144 tiles, one wave and 12 more, whose 376 rows make 6
        // one-warpgroup row tiles (the last of 56 rows).
        let tail = wave_tail(
            "gemm_q5k_wg@BT=256,PRODUCER=1",
            1024,
            4600,
            false,
            WGMMA_SMS,
        )
        .unwrap();
        assert_eq!(
            (tail.head, tail.tail_first, tail.tail_tiles),
            (132, 264, 24)
        );
        assert_eq!(
            tail.tail,
            "gemm_q5k_wg@WG=1,BT=256,STAGES=5,PRODUCER=1,SHFL_SCALES=1"
        );
        // Not split: a rest of more than half the SMs (T = 512, N = 14336: 224 tiles), less
        // than one full wave, more token tiles than a rasterization group, a ragged token tile,
        // other tiles, and the mma.sync kernels.
        for (kernel, t, n, gated) in [
            ("gemm_q4k_wg_silu@BT=256", 300, 14336, true),
            ("gemm_q4k_wg@BT=256", 512, 14336, false),
            ("gemm_q4k_wg@BT=256", 512, 6144, false),
            ("gemm_q4k_wg_silu@BT=256", 4096, 14336, true),
            ("gemm_q4k_wg@BT=256,SPLITK=2", 512, 4096, false),
            ("gemm_q4k_silu@BM=256,STAGES=2", 512, 14336, true),
        ] {
            assert_eq!(wave_tail(kernel, t, n, gated, WGMMA_SMS), None, "{kernel}");
        }
    }

    #[test]
    fn ragged_last_token_tiles_run_on_short_batch_tiles() {
        let head = |kernel: &str, t, n, gated| token_head(kernel, t, n, gated, WGMMA_SMS);
        // llama3-8b's gated units at T = 300: 448 tiles in 4 waves, 224 in 2 without the last
        // 44 tokens.
        let silu = gated_gemm(GgmlType::Q4_K, false, 300, 14336, 4096, true).unwrap();
        assert_eq!(head(&silu, 300, 14336, true), Some(256));
        assert_eq!(head("gemm_q4k_wg_silu@BT=256", 384, 14336, true), Some(256));
        // At T = 1033 its 4096-row products: 160 tiles in 2 waves, 128 in one; split in K,
        // 160 tiles twice over in 3 waves, 128 twice over in 2.
        assert_eq!(head("gemm_q4k_wg@BT=256", 1033, 4096, false), Some(1024));
        assert_eq!(
            head("gemm_q6k_wg@BT=256,SPLITK=2", 1033, 4096, false),
            Some(1024)
        );
        // Not split: waves as many without the last tile (T = 300: 64 tiles at N = 4096; T =
        // 1033: 40 at N = 1024), full token tiles, a last tile more than half full, a single
        // tile, other tiles, and the mma.sync kernels.
        for (kernel, t, n) in [
            ("gemm_q4k_wg@BT=256", 300, 4096),
            ("gemm_q6k_wg@BT=256,SPLITK=2", 300, 4096),
            ("gemm_q4k_wg@BT=256", 1033, 1024),
            ("gemm_q4k_wg@BT=256", 512, 14336),
            ("gemm_q4k_wg@BT=256", 385, 14336),
            ("gemm_q4k_wg@BT=256", 200, 14336),
            ("gemm_q4k_wg@WG=1,BT=128", 300, 14336),
            ("gemm_q4k@BM=256,STAGES=2", 300, 14336),
        ] {
            assert_eq!(head(kernel, t, n, false), None, "{kernel} at {t} x {n}");
        }
    }

    /// The stream-K tile replaces gemm_wg's tiles of products of 256 tokens or more whose
    /// tiles are at least a third of the SMs and whose input fits a third of the L2, plain or
    /// gated, and nothing else.
    #[test]
    fn stream_k_takes_gemm_wg_products_with_enough_tiles_and_an_input_the_l2_holds() {
        const L2: usize = 50 << 20;
        let sk = |base: &str| Some(format!("{base}@{}", StreamK::All.tile()));
        let q4k = |[t, n, k]: [usize; 3]| quant_gemm(GgmlType::Q4_K, t, n, k, true).unwrap();
        // 64 tiles of 128 rows at T = 512 and N = 4096, 112 at N = 14336; X of 14 MiB at
        // 512 x 14336, 16 MiB at 2048 x 4096.
        for shape in [[512, 4096, 14336], [2048, 14336, 4096], [512, 14336, 4096]] {
            let name = q4k(shape);
            assert_eq!(
                stream_k(&name, shape, false, 132, L2, StreamK::All),
                sk("gemm_q4k_wg"),
                "{name}"
            );
        }
        // A gated unit's 14336 outputs: 224 tiles of 64 at T = 512.
        let gated = gated_gemm(GgmlType::Q6_K, false, 512, 14336, 4096, true).unwrap();
        let shape = [512, 14336, 4096];
        assert_eq!(
            stream_k(&gated, shape, true, 132, L2, StreamK::All),
            sk("gemm_q6k_wg_silu")
        );
        // Sharing the last waves out takes the same products, on its own tile.
        assert_eq!(
            stream_k(&gated, shape, true, 132, L2, StreamK::LastWaves),
            Some(format!("gemm_q6k_wg_silu@{}", StreamK::LastWaves.tile()))
        );
        // The key and value products: 16 tiles at T = 512 (a third of 132 is 44), 40 at
        // T = 1280, 44 at T = 1408; the tiny model's 2 tiles on 6 SMs.
        let none =
            |shape, sms| stream_k(&q4k(shape), shape, false, sms, L2, StreamK::All).is_none();
        assert!(none([512, 1024, 4096], 132));
        assert!(none([1280, 1024, 4096], 132));
        assert!(!none([1408, 1024, 4096], 132));
        assert!(!none([256, 256, 512], 6));
        // X of 56 MiB at 2048 x 14336 (the down projection), 17.0 MiB at 2176 x 4096.
        assert!(none([2048, 4096, 14336], 132));
        assert!(none([2176, 4096, 4096], 132));
        for (other, shape) in [
            (q4k([255, 4096, 4096]), [255, 4096, 4096]),
            (
                quant_gemm(GgmlType::Q4_K, 512, 4096, 4096, false).unwrap(),
                [512, 4096, 4096],
            ),
            ("gemm_f16@BN=256,WN=64".to_string(), [512, 4096, 4096]),
        ] {
            assert_eq!(
                stream_k(&other, shape, false, 132, L2, StreamK::All),
                None,
                "{other}"
            );
        }
    }

    /// Stream-K replaces the two-warpgroup K split where its blocks leave a last wave at most
    /// half full, and nothing else.
    #[test]
    fn split_stream_k_takes_split_tiles_with_a_short_last_wave() {
        let sk = |base: &str| Some(format!("{base}@{}", StreamK::All.tile()));
        let split = |ty, t| quant_gemm(ty, t, 4096, 14336, true).unwrap();
        // 96 tiles, 192 blocks on 132 SMs.
        for t in [640, 768] {
            for (ty, base) in [
                (GgmlType::Q4_K, "gemm_q4k_wg"),
                (GgmlType::Q6_K, "gemm_q6k_wg"),
            ] {
                let kernel = split(ty, t);
                assert!(kernel.ends_with("@BT=256,SPLITK=2"), "{kernel}");
                assert_eq!(
                    split_stream_k(&kernel, [t, 4096, 14336], 132),
                    sk(base),
                    "{kernel}"
                );
            }
        }
        // 128 blocks fill a wave; 96 tiles of 128 rows unsplit; on 100 SMs 192 blocks leave 92.
        let at_512 = split(GgmlType::Q4_K, 512);
        assert_eq!(split_stream_k(&at_512, [512, 4096, 14336], 132), None);
        assert_eq!(
            split_stream_k(&split(GgmlType::Q4_K, 768), [768, 4096, 14336], 100),
            None
        );
        for other in [
            "gemm_q4k_wg@BT=256",
            "gemm_q4k_wg@WG=1,BT=128,SPLITK=2",
            "gemm_q4k@SPLITK=2",
        ] {
            assert_eq!(
                split_stream_k(other, [768, 4096, 14336], 132),
                None,
                "{other}"
            );
        }
    }

    /// `ZINC_STREAMK`: 1 and 2 pick the two ways, anything else none.
    #[test]
    fn stream_k_ways_come_from_1_and_2() {
        assert_eq!(StreamK::from_env_value("1"), Some(StreamK::All));
        assert_eq!(StreamK::from_env_value("2"), Some(StreamK::LastWaves));
        for other in ["", "0", "3", "yes", " 1"] {
            assert_eq!(StreamK::from_env_value(other), None, "{other:?}");
        }
        assert!(StreamK::All.tile().ends_with("STREAMK=1"));
        assert!(StreamK::LastWaves.tile().ends_with("STREAMK=2"));
    }

    #[test]
    fn wgmma_tiles_follow_the_batch_and_the_grid() {
        let tiles = |t, n, k| {
            let name = quant_gemm(GgmlType::Q4_K, t, n, k, true).unwrap();
            name.split_once('@').unwrap().1.to_string()
        };
        // Persistent blocks where the two-warpgroup tiles outnumber the SMs (224 and 256 here;
        // 128 at 1024 x 4096).
        assert_eq!(tiles(2048, 4096, 14336), PERSISTENT_TILE);
        assert_eq!(tiles(2048, 14336, 4096), PERSISTENT_TILE);
        assert_eq!(tiles(768, 14336, 4096), PERSISTENT_TILE);
        // On a 5-deep ring where a block runs fewer than two tiles (224 here), for a new output
        // of Q4_K or Q6_K weights.
        assert_eq!(tiles(512, 14336, 4096), PERSISTENT_TILE_DEEP);
        assert_eq!(
            quant_gemm(GgmlType::Q6_K, 512, 14336, 4096, true).unwrap(),
            format!("gemm_q6k_wg@{PERSISTENT_TILE_DEEP}")
        );
        for ty in [GgmlType::Q4_K, GgmlType::Q6_K] {
            let adding = quant_gemm_adding(ty, 512, 14336, 4096, true).unwrap();
            assert!(
                adding.ends_with(&format!("_wg@{PERSISTENT_TILE}")),
                "{adding}"
            );
        }
        let q8 = quant_gemm(GgmlType::Q8_0, 512, 14336, 4096, true).unwrap();
        assert_eq!(q8, format!("gemm_q8_0_wg@{PERSISTENT_TILE}"));
        assert_eq!(tiles(1024, 4096, 4096), "BT=256");
        // The one-warpgroup tile where it makes one wave and the K split would be taken
        // (Q4_K and Q6_K), except for a product that adds into its output.
        assert_eq!(tiles(512, 4096, 14336), ONE_WARPGROUP_DEEP);
        assert_eq!(tiles(384, 4096, 14336), ONE_WARPGROUP_DEEP);
        for ty in [GgmlType::Q4_K, GgmlType::Q6_K] {
            let adding = quant_gemm_adding(ty, 512, 4096, 14336, true).unwrap();
            assert!(adding.ends_with("_wg@BT=256,SPLITK=2"), "{adding}");
        }
        assert_eq!(tiles(512, 6144, 14336), "BT=256,SPLITK=2");
        assert_eq!(tiles(512, 6144, 4096), "BT=256");
        assert_eq!(tiles(512, 4608, 4096), "BT=256");
        assert_eq!(tiles(1024, 2560, 4096), "BT=256");
        // The one-warpgroup tile: a 6-deep ring for Q4_K and Q6_K on K of 4096 and more.
        assert_eq!(
            tiles(512, 4096, 4096),
            "WG=1,BT=256,STAGES=6,PRODUCER=1,SHFL_SCALES=1,DECODE_FIRST=1"
        );
        assert_eq!(
            quant_gemm(GgmlType::Q6_K, 512, 4096, 4096, true).unwrap(),
            "gemm_q6k_wg@WG=1,BT=256,STAGES=6,PRODUCER=1,SHFL_SCALES=1,DECODE_FIRST=1"
        );
        for ty in [GgmlType::Q8_0, GgmlType::Q5_K] {
            let name = quant_gemm(ty, 512, 4096, 4096, true).unwrap();
            assert!(
                name.ends_with("@WG=1,BT=256,STAGES=5,PRODUCER=1,SHFL_SCALES=1"),
                "{name}"
            );
        }
        assert_eq!(tiles(512, 1024, 4096), "WG=1,BT=128,SPLITK=4");
        for (t, n) in [(768, 1024), (512, 2048)] {
            assert_eq!(
                tiles(t, n, 4096),
                "WG=1,BT=256,STAGES=5,PRODUCER=1,SHFL_SCALES=1,SPLITK=2"
            );
        }
        assert_eq!(
            tiles(240, 4096, 256),
            "WG=1,BT=256,STAGES=5,PRODUCER=1,SHFL_SCALES=1"
        );
        // Short batches: the token tile they fill more than half, K split as far as the SMs
        // hold the blocks and every split keeps two super-blocks; up to 223 tokens.
        for (t, n, k, want) in [
            (128, 4096, 4096, "WG=1,BT=128,SPLITK=4"),
            (100, 4096, 14336, "WG=1,BT=128,SPLITK=4"),
            (128, 6144, 4096, "WG=1,BT=128,SPLITK=2"),
            (100, 14336, 4096, "WG=1,BT=128"),
            (128, 1024, 4096, "WG=1,BT=64,PRODUCER=1,SPLITK=8"),
            (64, 4096, 4096, "WG=1,BT=64,PRODUCER=1,SPLITK=4"),
            (40, 4096, 14336, "WG=1,BT=64,STAGES=6,PRODUCER=1,SPLITK=4"),
            (33, 1024, 4096, "WG=1,BT=64,PRODUCER=1,SPLITK=8"),
            (64, 6144, 4096, "WG=1,BT=64,PRODUCER=1,SPLITK=4"),
            (64, 14336, 4096, "WG=1,BT=64"),
            (64, 9216, 4096, "WG=1,BT=64,SPLITK=2"),
            (16, 4096, 4096, "WG=1,BT=32,SPLITK=8"),
            (32, 6144, 4096, "WG=1,BT=32,SPLITK=4"),
            (9, 14336, 4096, "WG=1,BT=32,SPLITK=2"),
            (16, 1024, 1024, "WG=1,BT=32,SPLITK=2"),
            (16, 1024, 256, "WG=1,BT=32"),
            (200, 4096, 4096, "WG=1,BT=128,SPLITK=2"),
            (223, 4096, 14336, "WG=1,BT=128,SPLITK=2"),
            (
                224,
                4096,
                4096,
                "WG=1,BT=256,STAGES=5,PRODUCER=1,SHFL_SCALES=1,SPLITK=2",
            ),
        ] {
            assert_eq!(tiles(t, n, k), want, "{t} x {n} x {k}");
        }
        // Q6_K, Q8_0 and Q4_0 take the same tiles on their own kernels (all but Q6_K without
        // the 6-deep one-warpgroup tile, so the K split at 512 x 4096 x 14336, as Q4_K's
        // adding products); Q5_K too, with a producer on two warpgroups.
        for (t, n, k) in [(512, 4096, 14336), (512, 1024, 4096), (9, 4096, 4096)] {
            for (ty, kernel) in [
                (GgmlType::Q6_K, "gemm_q6k_wg"),
                (GgmlType::Q8_0, "gemm_q8_0_wg"),
                (GgmlType::Q4_0, "gemm_q4_0_wg"),
                (GgmlType::IQ4_NL, "gemm_iq4_nl_wg"),
                (GgmlType::IQ4_XS, "gemm_iq4_xs_wg"),
            ] {
                let name = quant_gemm(ty, t, n, k, true).unwrap();
                let q4k = match ty {
                    GgmlType::Q6_K => quant_gemm(GgmlType::Q4_K, t, n, k, true),
                    _ => quant_gemm_adding(GgmlType::Q4_K, t, n, k, true),
                };
                let (_, tile) = q4k.as_deref().unwrap().split_once('@').unwrap();
                assert_eq!(name, format!("{kernel}@{tile}"));
            }
        }
        let q5k = [
            (512, 6144, 4096, "BT=256,PRODUCER=1"),
            (512, 14336, 4096, "BT=256,PRODUCER=1,PERSIST=132"),
            (512, 4096, 14336, "BT=256,SPLITK=2,PRODUCER=1"),
            (512, 1024, 4096, "WG=1,BT=128,SPLITK=4"),
        ];
        // Q6_K's unsplit two-warpgroup tiles take the producer from T = 1024, and its 64-token
        // blocks with the producer make two an SM.
        let q6k = [
            (512, 6144, 4096, "BT=256"),
            (1024, 4096, 4096, "BT=256,PRODUCER=1"),
            (512, 14336, 4096, PERSISTENT_TILE_DEEP),
            (2048, 4096, 14336, PERSISTENT_TILE),
            (512, 4096, 14336, ONE_WARPGROUP_DEEP),
            (64, 6144, 4096, "WG=1,BT=64,SPLITK=2"),
            (64, 4096, 4096, "WG=1,BT=64,PRODUCER=1,SPLITK=4"),
        ];
        for (ty, kernel, cases) in [
            (GgmlType::Q5_K, "gemm_q5k_wg", &q5k[..]),
            (GgmlType::Q6_K, "gemm_q6k_wg", &q6k[..]),
        ] {
            for &(t, n, k, variant) in cases {
                let name = quant_gemm(ty, t, n, k, true).unwrap();
                assert_eq!(name, format!("{kernel}@{variant}"), "{t} x {n} x {k}");
            }
        }
        // Other types, K not a multiple of 256, and every type without sm_90a keep the mma.sync
        // kernels.
        assert!(!quant_gemm(GgmlType::Q5_0, 512, 4096, 4096, true)
            .unwrap()
            .contains("_wg"));
        assert_eq!(
            quant_gemm(GgmlType::Q8_0, 512, 4096, 4160, true).as_deref(),
            Some("gemm_q8_0")
        );
        for ty in [
            GgmlType::Q4_K,
            GgmlType::Q5_K,
            GgmlType::Q6_K,
            GgmlType::Q8_0,
        ] {
            assert!(!quant_gemm(ty, 512, 4096, 4096, false)
                .unwrap()
                .contains("_wg"));
        }
    }

    #[test]
    fn short_matrices_get_blocks_for_every_sm() {
        let rows_per_block = |n| {
            let name = matvec(GgmlType::Q4_K, 1, n, 4096);
            8 * variant_param(&name, "RG").unwrap()
        };
        for n in [1024, 2048, 4096] {
            assert!(n / rows_per_block(n) >= FULL_GRID, "{n}");
        }
        // Long Q4_K matrices keep 32 rows per block (each X load serves them all).
        assert_eq!(rows_per_block(4096), 32);
        let q6k = matvec(GgmlType::Q6_K, 1, 4096, 14336);
        assert_eq!(variant_param(&q6k, "RG"), Some(2));
    }

    #[test]
    fn q6k_splits_k_only_where_its_tiles_leave_sms_idle() {
        let split = |t, n, k| {
            let name = quant_gemm(GgmlType::Q6_K, t, n, k, false).unwrap();
            variant_param(&name, "SPLITK").unwrap_or(1)
        };
        assert_eq!(split(512, 4096, 14336), 2);
        assert_eq!(split(512, 1024, 4096), 2);
        assert_eq!(split(2048, 4096, 14336), 1);
        assert_eq!(split(512, 14336, 4096), 1);
        // One super-block has nothing to split.
        assert_eq!(split(512, 4096, 256), 1);
        assert_eq!(
            variant_param(
                &quant_gemm(GgmlType::Q4_K, 512, 4096, 14336, false).unwrap(),
                "SPLITK"
            ),
            None
        );
    }

    /// Q4_K goes up as it is; Q6_K in planes: block 0's low-nibble bytes first (each 16
    /// interleaved, word m holding bytes 2m, 2m + 8, 2m + 1, 2m + 9), then block 1's, block 1's
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
        let q5k = bytes(GgmlType::Q5_K);
        assert_eq!(le(&device_words(GgmlType::Q5_K, &q5k).unwrap()), q5k);
        let raw = bytes(GgmlType::Q6_K);
        let planar = le(&device_words(GgmlType::Q6_K, &raw).unwrap());
        assert_eq!(planar.len(), 432);
        assert_eq!(planar[420..], [0; 12]);
        assert_eq!(planar[..4], [raw[0], raw[8], raw[1], raw[9]]);
        assert_eq!(planar[124..128], [raw[118], raw[126], raw[119], raw[127]]);
        assert_eq!(planar[128..132], [raw[210], raw[218], raw[211], raw[219]]);
        assert_eq!(from_planar(GgmlType::Q6_K, &planar[..420]).unwrap(), raw);
        assert_eq!(
            planar[2 * 192 + 16..2 * 192 + 32],
            raw[210 + 192..210 + 208]
        );
        assert!(device_words(GgmlType::Q6_K, &raw[..300]).is_err());
        let raw = bytes(GgmlType::Q8_0);
        let planar = le(&device_words(GgmlType::Q8_0, &raw).unwrap());
        assert_eq!(planar[..32], raw[2..34]);
        assert_eq!(planar[64..66], raw[..2]);
        let raw = bytes(GgmlType::Q5_0);
        let planar = le(&device_words(GgmlType::Q5_0, &raw).unwrap());
        assert_eq!(planar[..16], raw[6..22]);
        assert_eq!(planar[32..36], raw[2..6]);
        assert_eq!(planar[40..42], raw[..2]);
        let raw = bytes(GgmlType::Q4_0);
        let planar = le(&device_words(GgmlType::Q4_0, &raw).unwrap());
        assert_eq!(planar[..16], raw[2..18]);
        assert_eq!(planar[32..34], raw[..2]);
        assert_eq!(
            device_words(GgmlType::IQ4_NL, &raw).unwrap(),
            device_words(GgmlType::Q4_0, &raw).unwrap()
        );
    }

    #[test]
    fn tune_tables_match_n_and_k_and_nearby_t() {
        let entry = |kernel: &str, shape: [usize; 3], variant: &str| TuneEntry {
            kernel: kernel.into(),
            shape: shape.to_vec(),
            variant: variant.into(),
            median_us: 1.0,
        };
        let table = TuneTable {
            arch: "sm_90".into(),
            device: "test".into(),
            entries: vec![
                entry("gemm_q4k", [512, 4096, 14336], "gemm_q4k@A"),
                entry("gemm_q4k", [2048, 4096, 14336], "gemm_q4k@B"),
                entry("matvec_q4k", [1, 4096, 14336], "matvec_q4k@C"),
            ],
        };
        assert_eq!(table.pick("gemm_q4k", 512, 4096, 14336), Some("gemm_q4k@A"));
        assert_eq!(table.pick("gemm_q4k", 700, 4096, 14336), Some("gemm_q4k@A"));
        assert_eq!(
            table.pick("gemm_q4k", 1500, 4096, 14336),
            Some("gemm_q4k@B")
        );
        assert_eq!(table.pick("gemm_q4k", 5000, 4096, 14336), None);
        assert_eq!(table.pick("gemm_q4k", 200, 4096, 14336), None);
        assert_eq!(table.pick("gemm_q4k", 512, 4096, 4096), None);
        assert_eq!(table.pick("gemm_q6k", 512, 4096, 14336), None);
        assert_eq!(
            table.pick("matvec_q4k", 1, 4096, 14336),
            Some("matvec_q4k@C")
        );
        assert_eq!(table.pick("matvec_q4k", 2, 4096, 14336), None);
        let text = serde_json::to_string(&table).unwrap();
        let back: TuneTable = serde_json::from_str(&text).unwrap();
        assert_eq!(back.entries.len(), 3);
    }

    #[test]
    fn tune_tables_of_several_runs_combine() {
        let dir = std::env::temp_dir().join(format!("zinc-tune-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let write = |name: &str, kernel: &str, variant: &str| {
            let table = TuneTable {
                arch: "sm_90".into(),
                device: "test".into(),
                entries: vec![TuneEntry {
                    kernel: kernel.into(),
                    shape: vec![1, 4096, 14336],
                    variant: variant.into(),
                    median_us: 1.0,
                }],
            };
            let path = dir.join(name);
            std::fs::write(&path, serde_json::to_string(&table).unwrap()).unwrap();
            path
        };
        let a = write("a.json", "matvec_q4k", "matvec_q4k@TMAX=1,RG=4,KW=16");
        let b = write("b.json", "matvec_q6k", "matvec_q6k@TMAX=1,RG=2,KW=8");
        let both = std::env::join_paths([&a, &b]).unwrap();
        let table = TuneTable::load_all(&both).unwrap();
        assert_eq!(
            table.pick("matvec_q6k", 1, 4096, 14336),
            Some("matvec_q6k@TMAX=1,RG=2,KW=8")
        );
        assert_eq!(
            table.pick("matvec_q4k", 1, 4096, 14336),
            Some("matvec_q4k@TMAX=1,RG=4,KW=16")
        );
        assert!(matches!(
            TuneTable::load_all(&dir.join("missing.json").into_os_string()),
            Err(TuneError::Read { .. })
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn other_types_have_no_kernels() {
        assert!(!has_kernels(GgmlType::F16));
        assert!(!has_kernels(GgmlType::Q5_1));
        assert!(has_kernels(GgmlType::Q4_0));
        assert!(has_kernels(GgmlType::IQ4_NL));
        assert!(has_kernels(GgmlType::IQ4_XS));
        assert!(has_kernels(GgmlType::Q5_K));
        assert!(has_kernels(GgmlType::Q6_K));
    }
}
