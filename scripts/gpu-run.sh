#!/usr/bin/env bash
# Runs ON the GPU machine, from the repository root, after scripts/gpu-pack.sh built .carry/
# here and .carry was carried there. Every step logs to $OUT/STEP.log (and the terminal); bench
# results go to $OUT/bench.json, the fastest variants to $OUT/tune.json (for ZINC_TUNE). A
# summary table comes last. Exit status: 0 when every step passed.
#   scripts/gpu-run.sh                 every kernel: selftest, examples, bench-kernels --tune
#   scripts/gpu-run.sh FILTER...       only kernels whose name contains a FILTER (selftest and
#                                      bench-kernels --tune per filter; no examples), e.g. the
#                                      kernels changed since the last device session
set -uo pipefail
cd "$(dirname "$0")/.."

OUT="${OUT:-out/gpu-run}"
mkdir -p "$OUT"
if [[ ! -x .carry/zinc ]]; then
    echo "gpu-run: .carry/zinc is missing: run scripts/gpu-pack.sh where Rust is, and carry .carry" >&2
    exit 2
fi

steps=()
statuses=()
seconds=()
# step NAME COMMAND...: runs COMMAND, teeing its output to $OUT/NAME.log.
step() {
    local name=$1
    shift
    echo
    echo "=== $name: $*"
    local start=$SECONDS
    "$@" 2>&1 | tee "$OUT/$name.log"
    local rc=${PIPESTATUS[0]}
    steps+=("$name")
    statuses+=("$rc")
    seconds+=("$((SECONDS - start))")
}

step devices .carry/zinc devices
if [[ $# -eq 0 ]]; then
    step selftest .carry/zinc selftest
    step check_examples .carry/check_examples .carry/examples
    step bench .carry/zinc bench-kernels --tune --json "$OUT/bench.json" --table "$OUT/tune.json"
fi
for filter in "$@"; do
    step "selftest-$filter" .carry/zinc selftest "$filter"
    step "bench-$filter" .carry/zinc bench-kernels "$filter" --tune \
        --json "$OUT/bench-$filter.json" --table "$OUT/tune-$filter.json"
done

echo
echo "=== summary (logs in $OUT)"
printf '%-15s %-7s %6s  %s\n' step result time "last line"
failed=0
for i in "${!steps[@]}"; do
    result=pass
    if [[ ${statuses[$i]} -ne 0 ]]; then
        result="FAIL(${statuses[$i]})"
        failed=1
    fi
    printf '%-15s %-7s %5ss  %s\n' "${steps[$i]}" "$result" "${seconds[$i]}" \
        "$(tail -n 1 "$OUT/${steps[$i]}.log")"
done
exit $failed
