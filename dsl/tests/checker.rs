//! The checker's typing, desugaring and specialization rules, observed through the IR.

use std::collections::HashMap;

use zinc_dsl::ir::{ConstValue, ExprKind, FunctionKind, Module, Scalar, StmtKind, Type};
use zinc_dsl::{compile_source, print_ir};

fn compile_with(
    text: &str,
    defines: &[(&str, &str)],
    files: &[(&str, &str)],
) -> Result<Module, String> {
    let files: HashMap<String, String> = files
        .iter()
        .map(|(n, t)| (n.to_string(), t.to_string()))
        .collect();
    let defines: Vec<(String, String)> = defines
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
    compile_source("main.tile", text, &defines, &|p| files.get(p).cloned())
        .map(|c| c.module)
        .map_err(|f| f.render())
}

fn ir(text: &str) -> String {
    match compile_with(text, &[], &[]) {
        Ok(m) => print_ir(&m),
        Err(e) => panic!("unexpected errors:\n{e}"),
    }
}

fn error(text: &str) -> String {
    compile_with(text, &[], &[]).expect_err("expected an error")
}

#[test]
fn literals_take_their_type_from_context() {
    let out = ir(
        "kernel f(x: u8, y: f64, o: global mut [f64]) grid(1) block(1) {
        let a = x + 1;
        let b = 2 * x;
        let c = 3;
        let d = 1.5;
        let e: i64 = -9;
        let g = y * 2;
        o[0] = g;
    }",
    );
    assert!(out.contains("let a#3: u8 = (x#0 + 1u8);"), "{out}");
    assert!(out.contains("let b#4: u8 = (2u8 * x#0);"), "{out}");
    assert!(out.contains("let c#5: i32 = 3i32;"), "{out}");
    assert!(out.contains("let d#6: f32 = 1.5f32;"), "{out}");
    assert!(out.contains("let e#7: i64 = -9i64;"), "{out}");
    assert!(out.contains("let g#8: f64 = (y#1 * 2.0f64);"), "{out}");
}

#[test]
fn literal_ranges() {
    ir("fn f() -> i8 { return -128; }");
    ir("fn f() -> u64 { return 18446744073709551615; }");
    assert!(error("fn f() -> u64 { return -1; }").contains("out of range for `u64`"));
    assert!(error("fn f() -> f16 { return 70000.0; }").contains("out of range for `f16`"));
    assert!(error("fn f() -> i32 { return 2147483648; }").contains("out of range"));
}

#[test]
fn no_implicit_conversions() {
    assert!(error("fn f(a: u32, b: i32) -> u32 { return a + b; }").contains("mismatched types"));
    assert!(error("fn f(a: f32) -> f64 { return a; }").contains("must be `f64`, found `f32`"));
    assert!(error("fn f(a: u32) -> bool { return a; }").contains("must be `bool`"));
    ir("fn f(a: u32, b: i32) -> u32 { return a + b as u32; }");
}

#[test]
fn casts_and_operators() {
    let out = ir(
        "kernel f(a: u32, p: bool, v: global mut [f32x4], o: global mut [f16x4]) grid(1) block(1) {
        let n = !a;
        let q = !p && a < 4;
        let s = (a << 2) >> a;
        let w = -(a as i32);
        let h = v[0] + v[1] * f32x4(1.0, 2.0, 3.0, 4.0);
        let x = h.y % 2.0;
        o[0] = h as f16x4;
    }",
    );
    assert!(out.contains("let n#4: u32 = (!a#0);"), "{out}");
    assert!(
        out.contains("let q#5: bool = ((!p#1) && (a#0 < 4u32));"),
        "{out}"
    );
    assert!(
        out.contains("let s#6: u32 = ((a#0 << 2u32) >> a#0);"),
        "{out}"
    );
    assert!(out.contains("let w#7: i32 = (-(a#0 as i32));"), "{out}");
    assert!(
        out.contains("f32x4(1.0f32, 2.0f32, 3.0f32, 4.0f32)"),
        "{out}"
    );
    assert!(out.contains("let x#9: f32 = (h#8.y % 2.0f32);"), "{out}");
    assert!(
        out.contains("store offset(o#3, 0u32) <- (h#8 as f16x4);"),
        "{out}"
    );
    assert!(error("fn f(a: u32) -> u32 { return -a; }")
        .contains("unary `-` cannot be applied to `u32`"));
    assert!(
        error("fn f(a: f32) -> f32 { return a << 1; }").contains("`<<` cannot be applied to `f32`")
    );
}

#[test]
fn precedence_follows_rust() {
    let out = ir(
        "kernel f(a: u32, b: u32, o: global mut [bool]) grid(1) block(1) {
        o[0] = a + b * 2 as u32 << 1 == 4 || a & b != 0 && a > b;
    }",
    );
    assert!(
        out.contains(
            "<- ((((a#0 + (b#1 * (2i32 as u32))) << 1u32) == 4u32) || (((a#0 & b#1) != 0u32) && (a#0 > b#1)));"
        ),
        "{out}"
    );
}

#[test]
fn compound_assignment_desugars() {
    let out = ir("kernel k(v: global mut [f32], n: u32) grid(1) block(32) {
        var i = 0u32;
        i += 2;
        i <<= 1;
        v[i] += 1.0;
    }");
    assert!(out.contains("i#2 = (i#2 + 2u32);"), "{out}");
    assert!(out.contains("i#2 = (i#2 << 1u32);"), "{out}");
    assert!(
        out.contains("store offset(v#0, i#2) <- (load(offset(v#0, i#2)) + 1.0f32);"),
        "{out}"
    );
}

#[test]
fn shared_arrays_flatten_row_major() {
    let out = ir(
        "kernel k<T = 8>(o: global mut [f32], w: u64) grid(1) block(T, T) {
        shared a: [T][T + 1][2] f32;
        shared b: [T / 4] f32;
        a[thread.y][thread.x][1] = 1.0;
        o[0] = a[w][0][1] + b[thread.x];
        let view = a;
        o[1] = view[3];
    }",
    );
    assert!(
        out.contains("shared #0 @a: [8][9][2] f32;  // 576 bytes"),
        "{out}"
    );
    assert!(out.contains("shared #1 @b: [2] f32;"), "{out}");
    assert!(
        out.contains(
            "store offset(@a, ((((thread.y * 9u32) + thread.x) * 2u32) + 1u32)) <- 1.0f32;"
        ),
        "{out}"
    );
    // A 64-bit index makes the whole offset 64-bit; a single index is used as it is.
    assert!(
        out.contains("load(offset(@a, ((((w#1 * 9u64) + (0u32 as u64)) * 2u64) + (1u32 as u64))))"),
        "{out}"
    );
    assert!(out.contains("load(offset(@b, thread.x))"), "{out}");
    assert!(out.contains("let view#2: shared mut [f32] = @a;"), "{out}");
}

