//! TMA tensor copies and mbarriers: boxes with ragged edges (zero past the tensor), the 32-, 64-
//! and 128-byte swizzles read back through `swizzle`d arrays, 144-byte u32 rows (a Q4_K
//! super-block), tensors that start past the buffer's start, phases reused across a loop, and
//! the errors: reading before the wait, waiting for a phase that cannot complete, a misaligned
//! destination or tensor, a swizzled box into a plain array, a tensor the driver would not
//! encode; plain arrivals completing a phase; L2 prefetches.

use half::f16;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use zinc_dsl::Compilation;
use zinc_interp::{Arg, Buffer, Element, ErrorKind, InterpError, Interpreter, Value};

/// Each block copies its BR-row stripe of the tensor at `x + OFFSET` (rows x cols) box by box (BR x BC, one mbarrier
/// phase per box, parity alternating) into `dst`, and its 64 threads write the box to `out`, a
/// (rows rounded up to BR) x (cols rounded up to BC) tensor, so the zero fill shows.
/// `LOAD` is the expect and the copy, in the kernel ([`IN_KERNEL`]) or in the device functions
/// that take the map ([`THROUGH_FUNCTIONS`]).
const BOX_COPY: &str = "
fn start_box(dst: shared mut [ELEM], m: tensor_map<ELEM>, row: u32, col: u32,
             bar: shared mut [u64], bytes: u32) {
    mbarrier_expect_tx(bar, bytes);
    load_box(dst, m, row, col, bar);
}
fn load_box(dst: shared mut [ELEM], m: tensor_map<ELEM>, row: u32, col: u32,
            bar: shared mut [u64]) {
    tma_load(dst, m, row, col, bar);
}
kernel box_copy<BR: u32 = 16, BC: u32 = 32>(x: global [ELEM], out: global mut [ELEM], rows: u32,
                                           cols: u32)
    grid(1, cdiv(rows, BR)) block(64)
{
    let xm = tensor_map(x + OFFSET, rows, cols, BR, BC);
    shared dst: [BR][BC] ELEM LAYOUT;
    shared bars: [2] u64;
    if thread.x == 0 { mbarrier_init(bars[1], 1); }
    barrier();
    let tiles = cdiv(cols, BC);
    for k in 0u32..tiles {
        if thread.x == 0 {
            LOAD
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

/// The kernel expects the box's bytes and loads it itself.
const IN_KERNEL: &str = "mbarrier_expect_tx(bars[1], EXPECT);
            tma_load(dst[DST_ROW][0], xm, block.y * BR, k * BC, bars[1]);";

/// The kernel passes its map to `start_box`, which passes it on to `load_box`.
const THROUGH_FUNCTIONS: &str =
    "start_box(dst + DST_ROW * BC, xm, block.y * BR, k * BC, bars + 1, EXPECT);";

/// The kernel with its placeholders filled: element type, layout, the bytes expected per box,
/// the destination row, a statement before the wait, the tensor's offset into `x`, and where
/// the box is loaded.
struct Variant<'a> {
    elem: &'a str,
    layout: &'a str,
    expect: &'a str,
    dst_row: &'a str,
    early: &'a str,
    offset: &'a str,
    load: &'a str,
}

/// Boxes of 24 f16 (48-byte rows, no swizzle) unless a test sets BC.
const PLAIN_F16: Variant = Variant {
    elem: "f16",
    layout: "",
    expect: "BR * BC * 2",
    dst_row: "0",
    early: "",
    offset: "0",
    load: IN_KERNEL,
};

fn compile(v: &Variant, defines: &[(&str, u32)]) -> Compilation {
    let text = BOX_COPY
        .replace("LOAD", v.load)
        .replace("ELEM", v.elem)
        .replace("LAYOUT", v.layout)
        .replace("EXPECT", v.expect)
        .replace("DST_ROW", v.dst_row)
        .replace("EARLY", v.early)
        .replace("OFFSET", v.offset);
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

/// Runs the copy of a random rows x cols tensor, `lead` random elements into `x` (which `v`'s
/// offset must say), and checks `out` against the tensor padded with zeros.
fn check<T: Element + PartialEq + std::fmt::Debug>(
    v: &Variant,
    [br, bc]: [usize; 2],
    [rows, cols]: [usize; 2],
    lead: usize,
    random: impl Fn(&mut StdRng) -> T,
    zero: T,
) {
    let c = compile(v, &[("BR", br as u32), ("BC", bc as u32)]);
    let mut rng = StdRng::seed_from_u64((rows * 1000 + cols) as u64);
    let buffer: Vec<T> = (0..lead + rows * cols).map(|_| random(&mut rng)).collect();
    let x = &buffer[lead..];
    let (out_rows, out_cols) = (rows.div_ceil(br) * br, cols.div_ceil(bc) * bc);
    let mut args = vec![
        Arg::ReadOnly(Buffer::from_slice(&buffer)),
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
    for shape in [[37, 72], [16, 24], [5, 8], [48, 104]] {
        check(&PLAIN_F16, [16, 24], shape, 0, nonzero_f16, f16::ZERO);
    }
}

/// Box rows of 32, 64 or 128 bytes land in the swizzle of that width; reading them back through
/// a `swizzle`d array (whose indexing applies the language's swizzle) gives the tensor: the
/// patterns agree for every width.
#[test]
fn swizzled_box_matches_the_swizzled_array() {
    let swizzled = Variant {
        layout: "swizzle",
        ..PLAIN_F16
    };
    for bc in [16, 32, 64] {
        for shape in [[37, 136], [64, 64], [9, 200]] {
            check(&swizzled, [16, bc], shape, 0, nonzero_f16, f16::ZERO);
        }
    }
    // u32 rows of 64 and 128 bytes (Q6_K's high-bit and low-nibble planes).
    let u32_swizzled = Variant {
        elem: "u32",
        expect: "BR * BC * 4",
        ..swizzled
    };
    for bc in [16, 32] {
        check(
            &u32_swizzled,
            [24, bc],
            [50, 96],
            0,
            |r| r.random_range(1..u32::MAX),
            0,
        );
    }
}

/// A tensor that starts `x + offset` into its buffer (a plane of a planar layout): the elements
/// before it are never read, and the edges are the tensor's, not the buffer's.
#[test]
fn tensors_start_at_their_offset() {
    let shifted = Variant {
        elem: "u32",
        expect: "BR * BC * 4",
        offset: "cols * 3 + 4",
        ..PLAIN_F16
    };
    for shape in [[21, 36], [8, 72]] {
        let lead = shape[1] * 3 + 4;
        check(
            &shifted,
            [8, 36],
            shape,
            lead,
            |r| r.random_range(1..u32::MAX),
            0,
        );
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
            0,
            |r| r.random_range(1..u32::MAX),
            0,
        );
    }
}

/// A launch of the f16 kernel `v` on a 37 x 72 tensor with 16 x `bc` boxes; its error.
fn failure_with(v: &Variant, bc: u32) -> InterpError {
    let c = compile(v, &[("BR", 16), ("BC", bc)]);
    let mut args = vec![
        Arg::ReadOnly(Buffer::from_f16(&[f16::ONE; 37 * 72])),
        Arg::Buffer(Buffer::from_f16(&[f16::ZERO; 48 * 96])),
        Arg::Scalar(Value::U32(37)),
        Arg::Scalar(Value::U32(72)),
    ];
    launch(&c, &mut args).unwrap_err()
}

/// [`failure_with`] on boxes of 24 f16 (48-byte rows, no swizzle).
fn failure(v: &Variant) -> InterpError {
    failure_with(v, 24)
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
    // Row 1 of 24 f16 starts at byte 48.
    let off = Variant {
        dst_row: "1",
        ..PLAIN_F16
    };
    let err = failure(&off);
    assert!(
        matches!(
            err.kind(),
            ErrorKind::Misaligned {
                offset: 48,
                align: 128,
                ..
            }
        ),
        "{err}"
    );
}

/// A box of 64-byte rows lands in the 64-byte swizzle, which a plain array (aligned to 128
/// bytes) cannot hold: it needs the 512-byte period of a `swizzle`d array.
#[test]
fn swizzled_box_into_a_plain_array_is_refused() {
    let err = failure_with(&PLAIN_F16, 32);
    assert!(
        matches!(err.kind(), ErrorKind::Misaligned { align: 512, .. }),
        "{err}"
    );
}

/// TMA reads tensors from 16-byte aligned addresses: 4 f16 into the buffer is 8 bytes.
#[test]
fn tensor_off_the_16_byte_grid_is_refused() {
    let off = Variant {
        offset: "4",
        ..PLAIN_F16
    };
    let err = failure(&off);
    assert!(
        matches!(err.kind(), ErrorKind::TensorMap { what, .. } if what.contains("16-byte aligned")),
        "{err}"
    );
}

/// A launch of the f16 kernel `v` with 16 x 32 boxes on a 37 x 71 tensor, whose 142-byte rows
/// TMA cannot take; its error.
fn ragged_rows_failure(v: &Variant) -> InterpError {
    let c = compile(v, &[("BR", 16), ("BC", 32)]);
    let mut args = vec![
        Arg::ReadOnly(Buffer::from_f16(&[f16::ONE; 37 * 71])),
        Arg::Buffer(Buffer::from_f16(&[f16::ZERO; 48 * 96])),
        Arg::Scalar(Value::U32(37)),
        Arg::Scalar(Value::U32(71)),
    ];
    launch(&c, &mut args).unwrap_err()
}

#[test]
fn rows_of_a_ragged_byte_count_are_refused() {
    let err = ragged_rows_failure(&PLAIN_F16);
    assert!(matches!(err.kind(), ErrorKind::TensorMap { .. }), "{err}");
}

/// An L2 prefetch of the next box changes nothing the threads see; its map is checked as a
/// load's: the prefetch, before any load, is what refuses rows of a ragged byte count.
#[test]
fn prefetches_change_nothing_and_check_their_map() {
    let load = format!("tma_prefetch(xm, block.y * BR, (k + 1) * BC);\n            {IN_KERNEL}");
    let prefetching = Variant {
        load: &load,
        ..PLAIN_F16
    };
    for shape in [[37, 72], [16, 24]] {
        check(&prefetching, [16, 24], shape, 0, nonzero_f16, f16::ZERO);
    }
    let err = ragged_rows_failure(&prefetching);
    assert!(matches!(err.kind(), ErrorKind::TensorMap { .. }), "{err}");
    let text = BOX_COPY.replace("LOAD", &load);
    let line = text[..text.find("tma_prefetch").unwrap()].lines().count();
    assert!(
        err.to_string().contains(&format!("tma.tile:{line}:")),
        "{err}"
    );
}

/// A box loaded in a device function through the kernel's map passed on twice is the kernel's
/// own load: zero fill, swizzle, offset, and the barrier's bytes.
#[test]
fn maps_passed_to_functions_load_the_same_boxes() {
    let called = Variant {
        load: THROUGH_FUNCTIONS,
        ..PLAIN_F16
    };
    for shape in [[37, 72], [5, 8]] {
        check(&called, [16, 24], shape, 0, nonzero_f16, f16::ZERO);
    }
    let swizzled = Variant {
        layout: "swizzle",
        ..called
    };
    check(&swizzled, [16, 64], [37, 136], 0, nonzero_f16, f16::ZERO);
    let shifted = Variant {
        elem: "u32",
        expect: "BR * BC * 4",
        offset: "cols * 3 + 4",
        ..called
    };
    check(
        &shifted,
        [8, 36],
        [21, 36],
        36 * 3 + 4,
        |r| r.random_range(1..u32::MAX),
        0,
    );
}

/// The checks hold in functions too: a read before the wait, a short byte count, a misaligned
/// destination.
#[test]
fn loads_in_functions_are_checked_as_the_kernels() {
    let called = Variant {
        load: THROUGH_FUNCTIONS,
        ..PLAIN_F16
    };
    let early = Variant {
        early: "let peek = dst[thread.x / BC][thread.x % BC];",
        ..called
    };
    let err = failure(&early);
    assert!(matches!(err.kind(), ErrorKind::TmaInFlight { .. }), "{err}");
    let short = Variant {
        expect: "BR * BC * 2 + 16",
        ..called
    };
    let err = failure(&short);
    assert!(
        matches!(err.kind(), ErrorKind::MbarrierDeadlock { tx_bytes: 16, .. }),
        "{err}"
    );
    let off = Variant {
        dst_row: "1",
        ..called
    };
    let err = failure(&off);
    assert!(
        matches!(err.kind(), ErrorKind::Misaligned { offset: 48, .. }),
        "{err}"
    );
}

/// Threads `thread.x < arrivers` of a 64-thread block arrive on an mbarrier that waits for
/// `count` arrivals; then every thread waits for phase 0 and writes its index.
fn arrivals(count: u32, arrivers: u32) -> (Result<(), InterpError>, Vec<u32>) {
    let src = "kernel arrive(out: global mut [u32], count: u32, arrivers: u32) grid(1) block(64) {
        shared bars: [1] u64;
        if thread.x == 0 { mbarrier_init(bars[0], count); }
        barrier();
        if thread.x < arrivers { mbarrier_arrive(bars[0]); }
        barrier();
        mbarrier_wait(bars[0], 0);
        out[thread.x] = thread.x + 1;
    }";
    let c = zinc_dsl::compile_source("arrive.tile", src, &[], &|_| None)
        .unwrap_or_else(|f| panic!("{}", f.render()));
    let mut args = vec![
        Arg::Buffer(Buffer::from_u32(&[0; 64])),
        Arg::Scalar(Value::U32(count)),
        Arg::Scalar(Value::U32(arrivers)),
    ];
    let result = Interpreter::new(&c.module)
        .sources(&c.sources)
        .launch("arrive", &mut args);
    (result, args[0].buffer().unwrap().to_u32())
}

#[test]
fn arrivals_complete_a_phase_at_its_count() {
    let (result, out) = arrivals(48, 48);
    result.unwrap();
    assert_eq!(out, (1..=64).collect::<Vec<u32>>());
    let (result, _) = arrivals(48, 47);
    let err = result.unwrap_err();
    assert!(
        matches!(
            err.kind(),
            ErrorKind::MbarrierDeadlock {
                parity: 0,
                arrivals: 1,
                tx_bytes: 0,
                ..
            }
        ),
        "{err}"
    );
}
