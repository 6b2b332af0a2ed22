#!/usr/bin/env python3
"""Writes dequant_golden.bin: random ggml blocks of each type and gguf-py's dequantization.

The Rust test `quant::tests::matches_gguf_py_golden` checks zinc's dequantizers against it.
Usage: pip install gguf==0.19.0 numpy && python3 gen_dequant_golden.py

Format, repeated once per type (all little-endian):
    u32 ggml type id, u32 block count n, n * type_size bytes of blocks,
    n * block_size f32 values.
"""

from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGML_QUANT_SIZES
from gguf.quants import dequantize

BLOCKS = 6

# Byte offsets of the f16 scale fields in each block layout. Random bytes there could be NaN,
# Inf or huge, so they get ordinary random values; every other byte stays random.
F16_FIELDS = {
    T.Q4_0: [0],
    T.Q4_1: [0, 2],
    T.Q5_0: [0],
    T.Q5_1: [0, 2],
    T.Q8_0: [0],
    T.Q2_K: [80, 82],
    T.Q3_K: [108],
    T.Q4_K: [0, 2],
    T.Q5_K: [0, 2],
    T.Q6_K: [208],
    T.IQ4_NL: [0],
    T.IQ4_XS: [0],
}
PLAIN = {T.F32: np.float32, T.F16: np.float16}


def blocks_for(rng: np.random.Generator, qtype: T) -> np.ndarray:
    block_size, type_size = GGML_QUANT_SIZES[qtype]
    if qtype in PLAIN:
        values = rng.normal(0, 2, BLOCKS * 32).astype(PLAIN[qtype])
        return values.view(np.uint8)
    if qtype == T.BF16:
        values = rng.normal(0, 2, BLOCKS * 32).astype(np.float32)
        return (values.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8)
    raw = rng.integers(0, 256, (BLOCKS, type_size), dtype=np.uint8)
    for at in F16_FIELDS[qtype]:
        scale = rng.uniform(-0.1, 0.1, BLOCKS).astype(np.float16)
        raw[:, at : at + 2] = scale.view(np.uint8).reshape(BLOCKS, 2)
    return raw.reshape(-1)


def main() -> None:
    rng = np.random.default_rng(20240601)
    out = bytearray()
    for qtype in [T.F32, T.F16, T.BF16, *F16_FIELDS]:
        raw = blocks_for(rng, qtype)
        block_size, type_size = GGML_QUANT_SIZES[qtype]
        n_blocks = raw.size // type_size
        values = dequantize(raw, qtype).astype("<f4").reshape(-1)
        assert values.size == n_blocks * block_size and np.isfinite(values).all()
        out += np.array([qtype.value, n_blocks], dtype="<u4").tobytes()
        out += raw.tobytes()
        out += values.tobytes()
    path = Path(__file__).with_name("dequant_golden.bin")
    path.write_bytes(bytes(out))
    print(f"wrote {path} ({len(out)} bytes)")


if __name__ == "__main__":
    main()
