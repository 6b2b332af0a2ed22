//! Kernel signatures, read from the JSON manifest the compiler writes next to each kernel's PTX.
//!
//! This is the only module that knows the manifest format: `Raw*` types mirror the JSON and
//! [`KernelSignature::from_json`] validates them into the typed form the launch checks use.

use std::collections::HashSet;
use std::path::Path;

use serde::Deserialize;
use thiserror::Error;

use crate::dtype::{DType, ElemType};
use crate::grid_expr::{GridExpr, GridExprError};

#[derive(Debug, Error)]
pub enum SignatureError {
    #[error("cannot read kernel manifest {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("malformed kernel manifest: {0}")]
    Json(#[from] serde_json::Error),
    #[error("kernel `{kernel}`: parameter `{param}` has unknown type `{ty}`")]
    UnknownType {
        kernel: String,
        param: String,
        ty: String,
    },
    #[error("kernel `{kernel}`: parameter `{param}` is a view into `{space}` memory; kernel parameters must be global views")]
    UnsupportedSpace {
        kernel: String,
        param: String,
        space: String,
    },
    #[error("kernel `{kernel}`: parameter `{param}` is declared twice")]
    DuplicateParam { kernel: String, param: String },
    #[error("kernel `{kernel}`: grid.{axis}: {source}")]
    Grid {
        kernel: String,
        axis: char,
        source: GridExprError,
    },
    #[error("kernel `{kernel}`: grid.{axis} `{expr}` reads `{name}`, which is neither an integer scalar parameter nor a specialization constant")]
    UnboundGridName {
        kernel: String,
        axis: char,
        expr: String,
        name: String,
    },
    #[error("kernel name `{0}` is not a valid identifier")]
    BadName(String),
    #[error("kernel `{kernel}`: tensor map over `{param}`: {reason}")]
    TensorMap {
        kernel: String,
        param: String,
        reason: String,
    },
}

/// How a kernel parameter is passed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParamKind {
    /// A pointer into global memory; `mutable` views may be written by the kernel.
    View {
        elem: ElemType,
        mutable: bool,
    },
    Scalar(DType),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    pub name: String,
    pub kind: ParamKind,
}

/// A kernel's launch contract: parameters, block shape, grid expressions, shared memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelSignature {
    pub name: String,
    pub params: Vec<Param>,
    pub block: [u32; 3],
    /// Blocks per cluster per axis ([1, 1, 1]: no clusters): the PTX requires it
    /// (`.reqnctapercluster`), so every grid dimension must be a multiple of it.
    pub cluster: [u32; 3],
    /// Grid size per axis (x, y, z), over the integer scalar parameters and `specialization`.
    pub grid: [GridExpr; 3],
    pub static_shared_bytes: u32,
    pub dynamic_shared_bytes: u32,
    /// Compile-time parameters and the values this PTX was specialized with.
    pub specialization: Vec<(String, String)>,
    /// TMA tensor maps, which the launch encodes and passes after the arguments.
    pub tensor_maps: Vec<TensorMapSpec>,
}

/// A tensor map over view parameter `param` (an index into `params`): `rows` x `cols` elements
/// with dense rows, starting `offset` elements into the buffer, copied in boxes of `box_dims`
/// (rows, columns) that land in the `swizzle`-byte swizzle (0: none, or 32, 64, 128).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorMapSpec {
    pub param: usize,
    pub elem: DType,
    pub offset: GridExpr,
    pub rows: GridExpr,
    pub cols: GridExpr,
    pub box_dims: [u32; 2],
    pub swizzle: u32,
}

fn no_cluster() -> [u32; 3] {
    [1, 1, 1]
}

// Unknown fields are ignored, so the compiler can add fields without breaking the runtime.
#[derive(Deserialize)]
struct RawSignature {
    name: String,
    params: Vec<RawParam>,
    block: [u32; 3],
    #[serde(default = "no_cluster")]
    cluster: [u32; 3],
    grid: [RawGridDim; 3],
    #[serde(default)]
    static_shared_bytes: u32,
    #[serde(default)]
    dynamic_shared_bytes: u32,
    #[serde(default)]
    specialization: Vec<(String, serde_json::Value)>,
    #[serde(default)]
    tensor_maps: Vec<RawTensorMap>,
}

#[derive(Deserialize)]
struct RawTensorMap {
    param: String,
    #[serde(default = "zero_offset")]
    offset: String,
    rows: String,
    cols: String,
    #[serde(rename = "box")]
    box_dims: [u32; 2],
    #[serde(default)]
    swizzle: u32,
}

fn zero_offset() -> String {
    "0".into()
}

#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
enum RawParam {
    View {
        name: String,
        space: String,
        elem: String,
        #[serde(default)]
        mutable: bool,
    },
    Scalar {
        name: String,
        #[serde(rename = "type")]
        ty: String,
    },
}

/// A grid dimension may be written as an expression or, when constant, as a bare number.
#[derive(Deserialize)]
#[serde(untagged)]
enum RawGridDim {
    Number(u64),
    Expr(String),
}

const AXES: [char; 3] = ['x', 'y', 'z'];

