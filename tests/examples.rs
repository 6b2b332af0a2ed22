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

/// Assembles `ptx` for `arch` into `out`; ptxas must accept it.
fn assemble(ptx: &Path, arch: &str, out: &Path) {
    let result = Command::new(ptxas())
        .args([&format!("-arch={arch}"), "-o"])
        .arg(out)
        .arg(ptx)
        .output()
        .expect("running ptxas");
    assert!(
        result.status.success(),
        "ptxas rejected {} for {arch}:\n{}",
        ptx.display(),
        String::from_utf8_lossy(&result.stderr)
    );
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
            assemble(&ptx, arch, Path::new("/dev/null"));
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// wgmma_tile_a_shared (wgmma_tile with A in shared memory): its MMAs take A's shared-memory
/// descriptor, and in the SASS its HGMMAs read both operands through descriptors, where
/// wgmma_tile's read A from registers.
#[test]
fn wgmma_tile_a_shared_takes_a_from_shared_memory() {
    let c = zinc_dsl::compile_file(&root().join("examples/wgmma_tile.tile"), &[])
        .unwrap_or_else(|f| panic!("{}", f.render()));
    let opts = zinc_codegen::Options::new("sm_90a", None).unwrap();
    let out = zinc_codegen::compile(&c.module, &opts, zinc_codegen::Emit::Ptx).unwrap();
    assert_eq!(
        out.text
            .matches("zinc_desc_a, zinc_desc, 1, 1, 1, 0, 0;")
            .count(),
        4,
        "{}",
        out.text
    );
    let dir = std::env::temp_dir().join(format!("zinc-wgmma-ss-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (ptx, cubin) = (dir.join("ss.ptx"), dir.join("ss.cubin"));
    std::fs::write(&ptx, &out.text).unwrap();
    assemble(&ptx, "sm_90a", &cubin);
    let sass = Command::new(ptxas().with_file_name("cuobjdump"))
        .arg("-sass")
        .arg(&cubin)
        .output()
        .expect("running cuobjdump");
    std::fs::remove_dir_all(&dir).ok();
    let sass = String::from_utf8_lossy(&sass.stdout);
    // `HGMMA.64x64x16.F32 Rd, A, ...`: A is a register or a descriptor.
    let a_operands = |kernel: &str| -> Vec<String> {
        sass.split("Function : ")
            .find(|f| f.starts_with(&format!("{kernel}\n")))
            .unwrap_or_else(|| panic!("no {kernel} in:\n{sass}"))
            .lines()
            .filter_map(|l| l.split("HGMMA").nth(1))
            .map(|ops| ops.split(", ").nth(1).unwrap_or("").to_string())
            .collect()
    };
    let shared = a_operands("wgmma_tile_a_shared");
    assert_eq!(shared.len(), 4, "{sass}");
    assert!(shared.iter().all(|a| a.starts_with("gdesc[")), "{shared:?}");
    let registers = a_operands("wgmma_tile");
    assert_eq!(registers.len(), 4, "{sass}");
    assert!(
        registers.iter().all(|a| a.starts_with('R')),
        "{registers:?}"
    );
}
