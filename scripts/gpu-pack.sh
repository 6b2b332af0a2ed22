#!/usr/bin/env bash
# Builds the release binaries here and lays out .carry/ (ignored by git) for the GPU machine:
#   .carry/zinc             the engine, kernels embedded (no LLVM: checked below)
#   .carry/check_examples   the runtime's GPU check of the compiled examples
#   .carry/examples/        examples/*.tile compiled for sm_90 (NAME.ptx + NAME.json)
# Then, on the GPU machine, from the repository root: scripts/gpu-run.sh (see docs/GPU.md).
# Honours CARGO_TARGET_DIR; ZINC_ARCHS picks the archs embedded in zinc (default sm_89,sm_90,sm_120).
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
"$target/zincc" build --arch sm_90 examples/*.tile -o "$carry/examples" >/dev/null

echo "gpu-pack: $carry is ready ($(du -sh "$carry" | cut -f1)):"
ls -l "$carry" "$carry/examples"