impl KernelSignature {
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, SignatureError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| SignatureError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_json(&text)
    }

    pub fn from_json(text: &str) -> Result<Self, SignatureError> {
        let raw: RawSignature = serde_json::from_str(text)?;
        let kernel = raw.name;
        let is_ident = kernel.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && kernel
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !is_ident {
            return Err(SignatureError::BadName(kernel));
        }

        let mut seen = HashSet::new();
        let mut params = Vec::with_capacity(raw.params.len());
        for p in raw.params {
            let param = convert_param(&kernel, p)?;
            if !seen.insert(param.name.clone()) {
                return Err(SignatureError::DuplicateParam {
                    kernel,
                    param: param.name,
                });
            }
            params.push(param);
        }

        let specialization: Vec<(String, String)> = raw
            .specialization
            .into_iter()
            .map(|(name, value)| match value {
                serde_json::Value::String(s) => (name, s),
                other => (name, other.to_string()),
            })
            .collect();

        let mut grid = Vec::with_capacity(3);
        for (axis, dim) in AXES.into_iter().zip(raw.grid) {
            let expr = match dim {
                RawGridDim::Number(n) => GridExpr::parse(&n.to_string()),
                RawGridDim::Expr(text) => GridExpr::parse(&text),
            }
            .map_err(|source| SignatureError::Grid {
                kernel: kernel.clone(),
                axis,
                source,
            })?;
            if let Some(name) = expr
                .names()
                .into_iter()
                .find(|n| !is_bound(&params, &specialization, n))
            {
                return Err(SignatureError::UnboundGridName {
                    kernel: kernel.clone(),
                    axis,
                    expr: expr.text().to_string(),
                    name: name.to_string(),
                });
            }
            grid.push(expr);
        }
        let grid: [GridExpr; 3] = grid.try_into().expect("three grid axes");

        let mut tensor_maps = Vec::with_capacity(raw.tensor_maps.len());
        for m in raw.tensor_maps {
            let bad = |reason: String| SignatureError::TensorMap {
                kernel: kernel.clone(),
                param: m.param.clone(),
                reason,
            };
            let view = params.iter().enumerate().find_map(|(i, p)| match p.kind {
                ParamKind::View { elem, .. } if p.name == m.param && elem.lanes == 1 => {
                    Some((i, elem.scalar))
                }
                _ => None,
            });
            let (param, elem) =
                view.ok_or_else(|| bad("no view parameter of scalars has that name".into()))?;
            if !matches!(m.swizzle, 0 | 32 | 64 | 128) {
                return Err(bad(format!(
                    "swizzle {} is not 0, 32, 64 or 128",
                    m.swizzle
                )));
            }
            let mut extents = Vec::with_capacity(3);
            for text in [&m.offset, &m.rows, &m.cols] {
                let expr = GridExpr::parse(text).map_err(|e| bad(e.to_string()))?;
                if let Some(name) = expr
                    .names()
                    .into_iter()
                    .find(|n| !is_bound(&params, &specialization, n))
                {
                    return Err(bad(format!(
                        "`{name}` in `{text}` is not an integer parameter"
                    )));
                }
                extents.push(expr);
            }
            let [offset, rows, cols]: [GridExpr; 3] =
                extents.try_into().expect("an offset and two extents");
            tensor_maps.push(TensorMapSpec {
                param,
                elem,
                offset,
                rows,
                cols,
                box_dims: m.box_dims,
                swizzle: m.swizzle,
            });
        }

        Ok(KernelSignature {
            name: kernel,
            params,
            block: raw.block,
            cluster: raw.cluster,
            grid,
            static_shared_bytes: raw.static_shared_bytes,
            dynamic_shared_bytes: raw.dynamic_shared_bytes,
            specialization,
            tensor_maps,
        })
    }

    /// The integer value of a specialization constant, for grid expressions.
    pub fn specialization_int(&self, name: &str) -> Option<i128> {
        specialization_value(&self.specialization, name)
    }
}

/// Whether a manifest expression may read `name`: an integer scalar parameter or a
/// specialization constant.
fn is_bound(params: &[Param], spec: &[(String, String)], name: &str) -> bool {
    let is_int_scalar = params
        .iter()
        .any(|p| p.name == name && matches!(p.kind, ParamKind::Scalar(t) if is_index_type(t)));
    is_int_scalar || specialization_value(spec, name).is_some()
}

fn is_index_type(t: DType) -> bool {
    matches!(t, DType::I32 | DType::I64 | DType::U32 | DType::U64)
}

fn specialization_value(spec: &[(String, String)], name: &str) -> Option<i128> {
    spec.iter()
        .find(|(n, _)| n == name)
        .and_then(|(_, v)| v.parse().ok())
}

