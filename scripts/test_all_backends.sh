#!/usr/bin/env bash
# Runs the whole test suite once per Keras backend, one after another (one
# backend per process: KERAS_BACKEND is read at import). Extra arguments go
# to pytest, e.g. `scripts/test_all_backends.sh -x -k dense`.
# BACKENDS="jax torch" restricts the loop. The backend-independent tests
# (marked `backend_independent`) run in the jax pass only (conftest.py); the
# slowest tests of each pass are listed at its end.
# The tensorflow and jax passes run on TEST_WORKERS pytest-xdist workers
# (default 2; 1 runs in one process), a test module per worker at a time
# (`--dist loadfile`, so that a module's fixtures are built once), each
# worker with one OpenMP thread. The torch pass runs on TORCH_WORKERS
# (default 1): it holds the runner's kill-and-resume tests, which SIGKILL
# a sweep right after a given line, and a second worker on the same cores
# can let the sweep get a step further first.
set -u
cd "$(dirname "$0")/.."
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"
export TF_ENABLE_ONEDNN_OPTS="${TF_ENABLE_ONEDNN_OPTS:-0}"
PYTHON="${PYTHON:-python}"
failed=()
total_start=$(date +%s)
for backend in ${BACKENDS:-tensorflow jax torch}; do
  echo "=== KERAS_BACKEND=${backend} ==="
  start=$(date +%s)
  workers="${TEST_WORKERS:-2}"
  if [ "${backend}" = torch ]; then
    workers="${TORCH_WORKERS:-1}"
  fi
  parallel=()
  threads=()
  if [ "${workers}" != "1" ]; then
    parallel=(-n "${workers}" --dist loadfile)
    threads=("OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}")
  fi
  if ! env "${threads[@]}" KERAS_BACKEND="${backend}" \
      "${PYTHON}" -m pytest --durations=10 "${parallel[@]}" "$@"; then
    failed+=("${backend}")
  fi
  echo "=== ${backend}: $(( $(date +%s) - start )) s ==="
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "FAILED on: ${failed[*]}"
  exit 1
fi
echo "=== all passes: $(( $(date +%s) - total_start )) s ==="
echo "All backends passed."
