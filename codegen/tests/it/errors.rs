use super::ir::*;
use super::kernels;
use zinc_codegen::{compile, CodegenError, Emit, Options};
use zinc_dsl::diag::Diagnostic;
use zinc_dsl::ir::*;

fn diagnostics(m: &Module, arch: &str) -> Vec<Diagnostic> {
    let opts = Options::new(arch, None).unwrap();
    match compile(m, &opts, Emit::Ptx) {
        Err(CodegenError::Diagnostics(d)) => d,
        other => panic!("expected diagnostics, got {other:?}"),
    }
}

/// A kernel whose body is `out[0] = e;` (or `e;` for void).
fn kernel_with(e: Expr) -> Module {
    let mut f = Func::default();
    let out = f.param("out", global(e.ty.clone(), true));
    let body = match e.ty {
        Type::Void => vec![st(StmtKind::Expr(e))],
        _ => vec![store(out, u32c(0), e)],
    };
    Module {
        functions: vec![f.kernel("k", [32, 1, 1], grid1(u32c(1)), body)],
    }
}

#[test]
fn options_errors() {
    let e = Options::new("sm_75", None).unwrap_err();
    assert!(matches!(e, CodegenError::UnknownArch { .. }));
    assert!(
        e.to_string()
            .starts_with("unknown arch `sm_75`; known: sm_80, sm_86, sm_89, sm_90, sm_90a"),
        "{e}"
    );
    let e = Options::new("sm_120", Some("7.8")).unwrap_err();
    assert!(matches!(e, CodegenError::PtxVersionTooOld { min: 87, .. }));
    assert_eq!(
        e.to_string(),
        "PTX 7.8 is too old for sm_120 (needs at least 8.7)"
    );
    let e = Options::new("sm_90", Some("9.2")).unwrap_err();
    assert!(
        matches!(e, CodegenError::PtxVersionUnsupported { given: 92, .. }),
        "{e}"
    );
    let mut opts = Options::new("sm_90", None).unwrap();
    opts.opt_level = 4;
    let e = compile(&kernels::vector_add(), &opts, Emit::Ptx).unwrap_err();
    assert_eq!(
        e.to_string(),
        "optimization level 4 is out of range (0 to 3)"
    );
}

#[test]
fn shared_memory_too_large() {
    let mut f = Func::default();
    let out = f.param("out", global(F32, true));
    let a = f.shared("a", F32, &[15_000], 40);
    let b = f.shared("b", F32, &[15_000], 80);
    let body = vec![store(
        out,
        u32c(0),
        bin(BinOp::Add, index(a, u32c(1)), index(b, u32c(2))),
    )];
    let m = Module {
        functions: vec![f.kernel("big", [32, 1, 1], grid1(u32c(1)), body)],
    };
    // 60000 bytes, then 60000 at the next 128-byte boundary: fine for sm_90 (232448), too much for sm_89 and sm_120 (101376).
    assert!(compile(&m, &Options::new("sm_90", None).unwrap(), Emit::Ptx).is_ok());
    for arch in ["sm_89", "sm_120"] {
        let d = diagnostics(&m, arch);
        assert_eq!(d.len(), 1);
        assert_eq!(
            d[0].message,
            format!("shared memory of kernel `big` is 120032 bytes, more than the 101376 bytes {arch} allows per block")
        );
        assert_eq!(
            d[0].span,
            Some(span(80)),
            "points at `b`, which crosses the limit"
        );
        assert_eq!(d[0].notes.len(), 2);
    }
}

#[test]
fn unknown_intrinsic_is_located() {
    let e = at(
        ex(
            ExprKind::Intrinsic {
                name: "llvm.nvvm.no.such.thing".into(),
                args: vec![],
            },
            U32,
        ),
        7,
    );
    let d = diagnostics(&kernel_with(e), "sm_90");
    assert_eq!(
        d[0].message,
        "LLVM 22 has no intrinsic `llvm.nvvm.no.such.thing`"
    );
    assert_eq!(d[0].span, Some(span(7)));
}

