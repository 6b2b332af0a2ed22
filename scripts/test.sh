#!/usr/bin/env bash
# Runs every test. Installs what the tests need first (idempotent).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --deps
export LLVM_SYS_221_PREFIX="${LLVM_SYS_221_PREFIX:-$(llvm-config-22 --prefix)}"
cargo test --workspace --no-fail-fast "$@"
