//! Grid-size expressions from kernel manifests, e.g. `((n + 255) / 256)` or `cdiv(rows, 4)`.
//!
//! The compiler writes each grid dimension as an expression over the kernel's integer scalar
//! parameters and its specialization constants. They are parsed once, when the manifest loads,
//! and evaluated per launch with exact (wide) integer arithmetic, so an intermediate that would
//! wrap in u32 is reported instead of producing a bogus grid.

use std::fmt;

use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum GridExprError {
    #[error("bad grid expression `{text}` at byte {pos}: {msg}")]
    Parse {
        text: String,
        pos: usize,
        msg: &'static str,
    },
    #[error("grid expression `{text}` uses `{name}`, which is not an integer scalar argument")]
    Unbound { text: String, name: String },
    #[error("grid expression `{text}` divides by zero")]
    DivideByZero { text: String },
    #[error("grid expression `{text}` overflows")]
    Overflow { text: String },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Min,
    Max,
    /// Ceiling division, the language's `cdiv`.
    CeilDiv,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Node {
    Int(i128),
    Name(String),
    Bin(BinOp, Box<Node>, Box<Node>),
}

/// A parsed grid expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GridExpr {
    text: String,
    root: Node,
}

impl GridExpr {
    pub fn parse(text: &str) -> Result<GridExpr, GridExprError> {
        let mut parser = Parser { text, pos: 0 };
        let root = parser.expr()?;
        parser.skip_space();
        if parser.pos != text.len() {
            return Err(parser.error("unexpected trailing input"));
        }
        Ok(GridExpr {
            text: text.to_string(),
            root,
        })
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// The parameter names the expression reads.
    pub fn names(&self) -> Vec<&str> {
        fn walk<'a>(node: &'a Node, out: &mut Vec<&'a str>) {
            match node {
                Node::Int(_) => {}
                Node::Name(n) => out.push(n),
                Node::Bin(_, a, b) => {
                    walk(a, out);
                    walk(b, out);
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.root, &mut out);
        out
    }

    /// Evaluates with `lookup` binding names to values.
    pub fn eval(&self, lookup: &dyn Fn(&str) -> Option<i128>) -> Result<i128, GridExprError> {
        self.eval_node(&self.root, lookup)
    }

    fn eval_node(
        &self,
        node: &Node,
        lookup: &dyn Fn(&str) -> Option<i128>,
    ) -> Result<i128, GridExprError> {
        let (op, a, b) = match node {
            Node::Int(v) => return Ok(*v),
            Node::Name(name) => {
                return lookup(name).ok_or_else(|| GridExprError::Unbound {
                    text: self.text.clone(),
                    name: name.clone(),
                })
            }
            Node::Bin(op, a, b) => (*op, self.eval_node(a, lookup)?, self.eval_node(b, lookup)?),
        };
        let divisor_ok = || {
            if b == 0 {
                Err(GridExprError::DivideByZero {
                    text: self.text.clone(),
                })
            } else {
                Ok(())
            }
        };
        let value = match op {
            BinOp::Add => a.checked_add(b),
            BinOp::Sub => a.checked_sub(b),
            BinOp::Mul => a.checked_mul(b),
            BinOp::Div => {
                divisor_ok()?;
                a.checked_div(b)
            }
            BinOp::Rem => {
                divisor_ok()?;
                a.checked_rem(b)
            }
            BinOp::CeilDiv => {
                divisor_ok()?;
                a.checked_add(b - 1).and_then(|s| s.checked_div(b))
            }
            BinOp::Min => Some(a.min(b)),
            BinOp::Max => Some(a.max(b)),
        };
        value.ok_or_else(|| GridExprError::Overflow {
            text: self.text.clone(),
        })
    }
}

impl fmt::Display for GridExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Recursive descent over the text: `expr := term (('+'|'-') term)*`,
/// `term := atom (('*'|'/'|'%') atom)*`, `atom := int | name | name '(' expr ',' expr ')' | '(' expr ')'`.
struct Parser<'a> {
    text: &'a str,
    pos: usize,
}

impl Parser<'_> {
    fn error(&self, msg: &'static str) -> GridExprError {
        GridExprError::Parse {
            text: self.text.to_string(),
            pos: self.pos,
            msg,
        }
    }

    fn skip_space(&mut self) {
        let rest = &self.text[self.pos..];
        self.pos += rest.len() - rest.trim_start().len();
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_space();
        self.text.as_bytes().get(self.pos).copied()
    }

