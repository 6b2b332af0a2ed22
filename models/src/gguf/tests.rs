use super::*;
use crate::quant::quantize_row;

/// Tensor specs with their data.
type Tensors = Vec<(TensorSpec, Vec<u8>)>;

fn kv(key: &str, value: Value) -> (String, Value) {
    (key.to_string(), value)
}

fn spec(name: &str, dims: &[u64], ty: GgmlType) -> TensorSpec {
    TensorSpec {
        name: name.into(),
        dims: dims.to_vec(),
        ty,
    }
}

/// One value of every type, including nested and empty arrays.
fn all_values() -> Vec<(String, Value)> {
    vec![
        kv("general.architecture", Value::String("llama".into())),
        kv("u8", Value::U8(200)),
        kv("i8", Value::I8(-100)),
        kv("u16", Value::U16(60000)),
        kv("i16", Value::I16(-30000)),
        kv("u32", Value::U32(4_000_000_000)),
        kv("i32", Value::I32(-2_000_000_000)),
        kv("f32", Value::F32(-1.5e-7)),
        kv("bool", Value::Bool(true)),
        kv("string", Value::String("héllo ✓".into())),
        kv("empty string", Value::String(String::new())),
        kv("u64", Value::U64(u64::MAX)),
        kv("i64", Value::I64(i64::MIN)),
        kv("f64", Value::F64(std::f64::consts::PI)),
        kv("llama.block_count", Value::U64(2)),
        kv("a.u8", Value::Array(Array::U8(vec![1, 2, 255]))),
        kv("a.i8", Value::Array(Array::I8(vec![-1, 127]))),
        kv("a.u16", Value::Array(Array::U16(vec![7]))),
        kv("a.i16", Value::Array(Array::I16(vec![-7, 8]))),
        kv("a.u32", Value::Array(Array::U32(vec![1, u32::MAX]))),
        kv("a.i32", Value::Array(Array::I32(vec![-3, 0, 3]))),
        kv("a.f32", Value::Array(Array::F32(vec![0.5, -0.25]))),
        kv("a.bool", Value::Array(Array::Bool(vec![true, false, true]))),
        kv(
            "a.string",
            Value::Array(Array::String(vec!["a".into(), String::new(), "<s>".into()])),
        ),
        kv("a.u64", Value::Array(Array::U64(vec![u64::MAX]))),
        kv("a.i64", Value::Array(Array::I64(vec![i64::MIN, 5]))),
        kv("a.f64", Value::Array(Array::F64(vec![1e300]))),
        kv("a.empty", Value::Array(Array::F32(vec![]))),
        kv(
            "a.nested",
            Value::Array(Array::Array(vec![
                Array::U8(vec![1]),
                Array::String(vec!["x".into()]),
                Array::Array(vec![Array::I64(vec![]), Array::Bool(vec![false])]),
                Array::Array(vec![]),
            ])),
        ),
    ]
}

fn row_bytes(ty: GgmlType, values: &[f32]) -> Vec<u8> {
    let mut out = vec![0; values.len() / ty.block_size() * ty.type_size()];
    quantize_row(ty, values, &mut out).unwrap();
    out
}

fn ramp(n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
        .collect()
}

/// A small valid file: all value types and tensors of several types and shapes.
fn sample() -> (Vec<(String, Value)>, Tensors) {
    let tensors = vec![
        (
            spec("norm.weight", &[5], GgmlType::F32),
            row_bytes(GgmlType::F32, &ramp(5)),
        ),
        (
            spec("blk.0.attn_q.weight", &[256, 2], GgmlType::Q4_K),
            row_bytes(GgmlType::Q4_K, &ramp(512)),
        ),
        (
            spec("scalar", &[], GgmlType::F16),
            row_bytes(GgmlType::F16, &[3.0]),
        ),
        (
            spec("embd", &[32, 3, 1, 1], GgmlType::Q8_0),
            row_bytes(GgmlType::Q8_0, &ramp(96)),
        ),
    ];
    (all_values(), tensors)
}

