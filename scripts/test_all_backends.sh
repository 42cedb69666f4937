#!/usr/bin/env bash
# Runs the whole test suite once per Keras backend, one after another (one
# backend per process: KERAS_BACKEND is read at import). Extra arguments go
# to pytest, e.g. `scripts/test_all_backends.sh -x -k dense`.
# BACKENDS="jax torch" restricts the loop. The backend-independent tests
# (marked `backend_independent`) run in the jax pass only (conftest.py); the
# slowest tests of each pass are listed at its end.
set -u
cd "$(dirname "$0")/.."
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"
export TF_ENABLE_ONEDNN_OPTS="${TF_ENABLE_ONEDNN_OPTS:-0}"
PYTHON="${PYTHON:-python}"
failed=()
for backend in ${BACKENDS:-tensorflow jax torch}; do
  echo "=== KERAS_BACKEND=${backend} ==="
  start=$(date +%s)
  if ! KERAS_BACKEND="${backend}" "${PYTHON}" -m pytest --durations=10 "$@"; then
    failed+=("${backend}")
  fi
  echo "=== ${backend}: $(( $(date +%s) - start )) s ==="
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "FAILED on: ${failed[*]}"
  exit 1
fi
echo "All backends passed."
