#!/usr/bin/env python3
"""Checks that llama.cpp loads and runs synthetic models written by `zinc synth`.

    scripts/build-llama-cpp.sh
    zinc synth --preset qwen35-9b --tiny -o /tmp/qwen35-9b-tiny.gguf
    .cache/llama-venv/bin/python models/tests/data/check_synth_llamacpp.py /tmp/*.gguf

For each file: load it (CPU, weight repacking off as in gen_gemma3_logits.py), tokenize a
prompt, evaluate it, check that every logit is finite, then decode a few greedy tokens one at a
time through the KV cache / recurrent state and check those logits too. Prints one line per
file and exits non-zero if any file fails.
"""
import sys

import llama_cpp
import numpy as np

PROMPT = "The quick brown fox jumps over the lazy dog"
N_DECODE = 4


def no_repacking() -> None:
    default_params = llama_cpp.llama_cpp.llama_model_default_params

    def params():
        p = default_params()
        p.use_extra_bufts = False
        return p

    llama_cpp.llama_cpp.llama_model_default_params = params


def check(path: str) -> str:
    llm = llama_cpp.Llama(
        model_path=path, n_ctx=256, n_batch=256, n_threads=2, logits_all=True, verbose=False
    )
    ids = llm.tokenize(PROMPT.encode(), add_bos=True, special=True)
    llm.eval(ids)
    logits = np.array(llm.scores[: len(ids)], dtype=np.float32)
    if not np.isfinite(logits).all():
        raise ValueError("non-finite prompt logits")
    last = logits[-1]
    generated = []
    for _ in range(N_DECODE):
        token = int(np.argmax(last))
        generated.append(token)
        llm.eval([token])
        last = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
        if not np.isfinite(last).all():
            raise ValueError("non-finite decode logits")
    return (
        f"n_vocab {llm.n_vocab()}, {len(ids)} prompt tokens, "
        f"logit std {logits.std():.3g}, greedy {generated}"
    )


def main() -> int:
    no_repacking()
    failed = 0
    for path in sys.argv[1:]:
        try:
            print(f"ok    {path}: {check(path)}", flush=True)
        except Exception as e:  # report every file, not just the first failure
            failed += 1
            print(f"FAIL  {path}: {e}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
