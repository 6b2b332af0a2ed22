//! Tokens of the tile language (logos) and the token stream the LALRPOP parser reads.

use std::fmt;

use logos::Logos;

use crate::ir::Scalar;

/// Why a piece of source is not a token.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum LexError {
    #[default]
    BadChar,
    UnterminatedString,
    BadEscape,
    IntTooLarge,
    BadNumber,
}

impl fmt::Display for LexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LexError::BadChar => "unexpected character",
            LexError::UnterminatedString => "unterminated string literal",
            LexError::BadEscape => "unknown escape sequence in string literal",
            LexError::IntTooLarge => "integer literal is too large",
            LexError::BadNumber => "malformed number literal",
        })
    }
}

/// An integer literal with its optional type suffix (`7u32`).
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct IntLit {
    pub value: u128,
    pub suffix: Option<Scalar>,
}

/// A float literal with its optional type suffix (`0.5f16`).
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct FloatLit {
    pub value: f64,
    pub suffix: Option<Scalar>,
}

#[derive(Logos, Clone, Debug, PartialEq)]
#[logos(error = LexError)]
#[logos(skip r"[ \t\r\n\f]+")]
#[logos(skip r"//[^\n]*")]
pub enum Tok<'a> {
    #[token("import")]
    Import,
    #[token("const")]
    Const,
    #[token("fn")]
    Fn,
    #[token("kernel")]
    Kernel,
    #[token("grid")]
    Grid,
    #[token("block")]
    Block,
    #[token("cluster")]
    Cluster,
    #[token("global")]
    Global,
    #[token("shared")]
    Shared,
    #[token("mut")]
    Mut,
    #[token("let")]
    Let,
    #[token("var")]
    Var,
    #[token("if")]
    If,
    #[token("else")]
    Else,
    #[token("for")]
    For,
    #[token("in")]
    In,
    #[token("step")]
    Step,
    #[token("unroll")]
    Unroll,
    #[token("while")]
    While,
    #[token("break")]
    Break,
    #[token("continue")]
    Continue,
    #[token("return")]
    Return,
    #[token("as")]
    As,
    #[token("true")]
    True,
    #[token("false")]
    False,
    #[token("intrinsic")]
    Intrinsic,
    #[token("asm")]
    Asm,
    #[token("bitcast")]
    Bitcast,
    #[token("pipeline")]
    Pipeline,

    #[regex(r"[A-Za-z_][A-Za-z0-9_]*")]
    Ident(&'a str),
    #[regex(r"[0-9][0-9_]*([iu](8|16|32|64))?", int_lit)]
    #[regex(r"0[xX][0-9a-fA-F_]+([iu](8|16|32|64))?", int_lit)]
    #[regex(r"0[bB][01_]+([iu](8|16|32|64))?", int_lit)]
    Int(IntLit),
    #[regex(
        r"[0-9][0-9_]*\.[0-9][0-9_]*([eE][+-]?[0-9_]+)?(f16|bf16|f32|f64)?",
        float_lit
    )]
    #[regex(r"[0-9][0-9_]*[eE][+-]?[0-9_]+(f16|bf16|f32|f64)?", float_lit)]
    #[regex(r"[0-9][0-9_]*(f16|bf16|f32|f64)", float_lit)]
    Float(FloatLit),
    #[regex(r#""([^"\\\n]|\\[^\n])*""#, string_lit)]
    Str(String),
    #[regex(r#""([^"\\\n]|\\[^\n])*"#, unterminated)]
    UnterminatedStr,

    #[token("(")]
    LParen,
    #[token(")")]
    RParen,
    #[token("[")]
    LBracket,
    #[token("]")]
    RBracket,
    #[token("{")]
    LBrace,
    #[token("}")]
    RBrace,
    #[token(",")]
    Comma,
    #[token(";")]
    Semi,
    #[token(":")]
    Colon,
    #[token(".")]
    Dot,
    #[token("..")]
    DotDot,
    #[token("->")]
    Arrow,
    #[token("=")]
    Assign,
    #[token("+=")]
    AddAssign,
    #[token("-=")]
    SubAssign,
    #[token("*=")]
    MulAssign,
    #[token("/=")]
    DivAssign,
    #[token("%=")]
    RemAssign,
    #[token("&=")]
    AndAssign,
    #[token("|=")]
    OrAssign,
    #[token("^=")]
    XorAssign,
    #[token("<<=")]
    ShlAssign,
    #[token(">>=")]
    ShrAssign,
    #[token("+")]
    Plus,
    #[token("-")]
    Minus,
    #[token("*")]
    Star,
    #[token("/")]
    Slash,
    #[token("%")]
    Percent,
    #[token("&")]
    Amp,
    #[token("|")]
    Pipe,
    #[token("^")]
    Caret,
    #[token("<<")]
    Shl,
    #[token(">>")]
    Shr,
    #[token("!")]
    Bang,
    #[token("==")]
    EqEq,
    #[token("!=")]
    Ne,
    #[token("<")]
    Lt,
    #[token("<=")]
    Le,
    #[token(">")]
    Gt,
    #[token(">=")]
    Ge,
    #[token("&&")]
    AndAnd,
    #[token("||")]
    OrOr,
}

