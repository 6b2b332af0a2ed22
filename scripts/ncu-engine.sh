#!/usr/bin/env bash
# Runs ON the GPU machine: each launch's GPU time of the kernels matching a regex inside a real
# engine run (e.g. `zinc bench`), as ncu sees it with neither its cache flushes nor its clock
# locking, so each kernel finds the L2 and clocks the engine leaves it. `zinc bench --profile`
# sums a kernel's launches over all its variants and shapes; this splits them by variant (grid
# and block) and, within one, by duration (launches more than 25% apart: different shapes on
# the same grid). Prints one table; the raw CSV goes to $OUT/ncu-engine.csv.
#   scripts/ncu-engine.sh BINARY KERNEL_REGEX [-c LAUNCHES] -- ZINC_ARGUMENTS...
# Example, the prefill's quantized products of a synthetic Llama 3 8B:
#   scripts/ncu-engine.sh .carry/zinc 'gemm_q[46]k_wg' -- bench -m l8.gguf -p 512 -n 0 -r 1
# BINARY may be xz-compressed (`.xz`). Environment (ZINC_TUNE, ...) passes through.
set -uo pipefail

if (($# < 3)); then
    echo "usage: scripts/ncu-engine.sh BINARY KERNEL_REGEX [-c LAUNCHES] -- ZINC_ARGUMENTS..." >&2
    exit 2
fi
binary=$1
regex=$2
shift 2
launches=2000
if [[ "${1:-}" == "-c" ]]; then
    launches=$2
    shift 2
fi
if [[ "${1:-}" != "--" ]]; then
    echo "ncu-engine: expected -- before zinc's arguments, got '${1:-}'" >&2
    exit 2
fi
shift

ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
if [[ ! -x "$ncu" ]]; then
    echo "ncu-engine: no ncu on PATH or in /usr/local/cuda/bin" >&2
    exit 2
fi
OUT="${OUT:-out/ncu-engine}"
mkdir -p "$OUT"
if [[ "$binary" == *.xz ]]; then
    unpacked=$(mktemp)
    xz -dc "$binary" >"$unpacked" || exit 2
    chmod +x "$unpacked"
    binary=$unpacked
fi

csv="$OUT/ncu-engine.csv"
if ! "$ncu" --cache-control none --clock-control none --metrics gpu__time_duration.sum \
    -k "regex:$regex" -c "$launches" --csv --log-file "$csv" "$binary" "$@" >"$OUT/ncu-engine.log" 2>&1; then
    echo "ncu-engine: the run failed (last lines of $OUT/ncu-engine.log):" >&2
    tail -5 "$OUT/ncu-engine.log" >&2
    exit 1
fi

python3 - "$csv" <<'PY'
import csv, statistics, sys
from collections import defaultdict

to_us = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}
groups = defaultdict(list)
with open(sys.argv[1]) as f:
    rows = csv.DictReader(line for line in f if line.startswith('"'))
    for row in rows:
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        unit = row.get("Metric Unit", "ns")
        if unit not in to_us:
            sys.exit(f"ncu-engine: unknown time unit {unit!r}")
        value = float(row["Metric Value"].replace(",", "")) * to_us[unit]
        groups[(row["Kernel Name"], row["Grid Size"], row["Block Size"])].append(value)
if not groups:
    sys.exit("ncu-engine: no launch matched (see the log)")

print("| kernel | grid | block | launches | median us | min us | max us | total ms |")
print("|---|---|---|---:|---:|---:|---:|---:|")
for (name, grid, block), times in sorted(groups.items()):
    times.sort()
    # Launches of one grid at different shapes: split where a time exceeds the last by 25%.
    clusters = [[times[0]]]
    for t in times[1:]:
        if t > 1.25 * clusters[-1][-1]:
            clusters.append([])
        clusters[-1].append(t)
    for c in clusters:
        print(f"| {name} | {grid} | {block} | {len(c)} | {statistics.median(c):.1f} | "
              f"{min(c):.1f} | {max(c):.1f} | {sum(c) / 1e3:.3f} |")
PY
