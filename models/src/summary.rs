//! A model's vital statistics from its GGUF header, as `zinc info` shows them.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::gguf::{FromValue, Gguf, GgufError, Value};

/// What `zinc info` reports. Absent keys are `None`; keys present with the wrong type are errors.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub architecture: Option<String>,
    pub name: Option<String>,
    pub file_size: u64,
    pub gguf_version: u32,
    /// llama.cpp's name for `general.file_type`, e.g. `"Q4_K_M"`.
    pub file_type: Option<String>,
    pub parameter_count: u64,
    pub tensor_count: usize,
    /// Per tensor type, ordered by type name.
    pub tensor_types: Vec<TypeStats>,
    pub context_length: Option<u64>,
    pub embedding_length: Option<u64>,
    pub block_count: Option<u64>,
    pub feed_forward_length: Option<u64>,
    pub head_count: Option<u64>,
    pub head_count_kv: Option<u64>,
    pub expert_count: Option<u64>,
    pub expert_used_count: Option<u64>,
    pub vocab_size: Option<u64>,
    pub tokenizer_model: Option<String>,
    pub bos_token_id: Option<u64>,
    pub eos_token_id: Option<u64>,
    pub chat_template: Option<ChatTemplate>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TypeStats {
    /// The ggml type name, or `"unknown(ID)"` for a type id this reader does not know.
    #[serde(rename = "type")]
    pub type_name: String,
    pub tensors: usize,
    pub parameters: u64,
    /// Unknown for unknown types.
    pub bytes: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatTemplate {
    pub chars: usize,
    pub first_line: String,
}

type Result<T> = std::result::Result<T, GgufError>;

pub fn summary(g: &Gguf) -> Result<Summary> {
    let architecture: Option<String> = g.get_opt::<&str>("general.architecture")?.map(Into::into);
    let arch = |suffix: &str| arch_count(g, architecture.as_deref(), suffix);

    let mut types: BTreeMap<String, TypeStats> = BTreeMap::new();
    for t in g.tensors() {
        let type_name = match t.ggml_type() {
            Ok(ty) => ty.name().to_string(),
            Err(_) => format!("unknown({})", t.type_id),
        };
        let stats = types.entry(type_name.clone()).or_insert(TypeStats {
            type_name,
            tensors: 0,
            parameters: 0,
            bytes: Some(0),
        });
        // Saturating: only tensors of known types have sizes bounded by the file.
        stats.tensors += 1;
        stats.parameters = stats.parameters.saturating_add(t.n_elements());
        stats.bytes = stats
            .bytes
            .zip(t.n_bytes().ok())
            .map(|(a, b)| a.saturating_add(b));
    }

    let vocab_size = match g.get_opt::<&[String]>("tokenizer.ggml.tokens")? {
        Some(tokens) => Some(tokens.len() as u64),
        None => arch("vocab_size")?,
    };
    let chat_template = g
        .get_opt::<&str>("tokenizer.chat_template")?
        .map(|t| ChatTemplate {
            chars: t.chars().count(),
            first_line: t
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("")
                .trim()
                .to_string(),
        });

    Ok(Summary {
        name: g.get_opt::<&str>("general.name")?.map(Into::into),
        file_size: g.file_size(),
        gguf_version: g.version(),
        file_type: g.get_opt::<u32>("general.file_type")?.map(file_type_name),
        parameter_count: g
            .tensors()
            .iter()
            .fold(0, |n, t| n.saturating_add(t.n_elements())),
        tensor_count: g.tensors().len(),
        tensor_types: types.into_values().collect(),
        context_length: arch("context_length")?,
        embedding_length: arch("embedding_length")?,
        block_count: arch("block_count")?,
        feed_forward_length: arch("feed_forward_length")?,
        head_count: arch("attention.head_count")?,
        head_count_kv: arch("attention.head_count_kv")?,
        expert_count: arch("expert_count")?,
        expert_used_count: arch("expert_used_count")?,
        vocab_size,
        tokenizer_model: g.get_opt::<&str>("tokenizer.ggml.model")?.map(Into::into),
        bos_token_id: g.get_opt("tokenizer.ggml.bos_token_id")?,
        eos_token_id: g.get_opt("tokenizer.ggml.eos_token_id")?,
        chat_template,
        architecture,
    })
}

/// The integer `{arch}.{suffix}`. Some architectures store per-layer arrays for keys such as
/// the head counts (layers without attention have 0); for those this reports the largest.
fn arch_count(g: &Gguf, arch: Option<&str>, suffix: &str) -> Result<Option<u64>> {
    let Some(arch) = arch else { return Ok(None) };
    let key = format!("{arch}.{suffix}");
    match g.get(&key) {
        Some(value @ Value::Array(a)) => {
            let per_layer = a.to_i128s().ok_or_else(|| GgufError::WrongType {
                key: key.clone(),
                expected: "integer or array of integers",
                found: value.type_description(),
            })?;
            Ok(per_layer
                .into_iter()
                .max()
                .and_then(|m| u64::try_from(m).ok()))
        }
        Some(value) => u64::from_value(value)
            .map(Some)
            .ok_or_else(|| GgufError::WrongType {
                key,
                expected: u64::EXPECTED,
                found: value.type_description(),
            }),
        None => Ok(None),
    }
}

/// llama.cpp's `llama_ftype` names.
fn file_type_name(id: u32) -> String {
    let name = match id {
        0 => "F32",
        1 => "F16",
        2 => "Q4_0",
        3 => "Q4_1",
        7 => "Q8_0",
        8 => "Q5_0",
        9 => "Q5_1",
        10 => "Q2_K",
        11 => "Q3_K_S",
        12 => "Q3_K_M",
        13 => "Q3_K_L",
        14 => "Q4_K_S",
        15 => "Q4_K_M",
        16 => "Q5_K_S",
        17 => "Q5_K_M",
        18 => "Q6_K",
        19 => "IQ2_XXS",
        20 => "IQ2_XS",
        21 => "Q2_K_S",
        22 => "IQ3_XS",
        23 => "IQ3_XXS",
        24 => "IQ1_S",
        25 => "IQ4_NL",
        26 => "IQ3_S",
        27 => "IQ3_M",
        28 => "IQ2_S",
        29 => "IQ2_M",
        30 => "IQ4_XS",
        31 => "IQ1_M",
        32 => "BF16",
        36 => "TQ1_0",
        37 => "TQ2_0",
        38 => "MXFP4_MOE",
        _ => return format!("unknown({id})"),
    };
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::{write, Array, TensorSpec};
    use crate::quant::GgmlType;

    fn file(metadata: Vec<(&str, Value)>) -> Gguf {
        let metadata: Vec<(String, Value)> = metadata
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        let spec = |name: &str, dims: &[u64], ty| TensorSpec {
            name: name.into(),
            dims: dims.to_vec(),
            ty,
        };
        let tensors = [
            (spec("a", &[32, 2], GgmlType::Q8_0), &[0u8; 68][..]),
            (spec("b", &[32], GgmlType::Q8_0), &[0u8; 34][..]),
            (spec("c", &[3], GgmlType::F32), &[0u8; 12][..]),
        ];
        Gguf::from_bytes(write(Vec::new(), &metadata, &tensors).unwrap()).unwrap()
    }

    #[test]
    fn summarizes_a_moe_model() {
        let g = file(vec![
            ("general.architecture", Value::String("qwen3moe".into())),
            ("general.name", Value::String("Tiny MoE".into())),
            ("general.file_type", Value::U32(15)),
            ("qwen3moe.context_length", Value::U64(40960)),
            ("qwen3moe.embedding_length", Value::U32(64)),
            ("qwen3moe.block_count", Value::U32(2)),
            ("qwen3moe.attention.head_count", Value::U32(8)),
            // Per-layer counts, as hybrid models store them: the largest is reported.
            (
                "qwen3moe.attention.head_count_kv",
                Value::Array(Array::U32(vec![0, 4])),
            ),
            ("qwen3moe.expert_count", Value::U32(16)),
            ("qwen3moe.expert_used_count", Value::U32(4)),
            ("tokenizer.ggml.model", Value::String("gpt2".into())),
            (
                "tokenizer.ggml.tokens",
                Value::Array(Array::String(vec!["a".into(), "b".into()])),
            ),
            ("tokenizer.ggml.bos_token_id", Value::U32(0)),
            ("tokenizer.ggml.eos_token_id", Value::I32(1)),
            (
                "tokenizer.chat_template",
                Value::String("\n  {%- for m in messages %}\n{{ m }}\n{% endfor %}".into()),
            ),
        ]);
        let s = summary(&g).unwrap();
        assert_eq!(s.architecture.as_deref(), Some("qwen3moe"));
        assert_eq!(s.name.as_deref(), Some("Tiny MoE"));
        assert_eq!(s.file_type.as_deref(), Some("Q4_K_M"));
        assert_eq!((s.parameter_count, s.tensor_count), (99, 3));
        assert_eq!(
            s.tensor_types,
            [
                TypeStats {
                    type_name: "F32".into(),
                    tensors: 1,
                    parameters: 3,
                    bytes: Some(12)
                },
                TypeStats {
                    type_name: "Q8_0".into(),
                    tensors: 2,
                    parameters: 96,
                    bytes: Some(102)
                },
            ]
        );
        assert_eq!(s.context_length, Some(40960));
        assert_eq!(
            (s.embedding_length, s.block_count, s.feed_forward_length),
            (Some(64), Some(2), None)
        );
        assert_eq!((s.head_count, s.head_count_kv), (Some(8), Some(4)));
        assert_eq!((s.expert_count, s.expert_used_count), (Some(16), Some(4)));
        assert_eq!(
            (s.vocab_size, s.tokenizer_model.as_deref()),
            (Some(2), Some("gpt2"))
        );
        assert_eq!((s.bos_token_id, s.eos_token_id), (Some(0), Some(1)));
        let template = s.chat_template.unwrap();
        assert_eq!(template.first_line, "{%- for m in messages %}");
        assert_eq!(template.chars, 48);
    }

    #[test]
    fn missing_keys_are_none_and_wrong_types_are_errors() {
        let s = summary(&file(vec![])).unwrap();
        assert_eq!(
            (
                s.architecture,
                s.context_length,
                s.vocab_size,
                s.chat_template
            ),
            (None, None, None, None)
        );
        let g = file(vec![
            ("general.architecture", Value::String("llama".into())),
            ("llama.block_count", Value::String("32".into())),
        ]);
        assert_eq!(
            summary(&g).unwrap_err().to_string(),
            "metadata key 'llama.block_count' is string, expected u64"
        );
    }
}
