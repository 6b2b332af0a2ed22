#!/usr/bin/env bash
# Builds the release binaries here and lays out .carry/ (ignored by git) for the GPU machine:
#   .carry/zinc             the engine, kernels embedded (no LLVM: checked below)
#   .carry/check_examples   the runtime's GPU check of the compiled examples
#   .carry/examples/        examples/*.tile compiled for sm_90 (wgmma_tile: sm_90a; NAME.ptx + NAME.json)
#   .carry/llama.cpp.tar.gz llama.cpp's sources (from the llama-cpp-python sdist) for
#                           scripts/gpu-llama-bench.sh, without what llama-bench does not build
# Then, on the GPU machine, from the repository root: scripts/gpu-run.sh (see docs/GPU.md).
# Honours CARGO_TARGET_DIR; ZINC_ARCHS picks the archs embedded in zinc (default sm_89,sm_90a,sm_120).
set -euo pipefail
cd "$(dirname "$0")/.."

export LLVM_SYS_221_PREFIX="${LLVM_SYS_221_PREFIX:-$(llvm-config-22 --prefix)}"
target="${CARGO_TARGET_DIR:-target}/release"
carry=.carry

echo "gpu-pack: building release binaries"
cargo build --release --workspace --bin zinc --bin zincc --example check_examples

if ldd "$target/zinc" | grep -qi llvm; then
    echo "gpu-pack: $target/zinc links LLVM; the GPU machine has none" >&2
    exit 1
fi

rm -rf "$carry"
mkdir -p "$carry"
cp "$target/zinc" "$target/examples/check_examples" "$carry/"
# Symbols are not needed there, and the carried folder has a size limit.
strip "$carry/zinc" "$carry/check_examples" 2>/dev/null || true
"$target/zincc" build --arch sm_90 $(ls examples/*.tile | grep -v wgmma) -o "$carry/examples" >/dev/null
"$target/zincc" build --arch sm_90a examples/wgmma_tile.tile -o "$carry/examples" >/dev/null

# llama.cpp for the side-by-side bench: 8 MB instead of the sdist's 77 (vocabularies, docs,
# tests, web UI and other GPU backends left out).
sources=$(scripts/build-llama-cpp.sh --sdist-only | sed -n 's/^llama.cpp sources: //p')
tar -czf "$carry/llama.cpp.tar.gz" -C "$(dirname "$sources")" \
    --exclude='llama.cpp/.git*' --exclude='llama.cpp/models' --exclude='llama.cpp/docs' \
    --exclude='llama.cpp/tests' --exclude='llama.cpp/benches' --exclude='llama.cpp/conversion' \
    --exclude='llama.cpp/tools/ui' --exclude='llama.cpp/tools/server' \
    --exclude='llama.cpp/ggml/src/ggml-vulkan' --exclude='llama.cpp/ggml/src/ggml-sycl' \
    --exclude='llama.cpp/ggml/src/ggml-metal' --exclude='llama.cpp/ggml/src/ggml-cann' \
    --exclude='llama.cpp/ggml/src/ggml-opencl' --exclude='llama.cpp/ggml/src/ggml-webgpu' \
    llama.cpp

echo "gpu-pack: $carry is ready ($(du -sh "$carry" | cut -f1)):"
ls -l "$carry" "$carry/examples"
