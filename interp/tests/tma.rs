//! TMA tensor copies and mbarriers: boxes with ragged edges (zero past the tensor), the 128-byte
//! swizzle read back through a `swizzle`d array, 144-byte u32 rows (a Q4_K super-block), phases
//! reused across a loop, and the errors: reading before the wait, waiting for a phase that
//! cannot complete, a misaligned destination, a tensor the driver would not encode.

use half::f16;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use zinc_dsl::Compilation;
use zinc_interp::{Arg, Buffer, Element, ErrorKind, InterpError, Interpreter, Value};

/// Each block copies its BR-row stripe of `x` (rows x cols) box by box (BR x BC, one mbarrier
/// phase per box, parity alternating) into `dst`, and its 64 threads write the box to `out`, a
/// (rows rounded up to BR) x (cols rounded up to BC) tensor, so the zero fill shows.
const BOX_COPY: &str = "
kernel box_copy<BR: u32 = 16, BC: u32 = 32>(x: global [ELEM], out: global mut [ELEM], rows: u32,
                                           cols: u32)
    grid(1, cdiv(rows, BR)) block(64)
{
    let xm = tensor_map(x, rows, cols, BR, BC);
    shared dst: [BR][BC] ELEM LAYOUT;
    shared bars: [2] u64;
    if thread.x == 0 { mbarrier_init(bars[1], 1); }
    barrier();
    let tiles = cdiv(cols, BC);
    for k in 0u32..tiles {
        if thread.x == 0 {
            mbarrier_expect_tx(bars[1], EXPECT);
            tma_load(dst[DST_ROW][0], xm, block.y * BR, k * BC, bars[1]);
        }
        EARLY
        mbarrier_wait(bars[1], k % 2);
        for i in thread.x..BR * BC step 64 {
            let r = i / BC;
            let c = i % BC;
            out[(block.y * BR + r) * tiles * BC + k * BC + c] = dst[r][c];
        }
        barrier();
    }
}
";

/// The kernel with its placeholders filled: element type, layout, the bytes expected per box,
/// the destination row, and a statement before the wait.
struct Variant<'a> {
    elem: &'a str,
    layout: &'a str,
    expect: &'a str,
    dst_row: &'a str,
    early: &'a str,
}

const PLAIN_F16: Variant = Variant {
    elem: "f16",
    layout: "",
    expect: "BR * BC * 2",
    dst_row: "0",
    early: "",
};

fn compile(v: &Variant, defines: &[(&str, u32)]) -> Compilation {
    let text = BOX_COPY
        .replace("ELEM", v.elem)
        .replace("LAYOUT", v.layout)
        .replace("EXPECT", v.expect)
        .replace("DST_ROW", v.dst_row)
        .replace("EARLY", v.early);
    let defines: Vec<(String, String)> = defines
        .iter()
        .map(|(k, x)| (k.to_string(), x.to_string()))
        .collect();
    zinc_dsl::compile_source("tma.tile", &text, &defines, &|_| None)
        .unwrap_or_else(|f| panic!("{}", f.render()))
}

fn launch(c: &Compilation, args: &mut [Arg]) -> Result<(), InterpError> {
    Interpreter::new(&c.module)
        .sources(&c.sources)
        .launch("box_copy", args)
}

/// Runs the copy of a random rows x cols tensor and checks `out` against `x` padded with zeros.
fn check<T: Element + PartialEq + std::fmt::Debug>(
    v: &Variant,
    [br, bc]: [usize; 2],
    [rows, cols]: [usize; 2],
    random: impl Fn(&mut StdRng) -> T,
    zero: T,
) {
    let c = compile(v, &[("BR", br as u32), ("BC", bc as u32)]);
    let mut rng = StdRng::seed_from_u64((rows * 1000 + cols) as u64);
    let x: Vec<T> = (0..rows * cols).map(|_| random(&mut rng)).collect();
    let (out_rows, out_cols) = (rows.div_ceil(br) * br, cols.div_ceil(bc) * bc);
    let mut args = vec![
        Arg::ReadOnly(Buffer::from_slice(&x)),
        Arg::Buffer(Buffer::from_slice(&vec![
            random(&mut rng);
            out_rows * out_cols
        ])),
        Arg::Scalar(Value::U32(rows as u32)),
        Arg::Scalar(Value::U32(cols as u32)),
    ];
    launch(&c, &mut args).unwrap_or_else(|e| panic!("{rows} x {cols}: {e}"));
    let got: Vec<T> = args[1].buffer().unwrap().to_vec();
    for i in 0..out_rows {
        for j in 0..out_cols {
            let want = if i < rows && j < cols {
                x[i * cols + j]
            } else {
                zero
            };
            let at = i * out_cols + j;
            assert_eq!(got[at], want, "{rows} x {cols}: element ({i}, {j})");
        }
    }
}

