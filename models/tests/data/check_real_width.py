#!/usr/bin/env python3
"""Real-width check: each preset at its real widths and vocabulary but only a few layers, in
llama.cpp and in zinc. Too heavy for `cargo test` (files of 1-4 GB, up to ~14 GB of f32
weights in zinc); run by hand, results in docs/GOLDEN.md.

    scripts/build-llama-cpp.sh
    cargo build --release --bin zinc
    .cache/llama-venv/bin/python models/tests/data/check_real_width.py [--layers N] [--dir DIR] [PRESET ...]

For each preset (all by default): `zinc synth --preset P --layers N` (seed 0; N = 2, or 4 for
Qwen 3.5) into DIR (default .models/real-width), then
llama.cpp (1) loads the quantized file and evaluates a short sequence with finite logits, and
(2) evaluates it on an F32 copy (every tensor dequantized by gguf-py, F32 KV cache): its logits
at every position go to DIR/P.logits (f32, n_tokens x n_vocab) with DIR/P.json. At the end
models/tests/real_width.rs (an ignored test, release build) runs zinc on each file and compares
all logits and the greedy next token at every position; it prints one table row per preset.
Presets run one at a time, so memory peaks with the largest one (zinc holds weights as f32).
"""
import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import llama_cpp
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from gen_gemma3_f32_logits import GGML_TYPE_F32, dequantized_copy  # noqa: E402
from gen_gemma3_logits import no_repacking  # noqa: E402
from gen_synth_golden import PRESETS, ROOT, evaluate, zinc_bin  # noqa: E402

N_TOKENS = 8


def default_layers(name: str) -> int:
    """Two layers; Qwen 3.5 needs four to reach its first full-attention layer, as llama.cpp
    aborts on a hybrid model without one (no KV cache buffer: GGML_ASSERT(buffer))."""
    return 4 if name.startswith("qwen35") else 2


def check(name: str, layers: int, out: Path) -> None:
    path = out / f"{name}.gguf"
    subprocess.run(
        [zinc_bin(), "synth", "--preset", name, "--layers", str(layers), "-o", path],
        check=True, stderr=subprocess.DEVNULL,
    )
    vocab = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    n_vocab, bos = vocab.n_vocab(), vocab.token_bos()
    del vocab
    tokens = [bos] + [(1009 + 7919 * i) % n_vocab for i in range(1, N_TOKENS)]

    quantized = evaluate(path, tokens)
    f32 = out / f"{name}-f32.gguf"
    dequantized_copy(path, f32)
    try:
        ref = evaluate(f32, tokens, type_k=GGML_TYPE_F32, type_v=GGML_TYPE_F32)
    finally:
        f32.unlink()
    ref.tofile(out / f"{name}.logits")
    record = {
        "preset": name,
        "layers": layers,
        "tokens": tokens,
        "n_vocab": n_vocab,
        "quantized": {
            "finite": bool(np.isfinite(quantized).all()),
            "max_abs_diff_vs_f32": float(np.abs(quantized - ref).max()),
        },
        "logit_range": [float(ref.min()), float(ref.max())],
    }
    (out / f"{name}.json").write_text(json.dumps(record))
    print(f"{name}: llama.cpp done, {path.stat().st_size / 2**30:.2f} GiB, "
          f"quantized finite={record['quantized']['finite']}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--layers", type=int, help="layers of every preset (default: 2 or 4)")
    parser.add_argument("--dir", type=Path, default=ROOT / ".models/real-width")
    parser.add_argument("presets", nargs="*", default=PRESETS)
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    no_repacking()
    for name in args.presets:
        check(name, args.layers or default_layers(name), args.dir)
    env = dict(os.environ, ZINC_REAL_WIDTH_DIR=str(args.dir.resolve()))
    subprocess.run(
        ["cargo", "test", "--release", "-p", "zinc-models", "--test", "real_width", "--",
         "--ignored", "--nocapture", "--test-threads", "1"],
        check=True, cwd=ROOT, env=env,
    )


if __name__ == "__main__":
    main()
