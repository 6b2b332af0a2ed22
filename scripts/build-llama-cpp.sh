#!/usr/bin/env bash
# Builds a CPU-only llama.cpp reference (as llama-cpp-python) used to produce golden
# token ids and logits for the models/ tests. Everything lands in $ZINC_CACHE (default
# .cache/ in the repository, gitignored); re-running is cheap once the build exists.
#
# Result: a virtualenv whose python can `import llama_cpp` (and `gguf`):
#   $LLAMA_VENV/bin/python   (default $ZINC_CACHE/llama-venv)
# and llama.cpp's sources, whose models/ggml-vocab-*.gguf the tokenizer tests read.
#
#   scripts/build-llama-cpp.sh                # build (10-20 minutes on 2 cores)
#   scripts/build-llama-cpp.sh --sdist-only   # only fetch and unpack the sources (~15 s)
#
# Note: on CPUs with AMX, evaluate with weight repacking off (model param use_extra_bufts=False,
# as models/tests/data/gen_gemma3_logits.py does); the AMX kernels crash where the kernel does
# not grant AMX tile state.
set -euo pipefail

SDIST_ONLY=false
[ "${1:-}" = "--sdist-only" ] && SDIST_ONLY=true

VERSION=0.3.36
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${ZINC_CACHE:-$ROOT/.cache}
SDIST_DIR=$CACHE/llama-sdist
VENV=${LLAMA_VENV:-$CACHE/llama-venv}
PY=$VENV/bin/python

have_build() {
    [ -x "$PY" ] && "$PY" - "$VERSION" <<'EOF' 2>/dev/null
import sys, llama_cpp
sys.exit(0 if llama_cpp.__version__ == sys.argv[1] else 1)
EOF
}

SRC=$SDIST_DIR/llama_cpp_python-$VERSION
if ! $SDIST_ONLY && have_build; then
    echo "llama-cpp-python $VERSION already built: $PY"
    echo "llama.cpp sources: $SRC/vendor/llama.cpp"
    exit 0
fi

mkdir -p "$SDIST_DIR"
# Tests fetch in parallel: one process at a time downloads and unpacks.
exec 9>"$SDIST_DIR/.lock"
if command -v flock >/dev/null; then flock 9; fi
SDIST=$SDIST_DIR/llama_cpp_python-$VERSION.tar.gz
if [ ! -f "$SDIST" ]; then
    # Only llama-cpp-python from source: pip still prepares its metadata, which takes its build
    # backend (scikit-build-core, cmake and ninja wheels) in a throwaway environment, but
    # compiles nothing.
    python3 -m pip download --quiet --no-deps --no-binary llama-cpp-python \
        "llama-cpp-python==$VERSION" -d "$SDIST_DIR"
fi
# Keep an extracted copy: its vendor/llama.cpp sources are the reference we read.
# Unpack beside it and rename, so an interrupted unpack never passes for a whole one.
if [ ! -d "$SRC" ]; then
    TMP=$(mktemp -d "$SDIST_DIR/unpack.XXXXXX")
    tar -xzf "$SDIST" -C "$TMP"
    mv "$TMP/llama_cpp_python-$VERSION" "$SRC"
    rm -rf "$TMP"
fi
if $SDIST_ONLY; then
    echo "llama.cpp sources: $SRC/vendor/llama.cpp"
    exit 0
fi

if [ ! -x "$PY" ]; then
    python3 -m venv "$VENV"
fi
# Build backend and tools for --no-build-isolation, plus what the golden scripts import.
"$PY" -m pip install --quiet --upgrade pip
"$PY" -m pip install --quiet scikit-build-core cmake numpy gguf typing-extensions diskcache jinja2

# CPU only, no examples/tools/multimodal: the Python API is all the golden scripts need.
export CMAKE_ARGS="-DGGML_CUDA=OFF -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
-DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAVA_BUILD=OFF \
-DCMAKE_BUILD_TYPE=Release"
export CMAKE_BUILD_PARALLEL_LEVEL=2
# Build from the extracted tree (a fixed path) and keep the build tree, so an interrupted
# build resumes instead of starting over.
nice -n 10 "$PY" -m pip install --no-deps --no-build-isolation -v \
    --config-settings=build-dir="$CACHE/llama-build" "$SRC"

have_build
echo "llama-cpp-python $VERSION built: $PY"
echo "llama.cpp sources: $SRC/vendor/llama.cpp"
