//! A lossless planar layout for GGUF types whose blocks are not 16-byte multiples, for GPU
//! kernels that copy weights in aligned 16-byte pieces: the blocks of a tensor are split into
//! their fields, and each field of every block is stored contiguously (a plane), block after
//! block. The bytes are the same, only their order changes, so a kernel reads the same bits
//! per weight. With the fields ordered by size, every plane but the last starts at a multiple
//! of 16 bytes when the fields before it are multiples of 16.
//!
//! Q6_K's 210-byte block becomes four planes: 128 bytes of low nibbles, 64 of high bit pairs,
//! 16 of scales, then the 2-byte d of every block. In its two quant planes every 16 bytes are
//! interleaved ([`q6k_lane_position`]): word m holds bytes 2m, 2m + 8, 2m + 1 and 2m + 9, the
//! four quants' bytes that lane m of a tensor-core fragment takes for one 16-weight step, so a
//! kernel loads them as one word and needs no byte shuffle. Q8_0's 34-byte block becomes two
//! planes: the 32 quants of every block (after its d in GGUF), then every d; Q5_0's 22-byte block three: the 16 bytes of
//! nibbles of every block, then every block's 4 bytes of fifth bits, then every d; Q4_0's
//! 18-byte block two: the nibbles, then every d (Q5_0's layout without the fifth bits); IQ4_NL's
//! the same (its nibbles index a table of levels instead).
//!
//! IQ4_XS is repacked rather than regrouped, into IQ4_NL's geometry so that the same kernels
//! read both: per 256-weight super-block its 128 bytes of nibbles (8 sub-blocks of 32, each as
//! an IQ4_NL block's), and in a second plane one word per 64 weights, where IQ4_NL has the d of
//! its two blocks: the two sub-blocks' 6-bit scales less 32 as i8, then the super-block's f16 d
//! (repeated in its four words). 144 bytes for GGUF's 136 (4.5 bits per weight, IQ4_NL's), and
//! lossless: [`from_planar`] rebuilds the GGUF bytes.

use super::dequant::iq4_xs_scale;
use super::{GgmlType, QuantError};

/// Fields of a block as (offset in the block, size), in plane order.
pub type PlanarFields = &'static [(usize, usize)];

/// The fields of a type's planar layout, or None if it has none. They cover the block exactly
/// once.
pub fn planar_fields(ty: GgmlType) -> Option<PlanarFields> {
    match ty {
        GgmlType::Q6_K => Some(&[(0, 128), (128, 64), (192, 16), (208, 2)]),
        GgmlType::Q8_0 => Some(&[(2, 32), (0, 2)]),
        GgmlType::Q5_0 => Some(&[(6, 16), (2, 4), (0, 2)]),
        GgmlType::Q4_0 | GgmlType::IQ4_NL => Some(&[(2, 16), (0, 2)]),
        _ => None,
    }
}

/// Where byte `i` (0..16) of 16 bytes of Q6_K quants (low nibbles or high bit pairs) lies in
/// the planar layout: bytes i and i + 1 (i even, < 8) at 4 (i / 2) and 4 (i / 2) + 2, bytes
/// i + 8 and i + 9 between them.
fn q6k_lane_position(i: usize) -> usize {
    4 * (i % 8 / 2) + 2 * (i % 2) + i / 8
}

/// Whether the field at block offset `at` of `ty` is stored interleaved by
/// [`q6k_lane_position`]: Q6_K's low nibbles and high bit pairs.
fn lane_interleaved(ty: GgmlType, at: usize) -> bool {
    ty == GgmlType::Q6_K && at < 192
}

/// Whether [`to_planar`] takes `ty`: the types of [`planar_fields`] and IQ4_XS.
pub fn has_planar(ty: GgmlType) -> bool {
    ty == GgmlType::IQ4_XS || planar_fields(ty).is_some()
}

/// An IQ4_XS super-block's bytes in the planar layout.
const IQ4_XS_PLANAR: usize = 144;

/// The number of `block`-byte blocks in `len` bytes of `ty`, or the error for a partial one.
fn whole_blocks(ty: GgmlType, len: usize, block: usize) -> Result<usize, QuantError> {
    if !len.is_multiple_of(block) {
        return Err(QuantError::SizeMismatch {
            ty,
            len: len / block * ty.block_size(),
            expected: len / block * block,
            actual: len,
        });
    }
    Ok(len / block)
}

fn fields_of(ty: GgmlType, len: usize) -> Result<(PlanarFields, usize), QuantError> {
    let fields = planar_fields(ty).ok_or(QuantError::Unsupported {
        ty,
        op: "planar layout",
    })?;
    let block = ty.type_size();
    debug_assert_eq!(fields.iter().map(|f| f.1).sum::<usize>(), block);
    Ok((fields, whole_blocks(ty, len, block)?))
}

