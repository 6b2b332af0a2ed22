#!/usr/bin/env python3
"""Dumps the tokenizer fields of a GGUF file to JSON for the tokenizer tests.

    python3 dump_vocab.py MODEL.gguf OUT.json

Needs the `gguf` package (pip install gguf). The output mirrors `zinc_models::tokenizer::Vocab`;
it is a cache (large: a full vocabulary), never committed. It stands in for the GGUF reader
until the tests read the files directly.
"""
import json
import sys

import gguf


def main(src: str, dst: str) -> None:
    fields = gguf.GGUFReader(src).fields

    def get(key, default=None):
        field = fields.get(key)
        return default if field is None else field.contents()

    vocab = {
        "model": get("tokenizer.ggml.model"),
        "pre": get("tokenizer.ggml.pre"),
        "tokens": get("tokenizer.ggml.tokens"),
        "scores": get("tokenizer.ggml.scores", []),
        "token_types": get("tokenizer.ggml.token_type", []),
        "merges": get("tokenizer.ggml.merges", []),
        "bos": get("tokenizer.ggml.bos_token_id"),
        "eos": get("tokenizer.ggml.eos_token_id"),
        "eot": get("tokenizer.ggml.eot_token_id"),
        "eom": get("tokenizer.ggml.eom_token_id"),
        "unk": get("tokenizer.ggml.unknown_token_id"),
        "pad": get("tokenizer.ggml.padding_token_id"),
        "add_bos": get("tokenizer.ggml.add_bos_token"),
        "add_eos": get("tokenizer.ggml.add_eos_token"),
        "add_space_prefix": get("tokenizer.ggml.add_space_prefix"),
    }
    with open(dst, "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)


if __name__ == "__main__":
    main(*sys.argv[1:3])
