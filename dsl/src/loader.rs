//! Import resolution: parse the root file and, depth first, every file it imports, each once.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

use crate::ast::{self, Item};
use crate::diag::{Diagnostic, SourceMap};
use crate::parse::parse_file;

/// Where imported files come from: the disk, or a map in memory for tests.
pub trait FileSource {
    /// The identity of a file, so that two spellings of one path load it once.
    fn key(&self, name: &str) -> String;
    fn read(&self, name: &str) -> Option<String>;
}

/// Every file of a compilation, parsed; indices are [`crate::diag::Span::file`] ids.
pub struct Loaded {
    pub sources: SourceMap,
    /// Parsed files (a file that failed to parse has no items).
    pub files: Vec<ast::File>,
    /// The files each file imports directly.
    pub imports: Vec<Vec<u32>>,
    pub diagnostics: Vec<Diagnostic>,
}

/// Resolve `import` relative to the directory of the file `from`, lexically (no disk access).
pub fn resolve(from: &str, import: &str) -> String {
    let base = Path::new(from).parent().unwrap_or(Path::new(""));
    let mut out = PathBuf::new();
    for part in base.join(import).components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                if matches!(out.components().next_back(), Some(Component::Normal(_))) {
                    out.pop();
                } else {
                    out.push("..");
                }
            }
            other => out.push(other),
        }
    }
    out.to_string_lossy().into_owned()
}

struct Loader<'s> {
    source: &'s dyn FileSource,
    out: Loaded,
    /// Files by key: their id.
    seen: HashMap<String, u32>,
    /// The chain of files being loaded (for cycle detection).
    stack: Vec<u32>,
}

pub fn load(name: &str, text: &str, source: &dyn FileSource) -> Loaded {
    let mut loader = Loader {
        source,
        out: Loaded {
            sources: SourceMap::default(),
            files: Vec::new(),
            imports: Vec::new(),
            diagnostics: Vec::new(),
        },
        seen: HashMap::new(),
        stack: Vec::new(),
    };
    let root = loader.add(name, text.to_string());
    loader.seen.insert(source.key(name), root);
    loader.visit(root);
    loader.out
}

impl Loader<'_> {
    fn add(&mut self, name: &str, text: String) -> u32 {
        let id = self.out.sources.add(name, text);
        let file = match parse_file(id, &self.out.sources.files[id as usize].text) {
            Ok(file) => file,
            Err(d) => {
                self.out.diagnostics.push(d);
                ast::File { items: vec![] }
            }
        };
        self.out.files.push(file);
        self.out.imports.push(vec![]);
        id
    }

    fn visit(&mut self, id: u32) {
        self.stack.push(id);
        let imports: Vec<ast::Import> = self.out.files[id as usize]
            .items
            .iter()
            .filter_map(|item| match item {
                Item::Import(import) => Some(import.clone()),
                _ => None,
            })
            .collect();
        for import in imports {
            let name = resolve(&self.out.sources.files[id as usize].name, &import.path);
            let key = self.source.key(&name);
            if let Some(&target) = self.seen.get(&key) {
                if let Some(pos) = self.stack.iter().position(|&f| f == target) {
                    let chain: Vec<&str> = self.stack[pos..]
                        .iter()
                        .chain([&target])
                        .map(|&f| self.out.sources.files[f as usize].name.as_str())
                        .collect();
                    self.out.diagnostics.push(Diagnostic::error(
                        format!("import cycle: {}", chain.join(" -> ")),
                        import.span,
                    ));
                } else {
                    self.out.imports[id as usize].push(target);
                }
                continue;
            }
            let Some(text) = self.source.read(&name) else {
                self.out.diagnostics.push(Diagnostic::error(
                    format!(
                        "imported file `{}` not found (looked for `{name}`)",
                        import.path
                    ),
                    import.span,
                ));
                continue;
            };
            let target = self.add(&name, text);
            self.seen.insert(key, target);
            self.out.imports[id as usize].push(target);
            self.visit(target);
        }
        self.stack.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::resolve;

    #[test]
    fn resolves_relative_to_the_importer() {
        assert_eq!(
            resolve("examples/a.tile", "lib/r.tile"),
            "examples/lib/r.tile"
        );
        assert_eq!(resolve("a.tile", "./lib/../r.tile"), "r.tile");
        assert_eq!(resolve("x/a.tile", "../../r.tile"), "../r.tile");
    }
}
