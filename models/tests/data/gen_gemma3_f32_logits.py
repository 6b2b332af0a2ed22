#!/usr/bin/env python3
"""Generates gemma3_270m_f32_golden.json: llama.cpp's logits for Gemma 3 270M Q4_K_M with every
weight dequantized to F32 and an F32 KV cache.

    scripts/fetch-gemma3-270m.sh && scripts/build-llama-cpp.sh
    .cache/llama-venv/bin/python models/tests/data/gen_gemma3_f32_logits.py

On the Q4_K_M file itself llama.cpp's CPU backend quantizes activations to Q8 before each dot
product and keeps K/V in f16, which moves logits by ~0.2: too coarse to check an f32 reference.
Here the weights are dequantized (by gguf-py, as zinc does at load) into a temporary F32 GGUF,
so llama.cpp computes in f32 on the same values zinc does. What remains is llama.cpp's f16
lookup table for GELU (~2e-3 on the logits). Same records as gen_gemma3_logits.py.
"""
import json
import sys
import tempfile
from pathlib import Path

import llama_cpp
import numpy as np
from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter
from gguf.quants import dequantize

sys.path.insert(0, str(Path(__file__).parent))
from gen_gemma3_logits import MODEL, N_GENERATE, PROMPT, no_repacking, top  # noqa: E402

OUT = Path(__file__).with_name("gemma3_270m_f32_golden.json")
GGML_TYPE_F32 = 0


class _F32Rows:
    """A tensor dequantized to F32 while it is written, a block of rows at a time, so that
    real-width files (a 262k x 5376 embedding is 5.6 GB as F32) convert in bounded memory.
    Quacks like the numpy array GGUFWriter.write_tensor_data expects."""

    ROWS = 4096

    def __init__(self, tensor):
        self.rows = tensor.data.reshape(-1, tensor.data.shape[-1])
        self.tensor_type = tensor.tensor_type
        self.nbytes = int(tensor.n_elements) * 4

    def tofile(self, fp) -> None:
        for i in range(0, len(self.rows), self.ROWS):
            block = dequantize(self.rows[i : i + self.ROWS], self.tensor_type)
            block.astype(np.float32, copy=False).tofile(fp)


def dequantized_copy(src: Path, dst: Path) -> None:
    """Writes `src` to `dst` with the same metadata and every tensor as F32."""
    r = GGUFReader(src)
    w = GGUFWriter(dst, r.fields["general.architecture"].contents())
    for key, field in r.fields.items():
        if key.startswith("GGUF.") or key in ("general.architecture", "general.file_type"):
            continue
        kind = field.types[0]
        sub = field.types[-1] if kind == GGUFValueType.ARRAY else None
        w.add_key_value(key, field.contents(), kind, sub_type=sub)
    w.add_file_type(0)  # all F32
    tensors = [_F32Rows(t) for t in r.tensors]
    for t, rows in zip(r.tensors, tensors):
        shape = [int(d) for d in reversed(t.shape)]
        w.add_tensor_info(t.name, shape, np.dtype(np.float32), rows.nbytes, GGMLQuantizationType.F32)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for rows in tensors:
        w.write_tensor_data(rows)
    w.close()


def main() -> None:
    no_repacking()
    with tempfile.TemporaryDirectory() as tmp:
        f32_model = Path(tmp) / "model-f32.gguf"
        dequantized_copy(MODEL, f32_model)
        llm = llama_cpp.Llama(
            model_path=str(f32_model), n_ctx=128, n_batch=128, n_threads=2, logits_all=True,
            type_k=GGML_TYPE_F32, type_v=GGML_TYPE_F32, verbose=False,
        )
        ids = llm.tokenize(PROMPT.encode(), add_bos=True, special=True)
        llm.eval(ids)
        scores = np.array(llm.scores[: len(ids)], dtype=np.float32)
        generated, steps = [], []
        last = scores[-1]
        for _ in range(N_GENERATE):
            token = int(np.argmax(last))
            generated.append(token)
            llm.eval([token])
            last = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
            steps.append(top(last, 5))

    golden = {
        "model": MODEL.name,
        "reference": f"llama-cpp-python {llama_cpp.__version__}, CPU, n_threads=2, no repacking, "
        "weights dequantized to F32, F32 KV cache",
        "prompt": PROMPT,
        "prompt_ids": ids,
        "n_vocab": int(scores.shape[1]),
        "last_top20": top(scores[-1], 20),
        "top5_per_position": [top(row, 5) for row in scores],
        "greedy_ids": generated,
        "top5_per_greedy_step": steps,
        "greedy_text": llm.detokenize(generated).decode("utf-8", errors="replace"),
    }
    OUT.write_text(json.dumps(golden, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {OUT}: {golden['greedy_text']!r}")


if __name__ == "__main__":
    main()
