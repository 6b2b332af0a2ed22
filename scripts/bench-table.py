#!/usr/bin/env python3
"""The side-by-side table of scripts/gpu-llama-bench.sh: for each preset, the tests of
DIR/llama-bench-PRESET.json and DIR/zinc-bench-PRESET.json (llama-bench's JSON fields) matched by
(n_prompt, n_gen), as a markdown table.

    scripts/bench-table.py DIR PRESET...
"""
import json
import sys


def load(path):
    with open(path) as f:
        return {(r["n_prompt"], r["n_gen"]): r for r in json.load(f)}


def test_name(n_prompt, n_gen):
    return f"pp{n_prompt}" if n_gen == 0 else f"tg{n_gen}" if n_prompt == 0 else f"pp{n_prompt}+tg{n_gen}"


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out, presets = sys.argv[1], sys.argv[2:]
    print("| model | test | llama.cpp | zinc | zinc / llama.cpp |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for preset in presets:
        llama = load(f"{out}/llama-bench-{preset}.json")
        zinc = load(f"{out}/zinc-bench-{preset}.json")
        for key in sorted(llama.keys() | zinc.keys()):
            cells = []
            for runs in (llama, zinc):
                r = runs.get(key)
                cells.append(f"{r['avg_ts']:.2f} ± {r['stddev_ts']:.2f}" if r else "-")
            ratio = (
                f"{zinc[key]['avg_ts'] / llama[key]['avg_ts']:.2f}x"
                if key in llama and key in zinc
                else "-"
            )
            print(f"| {preset} | {test_name(*key)} | {cells[0]} | {cells[1]} | {ratio} |")


if __name__ == "__main__":
    main()
