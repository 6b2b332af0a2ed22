#!/usr/bin/env bash
# Runs ON the GPU machine: issue 5's anchor table. The engine's dispatch tiles for Q4_K and Q6_K
# (f32 output) at the six anchors (T in {512, 2048} by m4096 k14336, m14336 k4096, m4096 k4096),
# two rounds against cuBLAS f16 in the same runs; the tiles writing f16 (cuBLAS's own job), one
# round; and the decode matvecs at T = 1 against the device copy. llama.cpp's figures to set
# beside them are in ../shared/ANCHORS.md (same card kind: check the first line printed).
#   scripts/gpu-anchors.sh BINARY      BINARY: a zinc build, or an xz-compressed one (`.xz`)
# Results go to $OUT (default out/gpu-anchors): anchor/ab-*.json, f16-*.json, matvec.json.
set -uo pipefail
cd "$(dirname "$0")/.."

if (($# != 1)); then
    echo "usage: scripts/gpu-anchors.sh BINARY" >&2
    exit 2
fi
OUT="${OUT:-out/gpu-anchors}"
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader

zinc=$(mktemp)
case "$1" in
    *.xz) xz -dc "$1" >"$zinc" || exit 2 ;;
    *) cp "$1" "$zinc" || exit 2 ;;
esac
chmod +x "$zinc"

anchors=512x4096x4096,512x14336x4096,512x4096x14336,2048x4096x4096,2048x14336x4096,2048x4096x14336
# The dispatch's f16-output builds: the persistent tile where the tiles outnumber the SMs, the
# one-warpgroup 6-deep tile at T = 512, N = 4096.
persistent=BT=256,PRODUCER=1,PERSIST=132
one_warpgroup=WG=1,BT=256,STAGES=6,PRODUCER=1,SHFL_SCALES=1,DECODE_FIRST=1
status=0

echo "== the dispatch's tiles, f32 output (two rounds)"
OUT="$OUT/anchor" scripts/gpu-ab.sh -r 2 "zinc=$1" -- --dispatch 'gemm_q4k_wg$' 'gemm_q6k_wg$' \
    --shapes "$anchors" || status=1

echo "== the same tiles writing f16"
"$zinc" bench-kernels "gemm_q4k_wg_h@$persistent\$" "gemm_q6k_wg_h@$persistent\$" \
    --shapes 512x14336x4096,2048x4096x4096,2048x14336x4096,2048x4096x14336 \
    --json "$OUT/f16-persistent.json" || status=1
"$zinc" bench-kernels "gemm_q4k_wg_h@$one_warpgroup\$" "gemm_q6k_wg_h@$one_warpgroup\$" \
    --shapes 512x4096x4096,512x4096x14336 --json "$OUT/f16-one-warpgroup.json" || status=1

echo "== decode matvecs at T = 1 (the dispatch's), against the device copy"
"$zinc" bench-kernels --dispatch matvec --shapes 1x4096x14336,1x14336x4096 \
    --json "$OUT/matvec.json" || status=1

rm -f "$zinc"
exit $status
