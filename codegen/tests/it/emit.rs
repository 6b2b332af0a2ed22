use super::kernels;
use super::{build, ptx, ARCHS};
use zinc_codegen::{compile, Emit, Options, ParamKind};
use zinc_dsl::ir::{Scalar, Space, Type};

#[test]
fn vector_add_ptx() {
    for arch in ARCHS {
        let p = ptx(&kernels::vector_add(), arch);
        let version = if arch == "sm_120" {
            ".version 8.7"
        } else {
            ".version 7.8"
        };
        for fact in [
            version,
            &format!(".target {arch}"),
            ".visible .entry vector_add(",
            ".maxntid 256, 1, 1",
            "ld.global",
            "st.global",
            "add.rn.f32",
        ] {
            assert!(p.contains(fact), "{arch}: no `{fact}` in\n{p}");
        }
    }
}

#[test]
fn kernel_llvm_ir() {
    let ir = build(&kernels::vector_add(), "sm_90", Emit::LlvmIr).text;
    assert!(
        ir.contains("define ptx_kernel void @vector_add(ptr addrspace(1)"),
        "{ir}"
    );
    assert!(ir.contains("\"nvvm.maxntid\"=\"256,1,1\""), "{ir}");
    assert!(
        ir.contains("target triple = \"nvptx64-nvidia-cuda\""),
        "{ir}"
    );
    assert!(
        !ir.contains("alloca"),
        "mem2reg should remove the stack slots:\n{ir}"
    );
}

#[test]
fn vector_loads() {
    for arch in ARCHS {
        let p = ptx(&kernels::vec4_scale(), arch);
        // 16-byte accesses: v4.b32, or v2.b64 where sm_100+ computes on f32x2 pairs.
        assert!(
            p.contains("ld.global.v4.b32") || p.contains("ld.global.v2.b64"),
            "{arch}:\n{p}"
        );
        assert!(
            p.contains("st.global.v4.b32") || p.contains("st.global.v2.b64"),
            "{arch}:\n{p}"
        );
    }
}

/// A view's bitcast to a wider element keeps the address: a pair of f32 goes out as one 8-byte
/// store, to global and to shared memory.
#[test]
fn view_bitcasts_make_wide_accesses() {
    let src = "
kernel wide(x: global [f32], y: global mut [f32]) grid(1) block(32) {
    shared s: [64] f32;
    bitcast<shared mut [f32x2]>(s + 2 * lane)[0] = bitcast<global [f32x2]>(x + 2 * lane)[0];
    barrier();
    bitcast<global mut [f32x2]>(y + 2 * lane)[0] = f32x2(s[lane], s[lane + 32]);
}";
    let c = zinc_dsl::compile_source("wide.tile", src, &[], &|_| None)
        .unwrap_or_else(|f| panic!("{}", f.render()));
    for arch in ARCHS {
        let p = ptx(&c.module, arch);
        // Two 32-bit lanes (LLVM writes them as b32), or one b64.
        for op in ["ld.global", "st.shared", "st.global"] {
            let wide = [".v2.b32", ".v2.f32", ".b64"].map(|w| format!("{op}{w}"));
            assert!(
                wide.iter().any(|w| p.contains(w.as_str())),
                "{arch}: no 8-byte `{op}` in\n{p}"
            );
        }
    }
}

#[test]
fn reduce_uses_shuffles_shared_barriers_atomics() {
    for arch in ARCHS {
        let p = ptx(&kernels::reduce(), arch);
        for fact in [
            "shfl.sync.bfly.b32",
            "bar.sync 0",
            ".shared .align 16 .b8 reduce_partial[32]",
            "st.shared",
            "atom.global.add.f32",
            "fence.sc.gpu",
            "fence.sc.cta",
            "%laneid",
        ] {
            assert!(p.contains(fact), "{arch}: no `{fact}` in\n{p}");
        }
        // Device functions are internal and inlined away.
        assert!(!p.contains(".func"), "{arch}:\n{p}");
    }
}

#[test]
fn math_lowering() {
    let p = ptx(&kernels::math(), "sm_90");
    for fact in [
        "ex2.approx.ftz.f32",
        "lg2.approx.f32",
        "rsqrt.approx.f32",
        "rcp.approx.ftz.f32",
        "sqrt.rn.f32",
        "tanh.approx.f32",
        "sin.approx.f32",
        "cos.approx.f32",
        "sqrt.rn.f64",
        "rsqrt.approx.f64",
        "cvt.rmi.f32.f32",
        "cvt.rpi.f32.f32",
        "abs.s32",
        "max.f32",
        "fma.rn.f32",
        "fma.rn.f16",
        "cvt.f32.bf16",
    ] {
        assert!(p.contains(fact), "no `{fact}` in\n{p}");
    }
}