/// Never zero, so that a missing copy cannot pass for the zero fill.
fn nonzero_f16(rng: &mut StdRng) -> f16 {
    f16::from_f32(rng.random_range(0.5f32..2.0) * if rng.random() { 1.0 } else { -1.0 })
}

#[test]
fn ragged_f16_boxes_read_zero_past_the_edges() {
    for shape in [[37, 72], [16, 32], [5, 8], [48, 104]] {
        check(&PLAIN_F16, [16, 32], shape, nonzero_f16, f16::ZERO);
    }
}

/// 64 f16 per box row is the 128-byte swizzle; reading it back through a `swizzle`d array
/// (whose indexing applies the language's swizzle) gives the tensor: the two patterns agree.
#[test]
fn swizzled_box_matches_the_swizzled_array() {
    let swizzled = Variant {
        layout: "swizzle",
        ..PLAIN_F16
    };
    for shape in [[37, 136], [64, 64], [9, 200]] {
        check(&swizzled, [16, 64], shape, nonzero_f16, f16::ZERO);
    }
}

/// Rows of 36 u32 (144 bytes): one Q4_K super-block per row.
#[test]
fn q4k_superblock_rows_of_u32() {
    let u32_rows = Variant {
        elem: "u32",
        expect: "BR * BC * 4",
        ..PLAIN_F16
    };
    for shape in [[21, 108], [8, 36], [3, 72]] {
        check(
            &u32_rows,
            [8, 36],
            shape,
            |r| r.random_range(1..u32::MAX),
            0,
        );
    }
}

/// A launch of the f16 kernel `v` on a 37 x 72 tensor with 16 x 32 boxes; its error.
fn failure(v: &Variant) -> InterpError {
    let c = compile(v, &[("BR", 16), ("BC", 32)]);
    let mut args = vec![
        Arg::ReadOnly(Buffer::from_f16(&[f16::ONE; 37 * 72])),
        Arg::Buffer(Buffer::from_f16(&[f16::ZERO; 48 * 96])),
        Arg::Scalar(Value::U32(37)),
        Arg::Scalar(Value::U32(72)),
    ];
    launch(&c, &mut args).unwrap_err()
}

#[test]
fn reading_before_the_wait_is_an_error() {
    let early = Variant {
        early: "let peek = dst[thread.x / BC][thread.x % BC];",
        ..PLAIN_F16
    };
    let err = failure(&early);
    assert!(matches!(err.kind(), ErrorKind::TmaInFlight { .. }), "{err}");
}

#[test]
fn waiting_for_bytes_that_never_come_is_a_deadlock() {
    let short = Variant {
        expect: "BR * BC * 2 + 16",
        ..PLAIN_F16
    };
    let err = failure(&short);
    assert!(
        matches!(
            err.kind(),
            ErrorKind::MbarrierDeadlock {
                parity: 0,
                tx_bytes: 16,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn destination_off_the_128_byte_grid_is_misaligned() {
    // Row 1 of 32 f16 starts at byte 64.
    let off = Variant {
        dst_row: "1",
        ..PLAIN_F16
    };
    let err = failure(&off);
    assert!(
        matches!(
            err.kind(),
            ErrorKind::Misaligned {
                offset: 64,
                align: 128,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn rows_of_a_ragged_byte_count_are_refused() {
    let c = compile(&PLAIN_F16, &[("BR", 16), ("BC", 32)]);
    let mut args = vec![
        Arg::ReadOnly(Buffer::from_f16(&[f16::ONE; 37 * 71])),
        Arg::Buffer(Buffer::from_f16(&[f16::ZERO; 48 * 96])),
        Arg::Scalar(Value::U32(37)),
        Arg::Scalar(Value::U32(71)),
    ];
    let err = launch(&c, &mut args).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::TensorMap { .. }), "{err}");
}