/// A tensor's GGUF bytes (whole blocks of `ty`) in the planar layout.
pub fn to_planar(ty: GgmlType, bytes: &[u8]) -> Result<Vec<u8>, QuantError> {
    if ty == GgmlType::IQ4_XS {
        return iq4_xs_to_planar(bytes);
    }
    let (fields, blocks) = fields_of(ty, bytes.len())?;
    let mut out = Vec::with_capacity(bytes.len());
    for &(at, size) in fields {
        for block in bytes.chunks_exact(ty.type_size()) {
            let field = &block[at..at + size];
            if lane_interleaved(ty, at) {
                for group in field.chunks_exact(16) {
                    let mut lanes = [0u8; 16];
                    for (i, &byte) in group.iter().enumerate() {
                        lanes[q6k_lane_position(i)] = byte;
                    }
                    out.extend_from_slice(&lanes);
                }
            } else {
                out.extend_from_slice(field);
            }
        }
    }
    debug_assert_eq!(out.len(), blocks * ty.type_size());
    Ok(out)
}

/// The GGUF bytes of a tensor in the planar layout: the inverse of [`to_planar`].
pub fn from_planar(ty: GgmlType, planes: &[u8]) -> Result<Vec<u8>, QuantError> {
    if ty == GgmlType::IQ4_XS {
        return iq4_xs_from_planar(planes);
    }
    let (fields, blocks) = fields_of(ty, planes.len())?;
    let mut out = vec![0u8; planes.len()];
    let mut plane_start = 0;
    for &(at, size) in fields {
        for (b, block) in out.chunks_exact_mut(ty.type_size()).enumerate() {
            let from = &planes[plane_start + b * size..plane_start + (b + 1) * size];
            let field = &mut block[at..at + size];
            if lane_interleaved(ty, at) {
                for (group, lanes) in field.chunks_exact_mut(16).zip(from.chunks_exact(16)) {
                    for (i, byte) in group.iter_mut().enumerate() {
                        *byte = lanes[q6k_lane_position(i)];
                    }
                }
            } else {
                field.copy_from_slice(from);
            }
        }
        plane_start += blocks * size;
    }
    Ok(out)
}

fn iq4_xs_to_planar(bytes: &[u8]) -> Result<Vec<u8>, QuantError> {
    let ty = GgmlType::IQ4_XS;
    let blocks = whole_blocks(ty, bytes.len(), ty.type_size())?;
    let mut out = Vec::with_capacity(blocks * IQ4_XS_PLANAR);
    let super_blocks = || bytes.chunks_exact(ty.type_size());
    for b in super_blocks() {
        out.extend_from_slice(&b[8..]);
    }
    for b in super_blocks() {
        for pair in 0..4 {
            let scale = |i| (iq4_xs_scale(b, i) as i8 - 32) as u8;
            out.extend_from_slice(&[scale(2 * pair), scale(2 * pair + 1), b[0], b[1]]);
        }
    }
    Ok(out)
}

