#!/usr/bin/env bash
# Runs ON the GPU machine (see docs/GPU.md): llama.cpp's llama-bench and `zinc bench` on the same
# synthetic Q4_K_M files in one run, pp512 and tg128, side by side.
#   scripts/gpu-llama-bench.sh [PRESET[@FROM=TO,...]...]   (default: llama3-8b)
#   scripts/gpu-llama-bench.sh --build-only         (only build llama-bench, e.g. in the background
#                                                    while an earlier call's GPU work runs)
# A preset may carry `zinc synth --retype` pairs: `llama3-8b@Q4_K=Q8_0,Q6_K=Q8_0` is its shape
# with Q8_0 weights. Needs .carry/zinc and .carry/llama.cpp.tar.gz from scripts/gpu-pack.sh.
# llama.cpp is built with CUDA for sm_90 into $LLAMA_BUILD (default /tmp/zinc-llama; 4-6 minutes
# on 16 cores, reused while the machine stays up); the models are written into $MODELS (default
# /tmp/zinc-models, reused, as scripts/gpu-models.sh does). BENCH_ARGS overrides the arguments
# both benches get (default `-p 512 -n 128 -r 3`). Results: $OUT/llama-bench-TAG.json and
# $OUT/zinc-bench-TAG.json in llama-bench's JSON fields (TAG: the preset with `-` for `=`, `,`
# and `@`), logs beside them, and the table last.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT="${OUT:-out/gpu-llama-bench}"
MODELS="${MODELS:-/tmp/zinc-models}"
LLAMA_BUILD="${LLAMA_BUILD:-/tmp/zinc-llama}"
BENCH_ARGS="${BENCH_ARGS:--p 512 -n 128 -r 3}"
mkdir -p "$OUT" "$MODELS"
zinc=.carry/zinc
for need in "$zinc" .carry/llama.cpp.tar.gz; do
    if [[ ! -e $need ]]; then
        echo "gpu-llama-bench: $need is missing: run scripts/gpu-pack.sh where Rust is, and carry .carry" >&2
        exit 2
    fi
done
build_only=0
if [[ ${1:-} == --build-only ]]; then
    build_only=1
    shift
fi
presets=("$@")
[[ ${#presets[@]} -gt 0 ]] || presets=(llama3-8b)

llama_bench="$LLAMA_BUILD/build/bin/llama-bench"
if [[ ! -x $llama_bench ]]; then
    echo "=== building llama.cpp (CUDA, sm_90) into $LLAMA_BUILD"
    start=$SECONDS
    rm -rf "$LLAMA_BUILD"
    mkdir -p "$LLAMA_BUILD"
    tar -xzf .carry/llama.cpp.tar.gz -C "$LLAMA_BUILD"
    # Only what llama-bench needs: no tests, examples, server or web UI.
    cmake -S "$LLAMA_BUILD/llama.cpp" -B "$LLAMA_BUILD/build" -G Ninja \
        -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
        -DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
        -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF > "$OUT/llama-configure.log" 2>&1 ||
        { tail -n 30 "$OUT/llama-configure.log"; exit 1; }
    cmake --build "$LLAMA_BUILD/build" --target llama-bench -j "$(nproc)" \
        > "$OUT/llama-build.log" 2>&1 || { tail -n 30 "$OUT/llama-build.log"; exit 1; }
    echo "built in $((SECONDS - start)) s"
fi
[[ $build_only == 0 ]] || exit 0

tags=()
for spec in "${presets[@]}"; do
    # llama-bench splits -m at commas: files and results take the spec without =, @ and ,.
    p=${spec//[=,@]/-}
    tags+=("$p")
    model="$MODELS/$p.gguf"
    synth_args=(--preset "${spec%%@*}")
    [[ $spec != *@* ]] || synth_args+=(--retype "${spec#*@}")
    if [[ ! -s $model ]]; then
        echo "=== writing $model"
        $zinc synth "${synth_args[@]}" -o "$model" > "$OUT/synth-$p.log" 2>&1 ||
            { tail -n 20 "$OUT/synth-$p.log"; exit 1; }
    fi
    echo "=== $p: llama-bench"
    # shellcheck disable=SC2086 # BENCH_ARGS is a list of arguments
    "$llama_bench" -m "$model" -ngl 99 -fa 1 $BENCH_ARGS -o json \
        > "$OUT/llama-bench-$p.json" 2> "$OUT/llama-bench-$p.log" ||
        { tail -n 20 "$OUT/llama-bench-$p.log"; exit 1; }
    echo "=== $p: zinc bench"
    # shellcheck disable=SC2086
    $zinc bench -m "$model" $BENCH_ARGS --json "$OUT/zinc-bench-$p.json" \
        > "$OUT/zinc-bench-$p.log" 2>&1 || { tail -n 20 "$OUT/zinc-bench-$p.log"; exit 1; }
done

echo
echo "=== side by side (tokens/s, mean ± sd; ratio = zinc / llama.cpp)"
python3 scripts/bench-table.py "$OUT" "${tags[@]}"