fn write_file(metadata: &[(String, Value)], tensors: &[(TensorSpec, Vec<u8>)]) -> Vec<u8> {
    let borrowed: Vec<(TensorSpec, &[u8])> = tensors
        .iter()
        .map(|(s, d)| (s.clone(), d.as_slice()))
        .collect();
    write(Vec::new(), metadata, &borrowed).unwrap()
}

fn sample_bytes() -> Vec<u8> {
    let (metadata, tensors) = sample();
    write_file(&metadata, &tensors)
}

fn parse_err(bytes: Vec<u8>) -> GgufError {
    match Gguf::from_bytes(bytes) {
        Ok(_) => panic!("expected a parse error"),
        Err(e) => e,
    }
}

/// Byte position just after the first occurrence of `needle`.
fn after(bytes: &[u8], needle: &[u8]) -> usize {
    bytes
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("needle present")
        + needle.len()
}

/// Position of the data-offset field of tensor `name` (which must have `n_dims` dimensions).
fn offset_field(bytes: &[u8], name: &str, n_dims: usize) -> usize {
    after(bytes, name.as_bytes()) + 4 + 8 * n_dims + 4
}

/// A raw header for hand-made malformed files.
fn raw(version: u32, n_tensors: u64, n_kv: u64) -> Vec<u8> {
    let mut b = MAGIC.to_vec();
    b.extend(version.to_le_bytes());
    b.extend(n_tensors.to_le_bytes());
    b.extend(n_kv.to_le_bytes());
    b
}

fn push_str(b: &mut Vec<u8>, s: &str) {
    b.extend((s.len() as u64).to_le_bytes());
    b.extend(s.as_bytes());
}

#[test]
fn round_trips_every_value_type() {
    let (metadata, tensors) = sample();
    let g = Gguf::from_bytes(write_file(&metadata, &tensors)).unwrap();
    assert_eq!(g.version(), 3);
    assert_eq!(g.metadata(), metadata.as_slice());
    for (key, value) in &metadata {
        assert_eq!(g.get(key), Some(value), "{key}");
    }
    assert_eq!(g.alignment(), DEFAULT_ALIGNMENT);
    assert_eq!(g.data_offset() % DEFAULT_ALIGNMENT, 0);
    assert_eq!(g.tensors().len(), tensors.len());
    for (spec, data) in &tensors {
        let t = g.tensor(&spec.name).unwrap();
        assert_eq!((&t.dims, t.ggml_type().unwrap()), (&spec.dims, spec.ty));
        assert_eq!(t.offset % DEFAULT_ALIGNMENT, 0);
        assert_eq!(g.tensor_data(t).unwrap(), data.as_slice());
    }
    assert_eq!(g.tensor("scalar").unwrap().n_elements(), 1);
}

#[test]
fn typed_accessors() {
    let g = Gguf::from_bytes(sample_bytes()).unwrap();
    assert_eq!(g.get_u32("u32").unwrap(), 4_000_000_000);
    // Integers convert across widths when the value fits.
    assert_eq!(g.get_u32("u8").unwrap(), 200);
    assert_eq!(g.get_u64("u64").unwrap(), u64::MAX);
    assert!(matches!(
        g.get_u32("u64"),
        Err(GgufError::WrongType {
            expected: "u32",
            ..
        })
    ));
    assert!(matches!(g.get_u32("i8"), Err(GgufError::WrongType { .. })));
    assert_eq!(g.get_f32("f32").unwrap(), -1.5e-7);
    assert_eq!(g.get_f32("f64").unwrap(), std::f64::consts::PI as f32);
    assert!(g.get_bool("bool").unwrap());
    assert_eq!(g.get_str("string").unwrap(), "héllo ✓");
    assert_eq!(g.get_str_array("a.string").unwrap(), ["a", "", "<s>"]);
    assert_eq!(g.get_f32_array("a.f32").unwrap(), [0.5, -0.25]);
    assert_eq!(g.get_i32_array("a.i32").unwrap(), [-3, 0, 3]);
    assert_eq!(g.get_as::<&[u32]>("a.u32").unwrap(), [1, u32::MAX]);
    assert_eq!(g.architecture().unwrap(), "llama");
    assert_eq!(g.arch_key("block_count").unwrap(), "llama.block_count");
    assert_eq!(g.get_u32(&g.arch_key("block_count").unwrap()).unwrap(), 2);
    assert_eq!(g.get_opt::<u32>("absent").unwrap(), None);

    let missing = g.get_str("absent").unwrap_err();
    assert_eq!(missing.to_string(), "metadata key 'absent' not found");
    let wrong = g.get_str_array("a.f32").unwrap_err();
    assert_eq!(
        wrong.to_string(),
        "metadata key 'a.f32' is array of f32, expected array of String"
    );
}