fn iq4_xs_from_planar(planes: &[u8]) -> Result<Vec<u8>, QuantError> {
    let ty = GgmlType::IQ4_XS;
    let blocks = whole_blocks(ty, planes.len(), IQ4_XS_PLANAR)?;
    let (nibbles, words) = planes.split_at(128 * blocks);
    let mut out = vec![0u8; blocks * ty.type_size()];
    for ((b, qs), w) in out
        .chunks_exact_mut(ty.type_size())
        .zip(nibbles.chunks_exact(128))
        .zip(words.chunks_exact(16))
    {
        b[..2].copy_from_slice(&w[2..4]);
        let mut high = 0u16;
        for i in 0..8 {
            let s = (w[4 * (i / 2) + i % 2] as i8 as i32 + 32) as u8;
            b[4 + i / 2] |= (s & 0xF) << (4 * (i % 2));
            high |= u16::from(s >> 4) << (2 * i);
        }
        b[2..4].copy_from_slice(&high.to_le_bytes());
        b[8..].copy_from_slice(qs);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn planar_round_trips_and_moves_fields_into_planes() {
        let ty = GgmlType::Q6_K;
        // Three blocks of distinct bytes.
        let bytes: Vec<u8> = (0..3 * 210).map(|i| (i * 7 % 251) as u8).collect();
        let planes = to_planar(ty, &bytes).unwrap();
        assert_eq!(planes.len(), bytes.len());
        assert_ne!(planes, bytes);
        // Block 1's low nibbles at 128, interleaved: bytes 2m, 2m + 8, 2m + 1, 2m + 9 per word m
        // of each 16; its high bit pairs at 3 x 128 + 64, the same way.
        for (plane, at, size) in [(0, 0, 128), (3 * 128, 128, 64)] {
            let (lanes, gguf) = (&planes[plane + size..], &bytes[210 + at..]);
            for group in 0..size / 16 {
                for m in 0..4 {
                    let word = &lanes[16 * group + 4 * m..][..4];
                    let want =
                        [2 * m, 2 * m + 8, 2 * m + 1, 2 * m + 9].map(|i| gguf[16 * group + i]);
                    assert_eq!(word, want);
                }
            }
        }
        // Block 1's scales (bytes 192..208) sit in the scales plane, after 3 x (128 + 64) bytes.
        assert_eq!(planes[576 + 16..576 + 32], bytes[210 + 192..210 + 208]);
        // Block 2's d is the last two bytes.
        assert_eq!(planes[planes.len() - 2..], bytes[3 * 210 - 2..]);
        assert_eq!(from_planar(ty, &planes).unwrap(), bytes);
    }

    #[test]
    fn planar_q8_0_puts_quants_first() {
        let ty = GgmlType::Q8_0;
        let bytes: Vec<u8> = (0..5 * 34).map(|i| (i * 13 % 251) as u8).collect();
        let planes = to_planar(ty, &bytes).unwrap();
        // Block 1's quants at 32, the d of block 0 after all quants.
        assert_eq!(planes[32..64], bytes[34 + 2..2 * 34]);
        assert_eq!(planes[5 * 32..5 * 32 + 2], bytes[..2]);
        assert_eq!(from_planar(ty, &planes).unwrap(), bytes);
    }

    #[test]
    fn planar_q5_0_puts_nibbles_then_fifth_bits_then_d() {
        let ty = GgmlType::Q5_0;
        let blocks = 5;
        let bytes: Vec<u8> = (0..blocks * 22).map(|i| (i * 11 % 251) as u8).collect();
        let planes = to_planar(ty, &bytes).unwrap();
        assert_eq!(planes.len(), bytes.len());
        // Block 3's nibbles at 48, its fifth bits after all nibbles, its d after all fifth bits.
        assert_eq!(planes[48..64], bytes[3 * 22 + 6..4 * 22]);
        assert_eq!(
            planes[16 * blocks + 12..16 * blocks + 16],
            bytes[3 * 22 + 2..3 * 22 + 6]
        );
        assert_eq!(
            planes[20 * blocks + 6..20 * blocks + 8],
            bytes[3 * 22..3 * 22 + 2]
        );
        assert_eq!(from_planar(ty, &planes).unwrap(), bytes);
        assert!(to_planar(ty, &bytes[..blocks * 22 - 2]).is_err());
    }

    #[test]
    fn planar_q4_0_puts_nibbles_then_d() {
        let ty = GgmlType::Q4_0;
        let blocks = 3;
        let bytes: Vec<u8> = (0..blocks * 18).map(|i| (i * 7 % 251) as u8).collect();
        let planes = to_planar(ty, &bytes).unwrap();
        // Block 2's nibbles at 32, its d after all nibbles.
        assert_eq!(planes[32..48], bytes[2 * 18 + 2..3 * 18]);
        assert_eq!(
            planes[16 * blocks + 4..16 * blocks + 6],
            bytes[2 * 18..2 * 18 + 2]
        );
        assert_eq!(from_planar(ty, &planes).unwrap(), bytes);
    }

    #[test]
    fn planar_iq4_xs_puts_nibbles_then_a_word_of_scales_and_d_per_64_weights() {
        // Three super-blocks of distinct bytes: every bit pattern of the scales must survive.
        let (ty, blocks) = (GgmlType::IQ4_XS, 3);
        let bytes: Vec<u8> = (0..blocks * 136).map(|i| (i * 7 % 251) as u8).collect();
        let planes = to_planar(ty, &bytes).unwrap();
        assert_eq!(planes.len(), blocks * 144);
        // Super-block 1's nibbles at 128, sub-block 5's 16 bytes at 128 + 80.
        assert_eq!(
            planes[128 + 80..128 + 96],
            bytes[136 + 8 + 80..136 + 8 + 96]
        );
        // Super-block 1's sub-blocks 4 and 5 (pair 2): word 4 + 2 of the second plane.
        let b = &bytes[136..272];
        let at = 128 * blocks + 4 * 6;
        for (i, at) in [(4, at), (5, at + 1)] {
            let low = b[4 + i / 2] >> (4 * (i % 2)) & 0xF;
            let high = (u16::from_le_bytes([b[2], b[3]]) >> (2 * i) & 3) as u8;
            assert_eq!(planes[at] as i8, (low | high << 4) as i8 - 32);
        }
        assert_eq!(planes[at + 2..at + 4], b[..2]);
        assert_eq!(from_planar(ty, &planes).unwrap(), bytes);
        assert!(to_planar(ty, &bytes[..136 * blocks - 2]).is_err());
        assert!(from_planar(ty, &planes[..144 * blocks - 4]).is_err());
    }

    #[test]
    fn planar_rejects_partial_blocks_and_other_types() {
        assert!(to_planar(GgmlType::Q6_K, &[0; 211]).is_err());
        assert!(from_planar(GgmlType::Q6_K, &[0; 209]).is_err());
        assert!(matches!(
            to_planar(GgmlType::Q4_K, &[0; 144]),
            Err(QuantError::Unsupported { .. })
        ));
    }
}
