#!/usr/bin/env bash
# The prepared accelerator check: on a machine with only python3 and its
# own JAX and PyTorch (CUDA builds on a GPU machine; no TensorFlow, no
# internet), installs Keras, KerasTuner and the other pure-Python wheels
# from WHEELS (made by scripts/gpu_wheels.sh), then, on the jax and torch
# backends, runs the layer tests and `python -m benchmarks.layer_overhead --quick`,
# and writes the benchmark JSON (gpu-<backend>.json), the log (gpu_check.log)
# and a summary (gpu_check.json) into OUT. It ends within 8 minutes. On a
# CPU machine it checks the same things on the CPU.
# Usage: scripts/gpu_check.sh WHEELS OUT
# CI runs it on the CPU with a shorter selection:
#   GPU_CHECK_TESTS   the tests to run (default: tests/layers)
#   GPU_CHECK_BENCH   the benchmark's mode (default: --quick)
#   GPU_CHECK_BENCH_BACKENDS   the backends whose benchmark runs (default:
#                     jax torch; the others' is reported "skipped")
#   GPU_CHECK_TEST_TIMEOUT, GPU_CHECK_BENCH_TIMEOUT   seconds per backend
#                     (defaults 150 and 75: the whole check within 8 minutes)
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
wheels=${1:?usage: scripts/gpu_check.sh WHEELS OUT}
out=${2:?usage: scripts/gpu_check.sh WHEELS OUT}
PYTHON="${PYTHON:-python3}"
tests_sel=${GPU_CHECK_TESTS:-tests/layers}
bench_mode=${GPU_CHECK_BENCH:---quick}
bench_backends=" ${GPU_CHECK_BENCH_BACKENDS:-jax torch} "
test_timeout=${GPU_CHECK_TEST_TIMEOUT:-150}
bench_timeout=${GPU_CHECK_BENCH_TIMEOUT:-75}
mkdir -p "$out"
log="$out/gpu_check.log"
: > "$log"
site=$(mktemp -d)
trap 'rm -rf "$site"' EXIT
start=$(date +%s)
say() { echo "$*" | tee -a "$log"; }

say "== install from $wheels"
if ! "$PYTHON" -m pip install -q --no-index --no-deps --no-compile \
    --no-cache-dir --target "$site" "$wheels"/*.whl >> "$log" 2>&1; then
  say "install failed"; exit 1
fi
export PYTHONPATH="$site:$root${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL=2
"$PYTHON" - >> "$log" 2>&1 <<'PY'
import keras, keras_tuner, numpy
print("keras", keras.__version__, "keras_tuner", keras_tuner.__version__,
      "numpy", numpy.__version__)
for name in ("jax", "torch"):
    try:
        m = __import__(name)
        devices = (m.devices() if name == "jax"
                   else [m.cuda.get_device_name(0)] if m.cuda.is_available()
                   else ["cpu"])
        print(name, m.__version__, devices)
    except Exception as e:  # reported, and the check of that backend fails
        print(name, "unavailable:", e)
PY

status=()
for backend in jax torch; do
  say "== $backend: layer tests ($tests_sel)"
  # shellcheck disable=SC2086
  if timeout "$test_timeout" env KERAS_BACKEND="$backend" "$PYTHON" -m pytest \
      $tests_sel -q -x -p no:cacheprovider >> "$log" 2>&1; then
    tests=passed
  else
    tests=failed
  fi
  say "$backend layer tests: $tests ($(tail -1 "$log"))"
  if [[ "$bench_backends" != *" $backend "* ]]; then
    say "$backend benchmark: skipped (GPU_CHECK_BENCH_BACKENDS)"
    status+=("\"$backend\": {\"layer_tests\": \"$tests\", \"benchmark\": \"skipped\"}")
    continue
  fi
  say "== $backend: python -m benchmarks.layer_overhead $bench_mode"
  bench_dir="$site/bench-$backend"
  bench=failed
  if timeout "$bench_timeout" env KERAS_BACKEND="$backend" "$PYTHON" \
      -m benchmarks.layer_overhead "$bench_mode" \
      --output "$bench_dir" >> "$log" 2>&1; then
    json=$(ls "$bench_dir"/*.json 2>/dev/null | head -1)
    if [ -n "$json" ] && [ -s "$json" ]; then
      cp "$json" "$out/gpu-$backend.json"
      bench=passed
    fi
  fi
  say "$backend benchmark: $bench"
  status+=("\"$backend\": {\"layer_tests\": \"$tests\", \"benchmark\": \"$bench\"}")
done
elapsed=$(( $(date +%s) - start ))
host=$(hostname)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
(IFS=,; echo "{\"commit\": \"$commit\", \"host\": \"$host\", \"gpu\": \"${gpu:-none}\", \"elapsed_s\": $elapsed, ${status[*]}}") \
  > "$out/gpu_check.json"
say "== done in ${elapsed} s: $(cat "$out/gpu_check.json")"
grep -q failed "$out/gpu_check.json" && exit 1
exit 0
