//! Every example compiles, and its IR matches the reviewed snapshot.

use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Compile `examples/NAME` with file names relative to the workspace, so snapshots are stable.
fn compile(name: &str) -> zinc_dsl::Compilation {
    let root = workspace();
    let load = |path: &str| std::fs::read_to_string(root.join(path)).ok();
    let path = format!("examples/{name}");
    let text = load(&path).expect("example exists");
    match zinc_dsl::compile_source(&path, &text, &[], &load) {
        Ok(c) => c,
        Err(f) => panic!("{name} failed:\n{}", f.render()),
    }
}

#[test]
fn examples_match_snapshots() {
    let mut names: Vec<String> = std::fs::read_dir(workspace().join("examples"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".tile"))
        .collect();
    names.sort();
    assert!(names.len() >= 4);
    for name in names {
        let ir = zinc_dsl::print_ir(&compile(&name).module);
        insta::assert_snapshot!(name.trim_end_matches(".tile"), ir);
    }
}

#[test]
fn examples_compile_from_disk() {
    for name in ["vector_add", "softmax", "rmsnorm", "matmul_simt"] {
        let path = workspace().join("examples").join(format!("{name}.tile"));
        if let Err(f) = zinc_dsl::compile_file(&path, &[]) {
            panic!("{name}:\n{}", f.render());
        }
    }
}
