#!/usr/bin/env bash
# Installs ptxas, cuobjdump and nvdisasm (CUDA 13.x) into .tools/cuda/bin from NVIDIA's PyPI wheels,
# for validating emitted PTX offline. Idempotent: does nothing when all three are already there.
# Needs python3 with pip; installs unzip through apt-get when it is missing (Python's zipfile
# would drop the executable bit).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="$root/.tools/cuda"
bin="$dest/bin"
tools=(ptxas cuobjdump nvdisasm)
# wheel name -> the tool it carries
declare -A wheel_of=([ptxas]=nvidia-cuda-nvcc [cuobjdump]=nvidia-cuda-cuobjdump [nvdisasm]=nvidia-cuda-nvdisasm)

missing=()
for t in "${tools[@]}"; do
    [[ -x "$bin/$t" ]] || missing+=("$t")
done
if [[ ${#missing[@]} -eq 0 ]]; then
    echo "ptxas, cuobjdump, nvdisasm: $bin"
    exit 0
fi

die() {
    echo "install-ptxas.sh: $*" >&2
    exit 1
}

command -v python3 >/dev/null || die "python3 is required"
python3 -m pip --version >/dev/null 2>&1 || die "pip is required (python3 -m pip)"
if ! command -v unzip >/dev/null; then
    command -v apt-get >/dev/null || die "unzip is required and apt-get is not available to install it"
    sudo_cmd=()
    [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
    "${sudo_cmd[@]}" apt-get update -qq >/dev/null
    "${sudo_cmd[@]}" apt-get install -y -qq unzip >/dev/null || die "could not install unzip"
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$bin"

for t in "${missing[@]}"; do
    wheel="${wheel_of[$t]}"
    python3 -m pip download --quiet --no-deps --disable-pip-version-check \
        --dest "$work/$wheel" "$wheel>=13,<14" >"$work/pip.log" 2>&1 ||
        die "pip download $wheel failed:
$(cat "$work/pip.log")"
    whl="$(ls "$work/$wheel"/*.whl 2>/dev/null | head -n1)"
    [[ -n "$whl" ]] || die "pip download $wheel produced no wheel"
    unzip -q -o "$whl" "nvidia/cu13/bin/$t" -d "$work/$wheel/x" ||
        die "$(basename "$whl") has no nvidia/cu13/bin/$t"
    install -m 0755 "$work/$wheel/x/nvidia/cu13/bin/$t" "$bin/$t"
done

"$bin/ptxas" --version >/dev/null || die "the installed ptxas does not run on this machine"
echo "ptxas, cuobjdump, nvdisasm: $bin"