/// Splits a literal's text into digits and a type suffix that begins at the first `i`, `u`, or
/// (for decimal literals only, since `f` is a hex digit) `f`/`b` of a float suffix.
fn split_suffix(text: &str, hex: bool) -> (&str, Option<Scalar>) {
    for s in Scalar::ALL {
        if s == Scalar::Bool || (hex && s.is_float()) {
            continue;
        }
        if let Some(digits) = text.strip_suffix(s.name()) {
            // `0b1u8` must not read as digits `0` with suffix `b1u8`; a suffix follows a digit.
            let digit = |c: char| {
                c == '_'
                    || if hex {
                        c.is_ascii_hexdigit()
                    } else {
                        c.is_ascii_digit()
                    }
            };
            if digits.ends_with(digit) {
                return (digits, Some(s));
            }
        }
    }
    (text, None)
}

fn int_lit<'a>(lex: &mut logos::Lexer<'a, Tok<'a>>) -> Result<IntLit, LexError> {
    let text = lex.slice();
    let (radix, body) = match text.get(..2) {
        Some("0x" | "0X") => (16, &text[2..]),
        Some("0b" | "0B") => (2, &text[2..]),
        _ => (10, text),
    };
    let (digits, suffix) = split_suffix(body, radix == 16);
    let digits: String = digits.chars().filter(|&c| c != '_').collect();
    if digits.is_empty() {
        return Err(LexError::BadNumber);
    }
    let value = u128::from_str_radix(&digits, radix).map_err(|_| LexError::IntTooLarge)?;
    Ok(IntLit { value, suffix })
}

fn float_lit<'a>(lex: &mut logos::Lexer<'a, Tok<'a>>) -> Result<FloatLit, LexError> {
    let (digits, suffix) = split_suffix(lex.slice(), false);
    let digits: String = digits.chars().filter(|&c| c != '_').collect();
    let value: f64 = digits.parse().map_err(|_| LexError::BadNumber)?;
    Ok(FloatLit { value, suffix })
}

fn unterminated<'a>(_: &mut logos::Lexer<'a, Tok<'a>>) -> Result<(), LexError> {
    Err(LexError::UnterminatedString)
}

fn string_lit<'a>(lex: &mut logos::Lexer<'a, Tok<'a>>) -> Result<String, LexError> {
    let text = lex.slice();
    let mut out = String::new();
    let mut chars = text[1..text.len() - 1].chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        out.push(match chars.next() {
            Some('n') => '\n',
            Some('t') => '\t',
            Some('r') => '\r',
            Some('0') => '\0',
            Some('\\') => '\\',
            Some('"') => '"',
            _ => return Err(LexError::BadEscape),
        });
    }
    Ok(out)
}

/// A lexing failure at a byte range.
#[derive(Clone, Debug, PartialEq)]
pub struct LexicalError {
    pub error: LexError,
    pub start: usize,
    pub end: usize,
}

pub type Spanned<'a> = (usize, Tok<'a>, usize);

/// Lex a whole file; the first bad token ends it.
pub fn tokenize(text: &str) -> Result<Vec<Spanned<'_>>, LexicalError> {
    let mut out = Vec::new();
    let mut lex = Tok::lexer(text);
    while let Some(tok) = lex.next() {
        let span = lex.span();
        match tok {
            Ok(tok) => out.push((span.start, tok, span.end)),
            Err(error) => {
                return Err(LexicalError {
                    error,
                    start: span.start,
                    end: span.end,
                })
            }
        }
    }
    Ok(out)
}

