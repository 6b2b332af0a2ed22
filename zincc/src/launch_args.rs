//! Kernel arguments from the command line (`--arg NAME=SPEC`), typed by the kernel's parameters,
//! and the printing of buffer elements.

use std::path::Path;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use zinc_dsl::ir::{Scalar, Type};
use zinc_interp::{Arg, Buffer, Value};

/// What a buffer parameter accepts, for messages.
pub const BUFFER_SPECS: &str =
    "rand:LEN[:LO..HI], zeros:LEN, range:LEN, file:PATH or a list [1, 2, 3]";

/// The argument for a parameter of type `ty` from its spec; `rng` draws `rand:` values. Errors
/// say what is wrong with the spec, without the parameter's name (the caller adds it).
pub fn parse_arg(ty: &Type, spec: &str, rng: &mut StdRng) -> Result<Arg, String> {
    match ty {
        Type::Scalar(s) => parse_scalar(*s, spec).map(Arg::Scalar),
        Type::Vector(s, lanes) => {
            let values = parse_list(*s, spec)
                .ok_or_else(|| format!("expected a list of {lanes} values like [1, 2]"))??;
            if values.len() != usize::from(*lanes) {
                return Err(format!("expected {lanes} values, got {}", values.len()));
            }
            let vector = zinc_interp::Vector::new(&values).expect("2 to 4 lanes of one type");
            Ok(Arg::Scalar(Value::Vector(vector)))
        }
        Type::View { elem, mutable, .. } => {
            let buffer = parse_buffer(elem, spec, rng)?;
            Ok(if *mutable {
                Arg::Buffer(buffer)
            } else {
                Arg::ReadOnly(buffer)
            })
        }
        Type::Void | Type::Frag(_) | Type::Array { .. } | Type::TensorMap(_) => {
            Err(format!("parameters of type `{ty}` cannot be given"))
        }
    }
}

/// The scalar type a buffer of `elem` (a scalar or vector type) holds, and scalars per element.
fn scalar_of(elem: &Type) -> (Scalar, usize) {
    match elem {
        Type::Vector(s, lanes) => (*s, usize::from(*lanes)),
        Type::Scalar(s) => (*s, 1),
        _ => unreachable!("views hold scalars or vectors"),
    }
}

fn parse_buffer(elem: &Type, spec: &str, rng: &mut StdRng) -> Result<Buffer, String> {
    let (scalar, lanes) = scalar_of(elem);
    let from_values = |values: Vec<Value>| {
        let mut bytes = Vec::with_capacity(values.len() * scalar.size() as usize);
        for v in values {
            bytes.extend_from_slice(&v.to_bits().to_le_bytes()[..scalar.size() as usize]);
        }
        Buffer::new(elem.clone(), bytes)
    };
    if let Some(values) = parse_list(scalar, spec) {
        let values = values?;
        if values.len() % lanes != 0 {
            return Err(format!(
                "{} values are not a whole number of `{elem}` elements",
                values.len()
            ));
        }
        return Ok(from_values(values));
    }
    let (kind, rest) = spec
        .split_once(':')
        .ok_or_else(|| format!("a buffer takes {BUFFER_SPECS}"))?;
    let length = |text: &str| {
        text.trim()
            .parse::<usize>()
            .map(|len| len * lanes)
            .map_err(|_| format!("`{text}` is not a length"))
    };
    match kind {
        "zeros" => Ok(Buffer::zeros(elem.clone(), length(rest)?)),
        "range" => {
            let values = (0..length(rest)?).map(|i| from_index(scalar, i)).collect();
            Ok(from_values(values))
        }
        "rand" => {
            let (len, bounds) = match rest.split_once(':') {
                Some((len, bounds)) => (len, Some(parse_bounds(scalar, bounds)?)),
                None => (rest, None),
            };
            let values = (0..length(len)?)
                .map(|_| random(scalar, bounds, rng))
                .collect();
            Ok(from_values(values))
        }
        "file" => {
            let bytes =
                std::fs::read(Path::new(rest)).map_err(|e| format!("cannot read `{rest}`: {e}"))?;
            if bytes.len() % elem.size() as usize != 0 {
                return Err(format!(
                    "`{rest}` has {} bytes, not a whole number of `{elem}` elements ({} bytes each)",
                    bytes.len(),
                    elem.size()
                ));
            }
            Ok(Buffer::new(elem.clone(), bytes))
        }
        _ => Err(format!(
            "unknown buffer spec `{kind}:`; a buffer takes {BUFFER_SPECS}"
        )),
    }
}