fn convert_param(kernel: &str, raw: RawParam) -> Result<Param, SignatureError> {
    let unknown = |param: &str, ty: &str| SignatureError::UnknownType {
        kernel: kernel.to_string(),
        param: param.to_string(),
        ty: ty.to_string(),
    };
    match raw {
        RawParam::View {
            name,
            space,
            elem,
            mutable,
        } => {
            if space != "global" {
                return Err(SignatureError::UnsupportedSpace {
                    kernel: kernel.to_string(),
                    param: name,
                    space,
                });
            }
            let elem = ElemType::parse(&elem).ok_or_else(|| unknown(&name, &elem))?;
            Ok(Param {
                name,
                kind: ParamKind::View { elem, mutable },
            })
        }
        RawParam::Scalar { name, ty } => {
            let ty = DType::parse(&ty).ok_or_else(|| unknown(&name, &ty))?;
            Ok(Param {
                name,
                kind: ParamKind::Scalar(ty),
            })
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) const VECTOR_ADD: &str = r#"{
        "name": "vector_add",
        "params": [
            {"name": "a", "kind": "view", "space": "global", "elem": "f32", "mutable": false},
            {"name": "b", "kind": "view", "space": "global", "elem": "f32", "mutable": false},
            {"name": "c", "kind": "view", "space": "global", "elem": "f32", "mutable": true},
            {"name": "n", "kind": "scalar", "type": "u32"}
        ],
        "block": [256, 1, 1],
        "grid": ["((n + 255) / 256)", "1", "1"],
        "static_shared_bytes": 0,
        "dynamic_shared_bytes": 0,
        "specialization": [["BLOCK", "256"]]
    }"#;

    fn with_field(field: &str, value: &str) -> String {
        let mut v: serde_json::Value = serde_json::from_str(VECTOR_ADD).unwrap();
        v[field] = serde_json::from_str(value).unwrap();
        v.to_string()
    }

    #[test]
    fn parses_the_vector_add_manifest() {
        let sig = KernelSignature::from_json(VECTOR_ADD).unwrap();
        assert_eq!(sig.name, "vector_add");
        assert_eq!(sig.block, [256, 1, 1]);
        assert_eq!(sig.params.len(), 4);
        assert_eq!(
            sig.params[2].kind,
            ParamKind::View {
                elem: ElemType::scalar(DType::F32),
                mutable: true
            }
        );
        assert_eq!(sig.params[3].kind, ParamKind::Scalar(DType::U32));
        assert_eq!(sig.grid[0].text(), "((n + 255) / 256)");
        assert_eq!(sig.specialization_int("BLOCK"), Some(256));
    }

    #[test]
    fn optional_fields_default_and_numbers_are_accepted() {
        let text = r#"{"name": "k", "params": [{"name": "y", "kind": "view", "space": "global", "elem": "f16"}],
                       "block": [32, 1, 1], "grid": [4, 1, "1"], "specialization": [["TILE", 16]]}"#;
        let sig = KernelSignature::from_json(text).unwrap();
        assert_eq!(
            sig.params[0].kind,
            ParamKind::View {
                elem: ElemType::scalar(DType::F16),
                mutable: false
            }
        );
        assert_eq!(sig.dynamic_shared_bytes, 0);
        assert_eq!(sig.grid[0].text(), "4");
        assert_eq!(sig.specialization_int("TILE"), Some(16));
    }

    #[test]
    fn grid_may_read_specialization_constants() {
        let text = with_field("grid", r#"["cdiv(n, BLOCK)", "1", "1"]"#);
        assert!(KernelSignature::from_json(&text).is_ok());
    }

    #[test]
    fn rejects_bad_manifests() {
        let err = |text: &str| KernelSignature::from_json(text).unwrap_err();
        assert!(matches!(
            err(&with_field("grid", r#"["cdiv(m, 256)", "1", "1"]"#)),
            SignatureError::UnboundGridName { axis: 'x', name, .. } if name == "m"
        ));
        assert!(matches!(
            err(&with_field("grid", r#"["(n + 1", "1", "1"]"#)),
            SignatureError::Grid { axis: 'x', .. }
        ));
        assert!(matches!(
            err(&with_field("name", r#""vector add""#)),
            SignatureError::BadName(_)
        ));
        assert!(matches!(err("{"), SignatureError::Json(_)));
        assert!(matches!(
            err(&with_field("grid", r#"["1", "1"]"#)),
            SignatureError::Json(_)
        ));

        let params = |p: &str| with_field("params", p);
        assert!(matches!(
            err(&params(r#"[{"name": "a", "kind": "view", "space": "global", "elem": "f33"}]"#)),
            SignatureError::UnknownType { ty, .. } if ty == "f33"
        ));
        assert!(matches!(
            err(&params(
                r#"[{"name": "a", "kind": "view", "space": "shared", "elem": "f32"}]"#
            )),
            SignatureError::UnsupportedSpace { .. }
        ));
        assert!(matches!(
            err(&params(
                r#"[{"name": "n", "kind": "scalar", "type": "u32"}, {"name": "n", "kind": "scalar", "type": "u32"}]"#
            )),
            SignatureError::DuplicateParam { .. }
        ));
        assert!(matches!(
            err(&params(r#"[{"name": "n", "kind": "tensor"}]"#)),
            SignatureError::Json(_)
        ));
        // A float scalar cannot size a grid.
        assert!(matches!(
            err(&params(
                r#"[{"name": "n", "kind": "scalar", "type": "f32"}]"#
            )),
            SignatureError::UnboundGridName { .. }
        ));
    }
}
