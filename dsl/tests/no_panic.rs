//! The front end never panics: random text and mangled copies of the examples either compile or
//! fail with diagnostics (which must render).

use proptest::prelude::*;
use zinc_dsl::lexer::tokenize;

const EXAMPLES: [&str; 4] = [
    include_str!("../../examples/vector_add.tile"),
    include_str!("../../examples/softmax.tile"),
    include_str!("../../examples/rmsnorm.tile"),
    include_str!("../../examples/matmul_simt.tile"),
];
const REDUCE: &str = include_str!("../../examples/lib/reduce.tile");

/// Tokens worth splicing into programs.
const VOCABULARY: &[&str] = &[
    "{",
    "}",
    "(",
    ")",
    "[",
    "]",
    ";",
    ",",
    ".",
    "..",
    "=",
    "+=",
    "<",
    ">",
    "as",
    "let",
    "var",
    "if",
    "else",
    "for",
    "in",
    "step",
    "while",
    "break",
    "return",
    "shared",
    "global",
    "mut",
    "kernel",
    "fn",
    "const",
    "import",
    "barrier",
    "thread",
    "block",
    "x",
    "0",
    "1u8",
    "-",
    "300",
    "2.5",
    "\"lib/reduce.tile\"",
    "f32",
    "u64",
    "f32x4",
    "cdiv",
    "atomic_add",
    "select",
    "intrinsic",
    "<f32>",
    "asm",
    "void",
    "\"",
];

fn compile(text: &str) {
    let load = |path: &str| path.ends_with("reduce.tile").then(|| REDUCE.to_string());
    // Exercise the define path where a kernel may declare it.
    let defines = match text.contains("BLOCK") {
        true => vec![("BLOCK".to_string(), "64".to_string())],
        false => vec![],
    };
    if let Err(failure) = zinc_dsl::compile_source("examples/fuzz.tile", text, &defines, &load) {
        assert!(!failure.diagnostics.is_empty());
        let _ = failure.render();
    }
}

#[derive(Clone, Debug)]
enum Edit {
    Delete(usize),
    Insert(usize, usize),
    Swap(usize, usize),
    Duplicate(usize, usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        any::<usize>().prop_map(Edit::Delete),
        (any::<usize>(), 0..VOCABULARY.len()).prop_map(|(i, t)| Edit::Insert(i, t)),
        (any::<usize>(), any::<usize>()).prop_map(|(i, j)| Edit::Swap(i, j)),
        (any::<usize>(), any::<usize>()).prop_map(|(i, j)| Edit::Duplicate(i, j)),
    ]
}

/// Apply token-level edits to an example and print it back as text.
fn mangle(example: &str, edits: &[Edit]) -> String {
    let mut toks: Vec<&str> = tokenize(example)
        .expect("examples lex")
        .iter()
        .map(|&(s, _, e)| &example[s..e])
        .collect();
    for edit in edits {
        let n = toks.len().max(1);
        match *edit {
            Edit::Delete(i) if !toks.is_empty() => {
                toks.remove(i % n);
            }
            Edit::Insert(i, t) => toks.insert(i % (toks.len() + 1), VOCABULARY[t]),
            Edit::Swap(i, j) if !toks.is_empty() => toks.swap(i % n, j % n),
            Edit::Duplicate(i, j) if !toks.is_empty() => {
                let t = toks[i % n];
                toks.insert(j % (toks.len() + 1), t);
            }
            _ => {}
        }
    }
    toks.join(" ")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        compile(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn random_token_soup(text in r#"[a-z0-9_(){}\[\];:.,<>=+*/%&|^!" \n-]{0,300}"#) {
        compile(&text);
    }

    #[test]
    fn mangled_examples(which in 0..EXAMPLES.len(), edits in proptest::collection::vec(edit(), 1..6)) {
        compile(&mangle(EXAMPLES[which], &edits));
    }
}

#[test]
fn unmangled_examples_compile() {
    for example in EXAMPLES {
        let load = |path: &str| path.ends_with("reduce.tile").then(|| REDUCE.to_string());
        let text = mangle(example, &[]);
        assert!(zinc_dsl::compile_source("examples/x.tile", &text, &[], &load).is_ok());
    }
}

#[test]
fn pathological_nesting_is_an_error_not_a_stack_overflow() {
    let n = 100_000;
    let programs = [
        format!("fn f() -> i32 {{ return {}1; }}", "-".repeat(n)),
        format!(
            "fn f() -> i32 {{ return {}1{}; }}",
            "(".repeat(n),
            ")".repeat(n)
        ),
        format!("fn f(a: i32) -> i32 {{ return a{}; }}", " + a".repeat(n)),
        format!("fn f(a: bool) {{ {} }}", "if a {} else ".repeat(n) + "{}"),
        format!(
            "fn f(a: {}f32{}) {{ }}",
            "global [".repeat(n),
            "]".repeat(n)
        ),
        format!(
            "fn f(a: bool) {{ {}{} }}",
            "while a { ".repeat(n),
            "}".repeat(n)
        ),
    ];
    for p in &programs {
        let failure = zinc_dsl::compile_source("deep.tile", p, &[], &|_| None).err();
        assert!(failure.is_some_and(|f| f.render().contains("too deep")));
    }
}
