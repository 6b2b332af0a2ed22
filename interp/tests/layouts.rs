//! Shared-memory layouts (examples/tile_layouts.tile): a tile declared `swizzle` or `pad(8)` and
//! indexed by row and column gives the same ldmatrix fragments, elements and physical bytes as
//! the same kernel with the offsets written by hand, and the fragments hold the logical tile.

use std::path::Path;

use half::f16;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use zinc_interp::{Arg, Buffer, Interpreter};

const ROWS: usize = 16;
const PAD: usize = 8;

/// What a kernel of the example wrote: fragment registers, elements and raw shared memory.
struct Dump {
    frags: Vec<f16>,
    elems: Vec<f16>,
    raw: Vec<f16>,
}

fn run(kernel: &str, cols: usize, raw_len: usize, x: &[f16]) -> Dump {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/tile_layouts.tile");
    let defines = vec![("COLS".to_string(), cols.to_string())];
    let c = zinc_dsl::compile_file(&path, &defines).unwrap_or_else(|f| panic!("{}", f.render()));
    let tile = ROWS * cols;
    let mut args = [
        Arg::Buffer(Buffer::from_f16(x)),
        Arg::Buffer(Buffer::from_f16(&vec![f16::NAN; 2 * tile])),
        Arg::Buffer(Buffer::from_f16(&vec![f16::NAN; 2 * tile])),
        Arg::Buffer(Buffer::from_f16(&vec![f16::ZERO; raw_len])),
    ];
    Interpreter::new(&c.module)
        .sources(&c.sources)
        .launch(kernel, &mut args)
        .unwrap_or_else(|e| panic!("{kernel} COLS={cols}: {e}"));
    let out = |i: usize| args[i].buffer().unwrap().to_f16();
    Dump {
        frags: out(1),
        elems: out(2),
        raw: out(3),
    }
}

/// The A x4 fragments of every 16 x 16 block of both tiles, in the kernel's output order:
/// lane l, register j holds row l / 4 + 8 (j % 2), columns 2 (l % 4) + 8 (j / 2) + 0..2.
fn fragments(x: &[f16], cols: usize) -> Vec<f16> {
    let mut out = Vec::new();
    for s in 0..2 {
        for kc in 0..cols / 16 {
            for lane in 0..32 {
                for j in 0..4 {
                    let r = lane / 4 + 8 * (j % 2);
                    let c = kc * 16 + 2 * (lane % 4) + 8 * (j / 2);
                    let at = (s * ROWS + r) * cols + c;
                    out.extend_from_slice(&x[at..at + 2]);
                }
            }
        }
    }
    out
}

fn bits(v: &[f16]) -> Vec<u16> {
    v.iter().map(|h| h.to_bits()).collect()
}

fn check(declared: &str, by_hand: &str, cols: usize, row_stride: usize) {
    let mut rng = StdRng::seed_from_u64(cols as u64);
    // Never zero, so a zero-filled or unwritten element cannot pass for data.
    let x: Vec<f16> = (0..2 * ROWS * cols)
        .map(|_| f16::from_f32(rng.random_range(0.5f32..2.0) * [-1.0, 1.0][rng.random_range(0..2)]))
        .collect();
    let raw_len = 2 * ROWS * row_stride;
    let a = run(declared, cols, raw_len, &x);
    let b = run(by_hand, cols, raw_len, &x);
    assert_eq!(bits(&a.elems), bits(&x), "{declared} COLS={cols}: elements");
    assert_eq!(
        bits(&a.frags),
        bits(&fragments(&x, cols)),
        "{declared} COLS={cols}: fragments"
    );
    assert_eq!(
        bits(&a.frags),
        bits(&b.frags),
        "{declared} vs {by_hand} COLS={cols}"
    );
    assert_eq!(
        bits(&a.elems),
        bits(&b.elems),
        "{declared} vs {by_hand} COLS={cols}"
    );
    assert_eq!(
        bits(&a.raw),
        bits(&b.raw),
        "{declared} vs {by_hand} COLS={cols}: raw bytes"
    );
    assert_ne!(
        bits(&a.raw[..ROWS * cols]),
        bits(&x[..ROWS * cols]),
        "{declared}: not permuted"
    );
}

#[test]
fn swizzle_matches_hand_written_offsets() {
    // 64-byte rows (4 chunks, pairs of rows share a 128-byte line) and 128-byte rows (8 chunks).
    for cols in [32, 64] {
        check("tiles_swizzle", "tiles_swizzle_by_hand", cols, cols);
    }
}

#[test]
fn padding_matches_hand_written_offsets() {
    for cols in [32, 64] {
        check("tiles_pad", "tiles_pad_by_hand", cols, cols + PAD);
    }
}
