//! Every program in tests/diagnostics/ is malformed: compiling it must fail with the message its
//! header names, at the location it names. Header lines (at the top of the file):
//!
//! ```text
//! // expect: <substring of the first diagnostic, rendered>
//! // at: LINE:COL          (optional; where the first diagnostic points, in whatever file)
//! // define: NAME=VALUE    (optional, repeatable; passed like `zincc -D`)
//! ```

use std::path::{Path, PathBuf};

struct Expectation {
    message: String,
    at: Option<(usize, usize)>,
    defines: Vec<(String, String)>,
}

fn header(path: &Path, text: &str) -> Expectation {
    let mut exp = Expectation {
        message: String::new(),
        at: None,
        defines: vec![],
    };
    for line in text.lines().take_while(|l| l.starts_with("//")) {
        let line = line.trim_start_matches("//").trim();
        if let Some(m) = line.strip_prefix("expect:") {
            exp.message = m.trim().to_string();
        } else if let Some(at) = line.strip_prefix("at:") {
            let (l, c) = at.trim().split_once(':').expect("at: LINE:COL");
            exp.at = Some((l.parse().unwrap(), c.parse().unwrap()));
        } else if let Some(d) = line.strip_prefix("define:") {
            let (n, v) = d.trim().split_once('=').expect("define: NAME=VALUE");
            exp.defines.push((n.to_string(), v.to_string()));
        }
    }
    assert!(
        !exp.message.is_empty(),
        "{} has no `// expect:` line",
        path.display()
    );
    exp
}

fn cases() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/diagnostics");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/diagnostics exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "tile"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_malformed_program_gets_its_diagnostic() {
    let files = cases();
    assert!(files.len() >= 20, "only {} cases", files.len());
    let mut failures = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap();
        let exp = header(path, &text);
        let failure = match zinc_dsl::compile_file(path, &exp.defines) {
            Ok(_) => {
                failures.push(format!("{}: compiled without error", path.display()));
                continue;
            }
            Err(f) => f,
        };
        let first = &failure.diagnostics[0];
        let rendered = zinc_dsl::render(first, &failure.sources);
        if !rendered.contains(&exp.message) {
            failures.push(format!(
                "{}: expected `{}` in:\n{rendered}",
                path.display(),
                exp.message
            ));
            continue;
        }
        if let Some(at) = exp.at {
            let got = first
                .span
                .map(|s| failure.sources.line_col(s.file, s.start));
            if got != Some(at) {
                failures.push(format!(
                    "{}: expected the error at {at:?}, got {got:?}:\n{rendered}",
                    path.display()
                ));
            }
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n\n"));
}