/// `[a, b, ...]` as values of `scalar`; None when `spec` is not a list.
fn parse_list(scalar: Scalar, spec: &str) -> Option<Result<Vec<Value>, String>> {
    let inner = spec.trim().strip_prefix('[')?.strip_suffix(']')?;
    if inner.trim().is_empty() {
        return Some(Ok(Vec::new()));
    }
    Some(inner.split(',').map(|x| parse_scalar(scalar, x)).collect())
}

/// A number (or `true`/`false`) as a value of `scalar`; integers must fit the type.
pub fn parse_scalar(scalar: Scalar, text: &str) -> Result<Value, String> {
    let text = text.trim();
    let name = scalar.name();
    if scalar == Scalar::Bool {
        return match text {
            "true" | "1" => Ok(Value::Bool(true)),
            "false" | "0" => Ok(Value::Bool(false)),
            _ => Err(format!("`{text}` is not a bool (true or false)")),
        };
    }
    if scalar.is_float() {
        let x: f64 = text
            .parse()
            .map_err(|_| format!("`{text}` is not a number of type {name}"))?;
        return Ok(Value::from_f64(scalar, x));
    }
    let x = parse_int(text).ok_or_else(|| format!("`{text}` is not an integer of type {name}"))?;
    let (min, max) = int_range(scalar);
    if x < min || x > max {
        return Err(format!("{text} does not fit in {name} ({min}..={max})"));
    }
    Ok(Value::from_int(scalar, x))
}

/// A decimal or `0x` hexadecimal integer, optionally negative.
fn parse_int(text: &str) -> Option<i128> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let magnitude = match digits.strip_prefix("0x") {
        Some(hex) => i128::from_str_radix(hex, 16).ok()?,
        None => digits.parse::<i128>().ok()?,
    };
    Some(if negative { -magnitude } else { magnitude })
}

fn int_range(scalar: Scalar) -> (i128, i128) {
    let bits = 8 * scalar.size();
    if scalar.is_signed() {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    } else {
        (0, (1i128 << bits) - 1)
    }
}

/// Half-open bounds `LO..HI` of `rand:` values, as f64 (exact for every integer type up to 2^53).
fn parse_bounds(scalar: Scalar, text: &str) -> Result<(f64, f64), String> {
    let (lo, hi) = text
        .split_once("..")
        .ok_or_else(|| format!("`{text}` is not a range LO..HI"))?;
    let bound = |x: &str| {
        parse_scalar(scalar, x).map(|v| v.as_f64().or(v.as_int().map(|i| i as f64)).unwrap())
    };
    let (lo, hi) = (bound(lo)?, bound(hi)?);
    if lo >= hi {
        return Err(format!("the range `{text}` is empty"));
    }
    Ok((lo, hi))
}

/// Element `i` of `range:`: the index, wrapped to integer types and rounded to float types.
fn from_index(scalar: Scalar, i: usize) -> Value {
    match scalar {
        Scalar::Bool => Value::Bool(i % 2 == 1),
        s if s.is_float() => Value::from_f64(s, i as f64),
        s => Value::from_int(s, i as i128),
    }
}