impl fmt::Display for Tok<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            Tok::Ident(name) => return write!(f, "`{name}`"),
            Tok::Int(_) | Tok::Float(_) => return f.write_str("number"),
            Tok::Str(_) | Tok::UnterminatedStr => return f.write_str("string"),
            Tok::Import => "import",
            Tok::Const => "const",
            Tok::Fn => "fn",
            Tok::Kernel => "kernel",
            Tok::Grid => "grid",
            Tok::Block => "block",
            Tok::Cluster => "cluster",
            Tok::Global => "global",
            Tok::Shared => "shared",
            Tok::Mut => "mut",
            Tok::Let => "let",
            Tok::Var => "var",
            Tok::If => "if",
            Tok::Else => "else",
            Tok::For => "for",
            Tok::In => "in",
            Tok::Step => "step",
            Tok::Unroll => "unroll",
            Tok::While => "while",
            Tok::Break => "break",
            Tok::Continue => "continue",
            Tok::Return => "return",
            Tok::As => "as",
            Tok::True => "true",
            Tok::False => "false",
            Tok::Intrinsic => "intrinsic",
            Tok::Asm => "asm",
            Tok::Bitcast => "bitcast",
            Tok::Pipeline => "pipeline",
            Tok::LParen => "(",
            Tok::RParen => ")",
            Tok::LBracket => "[",
            Tok::RBracket => "]",
            Tok::LBrace => "{",
            Tok::RBrace => "}",
            Tok::Comma => ",",
            Tok::Semi => ";",
            Tok::Colon => ":",
            Tok::Dot => ".",
            Tok::DotDot => "..",
            Tok::Arrow => "->",
            Tok::Assign => "=",
            Tok::AddAssign => "+=",
            Tok::SubAssign => "-=",
            Tok::MulAssign => "*=",
            Tok::DivAssign => "/=",
            Tok::RemAssign => "%=",
            Tok::AndAssign => "&=",
            Tok::OrAssign => "|=",
            Tok::XorAssign => "^=",
            Tok::ShlAssign => "<<=",
            Tok::ShrAssign => ">>=",
            Tok::Plus => "+",
            Tok::Minus => "-",
            Tok::Star => "*",
            Tok::Slash => "/",
            Tok::Percent => "%",
            Tok::Amp => "&",
            Tok::Pipe => "|",
            Tok::Caret => "^",
            Tok::Shl => "<<",
            Tok::Shr => ">>",
            Tok::Bang => "!",
            Tok::EqEq => "==",
            Tok::Ne => "!=",
            Tok::Lt => "<",
            Tok::Le => "<=",
            Tok::Gt => ">",
            Tok::Ge => ">=",
            Tok::AndAnd => "&&",
            Tok::OrOr => "||",
        };
        write!(f, "`{text}`")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<Tok<'_>> {
        tokenize(text).unwrap().into_iter().map(|t| t.1).collect()
    }

    #[test]
    fn ranges_are_not_floats() {
        let int = |value, suffix| Tok::Int(IntLit { value, suffix });
        assert_eq!(
            kinds("0..5u32"),
            vec![int(0, None), Tok::DotDot, int(5, Some(Scalar::U32))]
        );
        assert_eq!(
            kinds("thread.x..n"),
            vec![
                Tok::Ident("thread"),
                Tok::Dot,
                Tok::Ident("x"),
                Tok::DotDot,
                Tok::Ident("n")
            ]
        );
    }

    #[test]
    fn literals() {
        let float = |value, suffix| Tok::Float(FloatLit { value, suffix });
        assert_eq!(
            kinds("0x7f 1_000 0xffu8 0b101"),
            vec![
                Tok::Int(IntLit {
                    value: 127,
                    suffix: None
                }),
                Tok::Int(IntLit {
                    value: 1000,
                    suffix: None
                }),
                Tok::Int(IntLit {
                    value: 255,
                    suffix: Some(Scalar::U8)
                }),
                Tok::Int(IntLit {
                    value: 5,
                    suffix: None
                }),
            ]
        );
        assert_eq!(
            kinds("1.5 2e-3 0.5f16 3f32 1bf16 -3.0e38"),
            vec![
                float(1.5, None),
                float(2e-3, None),
                float(0.5, Some(Scalar::F16)),
                float(3.0, Some(Scalar::F32)),
                float(1.0, Some(Scalar::Bf16)),
                Tok::Minus,
                float(3.0e38, None),
            ]
        );
        assert_eq!(kinds(r#""a\n\"b""#), vec![Tok::Str("a\n\"b".into())]);
    }

    #[test]
    fn errors() {
        let err = |text| tokenize(text).unwrap_err().error;
        assert_eq!(err("\"abc"), LexError::UnterminatedString);
        assert_eq!(err("a $ b"), LexError::BadChar);
        assert_eq!(err("\"\\q\""), LexError::BadEscape);
        assert_eq!(
            err("999999999999999999999999999999999999999999"),
            LexError::IntTooLarge
        );
    }
}
