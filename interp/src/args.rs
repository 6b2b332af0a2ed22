//! Kernel arguments and their check against the kernel's parameter types.

use zinc_dsl::ir::{Function, Type};

use crate::error::{ErrorKind, InterpError};
use crate::memory::Buffer;
use crate::value::Value;

/// One kernel argument.
#[derive(Clone, Debug, PartialEq)]
pub enum Arg {
    /// A scalar or vector parameter's value.
    Scalar(Value),
    /// A global buffer for a `global [T]` or `global mut [T]` parameter; written in place.
    Buffer(Buffer),
    /// An input buffer: accepted only by `global [T]` parameters, so that passing an input
    /// where the kernel writes is caught.
    ReadOnly(Buffer),
}

impl Arg {
    pub fn buffer(&self) -> Option<&Buffer> {
        match self {
            Arg::Scalar(_) => None,
            Arg::Buffer(b) | Arg::ReadOnly(b) => Some(b),
        }
    }

    pub(crate) fn buffer_mut(&mut self) -> Option<&mut Buffer> {
        match self {
            Arg::Scalar(_) => None,
            Arg::Buffer(b) | Arg::ReadOnly(b) => Some(b),
        }
    }

    fn describe(&self) -> String {
        match self {
            Arg::Scalar(v) => format!("a scalar {}", v.type_name()),
            Arg::Buffer(b) => format!("a buffer of {}", type_name(&b.elem)),
            Arg::ReadOnly(b) => format!("a read-only buffer of {}", type_name(&b.elem)),
        }
    }
}

/// The type as the language spells it.
pub(crate) fn type_name(ty: &Type) -> String {
    ty.to_string()
}

/// Whether a view of `view` elements takes a buffer of `buffer` elements: the same type, or a
/// vector view (`[u32x4]`) of a buffer of its scalar (`u32`), as the runtime accepts; the
/// buffer's length must then be a whole number of vectors (checked with the size below).
fn view_takes(view: &Type, buffer: &Type) -> bool {
    match (view, buffer) {
        (Type::Vector(s, _), Type::Scalar(b)) => s == b,
        _ => view == buffer,
    }
}

/// Check count, scalar types, buffer element types, sizes and mutability.
pub(crate) fn check(kernel: &Function, args: &[Arg]) -> Result<(), InterpError> {
    if args.len() != kernel.params.len() {
        return Err(InterpError::from(ErrorKind::ArgCount {
            kernel: kernel.name.clone(),
            expected: kernel.params.len(),
            got: args.len(),
        }));
    }
    for (index, (param, arg)) in kernel.params.iter().zip(args).enumerate() {
        let var = &kernel.vars[param.0 as usize];
        let mismatch = |got: String| {
            InterpError::from(ErrorKind::ArgType {
                kernel: kernel.name.clone(),
                index,
                param: var.name.clone(),
                expected: type_name(&var.ty),
                got,
            })
        };
        match (&var.ty, arg) {
            (Type::View { elem, mutable, .. }, Arg::Buffer(b) | Arg::ReadOnly(b)) => {
                if !view_takes(elem, &b.elem) {
                    return Err(mismatch(arg.describe()));
                }
                if *mutable && matches!(arg, Arg::ReadOnly(_)) {
                    return Err(mismatch(arg.describe()));
                }
                if b.bytes.len() % elem.size() as usize != 0 {
                    return Err(mismatch(format!(
                        "a buffer of {} bytes, not a whole number of {} elements",
                        b.bytes.len(),
                        type_name(elem)
                    )));
                }
            }
            (ty @ (Type::Scalar(_) | Type::Vector(..)), Arg::Scalar(v)) if v.has_type(ty) => {}
            _ => return Err(mismatch(arg.describe())),
        }
    }
    Ok(())
}
