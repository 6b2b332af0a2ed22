//! Source text to syntax tree: lexing, a delimiter pre-pass (for clear messages about unbalanced
//! brackets), the generated LALRPOP parser, and turning its errors into diagnostics.

use lalrpop_util::ParseError;

use crate::ast::{self, Expr, ExprKind, Stmt, StmtKind, MAX_DEPTH};
use crate::diag::{Diagnostic, Span};
use crate::lexer::{tokenize, Spanned, Tok};

lalrpop_util::lalrpop_mod!(
    #[allow(clippy::all, clippy::pedantic, unused_parens)]
    grammar
);

/// The parser's own errors.
#[derive(Clone, Debug, PartialEq)]
pub enum UserError {
    /// An expression or statement nested deeper than [`MAX_DEPTH`].
    TooDeep { span: Span },
    /// A contextual word (`stages`, `compute`) that is some other name.
    Expected {
        word: &'static str,
        found: String,
        span: Span,
    },
}

type Error<'a> = ParseError<usize, Tok<'a>, UserError>;

/// Require the name `name` to be the contextual word `word`.
pub fn contextual<'a>(name: &ast::Ident, word: &'static str) -> Result<(), Error<'a>> {
    if name.name == word {
        return Ok(());
    }
    Err(ParseError::User {
        error: UserError::Expected {
            word,
            found: name.name.clone(),
            span: name.span,
        },
    })
}

/// Build an expression node, refusing trees too deep for the later recursive passes.
pub fn expr<'a>(kind: ExprKind, span: Span) -> Result<Expr, Error<'a>> {
    let e = Expr::new(kind, span);
    if e.depth > MAX_DEPTH {
        return Err(ParseError::User {
            error: UserError::TooDeep { span },
        });
    }
    Ok(e)
}

/// Build a statement node, refusing trees too deep for the later recursive passes.
pub fn stmt<'a>(kind: StmtKind, span: Span) -> Result<Stmt, Error<'a>> {
    let s = Stmt::new(kind, span);
    if s.depth > MAX_DEPTH {
        return Err(ParseError::User {
            error: UserError::TooDeep { span },
        });
    }
    Ok(s)
}

/// Brackets may nest at most this deep (types nest through brackets only).
const MAX_BRACKET_DEPTH: usize = 256;

/// Parse one file of the source map.
pub fn parse_file(file: u32, text: &str) -> Result<ast::File, Diagnostic> {
    let tokens = tokenize(text)
        .map_err(|e| Diagnostic::error(e.error.to_string(), Span::new(file, e.start, e.end)))?;
    check_delimiters(file, &tokens)?;
    let ends: Vec<usize> = tokens.iter().map(|t| t.2).collect();
    grammar::FileParser::new()
        .parse(file, tokens.into_iter().map(Ok::<_, UserError>))
        .map_err(|e| syntax_error(file, text, &ends, e))
}

fn check_delimiters(file: u32, tokens: &[Spanned<'_>]) -> Result<(), Diagnostic> {
    let mut open: Vec<(&Tok<'_>, usize, usize)> = Vec::new();
    for (start, tok, end) in tokens {
        let closes = match tok {
            Tok::LParen | Tok::LBracket | Tok::LBrace => {
                if open.len() == MAX_BRACKET_DEPTH {
                    return Err(Diagnostic::error(
                        "brackets nested too deeply",
                        Span::new(file, *start, *end),
                    ));
                }
                open.push((tok, *start, *end));
                continue;
            }
            Tok::RParen => Tok::LParen,
            Tok::RBracket => Tok::LBracket,
            Tok::RBrace => Tok::LBrace,
            _ => continue,
        };
        let here = Span::new(file, *start, *end);
        match open.pop() {
            Some((opener, _, _)) if *opener == closes => {}
            Some((opener, s, e)) => {
                return Err(
                    Diagnostic::error(format!("mismatched closing delimiter {tok}"), here)
                        .with_note(
                            format!("unclosed {opener} opened here"),
                            Some(Span::new(file, s, e)),
                        ),
                )
            }
            None => return Err(Diagnostic::error(format!("unexpected closing {tok}"), here)),
        }
    }
    match open.pop() {
        Some((opener, s, e)) => Err(Diagnostic::error(
            format!("unclosed delimiter {opener}"),
            Span::new(file, s, e),
        )),
        None => Ok(()),
    }
}

fn syntax_error(file: u32, text: &str, ends: &[usize], e: Error<'_>) -> Diagnostic {
    match e {
        ParseError::UnrecognizedToken {
            token: (start, tok, end),
            expected,
        } => {
            // A missing `;` reads best pointed at the end of the line that lacks it.
            if expected.iter().any(|x| x == "\";\"") {
                let prev_end = ends.iter().rev().find(|&&e| e <= start).copied();
                if let Some(prev_end) = prev_end {
                    return Diagnostic::error(
                        format!("expected `;`, found {tok}"),
                        Span::new(file, prev_end, prev_end),
                    );
                }
            }
            Diagnostic::error(
                format!("expected {}, found {tok}", describe(&expected)),
                Span::new(file, start, end),
            )
        }
        ParseError::UnrecognizedEof { location, expected } => Diagnostic::error(
            format!("unexpected end of file, expected {}", describe(&expected)),
            Span::new(file, location.min(text.len()), text.len()),
        ),
        ParseError::ExtraToken {
            token: (start, tok, end),
        } => Diagnostic::error(format!("unexpected {tok}"), Span::new(file, start, end)),
        ParseError::User {
            error: UserError::TooDeep { span },
        } => Diagnostic::error(
            format!("expression or statement nested too deeply (the limit is {MAX_DEPTH} levels)"),
            span,
        ),
        ParseError::User {
            error: UserError::Expected { word, found, span },
        } => Diagnostic::error(format!("expected `{word}`, found `{found}`"), span),
        // The parser reads a token vector, never raw characters.
        ParseError::InvalidToken { location } => {
            Diagnostic::error("invalid token", Span::new(file, location, location))
        }
    }
}

/// "one of `;`, `)` or identifier", with the grammar's terminal names made readable.
fn describe(expected: &[String]) -> String {
    let mut names: Vec<String> = expected
        .iter()
        .map(|t| match t.as_str() {
            "Ident" => "identifier".to_string(),
            "Int" | "Float" => "number".to_string(),
            "Str" => "string".to_string(),
            quoted => format!("`{}`", quoted.trim_matches('"')),
        })
        .collect();
    names.dedup();
    const SHOWN: usize = 8;
    match names.len() {
        0 => "nothing more".to_string(),
        1 => names.remove(0),
        n if n <= SHOWN => format!("one of {}", names.join(", ")),
        n => format!(
            "one of {} (and {} more)",
            names[..SHOWN].join(", "),
            n - SHOWN
        ),
    }
}
