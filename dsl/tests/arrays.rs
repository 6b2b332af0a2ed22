//! Register arrays and `unroll` loops: what the checker accepts, the IR it produces, and its
//! diagnostics.

use zinc_dsl::{compile_source, print_ir};

fn compile(text: &str) -> Result<String, String> {
    compile_source("main.tile", text, &[], &|_| None)
        .map(|c| print_ir(&c.module))
        .map_err(|f| f.render())
}

fn ir(body: &str) -> String {
    let text = format!("kernel k(o: global mut [f32], n: u32) grid(1) block(32) {{ {body} }}");
    compile(&text).unwrap_or_else(|e| panic!("unexpected errors:\n{e}"))
}

fn error(body: &str) -> String {
    let text = format!("kernel k(o: global mut [f32], n: u32) grid(1) block(32) {{ {body} }}");
    compile(&text).expect_err("expected an error")
}

#[test]
fn unrolled_loops_index_arrays_with_constants() {
    let out = ir("var r: [2][3] f32 = 0.0;
        for i in 0u32..2 unroll { for j in 0u32..3 step 2 unroll { r[i][j] += 1.0; } }
        o[0] = r[1][2];");
    assert!(
        out.contains("var r#2: [2][3] f32 = [2][3] f32(0.0);"),
        "{out}"
    );
    // One copy per iteration, the loop variable a constant in each.
    for (i, j) in [(0, 0), (0, 2), (1, 0), (1, 2)] {
        assert!(
            out.contains(&format!("r#2[{i}][{j}] = (r#2[{i}][{j}] + 1.0f32);")),
            "{out}"
        );
    }
    assert!(!out.contains("for "), "{out}");
    assert!(
        out.contains("store offset(o#0, 0u32) <- r#2[1][2];"),
        "{out}"
    );
}

#[test]
fn arrays_of_fragments_fill_and_index_registers() {
    let out = ir("var acc: [2] frag_acc<f32> = 0;
        for i in 0u32..2 unroll { o[i] = acc[i][3]; }");
    assert!(out.contains("[2] frag_acc<f32>(0.0)"), "{out}");
    assert!(out.contains("<- acc#2[1][3];"), "{out}");
}

#[test]
fn arrays_of_vectors_fill_every_lane() {
    let out = ir("var v: [2] f32x4 = 1.5;
        v[1] = v[1] * f32x4(1.0, 2.0, 3.0, 4.0);
        o[0] = v[1].w;");
    assert!(out.contains("[2] f32x4(1.5)"), "{out}");
    let e = error("var v: [2] f32x4 = f32x4(0.0, 0.0, 0.0, 0.0);");
    assert!(e.contains("must be `[2] f32x4`, found `f32x4`"), "{e}");
}

#[test]
fn dynamic_indices_are_rejected() {
    let e = error("var r: [4] f32 = 0.0; for i in 0u32..4 { r[i] = 1.0; }");
    assert!(
        e.contains("index register array `r` with a constant or an unrolled loop variable"),
        "{e}"
    );
    let e = error("var r: [4] f32 = 0.0; o[0] = r[n % 4];");
    assert!(e.contains("index register array `r`"), "{e}");
}

#[test]
fn array_misuse_is_reported() {
    let e = error("var r: [4] f32 = 0.0; o[0] = r[4];");
    assert!(
        e.contains("index 4 is out of bounds for register array `r`"),
        "{e}"
    );
    let e = error("var r: [4] f32 = 0.0; for i in 0u32..5 unroll { r[i] = 1.0; }");
    assert!(e.contains("out of bounds") && e.contains("`i` = 4"), "{e}");
    let e = error("var r: [2][2] f32 = 0.0; o[0] = r[1];");
    assert!(
        e.contains("has 2 dimensions: give an index for each"),
        "{e}"
    );
    let e = error("var r: [2] f32 = 0.0; let s = r;");
    assert!(e.contains("cannot be used as a whole"), "{e}");
    let e = error("let r: [2] f32 = 0.0; r[0] = 1.0;");
    assert!(e.contains("declared with `let`"), "{e}");
    let e = error("var r: [2] f32 = o[0];");
    assert!(e.contains("must be `[2] f32`, found `f32`"), "{e}");
    let e = error("var r: [n] f32 = 0.0;");
    assert!(e.contains("must be a compile-time constant"), "{e}");
    let e = error("var r: [0] f32 = 0.0;");
    assert!(e.contains("dimensions must be positive"), "{e}");
    let e = compile("fn f(r: [2] f32) {}").expect_err("array parameter");
    assert!(e.contains("only be the type of a local"), "{e}");
}

#[test]
fn unroll_loops_need_constant_headers_and_no_jumps() {
    let e = error("for i in 0u32..n unroll { }");
    assert!(
        e.contains("the bounds and step of an `unroll` loop must be a compile-time constant"),
        "{e}"
    );
    let e = error("for i in 0u32..4 unroll { break; }");
    assert!(e.contains("`break` cannot leave an `unroll` loop"), "{e}");
    let e = error("for i in 0u32..1000 unroll { }");
    assert!(e.contains("at most 256 can be unrolled"), "{e}");
    // A loop inside an unrolled one may still jump.
    ir("for i in 0u32..2 unroll { while true { break; } }");
}
