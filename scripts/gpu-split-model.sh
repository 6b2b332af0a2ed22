#!/usr/bin/env bash
# Splits a model that is larger than one device call may carry (64 MiB in all) into parts, one
# ignored folder per call, and prints the calls that reassemble it on the GPU machine, whose /tmp
# survives between calls while the machine stays warm (about 30 s idle):
#   scripts/gpu-split-model.sh [FILE] [PART_MIB,...]  (default: the project's Gemma 3 270M, 60 MiB)
# PART_MIB may be a list: part i takes the i-th size, the last size repeats (e.g. 36,58 when the
# first call also carries .carry).
# Each part lands in .carry-model/NN/ (ignored by git); call NN carries ".carry-model/NN" and runs
#   scripts/gpu-split-model.sh --gather NN
# there, which appends the part to /tmp/zinc-models/NAME; the last call checks the SHA-256.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ ${1:-} == --gather ]]; then
    part=$2
    manifest=.carry-model/$part/MANIFEST
    # shellcheck source=/dev/null
    source "$manifest"
    mkdir -p /tmp/zinc-models
    target=/tmp/zinc-models/$NAME
    if [[ $INDEX == 1 ]]; then
        : > "$target"
    fi
    have=$(stat -c %s "$target" 2>/dev/null || echo 0)
    if [[ $have != "$OFFSET" ]]; then
        echo "gather: $target holds $have bytes, part $INDEX starts at $OFFSET (machine restarted? start again at part 1)" >&2
        exit 1
    fi
    cat ".carry-model/$part/data" >> "$target"
    if [[ $INDEX == "$COUNT" ]]; then
        echo "$SHA256  $target" | sha256sum -c -
    else
        echo "gather: part $INDEX of $COUNT appended ($(stat -c %s "$target") bytes)"
    fi
    exit 0
fi

file=${1:-.models/gemma-3-270m-q4_k_m.gguf}
IFS=, read -r -a part_mib <<< "${2:-60}"
[[ -s $file ]] || { echo "split: $file is missing" >&2; exit 1; }
name=$(basename "$file")
size=$(stat -c %s "$file")
# Part boundaries: offsets[i] is where part i + 1 starts.
offsets=(0)
while ((offsets[-1] < size)); do
    n=${#offsets[@]}
    mib=${part_mib[$((n <= ${#part_mib[@]} ? n - 1 : ${#part_mib[@]} - 1))]}
    ((mib > 0)) || { echo "split: part sizes must be positive MiB" >&2; exit 1; }
    offsets+=($((offsets[-1] + (mib << 20))))
done
count=$((${#offsets[@]} - 1))
sha=$(sha256sum "$file" | cut -d' ' -f1)
rm -rf .carry-model
for ((i = 1; i <= count; i++)); do
    dir=$(printf '.carry-model/%02d' "$i")
    mkdir -p "$dir"
    dd if="$file" of="$dir/data" bs=1M iflag=skip_bytes,count_bytes \
        skip="${offsets[$((i - 1))]}" count=$((offsets[i] - offsets[i - 1])) status=none
    printf 'NAME=%q\nINDEX=%d\nCOUNT=%d\nOFFSET=%d\nSHA256=%s\n' \
        "$name" "$i" "$count" "${offsets[$((i - 1))]}" "$sha" > "$dir/MANIFEST"
done
echo "split: $file ($size bytes) into $count parts under .carry-model/; one device call each:"
for ((i = 1; i < count; i++)); do
    printf '  run(command = "scripts/gpu-split-model.sh --gather %02d", carry = [".carry-model/%02d"])\n' "$i" "$i"
done
printf '  run(command = "scripts/gpu-split-model.sh --gather %02d && .carry/zinc check-model -m /tmp/zinc-models/%s", carry = [".carry", ".carry-model/%02d"])\n' "$count" "$name" "$count"
echo "(the model then stays in /tmp/zinc-models/ while the machine is warm)"