#[test]
fn tensor_f32_dequantizes_in_parallel_chunks() {
    // Several dequantization chunks, and a final partial one.
    let n = 3 * DEQUANT_CHUNK + 256 * 5;
    let values = ramp(n);
    let data = row_bytes(GgmlType::Q4_K, &values);
    let bytes = write_file(
        &[],
        &[(
            spec("w", &[256, (n / 256) as u64], GgmlType::Q4_K),
            data.clone(),
        )],
    );
    let g = Gguf::from_bytes(bytes).unwrap();
    let mut expected = vec![0.0; n];
    crate::quant::dequantize_row(GgmlType::Q4_K, &data, &mut expected).unwrap();
    assert_eq!(g.tensor_f32("w").unwrap(), expected);
    assert!(matches!(
        g.tensor_f32("nope"),
        Err(GgufError::MissingTensor { .. })
    ));
}

#[test]
fn custom_alignment_is_honoured() {
    let metadata = vec![kv(ALIGNMENT_KEY, Value::U32(256))];
    let tensors = vec![
        (
            spec("a", &[3], GgmlType::F32),
            row_bytes(GgmlType::F32, &[1.0, 2.0, 3.0]),
        ),
        (
            spec("b", &[1], GgmlType::F32),
            row_bytes(GgmlType::F32, &[4.0]),
        ),
    ];
    let g = Gguf::from_bytes(write_file(&metadata, &tensors)).unwrap();
    assert_eq!(g.alignment(), 256);
    assert_eq!(g.data_offset() % 256, 0);
    assert_eq!(g.tensor("b").unwrap().offset, 256);
    assert_eq!(g.tensor_f32("b").unwrap(), [4.0]);
}

#[test]
fn rejects_bad_alignment() {
    let tensors: Tensors = Vec::new();
    let mut bytes = write_file(&[kv(ALIGNMENT_KEY, Value::U32(64))], &tensors);
    let at = after(&bytes, ALIGNMENT_KEY.as_bytes()) + 4;
    bytes[at..at + 4].copy_from_slice(&48u32.to_le_bytes());
    assert!(matches!(
        parse_err(bytes.clone()),
        GgufError::BadAlignment { value: 48 }
    ));
    bytes[at..at + 4].copy_from_slice(&0u32.to_le_bytes());
    assert!(matches!(
        parse_err(bytes),
        GgufError::BadAlignment { value: 0 }
    ));

    let mut b = raw(3, 0, 1);
    push_str(&mut b, ALIGNMENT_KEY);
    b.extend(ValueType::String.id().to_le_bytes());
    push_str(&mut b, "32");
    assert_eq!(
        parse_err(b).to_string(),
        "metadata key 'general.alignment' is string, expected u32"
    );
}

