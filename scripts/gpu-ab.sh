#!/usr/bin/env bash
# Runs ON the GPU machine: times two or more builds of zinc against each other with
# `bench-kernels`, alternating them round by round (A B A B ...) so that drift of the card's
# clocks hits every build alike, and prints one table: each build's time per round, the cuBLAS
# f16 baseline's range over all runs, and each build's best time over the baseline's mean.
#   scripts/gpu-ab.sh [-r ROUNDS] LABEL=BINARY... -- BENCH-KERNELS ARGUMENTS...
# BINARY may be xz-compressed (`.xz`, as carried to stay under the carry limit). Results go to
# $OUT/ab-LABEL-ROUND.json and .log (OUT defaults to out/gpu-ab). Example, a build of HEAD
# against one of an older commit, both packed into .carry:
#   scripts/gpu-ab.sh old=.carry/zinc_old.xz new=.carry/zinc.xz -- \
#       'gemm_q4k_wg@BT=256,PRODUCER=1,PERSIST=132$' --shapes 2048x14336x4096
set -uo pipefail
cd "$(dirname "$0")/.."

rounds=2
if [[ "${1:-}" == "-r" ]]; then
    rounds=$2
    shift 2
fi
labels=()
binaries=()
while (($#)) && [[ "$1" != "--" ]]; do
    if [[ "$1" != *=* ]]; then
        echo "gpu-ab: expected LABEL=BINARY, got '$1'" >&2
        exit 2
    fi
    labels+=("${1%%=*}")
    binaries+=("${1#*=}")
    shift
done
if (($# == 0)) || ((${#labels[@]} < 1)); then
    echo "usage: scripts/gpu-ab.sh [-r ROUNDS] LABEL=BINARY... -- BENCH-KERNELS ARGUMENTS..." >&2
    exit 2
fi
shift

OUT="${OUT:-out/gpu-ab}"
mkdir -p "$OUT"
bin_dir=$(mktemp -d)
for i in "${!labels[@]}"; do
    src=${binaries[$i]}
    dst="$bin_dir/zinc-${labels[$i]}"
    case "$src" in
        *.xz) xz -dc "$src" >"$dst" || exit 2 ;;
        *) cp "$src" "$dst" || exit 2 ;;
    esac
    chmod +x "$dst"
done

status=0
tables=()
for round in $(seq 1 "$rounds"); do
    for label in "${labels[@]}"; do
        json="$OUT/ab-$label-$round.json"
        start=$SECONDS
        if ! "$bin_dir/zinc-$label" bench-kernels "$@" --json "$json" >"$OUT/ab-$label-$round.log" 2>&1; then
            echo "gpu-ab: $label round $round failed (last lines of $OUT/ab-$label-$round.log):" >&2
            tail -3 "$OUT/ab-$label-$round.log" >&2
            status=1
        fi
        echo "gpu-ab: $label round $round: $((SECONDS - start)) s"
        tables+=("$label=$json")
    done
done
python3 scripts/bench-ab-table.py "${tables[@]}" || status=1
rm -rf "$bin_dir"
exit $status