#[test]
fn specialization_and_launch() {
    let src = "const WARP: u32 = 32;
    kernel k<BLOCK: u32 = 256, ROWS = BLOCK / WARP, SCALE: f32 = 0.5, ON: bool = true>(
        x: global mut [f32], n: u32)
        grid(cdiv(n, BLOCK), ROWS) block(BLOCK)
    {
        if ON { x[thread.x] = SCALE * (ROWS as f32); }
    }";
    let m = compile_with(src, &[("BLOCK", "0x80"), ("SCALE", "2")], &[]).unwrap();
    let FunctionKind::Kernel(launch) = &m.functions[0].kind else {
        panic!("not a kernel")
    };
    assert_eq!(launch.block, [128, 1, 1]);
    assert_eq!(
        specialization(&m, "k"),
        ["BLOCK=128", "ROWS=4", "SCALE=2.0", "ON=true"]
    );
    assert!(launch
        .grid
        .iter()
        .all(|g| g.ty == Type::Scalar(Scalar::U32)));
    assert_eq!(launch.grid[2].kind, ExprKind::Const(ConstValue::Int(1)));
    let out = print_ir(&m);
    assert!(
        out.contains("grid((((n#1 + 128u32) - 1u32) / 128u32), 4u32, 1u32) block(128, 1, 1)"),
        "{out}"
    );
    let err = compile_with(src, &[("ON", "yes")], &[]).unwrap_err();
    assert!(
        err.contains("invalid value `yes` for compile-time parameter `ON: bool`"),
        "{err}"
    );
}

#[test]
fn module_holds_reachable_functions_callees_first() {
    let lib = "fn unused(x: f32) -> f32 { return x; }
        fn leaf(x: f32) -> f32 { return x * 2.0; }
        fn mid(x: f32) -> f32 { return leaf(x) + leaf(x); }
        kernel not_exported(x: global mut [f32]) grid(1) block(1) { x[0] = 1.0; }";
    let src = "import \"lib/m.tile\";
        import \"./lib/../lib/m.tile\";
        kernel a(x: global mut [f32]) grid(1) block(32) { x[0] = mid(1.0); }
        kernel b(x: global mut [f32]) grid(1) block(32) { x[0] = leaf(mid(2.0)); }";
    let m = compile_with(src, &[], &[("lib/m.tile", lib)]).unwrap();
    let names: Vec<&str> = m.functions.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["leaf", "mid", "a", "b"]);
    assert_eq!(m.functions[0].file, "lib/m.tile");
    let StmtKind::Store { value, .. } = &m.functions[3].body[0].kind else {
        panic!("expected a store")
    };
    let ExprKind::Call(outer, args) = &value.kind else {
        panic!("expected a call")
    };
    assert_eq!(outer.0, 0);
    assert!(matches!(args[0].kind, ExprKind::Call(inner, _) if inner.0 == 1));
}

/// Dropping a kernel renumbers the calls of the functions after it.
#[test]
fn retain_kernels_keeps_calls_on_their_callees() {
    let src = "fn first(x: f32) -> f32 { return x + 1.0; }
        fn second(x: f32) -> f32 { return x * 2.0; }
        kernel a(x: global mut [f32]) grid(1) block(32) { x[0] = first(1.0); }
        kernel b(x: global mut [f32]) grid(1) block(32) { x[0] = second(first(2.0)); }
        kernel c(x: global mut [f32]) grid(1) block(32) { x[0] = 3.0; }";
    let mut m = compile_with(src, &[], &[]).unwrap();
    let names =
        |m: &Module| -> Vec<String> { m.functions.iter().map(|f| f.name.clone()).collect() };
    assert_eq!(names(&m), ["first", "a", "second", "b", "c"]);
    m.retain_kernels(|name| name != "a");
    assert_eq!(names(&m), ["first", "second", "b", "c"]);
    let StmtKind::Store { value, .. } = &m.functions[2].body[0].kind else {
        panic!("expected a store")
    };
    let ExprKind::Call(outer, args) = &value.kind else {
        panic!("expected a call")
    };
    assert_eq!(m.functions[outer.0 as usize].name, "second");
    let ExprKind::Call(inner, _) = &args[0].kind else {
        panic!("expected a call")
    };
    assert_eq!(m.functions[inner.0 as usize].name, "first");
    m.retain_kernels(|_| false);
    assert_eq!(names(&m), ["first", "second"]);
}

