#!/usr/bin/env python3
"""Generates tiny random Gemma 4 GGUF models (F32 weights) under tiny/ and tiny_gemma4_golden.json:
llama.cpp's logits for every position of a fixed token sequence on each.

    scripts/build-llama-cpp.sh
    .cache/llama-venv/bin/python models/tests/data/gen_tiny_gemma4.py

Two models with the tensor names and metadata keys of llama.cpp's src/models/gemma4.cpp:
gemma4.gguf has the dense shape of Gemma 4 31B, gemma4moe.gguf the mixture-of-experts shape of
26B-A4B (a dense FFN beside softmax-routed experts with fused gate/up, per-expert output scales
and a scaled router input). Both pin what sets Gemma 4 apart from Gemma 3: global layers wider
than sliding-window ones with fewer KV heads and no `attn_v` (values are the key projection),
value RMSNorm, attention scale 1, proportional rope through `rope_freqs` (pairs with a 1e30
factor stay unrotated), per-layer output scales, and a window shorter than the sequence.
"""
import json
from pathlib import Path

import llama_cpp
import numpy as np
from gguf import GGUFWriter, TokenType

from gen_gemma3_logits import no_repacking

HERE = Path(__file__).parent
ARCH = "gemma4"
N_EMBD, N_HEAD, N_VOCAB = 32, 4, 40
SWA_PATTERN = [True, False, True, True, False]
HEAD_DIM_SWA, N_HEAD_KV_SWA = 8, 2
HEAD_DIM_GLOBAL, N_HEAD_KV_GLOBAL = 16, 1
# Rope factors of the global layers: two rotated pairs (one slowed down), the rest held still.
ROPE_FREQS = [1.0, 2.5] + [1e30] * (HEAD_DIM_GLOBAL // 2 - 2)
WINDOW = 4
N_EXPERT, N_EXPERT_USED, N_FF_EXP = 4, 2, 16
TOKENS = [1, 5, 17, 30, 5, 9, 39, 22, 3, 11]
GGML_TYPE_F32 = 0
MODELS = {"gemma4": {"n_ff": 64, "moe": False}, "gemma4moe": {"n_ff": 32, "moe": True}}


def write_model(path: Path, n_ff: int, moe: bool, rng: np.random.Generator) -> None:
    n_layer = len(SWA_PATTERN)
    w = GGUFWriter(path, ARCH)
    w.add_block_count(n_layer)
    w.add_context_length(64)
    w.add_embedding_length(N_EMBD)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(N_HEAD)
    w.add_array(f"{ARCH}.attention.head_count_kv",
                [N_HEAD_KV_SWA if swa else N_HEAD_KV_GLOBAL for swa in SWA_PATTERN])
    w.add_key_length(HEAD_DIM_GLOBAL)
    w.add_value_length(HEAD_DIM_GLOBAL)
    w.add_key_length_swa(HEAD_DIM_SWA)
    w.add_value_length_swa(HEAD_DIM_SWA)
    w.add_rope_dimension_count(HEAD_DIM_GLOBAL)
    w.add_rope_dimension_count_swa(HEAD_DIM_SWA)
    w.add_rope_freq_base(10000.0)
    w.add_rope_freq_base_swa(100.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_sliding_window(WINDOW)
    w.add_array(f"{ARCH}.attention.sliding_window_pattern", SWA_PATTERN)
    w.add_shared_kv_layers(0)
    w.add_embedding_length_per_layer_input(0)
    w.add_final_logit_softcapping(10.0)
    if moe:
        w.add_expert_count(N_EXPERT)
        w.add_expert_used_count(N_EXPERT_USED)
        w.add_expert_feed_forward_length(N_FF_EXP)
    # A minimal SentencePiece vocabulary: llama.cpp needs one to load the model.
    tokens = ["<unk>", "<s>", "</s>"] + [f"\u2581t{i}" for i in range(N_VOCAB - 3)]
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * N_VOCAB)
    w.add_token_types([TokenType.UNKNOWN, TokenType.CONTROL, TokenType.CONTROL] + [TokenType.NORMAL] * (N_VOCAB - 3))
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)

    def mat(*shape: int, scale: float = 0.5) -> np.ndarray:  # numpy shape = ggml dims reversed
        return rng.uniform(-scale, scale, shape).astype(np.float32)

    def norm(n: int) -> np.ndarray:
        return rng.uniform(0.8, 1.2, n).astype(np.float32)

    w.add_tensor("token_embd.weight", mat(N_VOCAB, N_EMBD))
    w.add_tensor("output_norm.weight", norm(N_EMBD))
    w.add_tensor("rope_freqs.weight", np.array(ROPE_FREQS, dtype=np.float32))
    for il, swa in enumerate(SWA_PATTERN):
        hd = HEAD_DIM_SWA if swa else HEAD_DIM_GLOBAL
        q, kv = N_HEAD * hd, (N_HEAD_KV_SWA if swa else N_HEAD_KV_GLOBAL) * hd
        t = {
            "attn_norm.weight": norm(N_EMBD),
            "attn_q.weight": mat(q, N_EMBD),
            "attn_k.weight": mat(kv, N_EMBD),
            "attn_output.weight": mat(N_EMBD, q),
            "attn_q_norm.weight": norm(hd),
            "attn_k_norm.weight": norm(hd),
            "post_attention_norm.weight": norm(N_EMBD),
            "layer_output_scale.weight": rng.uniform(0.5, 1.5, 1).astype(np.float32),
            "ffn_norm.weight": norm(N_EMBD),
            "ffn_gate.weight": mat(n_ff, N_EMBD),
            "ffn_up.weight": mat(n_ff, N_EMBD),
            "ffn_down.weight": mat(N_EMBD, n_ff),
            "post_ffw_norm.weight": norm(N_EMBD),
        }
        if swa:  # global layers take their values from the key projection
            t["attn_v.weight"] = mat(kv, N_EMBD)
        if moe:
            t |= {
                # A wide router keeps the top-k choice clear of near-ties.
                "ffn_gate_inp.weight": mat(N_EXPERT, N_EMBD, scale=8.0),
                "ffn_gate_inp.scale": norm(N_EMBD),
                "pre_ffw_norm_2.weight": norm(N_EMBD),
                "post_ffw_norm_1.weight": norm(N_EMBD),
                "post_ffw_norm_2.weight": norm(N_EMBD),
                "ffn_gate_up_exps.weight": mat(N_EXPERT, 2 * N_FF_EXP, N_EMBD),
                "ffn_down_exps.weight": mat(N_EXPERT, N_EMBD, N_FF_EXP),
                "ffn_down_exps.scale": rng.uniform(0.5, 1.5, N_EXPERT).astype(np.float32),
            }
        for name, data in t.items():
            w.add_tensor(f"blk.{il}.{name}", data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main() -> None:
    no_repacking()
    rng = np.random.default_rng(2026)
    golden = {"tokens": TOKENS, "reference": f"llama-cpp-python {llama_cpp.__version__}, F32 KV cache", "logits": {}}
    for name, spec in MODELS.items():
        path = HERE / "tiny" / f"{name}.gguf"
        write_model(path, spec["n_ff"], spec["moe"], rng)
        llm = llama_cpp.Llama(
            model_path=str(path), n_ctx=64, n_batch=64, n_threads=2, logits_all=True,
            type_k=GGML_TYPE_F32, type_v=GGML_TYPE_F32, verbose=False,
        )
        llm.eval(TOKENS)
        scores = np.array(llm.scores[: len(TOKENS)], dtype=np.float32)
        golden["logits"][name] = [[round(float(v), 6) for v in row] for row in scores]
        print(f"{name}: {path.stat().st_size} bytes, logits in [{scores.min():.2f}, {scores.max():.2f}]")
    (HERE / "tiny_gemma4_golden.json").write_text(json.dumps(golden) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