#[test]
fn every_truncation_is_an_error() {
    let bytes = sample_bytes();
    let g = Gguf::from_bytes(bytes.clone()).unwrap();
    // The file may end with alignment padding after the last tensor; cutting that is harmless.
    let data_end = g
        .tensors()
        .iter()
        .map(|t| g.data_offset() + t.offset + t.n_bytes().unwrap())
        .max()
        .unwrap();
    for len in 0..data_end as usize {
        let err = parse_err(bytes[..len].to_vec());
        // Cuts in the padding before the data section leave the header whole.
        let expected_kind = matches!(err, GgufError::OutOfBounds { .. })
            || len < g.data_offset() as usize
                && matches!(
                    err,
                    GgufError::Truncated { .. }
                        | GgufError::InKey { .. }
                        | GgufError::InTensorInfo { .. }
                        | GgufError::CountTooLarge { .. }
                );
        assert!(expected_kind, "cut at {len}: {err}");
    }
}

#[test]
fn truncation_errors_name_what_and_where() {
    let err = parse_err(b"GGUF\x03\x00".to_vec());
    assert_eq!(
        err.to_string(),
        "file truncated: version at offset 4 needs 4 bytes, but only 2 remain"
    );
    let bytes = sample_bytes();
    // Past the length check (3 strings need at least 24 bytes) but inside the last string.
    let cut = after(&bytes, b"a.string") + 4 + 4 + 8 + 26;
    let err = parse_err(bytes[..cut].to_vec());
    assert!(
        err.to_string()
            .starts_with("metadata key 'a.string': file truncated: string array element at offset"),
        "{err}"
    );
}

#[test]
fn rejects_bad_magic_and_version() {
    let mut bytes = sample_bytes();
    bytes[..4].copy_from_slice(b"GGML");
    assert_eq!(
        parse_err(bytes).to_string(),
        "not a GGUF file: magic at offset 0 is \"GGML\", expected \"GGUF\""
    );
    for version in [0u32, 1, 4, 3 << 24] {
        let mut bytes = sample_bytes();
        bytes[4..8].copy_from_slice(&version.to_le_bytes());
        assert!(
            matches!(parse_err(bytes), GgufError::UnsupportedVersion { version: v } if v == version)
        );
    }
    let mut v2 = sample_bytes();
    v2[4..8].copy_from_slice(&2u32.to_le_bytes());
    assert_eq!(Gguf::from_bytes(v2).unwrap().version(), 2);
}

#[test]
fn rejects_absurd_counts_before_allocating() {
    let err = parse_err(raw(3, u64::MAX, 0));
    assert!(
        matches!(
            err,
            GgufError::CountTooLarge {
                what: "tensor count",
                offset: 8,
                ..
            }
        ),
        "{err}"
    );
    let err = parse_err(raw(3, 0, 1 << 60));
    assert!(
        matches!(
            err,
            GgufError::CountTooLarge {
                what: "metadata count",
                offset: 16,
                ..
            }
        ),
        "{err}"
    );

    // An array claiming 2^62 strings, in a tiny file.
    let mut b = raw(3, 0, 1);
    push_str(&mut b, "k");
    b.extend(ValueType::Array.id().to_le_bytes());
    b.extend(ValueType::String.id().to_le_bytes());
    b.extend((1u64 << 62).to_le_bytes());
    b.extend([0; 16]);
    let err = parse_err(b);
    assert!(
        err.to_string().starts_with(
            "metadata key 'k': array length 4611686018427387904 at offset 41 is impossible"
        ),
        "{err}"
    );

    // A string claiming u64::MAX bytes.
    let mut b = raw(3, 0, 1);
    b.extend(u64::MAX.to_le_bytes());
    b.extend([b'x'; 20]);
    assert!(matches!(
        parse_err(b),
        GgufError::Truncated {
            what: "metadata key",
            needed: u64::MAX,
            ..
        }
    ));
}

fn single_value_file(ty: ValueType, payload: &[u8]) -> Vec<u8> {
    let mut b = raw(3, 0, 1);
    push_str(&mut b, "k");
    b.extend(ty.id().to_le_bytes());
    b.extend(payload);
    b
}