#[test]
fn warp_ops_lowering() {
    let p = ptx(&kernels::warp_ops(), "sm_89");
    for fact in [
        "shfl.sync.down.b32",
        "shfl.sync.up.b32",
        "shfl.sync.idx.b32",
        "shfl.sync.bfly.b32",
        "vote.sync.all.pred",
        "vote.sync.any.pred",
        "vote.sync.ballot.b32",
        "atom.global.add.u32",
        "atom.global.max.s32",
        "atom.global.min.u32",
        "atom.global.or.b64",
        "atom.shared.xor.b32",
        "atom.global.exch.b32",
        "atom.global.add.f64",
        "atom.global.add.noftz.f16",
        "cas.b32",
        "cas.b64",
        "atom.shared",
    ] {
        assert!(p.contains(fact), "no `{fact}` in\n{p}");
    }
    // Device scope: no system-scope atomics.
    assert!(!p.contains(".sys."), "{p}");
}

#[test]
fn escape_hatches_and_2d_blocks() {
    let p = ptx(&kernels::tile2d(), "sm_90");
    for fact in [
        "%clock",
        "mov.u32 %r",
        "%laneid",
        "membar.cta",
        "%ntid.x",
        ".maxntid 16, 16, 1",
        "add.u32",
    ] {
        assert!(p.contains(fact), "no `{fact}` in\n{p}");
    }
}

#[test]
fn large_shared_memory_becomes_dynamic() {
    for arch in ARCHS {
        let out = build(&kernels::big_shared(), arch, Emit::Ptx);
        assert!(
            out.text
                .contains(".extern .shared .align 128 .b8 zinc_dynamic_shared[]"),
            "{}",
            out.text
        );
        let k = &out.kernels[0];
        assert_eq!((k.static_shared_bytes, k.dynamic_shared_bytes), (0, 65536));
    }
    let k = &build(&kernels::reduce(), "sm_90", Emit::Ptx).kernels[0];
    assert_eq!((k.static_shared_bytes, k.dynamic_shared_bytes), (32, 0));
}

#[test]
fn manifest() {
    let out = build(&kernels::vector_add(), "sm_90", Emit::Ptx);
    assert_eq!(out.kernels.len(), 1);
    let k = &out.kernels[0];
    assert_eq!(k.name, "vector_add");
    assert_eq!(k.block, [256, 1, 1]);
    assert_eq!(
        k.grid,
        ["((n + 255) / 256)".to_string(), "1".into(), "1".into()]
    );
    assert_eq!(
        k.params[2].kind,
        ParamKind::View {
            space: Space::Global,
            elem: Type::Scalar(Scalar::F32),
            mutable: true
        }
    );
    assert_eq!(k.params[3].kind, ParamKind::Scalar(Scalar::U32));
    let json = k.to_json();
    let expected = r#"{
  "name": "vector_add",
  "params": [
    {"name": "a", "kind": "view", "space": "global", "elem": "f32", "mutable": false},
    {"name": "b", "kind": "view", "space": "global", "elem": "f32", "mutable": false},
    {"name": "c", "kind": "view", "space": "global", "elem": "f32", "mutable": true},
    {"name": "n", "kind": "scalar", "type": "u32"}
  ],
  "block": [256, 1, 1],
  "grid": ["((n + 255) / 256)", "1", "1"],
  "static_shared_bytes": 0,
  "dynamic_shared_bytes": 0,
  "specialization": [["BLOCK", "256"]],
  "tensor_maps": []
}
"#;
    assert_eq!(json, expected);
    let k = &build(&kernels::tile2d(), "sm_90", Emit::Ptx).kernels[0];
    assert_eq!(
        k.grid,
        ["(n / 16)".to_string(), "max(n, 1)".into(), "1".into()]
    );
}

#[test]
fn every_opt_level_and_ptx_version() {
    for level in 0..=3 {
        let mut opts = Options::new("sm_90", Some("9.0")).unwrap();
        opts.opt_level = level;
        let out = compile(&kernels::reduce(), &opts, Emit::Ptx).unwrap();
        assert!(out.text.contains(".version 9.0"), "O{level}");
    }
}

#[test]
fn every_known_arch_at_its_min_and_default_ptx() {
    for arch in zinc_dsl::target::ARCHS {
        for ptx in [arch.min_ptx, arch.default_ptx] {
            let version = format!("{}.{}", ptx / 10, ptx % 10);
            let opts = Options::new(arch.name, Some(&version)).unwrap();
            let out = compile(&kernels::reduce(), &opts, Emit::Ptx).unwrap();
            assert!(
                out.text.contains(&format!(".version {version}")),
                "{}",
                arch.name
            );
            assert!(
                out.text.contains(&format!(".target {}", arch.name)),
                "{}",
                arch.name
            );
        }
    }
}
