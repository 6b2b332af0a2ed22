//! The zinc tile language front end: lexer, parser, name resolution and type checking, producing
//! the typed IR in [`ir`].

pub mod diag;
pub mod ir;
pub mod target;