#[test]
fn rejects_malformed_values() {
    let mut b = raw(3, 0, 1);
    push_str(&mut b, "k");
    b.extend(13u32.to_le_bytes());
    let err = parse_err(b);
    assert_eq!(
        err.to_string(),
        "metadata key 'k': unknown metadata value type 13 at offset 33"
    );

    let err = parse_err(single_value_file(ValueType::Bool, &[2]));
    assert!(
        matches!(err, GgufError::InKey { error, .. } if matches!(*error, GgufError::BadBool { value: 2, offset: 37 }))
    );

    let mut s = 3u64.to_le_bytes().to_vec();
    s.extend(b"a\xffb");
    let err = parse_err(single_value_file(ValueType::String, &s));
    assert!(
        matches!(err, GgufError::InKey { error, .. } if matches!(*error, GgufError::BadUtf8 { offset: 46 }))
    );

    // Arrays of arrays nested past the limit: each level is a type tag and a count of one.
    let mut nested = Vec::new();
    for _ in 0..=MAX_ARRAY_DEPTH {
        nested.extend(ValueType::Array.id().to_le_bytes());
        nested.extend(1u64.to_le_bytes());
    }
    nested.extend([0; 12]);
    let err = parse_err(single_value_file(ValueType::Array, &nested));
    assert!(
        matches!(err, GgufError::InKey { error, .. } if matches!(*error, GgufError::NestingTooDeep { .. }))
    );

    let mut b = raw(3, 0, 2);
    for _ in 0..2 {
        push_str(&mut b, "dup");
        b.extend(ValueType::U8.id().to_le_bytes());
        b.push(0);
    }
    assert_eq!(
        parse_err(b).to_string(),
        "duplicate metadata key 'dup' at offset 40"
    );
}

#[test]
fn rejects_malformed_tensor_infos() {
    let tensor = |name: &str, dims: &[u64], type_id: u32, offset: u64| {
        let mut b = Vec::new();
        push_str(&mut b, name);
        b.extend((dims.len() as u32).to_le_bytes());
        dims.iter().for_each(|d| b.extend(d.to_le_bytes()));
        b.extend(type_id.to_le_bytes());
        b.extend(offset.to_le_bytes());
        b
    };
    let file = |infos: &[Vec<u8>], data: usize| {
        let mut b = raw(3, infos.len() as u64, 0);
        infos.iter().for_each(|i| b.extend(i));
        b.resize(b.len().next_multiple_of(32) + data, 0);
        b
    };

    let err = parse_err(file(&[tensor("t", &[1, 1, 1, 1, 1], 0, 0)], 64));
    assert_eq!(
        err.to_string(),
        "tensor info #0: tensor 't' has 5 dimensions (offset 33); at most 4 are allowed"
    );
    let err = parse_err(file(&[tensor("t", &[1 << 32, 1 << 32], 0, 0)], 64));
    assert!(
        matches!(err, GgufError::InTensorInfo { error, .. } if matches!(*error, GgufError::ShapeOverflow { .. }))
    );
    let err = parse_err(file(
        &[tensor("t", &[4], 0, 0), tensor("t", &[4], 0, 32)],
        64,
    ));
    assert!(matches!(err, GgufError::DuplicateTensor { .. }), "{err}");
    let err = parse_err(file(&[tensor("t", &[4], 0, 8)], 64));
    assert_eq!(
        err.to_string(),
        "tensor 't' data offset 8 is not a multiple of the alignment 32"
    );
    let err = parse_err(file(&[tensor("t", &[100], GgmlType::Q8_0.id(), 0)], 256));
    assert_eq!(
        err.to_string(),
        "tensor 't' of type Q8_0: row length 100 is not a multiple of the block size 32"
    );
    let err = parse_err(file(&[tensor("t", &[17], 0, 0)], 64));
    assert_eq!(
        err.to_string(),
        "tensor 't' data (offset 64, 68 bytes) runs past the end of the file (size 128)"
    );
    let err = parse_err(file(&[tensor("t", &[4], 0, u64::MAX - 31)], 64));
    assert!(matches!(err, GgufError::OutOfBounds { .. }), "{err}");
}