#[test]
fn builtins_lower_to_their_ir() {
    let out = ir(
        "kernel k(c: global mut [u32], f: global mut [f32], n: u32) grid(1) block(32) {
        let old = atomic_add(c[0], 1);
        let fo = atomic_add(f[1], 0.5);
        let swapped = atomic_cas(c[2], 0, old);
        let m = ballot(lane < 4);
        let all = vote_all(n > 0);
        let s = shfl_down(fo, 1);
        let q = cdiv(n, 4);
        let t = intrinsic<u32>(\"llvm.nvvm.read.ptx.sreg.clock\");
        intrinsic<void>(\"llvm.nvvm.barrier0\");
        let r = asm<u32>(\"mov.u32 $0, $1;\", \"=r,r\", n);
        fence_block();
        fence();
        barrier();
        nanosleep(n + 8);
        c[3] = select(all, m + q, t + r + swapped) + max(thread.x, block_dim.x) + (abs(-3) as u32);
    }",
    );
    assert!(
        out.contains("let old#3: u32 = atomic_add(offset(c#0, 0u32), 1u32);"),
        "{out}"
    );
    assert!(
        out.contains("let fo#4: f32 = atomic_add(offset(f#1, 1u32), 0.5f32);"),
        "{out}"
    );
    assert!(
        out.contains("atomic_cas(offset(c#0, 2u32), 0u32, old#3)"),
        "{out}"
    );
    assert!(
        out.contains("let m#6: u32 = ballot((lane < 4u32));"),
        "{out}"
    );
    assert!(
        out.contains("let s#8: f32 = shfl_down(fo#4, 1u32);"),
        "{out}"
    );
    assert!(
        out.contains("let q#9: u32 = (((n#2 + 4u32) - 1u32) / 4u32);"),
        "{out}"
    );
    assert!(
        out.contains("intrinsic<void>(\"llvm.nvvm.barrier0\");"),
        "{out}"
    );
    assert!(
        out.contains("asm<u32>(\"mov.u32 $0, $1;\", \"=r,r\", n#2)"),
        "{out}"
    );
    assert!(
        out.contains("fence.block;\n    fence.device;\n    barrier;\n    nanosleep((n#2 + 8u32));"),
        "{out}"
    );
}

#[test]
fn math_works_lane_wise_on_vectors() {
    let out = ir(
        "kernel k(v: global mut [f32x4], h: global mut [f16x2]) grid(1) block(1) {
        v[0] = max(sqrt(v[1]), fma(v[2], v[3], v[0]));
        h[0] = abs(h[1]);
    }",
    );
    assert!(
        out.contains("max(sqrt(load(offset(v#0, 1u32))), fma(load(offset(v#0, 2u32))"),
        "{out}"
    );
    assert!(out.contains("<- abs(load(offset(h#1, 1u32)));"), "{out}");
}

#[test]
fn builtin_misuse() {
    assert!(error("fn f(a: f32) -> f32 { return u32(a); }").contains("is a type, not a function"));
    assert!(error("fn f(a: u32) -> u32 { return exp(a); }")
        .contains("`exp` needs a float, found `u32`"));
    assert!(error("fn f(a: f32) -> f32 { return cdiv(a, 2.0); }")
        .contains("`cdiv` needs integer scalars"));
    assert!(
        error("fn f(a: global mut [u32]) -> u32 { return atomic_add(a, 1); }")
            .contains("must be an element of a view")
    );
    assert!(error("kernel k() grid(1) block(1) { fence(1); }")
        .contains("`fence` takes 0 arguments but 1 was given"));
    assert!(error("fn f(v: f32) { v + 1.0; }").contains("only calls can stand alone"));
    let e = error("fn f(t: f32) { nanosleep(t); }");
    assert!(
        e.contains("nanoseconds of `nanosleep`") && e.contains("`u32`"),
        "{e}"
    );
    assert!(
        error("fn f() { nanosleep(); }").contains("`nanosleep` takes 1 argument but 0 were given")
    );
}

#[test]
fn atomic_add_takes_half_floats_and_the_others_do_not() {
    let out = ir("kernel k(h: global mut [f16]) grid(1) block(32) { atomic_add(h[lane], 0.5); }");
    assert!(
        out.contains("atomic_add(offset(h#0, lane), 0.5f16)"),
        "{out}"
    );
    let e = error("kernel k(h: global mut [f16]) grid(1) block(32) { atomic_max(h[lane], 0.5); }");
    assert!(
        e.contains("`atomic_max` needs a 32- or 64-bit integer or float element, found `f16`"),
        "{e}"
    );
}

#[test]
fn atomics_on_shared_arrays() {
    let out = ir("kernel k(o: global mut [u32]) grid(1) block(32) {
        shared hist: [4][8] u32;
        atomic_or(hist[1][lane], 1);
        o[0] = hist[0][0];
    }");
    assert!(
        out.contains("atomic_or(offset(@hist, ((1u32 * 8u32) + lane)), 1u32);"),
        "{out}"
    );
}

#[test]
fn loops() {
    let out = ir("kernel f(n: i64, o: global mut [i64]) grid(1) block(1) {
        var s = 0i64;
        for i in 0..n step 2 { if i == 6 { continue; } s += i; }
        while s > 100 { s -= 1; if s == 50 { break; } }
        o[0] = s;
    }");
    assert!(out.contains("for i#3 in 0i64..n#0 step 2i64 {"), "{out}");
    assert!(
        out.contains("if (i#3 == 6i64) {\n            continue;"),
        "{out}"
    );
    assert!(
        error("fn f(n: u32) { for i in 0..n step 0 { } }").contains("loop step must be positive")
    );
    assert!(error("fn f(n: f32) { for i in 0.0..n { } }").contains("loop bounds must be integers"));
    assert!(error("fn f(n: u32) { for i in 0..n { i = 2; } }")
        .contains("cannot assign to loop variable `i`"));
}

#[test]
fn const_items_evaluate_at_compile_time() {
    let out = ir("const A: u32 = cdiv(100, 7) * 2;
        const B: i32 = max(-3, min(A as i32, 9)) << 1;
        const C: f32 = 1.0 / 4.0;
        const D: bool = B > 10 && C < 1.0;
        kernel k(o: global mut [f32]) grid(1) block(A) {
            shared s: [A - 20][2] f32;
            if D { o[0] = C + s[1][1]; }
        }");
    assert!(out.contains("block(30, 1, 1)"), "{out}");
    assert!(out.contains("@s: [10][2] f32"), "{out}");
    assert!(out.contains("if true {"), "{out}");
    assert!(out.contains("(0.25f32 + load("), "{out}");
}

#[test]
fn view_mutability_and_device_fn_views() {
    let out = ir("fn total(v: global [f32], n: u32) -> f32 {
            var s = 0.0;
            for i in 0..n { s += (v + 1)[i]; }
            return s;
        }
        fn fill(buf: shared mut [f32]) { buf[lane] = 0.0; }
        kernel k(v: global mut [f32]) grid(1) block(32) {
            shared tmp: [32] f32;
            fill(tmp);
            v[0] = total(v, 4) + tmp[0];
        }");
    assert!(
        out.contains("load(offset(offset(v#0, 1u32), i#3))"),
        "{out}"
    );
    assert!(out.contains("call #0 fill(@tmp);"), "{out}");
    assert!(error(
        "fn w(v: global mut [f32]) { v[0] = 1.0; }
        kernel k(v: global [f32]) grid(1) block(1) { w(v); }"
    )
    .contains("must be `global mut [f32]`, found `global [f32]`"));
}

#[test]
fn kernels_and_launch_errors() {
    assert!(error("kernel k(n: u32) grid() block(1) { }")
        .contains("`grid(...)` takes 1 to 3 dimensions"));
    assert!(error("kernel k(n: u32) grid(1) block(n) { }")
        .contains("a block dimension must be a compile-time constant"));
    assert!(error("kernel k(v: f32x4) grid(1) block(1) { }")
        .contains("kernel parameters must be scalars or global views"));
    assert!(
        error("kernel k<A = 1, A = 2>() grid(1) block(1) { }").contains("`A` is declared twice")
    );
    assert!(error("kernel k(a: u32, a: u32) grid(1) block(1) { }")
        .contains("parameter `a` is declared twice"));
}

#[test]
fn render_format() {
    let err = error("fn f() -> u32 {\n    return x;\n}\n");
    assert_eq!(
        err,
        "error: unknown name `x`\n --> main.tile:2:12\n  |\n2 |     return x;\n  |            ^\n"
    );
    let err = error("fn f(a: u32) -> u32 {\n    let b: u32 = 1;\n    b = a;\n    return b;\n}\n");
    assert!(err.ends_with(
        "note: `b` declared here; use `var` to make it mutable\n --> main.tile:2:9\n  |\n2 |     let b: u32 = 1;\n  |         ^\n"
    ), "{err}");
}

/// `bitcast<T>` of a view: the same address with another element type.
#[test]
fn views_bitcast_to_other_elements() {
    let out = ir("kernel k(y: global mut [f32]) grid(1) block(32) {
    let pairs = bitcast<global mut [f32x2]>(y + 2 * lane);
    pairs[0] = f32x2(1.0, 2.0);
    let read: global [u32] = bitcast<global [u32]>(y);
    y[64] = read[lane] as f32;
}");
    assert!(out.contains("bitcast<global mut [f32x2]>("), "{out}");
    assert!(out.contains("bitcast<global [u32]>("), "{out}");
}

#[test]
fn tensor_core_builtins_are_checked() {
    let wrap = |body: &str| {
        format!(
            "kernel k(g: global [f16], q: global [i8], y: global mut [f32]) grid(1) block(32) {{
    shared s: [16][16] f16;
    shared t: [16][32] i8;
    {body}
}}"
        )
    };
    let cases = [
        ("let a: frag_a<f64> = 0;", "is not a fragment type"),
        ("let a: frag_c<f16> = 0;", "unknown generic type `frag_c`"),
        ("let a = ldmatrix_x4(t + lane * 32, true);", "cannot transpose `i8`"),
        ("let a = ldmatrix_x4(g, false);", "a shared view of `f16`, `bf16` or `i8`"),
        ("cp_async(s + lane * 8, g + lane * 8, 12, true);", "copies 4, 8 or 16 bytes"),
        ("cp_async(s + lane * 8, g + lane * 8, 16 + lane, true);", "compile-time constant"),
        ("let b = frag(1, 2);", "expects none"),
        ("let a = ldmatrix_x4(s + lane * 8, false); y[0] = a[4].x as f32;", "the index must be below 4"),
        (
            "let a = ldmatrix_x4(s + lane * 8, false); let b = ldmatrix_x2(t + lane * 32, false); let c = mma(a, b, 0);",
            "operands of one element type",
        ),
        ("let x = bitcast<f32>(1u16);", "cannot bitcast `u16`"),
        ("let v = bitcast<shared [f32x2]>(y);", "a view keeps its memory space"),
        ("let v = bitcast<global mut [f16x2]>(g);", "cannot make a view mutable"),
        ("let v = bitcast<global [f32]>(1u64);", "views bitcast only to views"),
        ("let v = bitcast<u64>(g);", "views bitcast only to views"),
        ("let v = bitcast<frag_a<f16> >(1u32);", "bitcasts reinterpret scalars, vectors and views"),
        ("let x = lop3(1u32, 2u32, 3u32, 256);", "out of range"),
        ("let x = dp4a(1u32, 2u32, 3u32);", "the accumulator of `dp4a`"),
        ("let x = dp4a_us(1i32, 2u32, 3);", "the first operand of `dp4a`"),
        (
            "var acc: [8] frag_acc<f32> = 0; wgmma(acc, g, s[0][0]);",
            "a `frag_a<f16>` or a shared view of `f16` as A",
        ),
        (
            "var acc: [8] frag_acc<f32> = 0; wgmma(acc, t[0][0], s[0][0]);",
            "a `frag_a<f16>` or a shared view of `f16` as A",
        ),
        (
            "var acc: [8] frag_acc<f32> = 0; wgmma(acc, s[0][0], g);",
            "a shared view of `f16` as B",
        ),
    ];
    for (body, want) in cases {
        let err = error(&wrap(body));
        assert!(err.contains(want), "{body}: expected `{want}` in:\n{err}");
    }
    let out = ir(&wrap(
        "var acc: frag_acc<f32> = 0;
    let a = ldmatrix_x4(s + (lane % 16 * 16 + lane / 16 * 8), false);
    let b: frag_b<f16> = frag(a[0], a[1]);
    acc = mma(a, b, acc);
    cp_async_wait(1);
    y[lane] = acc[3] + bitcast<f32>(prmt(1u32, 2u32, 0x3210u32));
    y[0] = (dp4a(1u32, 2u32, 3) + dp4a_us(4u32, 5u32, -6)) as f32;",
    ));
    for want in [
        "var acc#3: frag_acc<f32> = frag_acc<f32>(0.0)",
        "ldmatrix_x4<trans=false>(",
        "frag_b<f16>(a#4[0], a#4[1])",
        "mma(a#4, b#5, acc#3)",
        "cp_async_wait<1>()",
        "dp4a(1u32, 2u32, 3i32)",
        "dp4a_us(4u32, 5u32, -6i32)",
    ] {
        assert!(out.contains(want), "no `{want}` in:\n{out}");
    }
}