/// A random value: in `bounds` when given; else floats of magnitude 0.1 to 1 with either sign,
/// and integers with random non-zero bits, so a kernel that skips work or reads the wrong
/// element does not pass by accident.
fn random(scalar: Scalar, bounds: Option<(f64, f64)>, rng: &mut StdRng) -> Value {
    match (scalar, bounds) {
        (Scalar::Bool, _) => Value::Bool(rng.random()),
        (s, Some((lo, hi))) if s.is_float() => Value::from_f64(s, rng.random_range(lo..hi)),
        (s, Some((lo, hi))) => Value::from_int(s, rng.random_range(lo as i128..hi as i128)),
        (s, None) if s.is_float() => {
            let magnitude = rng.random_range(0.1..=1.0);
            Value::from_f64(s, if rng.random() { magnitude } else { -magnitude })
        }
        (s, None) => loop {
            let v = Value::from_bits(s, rng.random());
            if v.to_bits() != 0 {
                break v;
            }
        },
    }
}

/// Elements `range` of a buffer, as text: numbers, vectors as `(x, y)`.
pub fn format_elements(buffer: &Buffer, range: std::ops::Range<usize>) -> Vec<String> {
    let (scalar, lanes) = scalar_of(&buffer.elem);
    let size = scalar.size() as usize;
    let scalar_at = |i: usize| {
        let mut raw = [0u8; 8];
        raw[..size].copy_from_slice(&buffer.bytes[i * size..(i + 1) * size]);
        format_scalar(Value::from_bits(scalar, u64::from_le_bytes(raw)))
    };
    range
        .map(|e| match lanes {
            1 => scalar_at(e),
            _ => {
                let parts: Vec<String> = (e * lanes..(e + 1) * lanes).map(scalar_at).collect();
                format!("({})", parts.join(", "))
            }
        })
        .collect()
}

fn format_scalar(v: Value) -> String {
    match (v.as_int(), v.as_f64()) {
        (_, Some(x)) if v.scalar() == Some(Scalar::F64) => format!("{x}"),
        // Narrower floats print their shortest f32 form, not the f64 expansion.
        (_, Some(x)) => format!("{}", x as f32),
        (Some(_), _) if v.scalar() == Some(Scalar::Bool) => format!("{}", v.to_bits() != 0),
        (Some(i), _) => format!("{i}"),
        (None, None) => unreachable!("buffers hold numbers and bools"),
    }
}

/// The NaN elements of a float buffer (any lane): how many, and the first one's index.
pub fn nans(buffer: &Buffer) -> Option<(usize, usize)> {
    let (scalar, lanes) = scalar_of(&buffer.elem);
    if !scalar.is_float() {
        return None;
    }
    let size = scalar.size() as usize;
    let mut found = None;
    let mut count = 0;
    for (i, chunk) in buffer.bytes.chunks_exact(size).enumerate() {
        let mut raw = [0u8; 8];
        raw[..size].copy_from_slice(chunk);
        let is_nan = Value::from_bits(scalar, u64::from_le_bytes(raw))
            .as_f64()
            .is_some_and(f64::is_nan);
        if is_nan {
            count += 1;
            found.get_or_insert(i / lanes);
        }
    }
    found.map(|first| (count, first))
}

