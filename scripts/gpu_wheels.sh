#!/usr/bin/env bash
# Downloads the wheels scripts/gpu_check.sh installs on a machine that has
# only python3 with JAX and PyTorch (no Keras, no internet): Keras,
# KerasTuner and what they need beyond what such a machine holds.
# Usage: scripts/gpu_wheels.sh DIR [PYTHON_VERSION]
#   PYTHON_VERSION: that machine's Python, e.g. 3.12 (default: this one's).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:?usage: scripts/gpu_wheels.sh DIR [PYTHON_VERSION]}
version=${2:-}
PYTHON="${PYTHON:-python3}"
mkdir -p "$dir"
pins=(
  "$(grep -E '^keras==' requirements-cpu.txt)"
  "$(grep -E '^keras-tuner==' requirements-cpu.txt)"
  namex kt-legacy optree
)
args=(--no-deps --only-binary=:all: -d "$dir")
if [ -n "$version" ]; then
  args+=(--python-version "$version" --implementation cp
         --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
         --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
fi
"$PYTHON" -m pip download -q "${args[@]}" "${pins[@]}" 2>&1 \
  | { grep -v "is ignored" || true; }
ls "$dir"
