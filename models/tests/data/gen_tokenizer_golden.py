#!/usr/bin/env python3
"""Generates tokenizer_golden.json: llama.cpp's token ids for a set of prompts, per vocabulary.

    scripts/build-llama-cpp.sh   # once: builds llama-cpp-python into .cache/llama-venv
    .cache/llama-venv/bin/python models/tests/data/gen_tokenizer_golden.py

Vocabularies: Gemma 3 270M (.models/, from scripts/fetch-gemma3-270m.sh) and the vocab-only
GGUFs that ship with llama.cpp's sources (llama-bpe = Llama 3, qwen2, qwen35, gpt-2, llama-spm
= Llama 2), whose own test inputs (`*.gguf.inp`) are included too. Each prompt is tokenized
twice: plain (add_special=False, parse_special=False) and as a prompt (both True).
"""
import json
import os
import sys
from pathlib import Path

import llama_cpp

ROOT = Path(__file__).resolve().parents[3]
# As in scripts/build-llama-cpp.sh and models/tests/common/mod.rs.
CACHE = Path(os.environ.get("ZINC_CACHE", ROOT / ".cache"))
LLAMA_CPP = Path(
    os.environ.get(
        "ZINC_LLAMA_CPP_DIR",
        CACHE / f"llama-sdist/llama_cpp_python-{llama_cpp.__version__}/vendor/llama.cpp",
    )
)
OUT = Path(__file__).with_name("tokenizer_golden.json")

VOCABS = {
    "gemma3": ROOT / ".models/gemma-3-270m-q4_k_m.gguf",
    "llama-bpe": LLAMA_CPP / "models/ggml-vocab-llama-bpe.gguf",
    "qwen2": LLAMA_CPP / "models/ggml-vocab-qwen2.gguf",
    "qwen35": LLAMA_CPP / "models/ggml-vocab-qwen35.gguf",
    "gpt-2": LLAMA_CPP / "models/ggml-vocab-gpt-2.gguf",
    "llama-spm": LLAMA_CPP / "models/ggml-vocab-llama-spm.gguf",
}

PROMPTS = [
    "The capital of France is",
    "Hello world",
    " Hello, world! How's it going?",
    "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n",
    "I 💜 llamas 🦙 and naïve café façades",
    "日本語のテキストと中文文本，还有한국어.",
    "3.14159 + 2,718 = 123456789 and 0x1F",
    "multiple   spaces\t\ttabs\n\n\nnewlines  \n end  ",
    "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
    "<|im_start|>user\nHi<|im_end|>\n<|endoftext|>",
    '<div class="x">text</div>\n<br/>',
    "Привет мир! مرحبا بالعالم नमस्ते दुनिया",
    "",
    " ",
    "   leading and trailing   ",
    "I'm sure they'll say we'd've DON'T",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ⚙️ \u200b zero-width \x01\x7f",
    "See https://example.com/a?b=c&d=e#f and **bold** `code`",
]


def llama_cpp_inputs(gguf: Path) -> list[str]:
    inp = gguf.with_name(gguf.name + ".inp")
    if not inp.exists():
        return []
    return inp.read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n")[:-1]


def main() -> None:
    vocabs = {}
    for name, path in VOCABS.items():
        if not path.exists():
            sys.exit(f"missing {path}")
        llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
        cases = []
        for text in PROMPTS:
            for special in (False, True):
                ids = llm.tokenize(text.encode(), add_bos=special, special=special)
                cases.append(
                    {"text": text, "add_special": special, "parse_special": special, "ids": ids}
                )
        for text in llama_cpp_inputs(path):
            ids = llm.tokenize(text.encode(), add_bos=False, special=False)
            cases.append({"text": text, "add_special": False, "parse_special": False, "ids": ids})
        vocabs[name] = {"file": path.name, "cases": cases}
        del llm

    # One case per line keeps the file small and its diffs readable.
    lines = ["{", f' "llama_cpp_python": "{llama_cpp.__version__}",', ' "vocabs": {']
    for i, (name, vocab) in enumerate(vocabs.items()):
        lines.append(f'  "{name}": {{"file": "{vocab["file"]}", "cases": [')
        cases = [json.dumps(c, ensure_ascii=False) for c in vocab["cases"]]
        lines.append(",\n".join("   " + c for c in cases))
        lines.append("  ]}" + ("," if i + 1 < len(vocabs) else ""))
    lines.append(" }\n}\n")
    OUT.write_text("\n".join(lines), encoding="utf-8")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