#[test]
fn intrinsic_with_wrong_types_is_located() {
    // shfl.sync.bfly.i32 takes (i32, i32, i32, i32); pass an f32 value.
    let args = vec![u32c(0xffff_ffff), float(1.0, F32), u32c(1), u32c(31)];
    let e = at(
        ex(
            ExprKind::Intrinsic {
                name: "llvm.nvvm.shfl.sync.bfly.i32".into(),
                args,
            },
            U32,
        ),
        9,
    );
    let d = diagnostics(&kernel_with(e), "sm_90");
    assert!(
        d[0].message
            .starts_with("LLVM rejects this call of `llvm.nvvm.shfl.sync.bfly.i32`"),
        "{:?}",
        d[0]
    );
    assert_eq!(d[0].span, Some(span(9)));
    // A misspelled overload suffix is caught too.
    let e = ex(
        ExprKind::Intrinsic {
            name: "llvm.nvvm.ex2.approx.f64".into(),
            args: vec![float(1.0, F32)],
        },
        F32,
    );
    let d = diagnostics(&kernel_with(e), "sm_90");
    assert!(
        d[0].message
            .starts_with("LLVM rejects this call of `llvm.nvvm.ex2.approx.f64`"),
        "{:?}",
        d[0]
    );
}

#[test]
fn f64_transcendentals_are_rejected() {
    let x = float(1.0, sc(Scalar::F64));
    let e = at(
        builtin(Builtin::Math(MathFn::Exp), vec![x], sc(Scalar::F64)),
        3,
    );
    let d = diagnostics(&kernel_with(e), "sm_89");
    assert!(
        d[0].message
            .starts_with("`exp` is not supported for f64 yet"),
        "{}",
        d[0].message
    );
    assert_eq!(d[0].span, Some(span(3)));
}

#[test]
fn bad_inline_asm_is_located() {
    let asm = |constraints: &str, args: Vec<Expr>, ty: Type| {
        at(
            ex(
                ExprKind::InlineAsm {
                    template: "mov.u32 $0, $1;".into(),
                    constraints: constraints.into(),
                    args,
                },
                ty,
            ),
            5,
        )
    };
    let cases = [
        (
            asm("=l,r", vec![u32c(1)], U32),
            "asm constraint `l` needs a 64-bit value or a view, not u32",
        ),
        (
            asm("=r,r", vec![], U32),
            "the constraints declare 1 input(s) but the asm has 0 argument(s)",
        ),
        (
            asm("r", vec![u32c(1)], U32),
            "asm<u32> has one result, so the constraints need exactly one `=` output, not 0",
        ),
        (
            asm("=r,x", vec![u32c(1)], U32),
            "unsupported asm constraint `x`; NVPTX takes b, c, h, r, l, f, d and n",
        ),
        (
            asm("=r", vec![], U32),
            "asm template uses `$1` but the constraints declare 1 operand(s)",
        ),
    ];
    for (e, message) in cases {
        let d = diagnostics(&kernel_with(e), "sm_90");
        assert_eq!(d[0].message, message);
        assert_eq!(d[0].span, Some(span(5)));
    }
}

#[test]
fn errors_in_several_functions_are_all_reported() {
    let bad = |name: &str| {
        let mut f = Func::default();
        let out = f.param("out", global(U32, true));
        let e = ex(
            ExprKind::Intrinsic {
                name: "llvm.bogus".into(),
                args: vec![],
            },
            U32,
        );
        f.kernel(
            name,
            [32, 1, 1],
            grid1(u32c(1)),
            vec![store(out, u32c(0), e)],
        )
    };
    let m = Module {
        functions: vec![bad("k1"), bad("k2")],
    };
    assert_eq!(diagnostics(&m, "sm_90").len(), 2);
}