/// The generator for parameter `index`: its own stream, so that values do not shift when other
/// arguments change.
pub fn rng_for(seed: u64, index: usize) -> StdRng {
    StdRng::seed_from_u64(seed ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(elem: Type, mutable: bool) -> Type {
        Type::View {
            space: zinc_dsl::ir::Space::Global,
            elem: Box::new(elem),
            mutable,
        }
    }

    fn f32_view() -> Type {
        view(Type::Scalar(Scalar::F32), false)
    }

    fn parse(ty: &Type, spec: &str) -> Result<Arg, String> {
        parse_arg(ty, spec, &mut rng_for(1, 0))
    }

    #[test]
    fn scalars_are_range_checked_per_type() {
        assert_eq!(parse_scalar(Scalar::U32, "1000"), Ok(Value::U32(1000)));
        assert_eq!(parse_scalar(Scalar::I32, "-0x10"), Ok(Value::I32(-16)));
        assert_eq!(parse_scalar(Scalar::U8, "255"), Ok(Value::U8(255)));
        assert!(parse_scalar(Scalar::U8, "256")
            .unwrap_err()
            .contains("does not fit in u8"));
        assert!(parse_scalar(Scalar::U32, "-1").is_err());
        assert!(parse_scalar(Scalar::U32, "1.5").is_err());
        assert_eq!(parse_scalar(Scalar::F32, "0.25"), Ok(Value::F32(0.25)));
        assert_eq!(
            parse_scalar(Scalar::F16, "1e-8"),
            Ok(Value::F16(half::f16::from_f64(1e-8)))
        );
        assert_eq!(parse_scalar(Scalar::Bool, "true"), Ok(Value::Bool(true)));
    }

    #[test]
    fn buffer_specs_make_typed_buffers() {
        let Arg::ReadOnly(b) = parse(&f32_view(), "range:5").unwrap() else {
            panic!("an input view takes a read-only buffer")
        };
        assert_eq!(b.to_f32(), [0.0, 1.0, 2.0, 3.0, 4.0]);
        let Arg::Buffer(b) = parse(&view(Type::Scalar(Scalar::I32), true), "[1, -2, 3]").unwrap()
        else {
            panic!("a mutable view takes a writable buffer")
        };
        assert_eq!(b.to_i32(), [1, -2, 3]);
        let zeros = parse(&f32_view(), "zeros:3").unwrap();
        assert_eq!(zeros.buffer().unwrap().to_f32(), [0.0; 3]);
        // A vector view counts vectors.
        let u32x4 = view(Type::Vector(Scalar::U32, 4), false);
        let b = parse(&u32x4, "range:2").unwrap();
        assert_eq!(b.buffer().unwrap().bytes.len(), 2 * 16);
        assert_eq!(format_elements(b.buffer().unwrap(), 1..2), ["(4, 5, 6, 7)"]);
        assert!(parse(&u32x4, "[1, 2, 3]")
            .unwrap_err()
            .contains("not a whole number"));
    }

    #[test]
    fn random_values_are_nonzero_reproducible_and_bounded() {
        let draw = |ty: &Type, spec: &str| {
            parse_arg(ty, spec, &mut rng_for(7, 3))
                .unwrap()
                .buffer()
                .unwrap()
                .clone()
        };
        let floats = draw(&f32_view(), "rand:1000").to_f32();
        assert!(floats.iter().all(|x| (0.1..=1.0).contains(&x.abs())));
        assert!(floats.iter().any(|&x| x < 0.0) && floats.iter().any(|&x| x > 0.0));
        assert_eq!(floats, draw(&f32_view(), "rand:1000").to_f32());
        let bytes = draw(&view(Type::Scalar(Scalar::U8), false), "rand:1000").to_u8();
        assert!(bytes.iter().all(|&b| b != 0));
        let ids = draw(&view(Type::Scalar(Scalar::U32), false), "rand:1000:5..9").to_u32();
        assert!(ids.iter().all(|id| (5..9).contains(id)));
        assert!((5..9).all(|id| ids.contains(&id)));
    }

    #[test]
    fn bad_specs_say_what_a_buffer_takes() {
        for spec in ["1000", "ones:4", "rand:x"] {
            let err = parse(&f32_view(), spec).unwrap_err();
            assert!(
                err.contains("rand:LEN") || err.contains("not a length"),
                "{spec}: {err}"
            );
        }
        assert!(parse(&f32_view(), "file:/nonexistent/x.bin")
            .unwrap_err()
            .contains("cannot read"));
        assert!(parse(&Type::Scalar(Scalar::U32), "rand:4").is_err());
    }

    #[test]
    fn nans_are_counted() {
        let b = Buffer::from_f32(&[1.0, f32::NAN, 2.0, f32::NAN]);
        assert_eq!(nans(&b), Some((2, 1)));
        assert_eq!(nans(&Buffer::from_f32(&[1.0])), None);
    }
}
