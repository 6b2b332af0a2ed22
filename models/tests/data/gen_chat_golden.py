#!/usr/bin/env python3
"""Generates chat_golden.json: chat templates rendered by Python Jinja2 the way Hugging Face
transformers renders them (sandboxed, trim_blocks, lstrip_blocks, loop controls,
raise_exception, tojson without ASCII escaping).

    .cache/llama-venv/bin/python models/tests/data/gen_chat_golden.py   # any python with jinja2

Templates (chat/*.jinja): Gemma 3 as published with google/gemma-3-*-it (the Gemma 3 270M GGUF
we test with carries no tokenizer.chat_template), Llama 3.1 8B Instruct and Qwen3 0.6B as
shipped in llama.cpp's models/templates.
"""
import json
from pathlib import Path

from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = Path(__file__).parent
TEMPLATES = {
    "gemma3": ("<bos>", "<eos>"),
    "llama3.1": ("<|begin_of_text|>", "<|eot_id|>"),
    "qwen3": ("", "<|im_end|>"),
}
CONVERSATIONS = {
    "single_user": [{"role": "user", "content": "What is the capital of France?"}],
    "system_and_turns": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "  Hi there!  "},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "Name a prime.\nJust one."},
    ],
    "ends_with_assistant": [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "<think>\nsimple\n</think>\n\n4"},
    ],
    "roles_not_alternating": [
        {"role": "user", "content": "a"},
        {"role": "user", "content": "b"},
    ],
}


def raise_exception(message):
    raise TemplateError(message)


def render(source, messages, add_generation_prompt, bos, eos):
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"]
    )
    env.filters["tojson"] = lambda x, indent=None: json.dumps(x, ensure_ascii=False, indent=indent)
    env.globals["raise_exception"] = raise_exception
    return env.from_string(source).render(
        messages=messages,
        add_generation_prompt=add_generation_prompt,
        bos_token=bos,
        eos_token=eos,
    )


def main():
    cases = []
    for name, (bos, eos) in TEMPLATES.items():
        source = (HERE / "chat" / f"{name}.jinja").read_text(encoding="utf-8")
        for conversation, messages in CONVERSATIONS.items():
            for add_generation_prompt in (False, True):
                case = {
                    "template": name,
                    "conversation": conversation,
                    "add_generation_prompt": add_generation_prompt,
                    "bos_token": bos,
                    "eos_token": eos,
                }
                try:
                    case["rendered"] = render(source, messages, add_generation_prompt, bos, eos)
                except TemplateError as e:
                    case["error"] = str(e)
                cases.append(case)
    golden = {"conversations": CONVERSATIONS, "cases": cases}
    out = HERE / "chat_golden.json"
    out.write_text(json.dumps(golden, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
