#!/usr/bin/env python3
"""Generates tiny random GGUF models (gemma3, llama, qwen3; F32 weights) under tiny/ and
tiny_golden.json: llama.cpp's logits for every position of a fixed token sequence on each.

    scripts/build-llama-cpp.sh
    /work/.cache/llama-venv/bin/python models/tests/data/gen_tiny_models.py

They pin the architecture details the real Gemma 3 model cannot: Llama's adjacent-pair rope with
rope_freqs factors, Qwen 3's QK-norm with NeoX rope, GQA, and Gemma 3's sliding window (shorter
than the sequence here) with its two rope bases. llama.cpp runs with an F32 KV cache so that only
its f16 GELU table separates it from an exact f32 computation.
"""
import json
from pathlib import Path

import llama_cpp
import numpy as np
from gguf import GGUFWriter, TokenType

from gen_gemma3_logits import no_repacking

HERE = Path(__file__).parent
N_EMBD, N_FF, N_HEAD, N_HEAD_KV, HEAD_DIM, N_LAYER, N_VOCAB = 32, 64, 4, 2, 8, 3, 40
TOKENS = [1, 5, 17, 30, 5, 9, 39, 22, 3, 11]
GGML_TYPE_F32 = 0


def write_model(arch: str, path: Path, rng: np.random.Generator) -> None:
    w = GGUFWriter(path, arch)
    w.add_block_count(N_LAYER)
    w.add_context_length(64)
    w.add_embedding_length(N_EMBD)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(10000.0)
    if arch == "gemma3":
        w.add_sliding_window(4)
        w.add_uint32(f"{arch}.attention.sliding_window_pattern", 2)
        w.add_float32(f"{arch}.rope.freq_base_swa", 100.0)
    # A minimal SentencePiece vocabulary: llama.cpp needs one to load the model.
    tokens = ["<unk>", "<s>", "</s>"] + [f"\u2581t{i}" for i in range(N_VOCAB - 3)]
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * N_VOCAB)
    w.add_token_types([TokenType.UNKNOWN, TokenType.CONTROL, TokenType.CONTROL] + [TokenType.NORMAL] * (N_VOCAB - 3))
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)

    def mat(rows: int, cols: int) -> np.ndarray:  # numpy [rows][cols] = ggml dims [cols, rows]
        return rng.uniform(-0.5, 0.5, (rows, cols)).astype(np.float32)

    def norm(n: int) -> np.ndarray:
        return rng.uniform(0.8, 1.2, n).astype(np.float32)

    w.add_tensor("token_embd.weight", mat(N_VOCAB, N_EMBD))
    w.add_tensor("output_norm.weight", norm(N_EMBD))
    if arch == "llama":
        w.add_tensor("output.weight", mat(N_VOCAB, N_EMBD))
        w.add_tensor("rope_freqs.weight", rng.uniform(1.0, 4.0, HEAD_DIM // 2).astype(np.float32))
    q, kv = N_HEAD * HEAD_DIM, N_HEAD_KV * HEAD_DIM
    for il in range(N_LAYER):
        t = {
            "attn_norm": norm(N_EMBD),
            "attn_q": mat(q, N_EMBD),
            "attn_k": mat(kv, N_EMBD),
            "attn_v": mat(kv, N_EMBD),
            "attn_output": mat(N_EMBD, q),
            "ffn_norm": norm(N_EMBD),
            "ffn_gate": mat(N_FF, N_EMBD),
            "ffn_up": mat(N_FF, N_EMBD),
            "ffn_down": mat(N_EMBD, N_FF),
        }
        if arch != "llama":
            t["attn_q_norm"] = norm(HEAD_DIM)
            t["attn_k_norm"] = norm(HEAD_DIM)
        if arch == "gemma3":
            t["post_attention_norm"] = norm(N_EMBD)
            t["post_ffw_norm"] = norm(N_EMBD)
        for name, data in t.items():
            w.add_tensor(f"blk.{il}.{name}.weight", data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main() -> None:
    no_repacking()
    rng = np.random.default_rng(2024)
    golden = {"tokens": TOKENS, "reference": f"llama-cpp-python {llama_cpp.__version__}, F32 KV cache", "logits": {}}
    for arch in ["gemma3", "llama", "qwen3"]:
        path = HERE / "tiny" / f"{arch}.gguf"
        write_model(arch, path, rng)
        llm = llama_cpp.Llama(
            model_path=str(path), n_ctx=64, n_batch=64, n_threads=2, logits_all=True,
            type_k=GGML_TYPE_F32, type_v=GGML_TYPE_F32, verbose=False,
        )
        llm.eval(TOKENS)
        scores = np.array(llm.scores[: len(TOKENS)], dtype=np.float32)
        golden["logits"][arch] = [[round(float(v), 6) for v in row] for row in scores]
        print(f"{arch}: {path.stat().st_size} bytes, logits in [{scores.min():.2f}, {scores.max():.2f}]")
    (HERE / "tiny_golden.json").write_text(json.dumps(golden) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