const PIPELINE_HEAD: &str =
    "kernel f(x: global [f32], y: global mut [f32], n: u32) grid(1) block(32) {
    shared buf: [4][32] f32;
    var s = 0.0;";

fn pipeline(stages: u32) -> String {
    ir(&format!(
        "{PIPELINE_HEAD}
    pipeline k in 0u32..n step 32 stages {stages} {{
        cp_async(buf + stage * 32 + thread.x, x + k + thread.x, 4, k < n);
    }} compute {{
        s += buf[stage][thread.x];
    }}
    y[thread.x] = s;
}}"
    ))
}

#[test]
fn pipeline_desugars_to_a_cp_async_ring() {
    let out = pipeline(3);
    let body = out.split_once("var s#3: f32 = 0.0f32;\n").expect("body").1;
    let want = "    let k_start#4: u32 = 0u32;
    let k_end#5: u32 = n#2;
    let k_step#6: u32 = 32u32;
    let k#7: u32 = k_start#4;
    let stage#8: u32 = 0u32;
    if (k#7 < k_end#5) {
        cp_async<4>(offset(offset(@buf, (stage#8 * 32u32)), thread.x), offset(offset(x#0, k#7), thread.x), (k#7 < n#2));
    }
    cp_async_commit();
    let k#9: u32 = (k_start#4 + k_step#6);
    let stage#10: u32 = 1u32;
    if (k#9 < k_end#5) {
        cp_async<4>(offset(offset(@buf, (stage#10 * 32u32)), thread.x), offset(offset(x#0, k#9), thread.x), (k#9 < n#2));
    }
    cp_async_commit();
    var k_ring#11: u32 = 0u32;
    var k_fill#12: u32 = 2u32;
    for k#13 in k_start#4..k_end#5 step k_step#6 {
        cp_async_wait<1>();
        barrier;
        let k#14: u32 = (k#13 + (2u32 * k_step#6));
        let stage#15: u32 = k_fill#12;
        if (k#14 < k_end#5) {
            cp_async<4>(offset(offset(@buf, (stage#15 * 32u32)), thread.x), offset(offset(x#0, k#14), thread.x), (k#14 < n#2));
        }
        cp_async_commit();
        k_fill#12 = select((k_fill#12 == 2u32), 0u32, (k_fill#12 + 1u32));
        let stage#16: u32 = k_ring#11;
        s#3 = (s#3 + load(offset(@buf, ((stage#16 * 32u32) + thread.x))));
        k_ring#11 = select((k_ring#11 == 2u32), 0u32, (k_ring#11 + 1u32));
    }
    cp_async_wait<0>();
    barrier;
    store offset(y#1, thread.x) <- s#3;
}
";
    assert_eq!(body, want, "{out}");
}

#[test]
fn pipeline_with_two_stages_waits_for_none() {
    let out = pipeline(2);
    assert_eq!(out.matches("cp_async_commit();").count(), 2, "{out}");
    assert!(
        out.contains("cp_async_wait<0>();\n        barrier;"),
        "{out}"
    );
    assert!(out.contains("let k#12: u32 = (k#11 + k_step#6);"), "{out}");
    assert!(out.contains("let stage#13: u32 = k_fill#10;"), "{out}");
    assert!(
        out.contains("k_ring#9 = select((k_ring#9 == 1u32), 0u32, (k_ring#9 + 1u32));"),
        "{out}"
    );
}

#[test]
fn pipeline_with_one_stage_is_synchronous() {
    let out = pipeline(1);
    let body = out.split_once("var s#3: f32 = 0.0f32;\n").expect("body").1;
    let want = "    let k_start#4: u32 = 0u32;
    let k_end#5: u32 = n#2;
    let k_step#6: u32 = 32u32;
    for k#7 in k_start#4..k_end#5 step k_step#6 {
        let k#8: u32 = k#7;
        let stage#9: u32 = 0u32;
        cp_async<4>(offset(offset(@buf, (stage#9 * 32u32)), thread.x), offset(offset(x#0, k#8), thread.x), (k#8 < n#2));
        cp_async_commit();
        cp_async_wait<0>();
        barrier;
        let stage#10: u32 = 0u32;
        s#3 = (s#3 + load(offset(@buf, ((stage#10 * 32u32) + thread.x))));
        barrier;
    }
    store offset(y#1, thread.x) <- s#3;
}
";
    assert_eq!(body, want, "{out}");
}

#[test]
fn pipeline_errors() {
    let with = |header: &str, copy: &str, compute: &str| {
        error(&format!(
            "{PIPELINE_HEAD}
    {header} {{
        {copy}
    }} compute {{
        {compute}
    }}
}}"
        ))
    };
    let copy = "cp_async(buf + stage * 32 + thread.x, x + k, 4, k < n);";
    let e = with("pipeline k in 0u32..n step 32 stages 9", copy, "");
    assert!(e.contains("a `pipeline` has 1 to 8 stages, not 9"), "{e}");
    let e = with("pipeline k in 0u32..n step 32 stages n", copy, "");
    assert!(e.contains("must be a compile-time constant"), "{e}");
    let e = with("pipeline k in 0u32..n step 0 stages 2", copy, "");
    assert!(
        e.contains("step of a `pipeline` must be positive, found 0"),
        "{e}"
    );
    let e = with("pipeline k in 0i32..5 step 1 stages 2", copy, "");
    assert!(e.contains("must be `u32`"), "{e}");
    let e = with("pipeline k in 0u32..n step 32 stages 2", copy, "break;");
    assert!(e.contains("`break` cannot leave a `pipeline` block"), "{e}");
    let e = with("pipeline k in 0u32..n step 32 stages 2", "return;", "");
    assert!(
        e.contains("`return` cannot leave a `pipeline` block"),
        "{e}"
    );
    let e = with("pipeline k in 0u32..n step 32 stages 2", copy, "stage = 1;");
    assert!(e.contains("cannot assign to `stage`"), "{e}");
    // Errors inside the blocks are found even when the header is wrong, and reported once.
    let e = with("pipeline k in 0u32..n step 32 stages 0", copy, "s += nope;");
    assert!(e.contains("unknown") && e.contains("nope"), "{e}");
    let e = with("pipeline k in 0u32..n step 32 stages 3", "cp_async(k);", "");
    assert_eq!(e.matches("takes 4 arguments").count(), 1, "{e}");
    let e = error(
        "kernel f(n: u32) grid(1) block(32) {
    pipeline k in 0u32..n step 32 stages 2 { } calc { }
}",
    );
    assert!(e.contains("expected `compute`, found `calc`"), "{e}");
}

#[test]
fn pipeline_blocks_allow_inner_loops_and_runtime_steps() {
    // A loop inside a block may break; the step may be a run-time value.
    let out = ir(&format!(
        "{PIPELINE_HEAD}
    for r in 0u32..2 {{
        pipeline k in r..n step n / 4 + 1 stages 2 {{
            cp_async(buf + stage * 32 + thread.x, x + k, 4, k < n);
        }} compute {{
            for j in 0u32..32 {{
                if j > k {{ break; }}
                s += buf[stage][j];
            }}
        }}
    }}
    y[thread.x] = s;
}}"
    ));
    assert!(
        out.contains("let k_step#7: u32 = ((n#2 / 4u32) + 1u32);"),
        "{out}"
    );
    assert!(out.contains("break;"), "{out}");
}

/// A kernel reading `t[s][r + 16][c]` of a tile declared with `layout`, and its IR.
fn laid_out(layout: &str) -> String {
    ir(&format!(
        "kernel f(y: global mut [f16], s: u32, r: u32, c: u32) grid(1) block(32) {{
    shared t: [2][32][32] f16 {layout};
    y[0] = t[s][r + 16][c];
    y[1] = t[s][r + 4][c];
}}"
    ))
}

#[test]
fn swizzled_tiles_index_through_the_xor_of_16_byte_chunks() {
    let out = laid_out("swizzle");
    assert!(
        out.contains("shared #0 @t: [2][32][32] f16 swizzle;  // 4096 bytes"),
        "{out}"
    );
    // 64-byte rows: 4 chunks of 8, two rows per 128-byte line. The tile is its own offset, the
    // constant 16 rows (a multiple of the pattern's 8) a third one.
    let whole = "offset(offset(offset(@t, (s#1 * 1024u32)), ((r#2 * 32u32) + ((((c#3 / 8u32) ^ ((r#2 / 2u32) % 4u32)) * 8u32) + (c#3 % 8u32)))), 512u32)";
    assert!(out.contains(whole), "{out}");
    // 4 rows are not a whole period of the pattern: the row stays in the XOR.
    assert!(out.contains("(((r#2 + 4u32) / 2u32) % 4u32)"), "{out}");
}

#[test]
fn padded_tiles_have_longer_rows() {
    let out = laid_out("pad(8)");
    assert!(
        out.contains("shared #0 @t: [2][32][32] f16 pad(8);  // 5120 bytes"),
        "{out}"
    );
    assert!(
        out.contains("offset(offset(offset(@t, (s#1 * 1280u32)), ((r#2 * 40u32) + c#3)), 640u32)"),
        "{out}"
    );
    assert!(
        out.contains("offset(offset(offset(@t, (s#1 * 1280u32)), ((r#2 * 40u32) + c#3)), 160u32)"),
        "{out}"
    );
}

#[test]
fn ldmatrix_and_cp_async_take_tile_elements_as_addresses() {
    let out = ir(
        "kernel f(x: global [f16], y: global mut [f16x2]) grid(1) block(32) {
    shared t: [16][64] f16 swizzle;
    cp_async(t[lane % 16][lane / 16 * 8], x + lane * 8, 16, true);
    cp_async_commit();
    cp_async_wait(0);
    barrier();
    let a = ldmatrix_x4(t[lane % 16][lane / 16 * 8], false);
    y[lane] = a[0];
}",
    );
    // 128-byte rows: 8 chunks, the key is the row mod 8.
    let at = "offset(@t, (((lane % 16u32) * 64u32) + ((((((lane / 16u32) * 8u32) / 8u32) ^ (((lane % 16u32) / 1u32) % 8u32)) * 8u32) + (((lane / 16u32) * 8u32) % 8u32))))";
    assert!(out.contains(&format!("cp_async<16>({at}")), "{out}");
    assert!(
        out.contains(&format!("ldmatrix_x4<trans=false>({at})")),
        "{out}"
    );
}

/// The specialization of kernel `name` in `m`, as `NAME=VALUE` texts.
fn specialization(m: &Module, name: &str) -> Vec<String> {
    let f = m.functions.iter().find(|f| f.name == name).expect(name);
    match &f.kind {
        FunctionKind::Kernel(launch) => launch
            .specialization
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect(),
        _ => panic!("{name} is not a kernel"),
    }
}

#[test]
fn kernel_instances_fix_compile_time_parameters_over_defines() {
    let lib =
        "kernel scale<K: u32 = 2, HALF: bool = false>(o: global mut [u32]) grid(1) block(32) {
        o[thread.x] = select(HALF, K / 2, K);
    }";
    let text = "import \"lib.tile\";\nkernel scale3 = scale<K = 3, HALF = true>;";
    // -D applies to what the instance leaves open; the instance's own arguments win.
    let m = compile_with(text, &[("K", "9")], &[("lib.tile", lib)]).unwrap();
    assert_eq!(specialization(&m, "scale3"), ["K=3", "HALF=true"]);
    // Only the root file's kernels and instances are compiled.
    assert!(m.functions.iter().all(|f| f.name != "scale"));
    let m = compile_with(
        "import \"lib.tile\";\nkernel s = scale<HALF = true>;",
        &[("K", "8")],
        &[("lib.tile", lib)],
    )
    .unwrap();
    assert_eq!(specialization(&m, "s")[0], "K=8");
}

#[test]
fn type_parameters_stand_for_scalar_types() {
    let lib = "kernel copy<OUT: type = f32, BLOCK = 32>(x: global [f32], y: global mut [OUT])
        grid(1) block(BLOCK)
    {
        let v: OUT = x[thread.x] as OUT;
        y[thread.x] = v;
    }";
    let out_param = |m: &Module, name: &str| {
        let f = m.functions.iter().find(|f| f.name == name).expect(name);
        f.vars[f.params[1].0 as usize].ty.to_string()
    };
    let m = compile_with(lib, &[], &[]).unwrap();
    assert_eq!(specialization(&m, "copy"), ["OUT=f32", "BLOCK=32"]);
    assert_eq!(out_param(&m, "copy"), "global mut [f32]");
    // The identity cast is dropped; to f16 it is a conversion.
    assert!(!print_ir(&m).contains(" as f32"), "{}", print_ir(&m));
    let m = compile_with(lib, &[("OUT", "f16")], &[]).unwrap();
    assert_eq!(out_param(&m, "copy"), "global mut [f16]");
    assert!(print_ir(&m).contains(" as f16"), "{}", print_ir(&m));
    let text = "import \"lib.tile\";\nkernel copy_h = copy<OUT = bf16>;";
    let m = compile_with(text, &[("OUT", "f16")], &[("lib.tile", lib)]).unwrap();
    assert_eq!(specialization(&m, "copy_h")[0], "OUT=bf16");
    assert_eq!(out_param(&m, "copy_h"), "global mut [bf16]");
}

/// `OUTx2` is the vector of a type parameter: pairs of OUT stored at once.
#[test]
fn type_parameters_have_vectors() {
    let src = "kernel pairs<OUT: type = f32>(y: global mut [OUT]) grid(1) block(32) {
        bitcast<global mut [OUTx2]>(y + 2 * lane)[0] = f32x2(1.0, 2.0) as OUTx2;
    }";
    for (out, want) in [("f32", "global mut [f32x2]"), ("f16", "global mut [f16x2]")] {
        let m = compile_with(src, &[("OUT", out)], &[]).unwrap();
        assert!(print_ir(&m).contains(want), "{out}: {}", print_ir(&m));
    }
}

#[test]
fn type_parameter_mistakes_are_reported() {
    let err =
        |text: &str, defines: &[(&str, &str)]| compile_with(text, defines, &[]).expect_err(text);
    let kernel = |ct: &str, body: &str| {
        format!("kernel k<{ct}>(y: global mut [f32]) grid(1) block(32) {{ {body} }}")
    };
    let e = err(&kernel("OUT: type = 3", ""), &[]);
    assert!(e.contains("default must be a scalar type"), "{e}");
    let e = err(&kernel("OUT: type = f32", ""), &[("OUT", "f17")]);
    assert!(
        e.contains("invalid value `f17` for type parameter `OUT`"),
        "{e}"
    );
    let e = err(&kernel("f16: type = f32", ""), &[]);
    assert!(e.contains("cannot take the name of a scalar type"), "{e}");
    let e = err(&kernel("OUT: type = f32", "let a = OUT;"), &[]);
    assert!(e.contains("`OUT` is a type parameter, not a value"), "{e}");
    // A value parameter given a type, and a type used outside its kernel.
    let e = err(&kernel("K: u32 = 2", ""), &[("K", "f16")]);
    assert!(e.contains("invalid value `f16`"), "{e}");
    let text = format!(
        "{}\nkernel j(y: global mut [OUT]) grid(1) block(32) {{ }}",
        kernel("OUT: type = f32", "")
    );
    let e = err(&text, &[]);
    assert!(e.contains("unknown type `OUT`"), "{e}");
}

#[test]
fn kernel_instance_mistakes_are_reported() {
    let lib = "kernel scale<K: u32 = 2>(o: global mut [u32]) grid(1) block(32) { o[0] = K; }";
    let files = [("lib.tile", lib)];
    let err = |text: &str| compile_with(text, &[], &files).expect_err(text);
    let e = err("import \"lib.tile\";\nkernel s = nothing<K = 3>;");
    assert!(e.contains("`nothing` is not a kernel"), "{e}");
    let e = err("import \"lib.tile\";\nkernel s = scale<J = 3>;");
    assert!(
        e.contains("kernel `scale` has no compile-time parameter `J`"),
        "{e}"
    );
    let e = err("import \"lib.tile\";\nkernel s = scale<K = 1 + 2>;");
    assert!(e.contains("must be a literal"), "{e}");
    let e = err("import \"lib.tile\";\nkernel s = scale<K = 3>;\nkernel s = scale<K = 4>;");
    assert!(e.contains("defined more than once"), "{e}");
}

/// A kernel with one f16 tensor map `xm` and the statements `body`, for the TMA diagnostics.
fn tma_kernel(decl: &str, body: &str) -> String {
    format!(
        "kernel k(x: global [f16], y: global [u32], rows: u32, cols: u32) grid(1) block(32) {{
            {decl}
            shared dst: [16][64] f16;
            shared wrong: [16][64] u32;
            shared bars: [2] u64;
            {body}
        }}"
    )
}

#[test]
fn tensor_maps_and_mbarriers() {
    let good = "let xm = tensor_map(x, rows, cols, 16, 64);";
    let ok = tma_kernel(
        good,
        "if thread.x == 0 { mbarrier_init(bars[0], 1); }
         barrier();
         if thread.x == 0 {
             mbarrier_expect_tx(bars[0], 2048);
             tma_load(dst[0][0], xm, 0, 0, bars[0]);
         }
         mbarrier_wait(bars[0], 0);",
    );
    let m = compile_with(&ok, &[], &[]).unwrap_or_else(|e| panic!("{e}"));
    let FunctionKind::Kernel(launch) = &m.functions[0].kind else {
        panic!("a kernel")
    };
    let map = &launch.tensor_maps[0];
    assert_eq!(
        (map.box_rows, map.box_cols, map.elem),
        (16, 64, Scalar::F16)
    );
    assert!(map.swizzle_bytes() == 128 && map.box_bytes() == 2048);
    assert!(matches!(
        map.offset.kind,
        ExprKind::Const(ConstValue::Int(0))
    ));

    // A tensor further into the buffer, and 64-byte box rows: the 64-byte swizzle.
    let shifted = tma_kernel(
        "let xm = tensor_map(x + rows * 64, rows, cols, 16, 32);",
        "",
    );
    let m = compile_with(&shifted, &[], &[]).unwrap_or_else(|e| panic!("{e}"));
    let FunctionKind::Kernel(launch) = &m.functions[0].kind else {
        panic!("a kernel")
    };
    let map = &launch.tensor_maps[0];
    assert_eq!(map.swizzle_bytes(), 64);
    assert!(matches!(map.offset.kind, ExprKind::Binary(..)));

    let fails = |decl: &str, body: &str, message: &str| {
        let e = error(&tma_kernel(decl, body));
        assert!(e.contains(message), "expected `{message}` in:\n{e}");
    };
    let local = "let z = x; let xm = tensor_map(z, rows, cols, 16, 64);";
    fails(local, "", "must be a global view parameter");
    fails(
        "let xm = tensor_map(x, rows, cols, 300, 64);",
        "",
        "box rows must be 1 to 256",
    );
    // 50 f16 are 100 bytes.
    fails(
        "let xm = tensor_map(x, rows, cols, 16, 50);",
        "",
        "multiple of 16 bytes, found 100",
    );
    fails(
        "let xm = tensor_map(x + thread.x, rows, cols, 16, 64);",
        "",
        "offset, rows and columns may only use the kernel's scalar parameters",
    );
    let nested = "if rows > 0 { let xm = tensor_map(x, rows, cols, 16, 64); }";
    fails(nested, "", "at the top level of a kernel body");
    fails(
        good,
        "let v = xm;",
        "is a tensor map, which only `tma_load`, `tma_prefetch` and `tma_store` take",
    );
    fails(
        good,
        "tma_load(wrong[0][0], xm, 0, 0, bars[0]);",
        "a shared view of `f16` (the tensor map's elements)",
    );
    fails(
        good,
        "tma_load(dst[0][0], x, 0, 0, bars[0]);",
        "must be a tensor map",
    );
    fails(
        good,
        "mbarrier_init(dst[0][0], 1);",
        "a shared `u64` mbarrier",
    );
    // An L2 prefetch takes the map and the box's first element, nothing to land or wait for.
    let prefetch = tma_kernel(good, "if thread.x == 0 { tma_prefetch(xm, 16, 64); }");
    compile_with(&prefetch, &[], &[]).unwrap_or_else(|e| panic!("{e}"));
    fails(
        good,
        "tma_prefetch(x, 0, 0);",
        "the first argument of `tma_prefetch` must be a tensor map",
    );
    fails(
        good,
        "tma_prefetch(xm, 0, 1.5);",
        "the column of `tma_prefetch`",
    );
    fails(
        good,
        "tma_prefetch(xm, 0);",
        "`tma_prefetch` takes 3 arguments but 2 were given",
    );
}

/// `tma_kernel` with device functions `fns`, for tensor maps passed to functions.
fn tma_module(fns: &str, decl: &str, body: &str) -> String {
    format!("{fns}\n{}", tma_kernel(decl, body))
}

/// A kernel passes its map to a function, which passes it on to the one that loads the box.
const MAP_FNS: &str = "
fn load_box(dst: shared mut [f16], m: tensor_map<f16>, row: u32, bar: shared mut [u64]) {
    pass_on(dst, m, row, bar);
}
fn pass_on(dst: shared mut [f16], m: tensor_map<f16>, row: u32, bar: shared mut [u64]) {
    tma_load(dst, m, row, 0, bar);
}";

#[test]
fn tensor_maps_pass_to_functions() {
    let good = "let xm = tensor_map(x, rows, cols, 16, 64);";
    let m = compile_with(
        &tma_module(MAP_FNS, good, "load_box(dst, xm, 16, bars + 1);"),
        &[],
        &[],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let find = |name: &str| m.functions.iter().find(|f| f.name == name).unwrap();
    // The kernel passes its map #0; the functions pass and load their parameter.
    let mut kernel_body = find("k").body.clone();
    let mut passed = vec![];
    zinc_dsl::ir::for_each_expr_mut(&mut kernel_body, &mut |e| {
        if let ExprKind::Call(_, args) = &e.kind {
            passed.push(args[1].clone());
        }
    });
    assert!(
        matches!(&passed[..], [a] if a.kind == ExprKind::TensorMap(0) && a.ty == Type::TensorMap(Scalar::F16)),
        "{passed:?}"
    );
    let pass_on = find("pass_on");
    let param = pass_on.params[1];
    assert_eq!(
        pass_on.vars[param.0 as usize].ty,
        Type::TensorMap(Scalar::F16)
    );
    let StmtKind::Expr(load) = &pass_on.body[0].kind else {
        panic!("{:?}", pass_on.body)
    };
    let ExprKind::Builtin(zinc_dsl::ir::Builtin::TmaLoad, args) = &load.kind else {
        panic!("{load:?}")
    };
    assert_eq!(args[1].kind, ExprKind::Var(param));
    let out = print_ir(&m);
    for needle in ["m#1: tensor_map<f16>", "tma_load(dst#0, m#1, ", "load_box"] {
        assert!(out.contains(needle), "missing `{needle}` in:\n{out}");
    }
    assert!(out.contains(", @xm, 16u32, "), "{out}");

    let fails = |fns: &str, body: &str, message: &str| {
        let e = error(&tma_module(fns, good, body));
        assert!(e.contains(message), "expected `{message}` in:\n{e}");
    };
    let call = "load_box(dst, xm, 0, bars);";
    fails(
        &MAP_FNS.replace("m: tensor_map<f16>, row", "m: tensor_map<u16>, row"),
        call,
        "argument 2 (`m`) of `load_box` must be a `tensor_map<u16>`, found `tensor_map<f16>`",
    );
    fails(
        MAP_FNS,
        "load_box(dst, x, 0, bars);",
        "argument 2 (`m`) of `load_box` must be a tensor map",
    );
    fails(
        MAP_FNS,
        "load_box(dst, xm + 1, 0, bars);",
        "argument 2 (`m`) of `load_box` must be a tensor map",
    );
    // A map parameter is no value either, and a function can load only its own elements.
    fails(
        &MAP_FNS.replace("pass_on(dst, m, row, bar);", "let v = m;"),
        call,
        "`m` is a tensor map, which only `tma_load`, `tma_prefetch` and `tma_store` take",
    );
    fails(
        &MAP_FNS.replace("pass_on(dst, m, row, bar);", "m = m;"),
        call,
        "cannot assign to parameter `m`",
    );
    fails(
        &MAP_FNS.replace("tma_load(dst, m, ", "tma_load(dst, row, "),
        call,
        "the second argument of `tma_load` must be a tensor map",
    );
    fails(
        &MAP_FNS.replace(
            "pass_on(dst: shared mut [f16]",
            "pass_on(dst: shared mut [u16]",
        ),
        call,
        "argument 1 (`dst`) of `pass_on`",
    );
    fails(
        "fn f(dst: shared mut [u16], m: tensor_map<f16>, b: shared mut [u64]) { tma_load(dst, m, 0, 0, b); }",
        "",
        "a shared view of `f16` (the tensor map's elements)",
    );
    // Maps exist only as kernels' declarations and functions' parameters.
    let kernel_map = "kernel k(m: tensor_map<f16>) grid(1) block(32) {}";
    let e = error(kernel_map);
    assert!(
        e.contains("kernels take no tensor maps; declare one with `let m = tensor_map(...)`"),
        "{e}"
    );
    for (fns, message) in [
        (
            "fn f(m: tensor_map<f16>) { let v: tensor_map<f16> = m; }",
            "tensor maps are declared with `let m = tensor_map(...)` in kernels",
        ),
        (
            "fn f(m: tensor_map<f16>) -> tensor_map<f16> { return m; }",
            "tensor maps are declared with `let m = tensor_map(...)` in kernels",
        ),
        (
            "fn f(m: tensor_map<f16x2>) {}",
            "`tensor_map<f16x2>` is not a tensor map type: its element must be a scalar",
        ),
    ] {
        fails(fns, "", message);
    }
}

/// A kernel with an f32 output `y` (mutable), its map `ym` of 16 x 32 boxes, an f32 staging
/// tile and the statements `body`, for the TMA store diagnostics.
fn tma_store_kernel(fns: &str, body: &str) -> String {
    format!(
        "{fns}
        kernel k(x: global [f32], y: global mut [f32], rows: u32, cols: u32) grid(1) block(32) {{
            let xm = tensor_map(x, rows, cols, 16, 32);
            let ym = tensor_map(y, rows, cols, 16, 32);
            shared stage: [16][32] f32 swizzle;
            shared halves: [16][32] f16 swizzle;
            {body}
        }}"
    )
}

#[test]
fn tma_stores_and_their_bulk_groups() {
    let fns = "fn store(m: tensor_map<f32>, row: u32, src: shared [f32]) {
        tma_store(m, row, 0, src);
    }";
    let ok = tma_store_kernel(
        fns,
        "if thread.x == 0 {
             tma_store(ym, 16, 32, stage[0][0]);
             tma_store(ym, 0, 0, stage + 0);
             store(ym, 32, stage);
             tma_store_commit();
             tma_store_wait(1);
             tma_store_wait(0);
             tma_store_done(0);
             fence_proxy_async_global();
         }",
    );
    let m = compile_with(&ok, &[], &[]).unwrap_or_else(|e| panic!("{e}"));
    // The map of the `global mut` output is the kernel's second, over parameter `y`.
    let FunctionKind::Kernel(launch) = &m.functions.iter().find(|f| f.name == "k").unwrap().kind
    else {
        panic!("a kernel")
    };
    let ym = &launch.tensor_maps[1];
    assert_eq!(
        (ym.name.as_str(), ym.param.0, ym.elem),
        ("ym", 1, Scalar::F32)
    );
    assert_eq!(ym.swizzle_bytes(), 128);
    let out = print_ir(&m);
    for needle in [
        "tma_store(@ym, 16u32, 32u32, ",
        "tma_store(m#0, row#1, 0u32, src#2);",
        "tma_store_commit();",
        "tma_store_wait<1>();",
        "tma_store_wait<0>();",
        "tma_store_done<0>();",
        "fence_proxy_async_global();",
    ] {
        assert!(out.contains(needle), "missing `{needle}` in:\n{out}");
    }

    let fails = |body: &str, message: &str| {
        let e = error(&tma_store_kernel("", body));
        assert!(e.contains(message), "expected `{message}` in:\n{e}");
    };
    fails(
        "tma_store(ym, 0, 0);",
        "`tma_store` takes 4 arguments but 3 were given",
    );
    fails(
        "tma_store(y, 0, 0, stage[0][0]);",
        "the first argument of `tma_store` must be a tensor map",
    );
    fails(
        "tma_store(ym, 0, 0, y);",
        "`tma_store` needs a shared view of `f32` (the tensor map's elements), found `global mut [f32]`",
    );
    fails(
        "tma_store(ym, 0, 0, halves[0][0]);",
        "`tma_store` needs a shared view of `f32` (the tensor map's elements), found `shared mut [f16]`",
    );
    fails(
        "tma_store(ym, 0.5, 0, stage + 0);",
        "the row of `tma_store`",
    );
    fails(
        "tma_store(ym, 0, true, stage + 0);",
        "the column of `tma_store`",
    );
    // Stores go to outputs: the map's view must be `global mut`.
    fails(
        "tma_store(xm, 0, 0, stage + 0);",
        "`tma_store` writes through the tensor map over `x`, which is not a `global mut` view",
    );
    fails(
        "tma_store_commit(1);",
        "`tma_store_commit` takes 0 arguments but 1 was given",
    );
    fails(
        "tma_store_wait();",
        "`tma_store_wait` takes 1 argument but 0 were given",
    );
    fails(
        "tma_store_wait(rows);",
        "the number of bulk groups `tma_store_wait` leaves reading",
    );
    fails(
        "tma_store_wait(8);",
        "the number of bulk groups `tma_store_wait` leaves reading must be in 0..=7, found 8",
    );
    fails(
        "tma_store_done(rows);",
        "the number of bulk groups `tma_store_done` leaves unfinished",
    );
    fails(
        "fence_proxy_async_global(1);",
        "`fence_proxy_async_global` takes 0 arguments but 1 was given",
    );
    fails(
        "let v = tma_store_commit();",
        "this call has no value; it can only be used as a statement",
    );
    // In a function, the map parameter's type gives the element type.
    let e = error(&tma_store_kernel(
        "fn store(m: tensor_map<f16>, src: shared [f32]) { tma_store(m, 0, 0, src); }",
        "",
    ));
    assert!(
        e.contains("`tma_store` needs a shared view of `f16` (the tensor map's elements), found `shared [f32]`"),
        "{e}"
    );
    // `tma_store_add` takes the same operands, and elements the hardware adds.
    let adds = tma_store_kernel(
        "fn add(m: tensor_map<f32>, src: shared [f32]) { tma_store_add(m, 0, 0, src); }",
        "if thread.x == 0 { tma_store_add(ym, 16, 32, stage[0][0]); add(ym, stage); }",
    );
    let m = compile_with(&adds, &[], &[]).unwrap_or_else(|e| panic!("{e}"));
    assert!(print_ir(&m).contains("tma_store_add(@ym, 16u32, 32u32, "));
    fails(
        "tma_store_add(xm, 0, 0, stage + 0);",
        "`tma_store_add` writes through the tensor map over `x`, which is not a `global mut` view",
    );
    let e = error(&tma_store_kernel(
        "fn add(m: tensor_map<u16>, src: shared [u16]) { tma_store_add(m, 0, 0, src); }",
        "",
    ));
    assert!(
        e.contains("`tma_store_add` adds f32, f16, i32 or u32 elements, not u16"),
        "{e}"
    );
}

#[test]
fn setmaxnreg_takes_a_constant_register_count() {
    let kernel = |body: &str| {
        format!("kernel k(y: global mut [u32]) grid(1) block(256) {{ {body} y[thread.x] = 1; }}")
    };
    let m = compile_with(
        &kernel("setmaxnreg_dec(40); setmaxnreg_inc(232);"),
        &[],
        &[],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let printed = print_ir(&m);
    assert!(
        printed.contains("setmaxnreg_dec<40>") && printed.contains("setmaxnreg_inc<232>"),
        "{printed}"
    );
    for (bad, why) in [
        ("setmaxnreg_inc(236);", "not a multiple of 8"),
        ("setmaxnreg_inc(16);", "24 to 256"),
        ("setmaxnreg_dec(thread.x);", "24 to 256"),
    ] {
        let err = compile_with(&kernel(bad), &[], &[]).unwrap_err();
        assert!(err.contains(why), "{bad}: {err}");
    }
}
