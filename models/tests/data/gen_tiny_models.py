#!/usr/bin/env python3
"""Generates tiny random GGUF models (gemma3, llama, qwen3, qwen3moe, qwen35, qwen35moe; F32
weights) under tiny/ and tiny_golden.json: llama.cpp's logits for every position of a fixed
token sequence on each.

    scripts/build-llama-cpp.sh
    .cache/llama-venv/bin/python models/tests/data/gen_tiny_models.py

They pin the architecture details the real Gemma 3 model cannot: Llama's adjacent-pair rope with
rope_freqs factors, Qwen 3's QK-norm with NeoX rope, GQA, and Gemma 3's sliding window (shorter
than the sequence here) with its two rope bases; the Qwen 3 / 3.5 MoE routing (8 experts, top 3 or 2, renormalized)
and shared expert; Qwen 3.5's hybrid layout (delta-net layers 0, 1 and 3, full attention at 2:
full_attention_interval 3) with 4 value heads on 2 key heads, its gated attention, partial rope
and an M-RoPE section layout that leaves one rotation pair unrotated. llama.cpp runs with an F32 KV cache so that only
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
# Mixture of experts.
N_EXPERT, N_FF_EXP, N_FF_SHEXP = 8, 8, 16
# Qwen 3.5: full-attention head width and rotated dims, delta-net shape, layers.
Q35_HEAD_DIM, Q35_ROT, Q35_SECTIONS = 16, 8, [1, 1, 1, 1]
SSM_CONV, SSM_STATE, SSM_GROUPS, SSM_V_HEADS, Q35_LAYERS, Q35_INTERVAL = 4, 8, 2, 4, 4, 3


def header(arch: str, path: Path, n_layer: int, head_dim: int) -> GGUFWriter:
    w = GGUFWriter(path, arch)
    w.add_block_count(n_layer)
    w.add_context_length(64)
    w.add_embedding_length(N_EMBD)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
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
    return w


def finish(w: GGUFWriter) -> None:
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


class Init:
    def __init__(self, rng: np.random.Generator):
        self.rng = rng

    def mat(self, *shape: int) -> np.ndarray:  # numpy [..][rows][cols] = ggml dims [cols, rows, ..]
        return self.rng.uniform(-0.5, 0.5, shape).astype(np.float32)

    def norm(self, n: int) -> np.ndarray:
        return self.rng.uniform(0.8, 1.2, n).astype(np.float32)


def write_model(arch: str, path: Path, rng: np.random.Generator) -> None:
    w = header(arch, path, N_LAYER, HEAD_DIM)
    init = Init(rng)
    mat, norm = init.mat, init.norm

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
    finish(w)


def add_moe(w: GGUFWriter, used: int, shared: bool) -> None:
    w.add_expert_count(N_EXPERT)
    w.add_expert_used_count(used)
    w.add_expert_feed_forward_length(N_FF_EXP)
    if shared:
        w.add_expert_shared_feed_forward_length(N_FF_SHEXP)


def moe_tensors(init: Init, shared: bool) -> dict:
    t = {
        "ffn_gate_inp.weight": init.mat(N_EXPERT, N_EMBD),
        "ffn_gate_exps.weight": init.mat(N_EXPERT, N_FF_EXP, N_EMBD),
        "ffn_up_exps.weight": init.mat(N_EXPERT, N_FF_EXP, N_EMBD),
        "ffn_down_exps.weight": init.mat(N_EXPERT, N_EMBD, N_FF_EXP),
    }
    if shared:
        t["ffn_gate_inp_shexp.weight"] = init.mat(N_EMBD)
        t["ffn_gate_shexp.weight"] = init.mat(N_FF_SHEXP, N_EMBD)
        t["ffn_up_shexp.weight"] = init.mat(N_FF_SHEXP, N_EMBD)
        t["ffn_down_shexp.weight"] = init.mat(N_EMBD, N_FF_SHEXP)
    return t


def write_qwen3moe(path: Path, rng: np.random.Generator) -> None:
    w = header("qwen3moe", path, N_LAYER, HEAD_DIM)
    add_moe(w, used=3, shared=False)
    init = Init(rng)
    w.add_tensor("token_embd.weight", init.mat(N_VOCAB, N_EMBD))
    w.add_tensor("output_norm.weight", init.norm(N_EMBD))
    w.add_tensor("output.weight", init.mat(N_VOCAB, N_EMBD))
    q, kv = N_HEAD * HEAD_DIM, N_HEAD_KV * HEAD_DIM
    for il in range(N_LAYER):
        t = {
            "attn_norm.weight": init.norm(N_EMBD),
            "attn_q.weight": init.mat(q, N_EMBD),
            "attn_k.weight": init.mat(kv, N_EMBD),
            "attn_v.weight": init.mat(kv, N_EMBD),
            "attn_output.weight": init.mat(N_EMBD, q),
            "attn_q_norm.weight": init.norm(HEAD_DIM),
            "attn_k_norm.weight": init.norm(HEAD_DIM),
            "ffn_norm.weight": init.norm(N_EMBD),
            **moe_tensors(init, shared=False),
        }
        for name, data in t.items():
            w.add_tensor(f"blk.{il}.{name}", data)
    finish(w)


def write_qwen35(arch: str, path: Path, rng: np.random.Generator) -> None:
    moe = arch == "qwen35moe"
    hd = Q35_HEAD_DIM
    w = header(arch, path, Q35_LAYERS, hd)
    w.add_rope_dimension_count(Q35_ROT)
    w.add_rope_dimension_sections(Q35_SECTIONS)
    w.add_ssm_conv_kernel(SSM_CONV)
    w.add_ssm_state_size(SSM_STATE)
    w.add_ssm_group_count(SSM_GROUPS)
    w.add_ssm_time_step_rank(SSM_V_HEADS)
    w.add_ssm_inner_size(SSM_STATE * SSM_V_HEADS)
    w.add_full_attention_interval(Q35_INTERVAL)
    if moe:
        add_moe(w, used=2, shared=True)
    init = Init(rng)
    w.add_tensor("token_embd.weight", init.mat(N_VOCAB, N_EMBD))
    w.add_tensor("output_norm.weight", init.norm(N_EMBD))
    key_dim, value_dim = SSM_STATE * SSM_GROUPS, SSM_STATE * SSM_V_HEADS
    for il in range(Q35_LAYERS):
        t = {"attn_norm.weight": init.norm(N_EMBD), "post_attention_norm.weight": init.norm(N_EMBD)}
        if (il + 1) % Q35_INTERVAL == 0:
            t |= {
                "attn_q.weight": init.mat(2 * N_HEAD * hd, N_EMBD),  # query and gate rows per head
                "attn_k.weight": init.mat(N_HEAD_KV * hd, N_EMBD),
                "attn_v.weight": init.mat(N_HEAD_KV * hd, N_EMBD),
                "attn_output.weight": init.mat(N_EMBD, N_HEAD * hd),
                "attn_q_norm.weight": init.norm(hd),
                "attn_k_norm.weight": init.norm(hd),
            }
        else:
            t |= {
                "attn_qkv.weight": init.mat(2 * key_dim + value_dim, N_EMBD),
                "attn_gate.weight": init.mat(value_dim, N_EMBD),
                "ssm_conv1d.weight": init.mat(2 * key_dim + value_dim, SSM_CONV),
                "ssm_dt.bias": init.mat(SSM_V_HEADS),
                # -exp(A_log): negative, so every step decays the state.
                "ssm_a": -rng.uniform(0.2, 1.5, SSM_V_HEADS).astype(np.float32),
                "ssm_beta.weight": init.mat(SSM_V_HEADS, N_EMBD),
                "ssm_alpha.weight": init.mat(SSM_V_HEADS, N_EMBD),
                "ssm_norm.weight": init.norm(SSM_STATE),
                "ssm_out.weight": init.mat(N_EMBD, value_dim),
            }
        if moe:
            t |= moe_tensors(init, shared=True)
        else:
            t |= {
                "ffn_gate.weight": init.mat(N_FF, N_EMBD),
                "ffn_up.weight": init.mat(N_FF, N_EMBD),
                "ffn_down.weight": init.mat(N_EMBD, N_FF),
            }
        for name, data in t.items():
            w.add_tensor(f"blk.{il}.{name}", data)
    finish(w)


def main() -> None:
    no_repacking()
    rng = np.random.default_rng(2024)
    golden = {"tokens": TOKENS, "reference": f"llama-cpp-python {llama_cpp.__version__}, F32 KV cache", "logits": {}}
    for arch in ["gemma3", "llama", "qwen3", "qwen3moe", "qwen35", "qwen35moe"]:
        path = HERE / "tiny" / f"{arch}.gguf"
        if arch == "qwen3moe":
            write_qwen3moe(path, rng)
        elif arch.startswith("qwen35"):
            write_qwen35(arch, path, rng)
        else:
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