    fn expect(&mut self, c: u8, msg: &'static str) -> Result<(), GridExprError> {
        if self.peek() == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.error(msg))
        }
    }

    fn take_while(&mut self, pred: impl Fn(u8) -> bool) -> &str {
        let start = self.pos;
        let len = self.text.as_bytes()[start..]
            .iter()
            .take_while(|&&c| pred(c))
            .count();
        self.pos += len;
        &self.text[start..self.pos]
    }

    fn expr(&mut self) -> Result<Node, GridExprError> {
        let mut lhs = self.term()?;
        while let Some(op) = match self.peek() {
            Some(b'+') => Some(BinOp::Add),
            Some(b'-') => Some(BinOp::Sub),
            _ => None,
        } {
            self.pos += 1;
            lhs = Node::Bin(op, Box::new(lhs), Box::new(self.term()?));
        }
        Ok(lhs)
    }

    fn term(&mut self) -> Result<Node, GridExprError> {
        let mut lhs = self.atom()?;
        while let Some(op) = match self.peek() {
            Some(b'*') => Some(BinOp::Mul),
            Some(b'/') => Some(BinOp::Div),
            Some(b'%') => Some(BinOp::Rem),
            _ => None,
        } {
            self.pos += 1;
            lhs = Node::Bin(op, Box::new(lhs), Box::new(self.atom()?));
        }
        Ok(lhs)
    }

    fn atom(&mut self) -> Result<Node, GridExprError> {
        match self.peek() {
            Some(b'(') => {
                self.pos += 1;
                let inner = self.expr()?;
                self.expect(b')', "expected `)`")?;
                Ok(inner)
            }
            Some(c) if c.is_ascii_digit() => {
                let start = self.pos;
                let digits = self.take_while(|c| c.is_ascii_digit());
                let value = digits.parse().map_err(|_| GridExprError::Parse {
                    text: self.text.to_string(),
                    pos: start,
                    msg: "integer too large",
                })?;
                Ok(Node::Int(value))
            }
            Some(c) if c.is_ascii_alphabetic() || c == b'_' => {
                let start = self.pos;
                let name = self
                    .take_while(|c| c.is_ascii_alphanumeric() || c == b'_')
                    .to_string();
                if self.peek() != Some(b'(') {
                    return Ok(Node::Name(name));
                }
                let op = match name.as_str() {
                    "min" => BinOp::Min,
                    "max" => BinOp::Max,
                    "cdiv" => BinOp::CeilDiv,
                    _ => {
                        return Err(GridExprError::Parse {
                            text: self.text.to_string(),
                            pos: start,
                            msg: "unknown function (expected min, max or cdiv)",
                        })
                    }
                };
                self.pos += 1;
                let a = self.expr()?;
                self.expect(b',', "expected `,` between the two arguments")?;
                let b = self.expr()?;
                self.expect(b')', "expected `)` after the arguments")?;
                Ok(Node::Bin(op, Box::new(a), Box::new(b)))
            }
            Some(_) => Err(self.error("expected a number, a name or `(`")),
            None => Err(self.error("unexpected end of expression")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(text: &str, vars: &[(&str, i128)]) -> Result<i128, GridExprError> {
        let lookup = |name: &str| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| *v);
        GridExpr::parse(text)?.eval(&lookup)
    }

    #[test]
    fn arithmetic_and_precedence() {
        assert_eq!(eval("1 + 2 * 3", &[]), Ok(7));
        assert_eq!(eval("(1 + 2) * 3", &[]), Ok(9));
        assert_eq!(eval("10 - 4 - 3", &[]), Ok(3));
        assert_eq!(eval("100 / 10 / 5", &[]), Ok(2));
        assert_eq!(eval("17 % 5 * 2", &[]), Ok(4));
        assert_eq!(eval("  42  ", &[]), Ok(42));
    }

    #[test]
    fn names_and_functions() {
        let vars = [("n", 1_000_003), ("rows", 1001), ("TILE", 16)];
        assert_eq!(eval("((n + 255) / 256)", &vars), Ok(3907));
        assert_eq!(eval("cdiv(rows, 4)", &vars), Ok(251));
        assert_eq!(eval("cdiv(n, TILE) * 2", &vars), Ok(125_002));
        assert_eq!(eval("min(rows, 65535)", &vars), Ok(1001));
        assert_eq!(eval("max(rows / 2000, 1)", &vars), Ok(1));
        let e = GridExpr::parse("cdiv(n, TILE) + min(rows, n)").unwrap();
        assert_eq!(e.names(), ["n", "TILE", "rows", "n"]);
    }

    #[test]
    fn u32_sized_intermediates_do_not_wrap() {
        let vars = [("n", u32::MAX as i128)];
        assert_eq!(eval("(n + 255) / 256", &vars), Ok(16_777_216));
    }

    #[test]
    fn evaluation_errors() {
        assert!(
            matches!(eval("n + 1", &[]), Err(GridExprError::Unbound { name, .. }) if name == "n")
        );
        assert!(matches!(
            eval("4 / (2 - 2)", &[]),
            Err(GridExprError::DivideByZero { .. })
        ));
        assert!(matches!(
            eval("cdiv(4, 0)", &[]),
            Err(GridExprError::DivideByZero { .. })
        ));
        let big = "170141183460469231731687303715884105727";
        assert!(matches!(
            eval(&format!("{big} + 1"), &[]),
            Err(GridExprError::Overflow { .. })
        ));
    }

    #[test]
    fn parse_errors_point_at_the_problem() {
        let pos = |text: &str| match GridExpr::parse(text) {
            Err(GridExprError::Parse { pos, .. }) => pos,
            other => panic!("expected a parse error for `{text}`, got {other:?}"),
        };
        assert_eq!(pos("(n + 1"), 6);
        assert_eq!(pos("n +"), 3);
        assert_eq!(pos("n 1"), 2);
        assert_eq!(pos("sqrt(n, 2)"), 0);
        assert_eq!(pos("min(n)"), 5);
        assert_eq!(pos("n & 1"), 2);
        assert_eq!(pos(""), 0);
    }
}
