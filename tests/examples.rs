//! Every example, for every user arch (sm_90a alone for examples on its wgmma): the typed IR and
//! the PTX are snapshotted, and ptxas must assemble the PTX. ptxas comes from
//! scripts/install-ptxas.sh, which this test runs when needed.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

const ARCHS: [&str; 3] = ["sm_89", "sm_90", "sm_120"];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Paths relative to the package root (the tests' working directory), so that snapshots hold the
/// same file names in every checkout.
fn examples() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("examples"))
        .expect("examples/ exists")
        .map(|e| Path::new("examples").join(e.unwrap().file_name()))
        .filter(|p| p.extension().is_some_and(|e| e == "tile"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 4,
        "expected the four examples, found {files:?}"
    );
    files
}

fn ptxas() -> &'static Path {
    static PTXAS: OnceLock<PathBuf> = OnceLock::new();
    PTXAS.get_or_init(|| {
        let path = root().join(".tools/cuda/bin/ptxas");
        if !path.exists() {
            let status = Command::new(root().join("scripts/install-ptxas.sh"))
                .status()
                .expect("running scripts/install-ptxas.sh");
            assert!(status.success(), "scripts/install-ptxas.sh failed");
        }
        assert!(path.exists(), "ptxas still missing at {}", path.display());
        path
    })
}

fn stem(path: &Path) -> String {
    path.file_stem().unwrap().to_string_lossy().into_owned()
}

#[test]
fn ir_snapshots() {
    for file in examples() {
        let c = zinc_dsl::compile_file(&file, &[]).unwrap_or_else(|f| panic!("{}", f.render()));
        insta::assert_snapshot!(format!("ir_{}", stem(&file)), zinc_dsl::print_ir(&c.module));
    }
}

#[test]
fn ptx_snapshots_and_ptxas() {
    let dir = std::env::temp_dir().join(format!("zinc-examples-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for file in examples() {
        let c = zinc_dsl::compile_file(&file, &[]).unwrap_or_else(|f| panic!("{}", f.render()));
        let wgmma = c
            .module
            .functions
            .iter()
            .any(|f| zinc_dsl::ir::needs_sm90a(&c.module, f));
        let archs: &[&str] = if wgmma { &["sm_90a"] } else { &ARCHS };
        for &arch in archs {
            let opts = zinc_codegen::Options::new(arch, None).unwrap();
            let out = zinc_codegen::compile(&c.module, &opts, zinc_codegen::Emit::Ptx)
                .unwrap_or_else(|e| panic!("{}: {arch}: {e}", file.display()));
            // The header names the LLVM version; keep snapshots stable across LLVM patch releases.
            let body: String = out
                .text
                .lines()
                .filter(|l| !l.starts_with("//"))
                .collect::<Vec<_>>()
                .join("\n");
            insta::assert_snapshot!(format!("ptx_{}_{arch}", stem(&file)), body);
            let ptx = dir.join(format!("{}_{arch}.ptx", stem(&file)));
            std::fs::write(&ptx, &out.text).unwrap();
            let result = Command::new(ptxas())
                .args([&format!("-arch={arch}"), "-o", "/dev/null"])
                .arg(&ptx)
                .output()
                .expect("running ptxas");
            assert!(
                result.status.success(),
                "ptxas rejected {} for {arch}:\n{}",
                file.display(),
                String::from_utf8_lossy(&result.stderr)
            );
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}
