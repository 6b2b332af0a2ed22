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

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `zincc run-cpu` on `text` written to DIR/NAME, with `args` after the file.
fn run_cpu_source(dir: &Path, name: &str, text: &str, args: &[&str]) -> Output {
    let src = dir.join(name);
    std::fs::write(&src, text).unwrap();
    let mut all = vec!["run-cpu", src.to_str().unwrap()];
    all.extend_from_slice(args);
    zincc(&all)
}

fn vector_add_path() -> String {
    examples_dir()
        .join("vector_add.tile")
        .to_string_lossy()
        .into_owned()
}

#[test]
fn run_cpu_computes_vector_add_by_hand() {
    let src = vector_add_path();
    let out = zincc(&[
        "run-cpu",
        &src,
        "-D",
        "BLOCK=32",
        "--arg",
        "a=[1.5, -2, 3, 0.25, 8]",
        "--arg",
        "b=range:5",
        "--arg",
        "c=zeros:5",
        "--arg",
        "n=5",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    // a + [0, 1, 2, 3, 4]
    assert!(
        text.contains("c[0..5] of f32[5]: [1.5, -1, 5, 3.25, 12]"),
        "{text}"
    );
    assert!(
        text.contains("grid [1, 1, 1] x block [32, 1, 1] = 32 threads"),
        "{text}"
    );
}

#[test]
fn run_cpu_saves_random_inputs_and_the_result() {
    let dir = temp_dir("run-save");
    let file = |name: &str| dir.join(name).to_string_lossy().into_owned();
    let saves = [
        format!("a={}", file("a.bin")),
        format!("b={}", file("b.bin")),
        format!("c={}", file("c.bin")),
    ];
    let src = vector_add_path();
    let mut args = vec![
        "run-cpu",
        &src,
        "-D",
        "BLOCK=128",
        "-a",
        "a=rand:1000",
        "-a",
        "b=rand:1000",
        "-a",
        "c=zeros:1000",
        "-a",
        "n=1000",
        "--print",
        "c:998..",
    ];
    for s in &saves {
        args.extend(["--save", s.as_str()]);
    }
    let out = zincc(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("grid [8, 1, 1]"), "{}", stdout(&out));
    let read = |name: &str| -> Vec<f32> {
        std::fs::read(dir.join(name))
            .unwrap()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect()
    };
    let (a, b, c) = (read("a.bin"), read("b.bin"), read("c.bin"));
    assert_eq!((a.len(), b.len(), c.len()), (1000, 1000, 1000));
    assert!(
        a.iter().chain(&b).all(|&x| x != 0.0),
        "rand: values are non-zero"
    );
    assert_ne!(a, b, "each buffer draws its own values");
    for i in 0..1000 {
        assert_eq!(c[i], a[i] + b[i], "element {i}");
    }
    let last = format!("c[998..1000] of f32[1000]: [{}, {}]", c[998], c[999]);
    assert!(stdout(&out).contains(&last), "{}", stdout(&out));

    // The file: spec reads saved bytes back; the same seed draws the same values.
    let a_file = format!("a=file:{}", file("a.bin"));
    let again = zincc(&[
        "run-cpu",
        &src,
        "-a",
        &a_file,
        "-a",
        "b=rand:1000",
        "-a",
        "c=zeros:1000",
        "-a",
        "n=1000",
        "--print",
        "c:998..",
    ]);
    assert!(again.status.success(), "{}", stderr(&again));
    assert!(stdout(&again).contains(&last), "{}", stdout(&again));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn run_cpu_grid_override_launches_only_those_blocks() {
    let src = vector_add_path();
    let out = zincc(&[
        "run-cpu",
        &src,
        "-D",
        "BLOCK=32",
        "-a",
        "a=range:100",
        "-a",
        "b=range:100",
        "-a",
        "c=zeros:100",
        "-a",
        "n=100",
        "--grid",
        "2",
        "--print",
        "c:62..66",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("c[62..66] of f32[100]: [124, 126, 0, 0]"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn run_cpu_reports_out_of_bounds_at_its_line() {
    let dir = temp_dir("run-oob");
    // The guard is `<=`: thread n reads one past the end.
    let text =
        "kernel copy(x: global [f32], y: global mut [f32], n: u32) grid(1) block(64) {\n    \
                if thread.x <= n {\n        y[thread.x] = x[thread.x];\n    }\n}\n";
    let out = run_cpu_source(
        &dir,
        "oob.tile",
        text,
        &["-a", "x=rand:10", "-a", "y=zeros:64", "-a", "n=10"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("out-of-bounds read of global buffer `x` at element 10 (length 10)"),
        "{err}"
    );
    assert!(err.contains("oob.tile:3:23"), "{err}");
    assert!(
        err.contains("3 |         y[thread.x] = x[thread.x];"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn run_cpu_reports_races_divergent_barriers_and_early_cp_async_reads() {
    let dir = temp_dir("run-race");
    let cases = [
        (
            "race.tile",
            "kernel rev(x: global [f32], y: global mut [f32]) grid(1) block(64) {\n    \
             shared s: [64] f32;\n    s[thread.x] = x[thread.x];\n    \
             y[thread.x] = s[63 - thread.x];\n}\n",
            [
                "data race on shared array `s`",
                "race.tile:4:19",
                "race.tile:3:5",
            ],
        ),
        (
            "diverge.tile",
            "kernel rev(x: global [f32], y: global mut [f32]) grid(1) block(64) {\n    \
             shared s: [64] f32;\n    s[thread.x] = x[thread.x];\n    \
             if thread.x < 16 {\n        barrier();\n    }\n    \
             y[thread.x] = s[63 - thread.x];\n}\n",
            [
                "barrier in divergent code",
                "diverge.tile:5:9",
                "16 of the 64",
            ],
        ),
        (
            "early.tile",
            "kernel rev(x: global [f32], y: global mut [f32]) grid(1) block(64) {\n    \
             shared s: [64] f32;\n    cp_async(s + thread.x, x + thread.x, 4, true);\n    \
             y[thread.x] = s[thread.x];\n}\n",
            ["still in flight", "early.tile:4:19", "cp_async_wait"],
        ),
    ];
    for (name, text, wants) in cases {
        let out = run_cpu_source(&dir, name, text, &["-a", "x=rand:64", "-a", "y=zeros:64"]);
        assert_eq!(out.status.code(), Some(1), "{name}: {}", stderr(&out));
        for want in wants {
            assert!(stderr(&out).contains(want), "{name}: {}", stderr(&out));
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn run_cpu_argument_mistakes_are_usage_errors_naming_the_parameter() {
    let src = vector_add_path();
    let run = |args: &[&str]| {
        let mut all = vec!["run-cpu", src.as_str()];
        all.extend_from_slice(args);
        let out = zincc(&all);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        stderr(&out)
    };
    let complete = ["-a", "a=rand:8", "-a", "b=rand:8", "-a", "c=zeros:8"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        complete.iter().chain(extra).copied().collect()
    };
    let err = run(&complete);
    assert!(err.contains("missing --arg for `n: u32`"), "{err}");
    let err = run(&with(&["-a", "n=8", "-a", "m=8"]));
    assert!(
        err.contains("no parameter `m`") && err.contains("c: global mut [f32]"),
        "{err}"
    );
    let err = run(&with(&["-a", "n=-1"]));
    assert!(
        err.contains("`n` is `u32`") && err.contains("does not fit in u32"),
        "{err}"
    );
    let err = run(&with(&["-a", "n=8", "-a", "n=9"]));
    assert!(err.contains("`n` is given twice"), "{err}");
    let err = run(&[
        "-a",
        "a=8",
        "-a",
        "b=rand:8",
        "-a",
        "c=zeros:8",
        "-a",
        "n=8",
    ]);
    assert!(
        err.contains("`a` is `global [f32]`") && err.contains("rand:LEN"),
        "{err}"
    );
    let err = run(&with(&["-a", "n=8", "--print", "n"]));
    assert!(err.contains("not a buffer"), "{err}");
    let err = run(&with(&["-a", "n=8", "--grid", "0"]));
    assert!(err.contains("--grid"), "{err}");

    let kernels = examples_dir().join("tile_layouts.tile");
    let out = zincc(&["run-cpu", kernels.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("pick one with --kernel"),
        "{}",
        stderr(&out)
    );
}
