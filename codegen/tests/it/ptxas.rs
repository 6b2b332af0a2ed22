//! ptxas (from scripts/install-ptxas.sh, run here when missing) must assemble every kernel for
//! every user arch, at -O3 and -O0.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use super::{kernels, ARCHS};
use zinc_codegen::{compile, Emit, Options};

/// A CUDA tool (`ptxas`, `cuobjdump`, `nvdisasm`) from .tools/cuda/bin.
pub fn tool(name: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let bin = ptxas().parent().unwrap().to_path_buf();
    assert!(bin.starts_with(root));
    bin.join(name)
}

pub fn ptxas() -> &'static Path {
    static PTXAS: OnceLock<PathBuf> = OnceLock::new();
    PTXAS.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let path = root.join(".tools/cuda/bin/ptxas");
        // The installer puts all three tools there; run it when any is missing.
        if !["ptxas", "cuobjdump", "nvdisasm"]
            .iter()
            .all(|t| path.with_file_name(t).exists())
        {
            let status = Command::new(root.join("scripts/install-ptxas.sh"))
                .status()
                .expect("running scripts/install-ptxas.sh");
            assert!(
                status.success(),
                "scripts/install-ptxas.sh failed: cannot validate PTX"
            );
        }
        assert!(path.exists(), "ptxas still missing at {}", path.display());
        path
    })
}

/// Assembles `ptx` for `arch` with `ptxas -v` (ptxas must accept it) and disassembles the
/// cubin; (SASS, ptxas report). `name` keeps concurrent tests' files apart.
pub fn sass_of(ptx: &str, arch: &str, name: &str) -> (String, String) {
    let dir = std::env::temp_dir().join(format!("zinc-sass-{name}-{arch}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (ptx_file, cubin) = (dir.join("k.ptx"), dir.join("k.cubin"));
    std::fs::write(&ptx_file, ptx).unwrap();
    let out = Command::new(ptxas())
        .args([&format!("-arch={arch}"), "-v", "-o"])
        .arg(&cubin)
        .arg(&ptx_file)
        .output()
        .expect("running ptxas");
    let report = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "ptxas failed on {name} for {arch}:\n{report}"
    );
    let sass = Command::new(tool("cuobjdump"))
        .arg("-sass")
        .arg(&cubin)
        .output()
        .expect("running cuobjdump");
    assert!(
        sass.status.success(),
        "cuobjdump failed on {name} for {arch}"
    );
    std::fs::remove_dir_all(&dir).ok();
    (String::from_utf8_lossy(&sass.stdout).into_owned(), report)
}

fn assemble(name: &str, arch: &str, opt_level: u8) {
    let mut opts = Options::new(arch, None).unwrap();
    opts.opt_level = opt_level;
    let out = compile(
        &kernels::all()
            .into_iter()
            .find(|(n, _)| *n == name)
            .unwrap()
            .1,
        &opts,
        Emit::Ptx,
    )
    .unwrap_or_else(|e| panic!("{name} {arch} O{opt_level}: {e}"));
    let dir = std::env::temp_dir().join(format!("zinc-codegen-ptxas-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{name}_{arch}_O{opt_level}.ptx"));
    std::fs::write(&file, &out.text).unwrap();
    let result = Command::new(ptxas())
        .args([&format!("-arch={arch}"), "-o", "/dev/null"])
        .arg(&file)
        .output()
        .expect("running ptxas");
    assert!(
        result.status.success(),
        "ptxas rejected {name} for {arch} at O{opt_level}:\n{}\n{}",
        String::from_utf8_lossy(&result.stderr),
        out.text
    );
    std::fs::remove_file(&file).ok();
}

#[test]
fn ptxas_accepts_every_kernel() {
    for (name, _) in kernels::all() {
        for arch in ARCHS {
            assemble(name, arch, 3);
        }
    }
}

#[test]
fn ptxas_accepts_unoptimized_code() {
    for (name, _) in kernels::all() {
        assemble(name, "sm_90", 0);
    }
}
