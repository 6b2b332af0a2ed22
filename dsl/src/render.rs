//! Diagnostics as text, rustc style:
//!
//! ```text
//! error: MESSAGE
//!   --> file:LINE:COL
//!    |
//! LL | source line
//!    |     ^^^^^
//! note: ...
//! ```

use std::fmt::Write;

use crate::diag::{Diagnostic, Severity, SourceMap, Span};

pub fn render(d: &Diagnostic, sources: &SourceMap) -> String {
    let mut out = String::new();
    let label = match d.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
    };
    let _ = writeln!(out, "{label}: {}", d.message);
    if let Some(span) = d.span {
        snippet(&mut out, span, sources);
    }
    for (note, span) in &d.notes {
        let _ = writeln!(out, "note: {note}");
        if let Some(span) = span {
            snippet(&mut out, *span, sources);
        }
    }
    out
}

/// The location line, the source line and the underline.
fn snippet(out: &mut String, span: Span, sources: &SourceMap) {
    let Some(file) = sources.files.get(span.file as usize) else {
        return;
    };
    let (line, col) = sources.line_col(span.file, span.start);
    let (end_line, end_col) = sources.line_col(span.file, span.end);
    let text = file.text.lines().nth(line - 1).unwrap_or("");
    // Tabs print as one space so that the underline stays aligned.
    let text = text.replace('\t', " ");
    let width = if end_line == line && end_col > col {
        end_col - col
    } else if end_line > line {
        (text.chars().count() + 1).saturating_sub(col).max(1)
    } else {
        1
    };
    let gutter = line.to_string().len();
    let pad = " ".repeat(gutter);
    let _ = writeln!(out, "{pad}--> {}:{line}:{col}", file.name);
    let _ = writeln!(out, "{pad} |");
    let _ = writeln!(out, "{line} | {text}");
    let _ = writeln!(out, "{pad} | {}{}", " ".repeat(col - 1), "^".repeat(width));
}
