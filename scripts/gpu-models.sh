#!/usr/bin/env bash
# Runs ON the GPU machine (see docs/GPU.md), after scripts/gpu-pack.sh built .carry/ here and
# .carry was carried there: whole-model checks and throughput.
#   scripts/gpu-models.sh [PRESET...]      (default: llama3-8b)
# 1. For each PRESET, a tiny synthetic file (`zinc synth --tiny`), checked on the GPU against the
#    CPU reference (`zinc check-model`).
# 2. For each PRESET, the full-size synthetic Q4_K_M file (written once into $MODELS, default
#    /tmp/zinc-models, reused while the machine stays up), then `zinc bench` (pp512, tg128, with
#    the per-kernel profile of one prefill). BENCH_ARGS overrides the bench arguments.
# Logs go to $OUT/models-*.log; a summary comes last. Exit status 0 when every step passed.
# With ZINC_TUNE set (e.g. to gpu-run.sh's $OUT/tune.json) the engine dispatches by that table.
set -uo pipefail
cd "$(dirname "$0")/.."

OUT="${OUT:-out/gpu-models}"
MODELS="${MODELS:-/tmp/zinc-models}"
BENCH_ARGS="${BENCH_ARGS:--p 512 -n 128 -r 3 --profile}"
mkdir -p "$OUT" "$MODELS"
zinc=.carry/zinc
if [[ ! -x $zinc ]]; then
    echo "gpu-models: $zinc is missing: run scripts/gpu-pack.sh where Rust is, and carry .carry" >&2
    exit 2
fi
presets=("$@")
[[ ${#presets[@]} -gt 0 ]] || presets=(llama3-8b)

summary=()
failed=0
# step NAME COMMAND...: runs COMMAND, logging to $OUT/models-NAME.log.
step() {
    local name=$1
    shift
    echo "=== $name: $*"
    local start=$SECONDS
    "$@" > "$OUT/models-$name.log" 2>&1
    local rc=$?
    tail -n 25 "$OUT/models-$name.log"
    summary+=("$(printf '%-28s %-5s %5ss' "$name" "$([[ $rc == 0 ]] && echo ok || echo FAIL)" "$((SECONDS - start))")")
    [[ $rc == 0 ]] || failed=1
}

for p in "${presets[@]}"; do
    tiny="$MODELS/$p-tiny.gguf"
    step "$p-tiny-synth" $zinc synth --preset "$p" --tiny -o "$tiny"
    step "$p-tiny-check" $zinc check-model -m "$tiny"
done
for p in "${presets[@]}"; do
    full="$MODELS/$p.gguf"
    [[ -s $full ]] || step "$p-synth" $zinc synth --preset "$p" -o "$full"
    # shellcheck disable=SC2086 # BENCH_ARGS is a list of arguments
    step "$p-bench" $zinc bench -m "$full" $BENCH_ARGS --json "$OUT/bench-$p.json"
done

echo
echo "=== summary (logs in $OUT)"
printf '%s\n' "${summary[@]}"
exit $failed
