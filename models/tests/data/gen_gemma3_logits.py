#!/usr/bin/env python3
"""Generates gemma3_270m_golden.json: llama.cpp's (CPU) logits for Gemma 3 270M Q4_K_M.

    scripts/fetch-gemma3-270m.sh && scripts/build-llama-cpp.sh
    .cache/llama-venv/bin/python models/tests/data/gen_gemma3_logits.py

Records the prompt's token ids (BOS added, as llama.cpp does for this model), the top-20
logits at the last prompt position, the top-5 at every position, and the greedy 8-token
continuation, each step evaluated incrementally with the KV cache.

Weight repacking ("extra buffer types") is turned off: it brings in the AMX kernels on CPUs
that have AMX, which crash in sandboxes that do not grant AMX tile state, and without it the
reference is ggml's plain Q4_K/Q6_K dot products.
"""
import json
from pathlib import Path

import llama_cpp
import numpy as np

ROOT = Path(__file__).resolve().parents[3]
MODEL = ROOT / ".models/gemma-3-270m-q4_k_m.gguf"
OUT = Path(__file__).with_name("gemma3_270m_golden.json")
PROMPT = "The capital of France is"
N_GENERATE = 8


def top(logits: np.ndarray, k: int) -> list[list]:
    order = np.argsort(-logits, kind="stable")[:k]
    return [[int(i), round(float(logits[i]), 5)] for i in order]


def no_repacking() -> None:
    default_params = llama_cpp.llama_cpp.llama_model_default_params

    def params():
        p = default_params()
        p.use_extra_bufts = False
        return p

    llama_cpp.llama_cpp.llama_model_default_params = params


def main() -> None:
    no_repacking()
    llm = llama_cpp.Llama(
        model_path=str(MODEL), n_ctx=128, n_batch=128, n_threads=2, logits_all=True, verbose=False
    )
    ids = llm.tokenize(PROMPT.encode(), add_bos=True, special=True)
    llm.eval(ids)
    scores = np.array(llm.scores[: len(ids)], dtype=np.float32)

    generated = []
    last = scores[-1]
    for _ in range(N_GENERATE):
        token = int(np.argmax(last))
        generated.append(token)
        llm.eval([token])
        last = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)

    golden = {
        "model": MODEL.name,
        "reference": f"llama-cpp-python {llama_cpp.__version__}, CPU, n_threads=2, no repacking",
        "prompt": PROMPT,
        "prompt_ids": ids,
        "n_vocab": int(scores.shape[1]),
        "last_top20": top(scores[-1], 20),
        "top5_per_position": [top(row, 5) for row in scores],
        "greedy_ids": generated,
        "greedy_text": llm.detokenize(generated).decode("utf-8", errors="replace"),
    }
    OUT.write_text(json.dumps(golden, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {OUT}: {golden['greedy_text']!r}")


if __name__ == "__main__":
    main()
