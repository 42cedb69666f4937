#!/usr/bin/env bash
# Runs the whole test suite once per Keras backend, one after another (one
# backend per process: KERAS_BACKEND is read at import). Extra arguments go
# to pytest, e.g. `scripts/test_all_backends.sh -x -k dense`.
# BACKENDS="jax torch" restricts the loop. The backend-independent tests
# (marked `backend_independent`) run in the torch pass only (conftest.py); the
# slowest tests of each pass are listed at its end.
# Each pass runs on TEST_WORKERS pytest-xdist workers (default 2; 1 runs in
# one process), a test module per worker at a time (`--dist loadfile`, so
# that a module's fixtures are built once), each worker with one OpenMP
# thread. (The runner's kill-and-resume tests, in the torch pass, have the
# sweep kill itself at the line they name, so a busy second worker cannot
# let it get a step further first.)
# XLA (JAX, and TensorFlow's jit-compiled steps) compiles the tests' many
# small programs with LLVM's cheaper code generation: its HLO passes (the
# fusion and simplification users' programs get) are unchanged, and the
# JAX layer tests take about half the time. XLA_FLAGS overrides it.
set -u
cd "$(dirname "$0")/.."
export XLA_FLAGS="${XLA_FLAGS:---xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true}"
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"
export TF_ENABLE_ONEDNN_OPTS="${TF_ENABLE_ONEDNN_OPTS:-0}"
PYTHON="${PYTHON:-python}"
failed=()
total_start=$(date +%s)
for backend in ${BACKENDS:-tensorflow jax torch}; do
  echo "=== KERAS_BACKEND=${backend} ==="
  start=$(date +%s)
  workers="${TEST_WORKERS:-2}"
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
