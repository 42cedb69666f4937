#!/usr/bin/env bash
# Builds the wheel and the sdist, installs the wheel into a fresh venv with
# only Keras, NumPy and one backend (JAX, then PyTorch), and runs
# scripts/wheel_smoke.py there: the library must need none of the extras.
# Usage: scripts/wheel_check.sh [BACKEND ...]   (default: jax torch)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
PYTHON="${PYTHON:-python3}"
# `build` in a venv of its own: the Python that runs this is left as it is.
"$PYTHON" -m venv "$work/venv-build"
"$work/venv-build/bin/python" -m pip install -q build 2>&1 | { grep -v "is ignored" || true; }
"$work/venv-build/bin/python" -m build --outdir "$work/dist" . > "$work/build.log" 2>&1 \
  || { cat "$work/build.log"; exit 1; }
ls "$work/dist"/*.whl "$work/dist"/*.tar.gz > /dev/null
keras_pin=$(grep -E '^keras==' requirements-cpu.txt)
# The index of torch's CPU wheel, as requirements-cpu.txt names it.
torch_index=$(sed -n 's/^# torch index: //p' requirements-cpu.txt)
for backend in ${@:-jax torch}; do
  case "$backend" in
    jax) pin=$(grep -E '^jax\[cpu\]==' requirements-cpu.txt) ;;
    torch) pin=$(grep -E '^torch==' requirements-cpu.txt) ;;
    tensorflow) pin=$(grep -E '^tensorflow-cpu==' requirements-cpu.txt) ;;
    *) echo "unknown backend: $backend"; exit 2 ;;
  esac
  "$PYTHON" -m venv "$work/venv-$backend"
  if [ "$backend" = torch ]; then
    # Alone, so that no other package is looked up on torch's index.
    "$work/venv-$backend/bin/python" -m pip install -q --no-compile --no-deps \
      --extra-index-url "$torch_index" "$pin" 2>&1 | { grep -v "is ignored" || true; }
  fi
  "$work/venv-$backend/bin/python" -m pip install -q --no-compile "$work"/dist/*.whl \
    "$keras_pin" "$pin" 2>&1 | { grep -v "is ignored" || true; }
  (cd "$work" && KERAS_BACKEND="$backend" \
    "$work/venv-$backend/bin/python" "$root/scripts/wheel_smoke.py")
done
