#!/usr/bin/env python3
"""The table of scripts/gpu-ab.sh: `bench-kernels --json` results of several builds and rounds,
matched by (kernel, shape), as markdown. Per build, its median time in each round (us); the
cuBLAS f16 baseline's range over every run; and per build its best time's ratio to the
baseline's mean (above 1: faster than cuBLAS).

    scripts/bench-ab-table.py LABEL=FILE...    (a label repeats once per round)
"""
import json
import sys


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    labels = []
    rows = {}
    device = None
    for arg in sys.argv[1:]:
        label, _, path = arg.partition("=")
        if label not in labels:
            labels.append(label)
        try:
            with open(path) as f:
                report = json.load(f)
        except (OSError, ValueError) as e:
            print(f"bench-ab-table: skipping {path}: {e}", file=sys.stderr)
            continue
        device = report.get("device", device)
        for r in report["results"]:
            row = rows.setdefault((r["kernel"], r["shape_desc"]), {"times": {}, "base": []})
            row["times"].setdefault(label, []).append(r["median_us"])
            if r.get("baseline_us"):
                row["base"].append(r["baseline_us"])
    print(f"device: {device}\n")
    print("| kernel | shape | " + " | ".join(labels) + " | cuBLAS f16 | "
          + " | ".join(f"{l} vs cuBLAS" for l in labels) + " |")
    print("|---|---|" + "---|" * (2 * len(labels) + 1))
    for (kernel, shape), row in rows.items():
        base = row["base"]
        cells = []
        ratios = []
        for label in labels:
            times = row["times"].get(label, [])
            cells.append(", ".join("failed" if t is None else f"{t:.1f}" for t in times) or "-")
            ok = [t for t in times if t]
            ratios.append(f"{sum(base) / len(base) / min(ok):.3f}x" if ok and base else "-")
        span = f"{min(base):.1f}-{max(base):.1f}" if base else "-"
        print(f"| {kernel} | {shape} | " + " | ".join(cells) + f" | {span} | "
              + " | ".join(ratios) + " |")


if __name__ == "__main__":
    main()
