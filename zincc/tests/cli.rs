//! The compiler's command line: outputs, exit codes, and the diagnostics that need an arch.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn zincc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_zincc"))
        .args(args)
        .output()
        .expect("running zincc")
}

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("zincc-cli-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn build_writes_one_ptx_and_manifest_per_kernel() {
    let out_dir = temp_dir("build");
    let ex = examples_dir();
    let files: Vec<String> = ["vector_add", "rmsnorm", "softmax", "matmul_simt"]
        .iter()
        .map(|n| ex.join(format!("{n}.tile")).to_string_lossy().into_owned())
        .collect();
    let mut args = vec!["build", "--arch", "sm_120", "-o", out_dir.to_str().unwrap()];
    args.extend(files.iter().map(String::as_str));
    let out = zincc(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    for kernel in ["vector_add", "rmsnorm_f16", "softmax_rows", "matmul_simt"] {
        let ptx = std::fs::read_to_string(out_dir.join(format!("{kernel}.ptx"))).unwrap();
        assert!(
            ptx.contains(&format!(".entry {kernel}")),
            "{kernel}.ptx lacks its entry"
        );
        assert!(
            ptx.contains(".target sm_120"),
            "{kernel}.ptx is not for sm_120"
        );
        let manifest = std::fs::read_to_string(out_dir.join(format!("{kernel}.json"))).unwrap();
        assert!(manifest.contains(kernel));
    }
    std::fs::remove_dir_all(&out_dir).ok();
}

#[test]
fn several_archs_go_to_subfolders_and_defines_specialize() {
    let out_dir = temp_dir("archs");
    let src = examples_dir().join("vector_add.tile");
    let out = zincc(&[
        "build",
        "--arch",
        "sm_89,sm_90",
        "-D",
        "BLOCK=128",
        "-o",
        out_dir.to_str().unwrap(),
        src.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    for arch in ["sm_89", "sm_90"] {
        let ptx = std::fs::read_to_string(out_dir.join(arch).join("vector_add.ptx")).unwrap();
        assert!(ptx.contains(&format!(".target {arch}")));
        assert!(
            ptx.contains(".maxntid 128"),
            "BLOCK=128 should set the launch bound:\n{ptx}"
        );
    }
    std::fs::remove_dir_all(&out_dir).ok();
}

#[test]
fn unknown_arch_is_a_usage_error() {
    let src = examples_dir().join("vector_add.tile");
    let out = zincc(&[
        "build",
        "--arch",
        "sm_75",
        "-o",
        "/nonexistent",
        src.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("sm_75") && err.contains("sm_120"),
        "message should name the arch and list known ones: {err}"
    );
}

#[test]
fn ptx_version_too_old_is_a_usage_error() {
    let src = examples_dir().join("vector_add.tile");
    let out = zincc(&[
        "build",
        "--arch",
        "sm_120",
        "--ptx-version",
        "7.8",
        "-o",
        "/nonexistent",
        src.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("7.8") && err.contains("8.7"),
        "message should give both versions: {err}"
    );
}

#[test]
fn shared_memory_too_large_for_the_arch_points_at_the_declaration() {
    let dir = temp_dir("smem");
    let src = dir.join("big.tile");
    // 60000 f32 = 240000 bytes: over the 227 KiB an sm_90 block may have.
    std::fs::write(
        &src,
        "kernel big(y: global mut [f32]) grid(1) block(32) {\n    shared buf: [60000] f32;\n    buf[thread.x] = 1.0;\n    barrier();\n    y[thread.x] = buf[thread.x];\n}\n",
    )
    .unwrap();
    let out = zincc(&[
        "build",
        "--arch",
        "sm_90",
        "-o",
        dir.to_str().unwrap(),
        src.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("shared memory"), "{err}");
    assert!(
        err.contains("big.tile:2:"),
        "should point at the shared declaration: {err}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn program_errors_exit_1_with_a_located_message() {
    let dir = temp_dir("err");
    let src = dir.join("bad.tile");
    std::fs::write(
        &src,
        "kernel k(n: u32) grid(1) block(32) {\n    let x = nope + 1;\n}\n",
    )
    .unwrap();
    let out = zincc(&["check", src.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("bad.tile:2:13") && err.contains("nope"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn targets_lists_every_arch() {
    let out = zincc(&["targets"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for arch in [
        "sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_120", "sm_120a",
    ] {
        assert!(text.contains(arch), "{arch} missing from:\n{text}");
    }
}

#[test]
fn an_intrinsic_the_arch_lacks_is_an_error_not_an_abort() {
    let dir = temp_dir("crash");
    let src = dir.join("cluster.tile");
    // Cluster barriers exist from sm_90 on; LLVM only finds out in instruction selection.
    std::fs::write(
        &src,
        "kernel k(y: global mut [u32]) grid(1) block(32) {\n    intrinsic<void>(\"llvm.nvvm.barrier.cluster.arrive\");\n    y[thread.x] = 1u32;\n}\n",
    )
    .unwrap();
    let out = zincc(&[
        "build",
        "--arch",
        "sm_89",
        "-o",
        dir.to_str().unwrap(),
        src.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("kernel `k` for sm_89"),
        "{}",
        stderr(&out)
    );
    let out = zincc(&[
        "build",
        "--arch",
        "sm_90",
        "-o",
        dir.to_str().unwrap(),
        src.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "sm_90 has cluster barriers: {}",
        stderr(&out)
    );
    std::fs::remove_dir_all(&dir).ok();
}
