#!/usr/bin/env python3
"""Generates synth_golden.json: llama.cpp's token ids and logits on the `zinc synth --tiny` file
of every preset (seed 0), for models/tests/synth_golden.rs.

    scripts/build-llama-cpp.sh
    cargo build --release --bin zinc
    .cache/llama-venv/bin/python models/tests/data/gen_synth_golden.py [PRESET.gguf ...]

Without arguments it writes each tiny file into a temporary directory with the zinc binary
($ZINC_BIN, default target/release/zinc); given files, the stem of each names its preset. The
files are not committed: synth is deterministic, so the test writes them again through the
library, and checks their FNV-1a hash against the one recorded here.

Per preset:
- `cases`: llama.cpp's ids for a few prompts, plain and as a prompt (BOS, special tokens parsed).
- `logits`: llama.cpp on an F32 copy of the file (every tensor dequantized by gguf-py, F32 KV
  cache), so that it computes the function zinc computes after dequantizing at load. On the
  quantized file llama.cpp quantizes activations to 8 bits, which on random weights moves
  logits by up to ~1. The sequence is longer than the tiny sliding window (64); at a few
  positions it keeps the first HEAD logits and the top TOP.
- `quantized`: llama.cpp loaded the quantized file itself and evaluated the same sequence with
  finite logits; how far they are from the F32 copy's (information, not a tolerance).
"""
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import llama_cpp
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from gen_gemma3_f32_logits import GGML_TYPE_F32, dequantized_copy  # noqa: E402
from gen_gemma3_logits import no_repacking, top  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
OUT = Path(__file__).with_name("synth_golden.json")
PRESETS = [
    "llama3-8b", "qwen3-8b", "qwen3-30b-a3b", "qwen35-9b", "qwen35-27b", "qwen35-35b-a3b",
    "gemma3-27b", "gemma4-31b", "gemma4-26b-a4b",
]
PROMPTS = [
    "The capital of France is",
    " Hello, world! How's it going? 3.14159 + 2,718",
    "I 💜 llamas 🦙 and naïve café; 日本語のテキスト",
    "multiple   spaces\t\ttabs\n\n\nnewlines  \n end  ",
    "<|im_start|>user\nHi<|im_end|>\n<start_of_turn>model\n<|eot_id|>",
]
N_TOKENS = 72
POSITIONS = [0, 1, 2, 31, 63, 64, 65, 71]
HEAD, TOP = 32, 16


def zinc_bin() -> Path:
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return Path(os.environ.get("ZINC_BIN", target / "release/zinc"))


def fnv1a64(path: Path) -> str:
    h = 0xCBF29CE484222325
    for byte in path.read_bytes():
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def sequence(n_vocab: int, bos: int) -> list[int]:
    """BOS, then ids spread over the whole vocabulary (special tokens included)."""
    return [bos] + [(17 + 389 * i) % n_vocab for i in range(1, N_TOKENS)]


def evaluate(path: Path, tokens: list[int], **kw) -> np.ndarray:
    llm = llama_cpp.Llama(
        model_path=str(path), n_ctx=128, n_batch=128, n_threads=2, logits_all=True,
        verbose=False, **kw,
    )
    llm.eval(tokens)
    return np.array(llm.scores[: len(tokens)], dtype=np.float32)


def golden(path: Path, tmp: Path) -> dict:
    vocab = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    cases = [
        {"text": text, "special": special,
         "ids": vocab.tokenize(text.encode(), add_bos=special, special=special)}
        for text in PROMPTS for special in (False, True)
    ]
    tokens = sequence(vocab.n_vocab(), vocab.token_bos())
    del vocab

    f32 = tmp / (path.stem + "-f32.gguf")
    dequantized_copy(path, f32)
    ref = evaluate(f32, tokens, type_k=GGML_TYPE_F32, type_v=GGML_TYPE_F32)
    f32.unlink()
    quantized = evaluate(path, tokens)
    finite = bool(np.isfinite(quantized).all())
    return {
        "fnv1a64": fnv1a64(path),
        "cases": cases,
        "tokens": tokens,
        "logits": [
            {"position": p, "head": [round(float(v), 5) for v in ref[p, :HEAD]],
             "top": top(ref[p], TOP)}
            for p in POSITIONS
        ],
        "quantized": {
            "loaded": True,
            "finite": finite,
            "max_abs_diff_vs_f32": round(float(np.abs(quantized - ref).max()), 4),
            "argmax_agreement": f"{int((quantized.argmax(1) == ref.argmax(1)).sum())}/{len(tokens)}",
        },
    }


def main() -> None:
    no_repacking()
    presets = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        files = [Path(a) for a in sys.argv[1:]]
        if not files:
            for name in PRESETS:
                files.append(tmp / f"{name}.gguf")
                subprocess.run(
                    [zinc_bin(), "synth", "--preset", name, "--tiny", "-o", files[-1]],
                    check=True, stderr=subprocess.DEVNULL,
                )
        for path in files:
            presets[path.stem] = g = golden(path, tmp)
            q = g["quantized"]
            print(f"{path.stem}: quantized file finite={q['finite']}, "
                  f"max |dlogit| vs F32 copy {q['max_abs_diff_vs_f32']}, argmax {q['argmax_agreement']}")

    # One record per line keeps the file small and its diffs readable.
    lines = ["{", f' "reference": "llama-cpp-python {llama_cpp.__version__}, CPU, n_threads=2, '
             'no repacking; logits from an F32 copy with an F32 KV cache",',
             f' "seed": 0, "presets": {{']
    for i, (name, g) in enumerate(presets.items()):
        lines.append(f'  "{name}": {{')
        lines.append(f'   "fnv1a64": "{g["fnv1a64"]}", "quantized": {json.dumps(g["quantized"])},')
        lines.append(f'   "tokens": {json.dumps(g["tokens"])},')
        lines.append('   "cases": [')
        lines.append(",\n".join("    " + json.dumps(c, ensure_ascii=False) for c in g["cases"]))
        lines.append('   ],\n   "logits": [')
        lines.append(",\n".join("    " + json.dumps(r) for r in g["logits"]))
        lines.append("   ]\n  }" + ("," if i + 1 < len(presets) else ""))
    lines.append(" }\n}\n")
    OUT.write_text("\n".join(lines), encoding="utf-8")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