#[test]
fn tensor_out_of_bounds_in_written_file() {
    let mut bytes = sample_bytes();
    let (size, data_offset) = (
        bytes.len(),
        Gguf::from_bytes(bytes.clone()).unwrap().data_offset(),
    );
    let at = offset_field(&bytes, "blk.0.attn_q.weight", 2);
    bytes[at..at + 8].copy_from_slice(&(1u64 << 20).to_le_bytes());
    let expected = format!(
        "tensor 'blk.0.attn_q.weight' data (offset {}, 288 bytes) runs past the end of the file (size {size})",
        data_offset + (1 << 20)
    );
    assert_eq!(parse_err(bytes).to_string(), expected);
}

#[test]
fn unknown_type_is_an_error_only_when_used() {
    let mut bytes = sample_bytes();
    let at = offset_field(&bytes, "embd", 4) - 4;
    bytes[at..at + 4].copy_from_slice(&99u32.to_le_bytes());
    let g = Gguf::from_bytes(bytes).unwrap();
    assert_eq!(g.tensor_f32("norm.weight").unwrap(), ramp(5));
    let err = g.tensor_f32("embd").unwrap_err();
    assert_eq!(err.to_string(), "tensor 'embd' has unknown ggml type id 99");
    let summary = crate::summary::summary(&g).unwrap();
    assert!(summary
        .tensor_types
        .iter()
        .any(|t| t.type_name == "unknown(99)" && t.bytes.is_none()));
}

#[test]
fn unsupported_type_is_reported_before_allocating() {
    let bytes = write_file(&[], &[(spec("iq", &[256], GgmlType::IQ2_XXS), vec![0; 66])]);
    let err = Gguf::from_bytes(bytes)
        .unwrap()
        .tensor_f32("iq")
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "tensor 'iq': dequantization is not supported for IQ2_XXS"
    );
}

#[test]
fn open_maps_a_file() {
    let dir = std::env::temp_dir().join(format!("zinc-gguf-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sample.gguf");
    std::fs::write(&path, sample_bytes()).unwrap();
    let g = Gguf::open(&path).unwrap();
    assert_eq!(g.file_size(), std::fs::metadata(&path).unwrap().len());
    assert_eq!(g.tensor_f32("scalar").unwrap(), [3.0]);
    std::fs::write(&path, b"").unwrap();
    assert!(matches!(
        Gguf::open(&path),
        Err(GgufError::Truncated { what: "magic", .. })
    ));
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(matches!(Gguf::open(&path), Err(GgufError::Io(_))));
}

#[test]
fn writer_rejects_bad_input() {
    let err = write(
        Vec::new(),
        &[],
        &[(spec("t", &[33], GgmlType::Q8_0), &[0u8; 34][..])],
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "tensor 't': row length 33 is not a multiple of the Q8_0 block size 32"
    );
    let err = write(
        Vec::new(),
        &[],
        &[(spec("t", &[32], GgmlType::Q8_0), &[0u8; 30][..])],
    )
    .unwrap_err();
    assert_eq!(err.to_string(), "tensor 't' needs 34 bytes of data, got 30");
    let err = write(Vec::new(), &[kv(ALIGNMENT_KEY, Value::U32(3))], &[]).unwrap_err();
    assert!(matches!(err, WriteError::BadAlignment));

    let mut w = GgufWriter::new(Vec::new(), &[], &[spec("t", &[1], GgmlType::F32)]).unwrap();
    assert!(matches!(w.write_tensor_data(&[0; 4]), Ok(())));
    assert!(matches!(
        w.write_tensor_data(&[0; 4]),
        Err(WriteError::TensorCount { .. })
    ));
    let w = GgufWriter::new(Vec::new(), &[], &[spec("t", &[1], GgmlType::F32)]).unwrap();
    assert!(matches!(
        w.finish(),
        Err(WriteError::TensorCount {
            expected: 1,
            written: 0
        })
    ));
}
