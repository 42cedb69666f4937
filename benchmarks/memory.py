"""Peak memory of one model's training step, each in a fresh process.

`measure_memory` runs, once per model of a case,

    python -m benchmarks.memory CASE MODEL [--mode full|quick|smoke]

which builds the model, its optimizer variables and the batch, runs
`MEMORY_STEPS` training steps and prints one line `MEMORY_RESULT {json}`
(see `measure_step_memory` and `MEMORY_METHOD` for what it holds).
"""

import argparse
import json
import os
import pathlib
import re
import resource
import subprocess
import sys

import keras

from benchmarks import cases as bench_cases
from tuning import provenance

MEMORY_STEPS = 3
RESULT_PREFIX = "MEMORY_RESULT "
# The figures of a model that get a ratio to the baseline's.
MEMORY_KEYS = (
    "first_step_peak_increase_mib",
    "step_peak_increase_mib",
    "xla_total_mib",
)
# Below this, a baseline's memory figure is noise: no ratio is given.
MEMORY_RATIO_FLOOR_MIB = 8.0

MEMORY_METHOD = (
    "Fresh process per model, after the model, its optimizer variables and "
    "the batch exist. first_step_peak_increase: peak resident set size "
    "during the first training step (VmHWM, reset through "
    "/proc/self/clear_refs) minus the resident size just before it; it "
    "includes tracing and compilation of the step. step_peak_increase: the "
    f"same over steps 2..{MEMORY_STEPS}, with the peak reset after step 1: "
    "what a step allocates beyond what stays resident between steps (memory "
    "the allocator keeps from step 1 and reuses is not counted). Both are "
    "page-granular and a few MiB noisy. Where /proc is missing, ru_maxrss, "
    "which cannot be reset. On JAX, xla_*: the buffers XLA assigns to the "
    "compiled training step (stateless_call + value_and_grad + SGD under "
    "jax.jit, compiled.memory_analysis()), exact for that program, blind to "
    "allocator overhead."
)


def memory_ratio(entry, base, key):
    """The ratio of `entry[key]` to the baseline's, or `None`.

    Args:
        entry: one model's memory record.
        base: the baseline's, from the same case.
        key: one of `MEMORY_KEYS`.

    Returns:
        float, or `None` where `entry` lacks `key` or the baseline's figure
        is under `MEMORY_RATIO_FLOOR_MIB`.
    """
    if key not in entry or base.get(key, 0.0) < MEMORY_RATIO_FLOOR_MIB:
        return None
    return entry[key] / base[key]


def _memory_kib():
    """`(resident, peak resident)` of this process in KiB, and the method.

    On Linux the peak is `VmHWM` from /proc/self/status, which
    `_reset_peak_memory` can reset; elsewhere `ru_maxrss`, which never
    resets (and `resident` is then unknown, None).
    """
    try:
        status = pathlib.Path("/proc/self/status").read_text()
        fields = dict(
            re.findall(r"^(VmRSS|VmHWM):\s+(\d+) kB", status, re.MULTILINE)
        )
        return int(fields["VmRSS"]), int(fields["VmHWM"]), "VmHWM"
    except (OSError, KeyError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        if sys.platform == "darwin":  # bytes there, KiB on Linux
            peak //= 1024
        return None, peak, "ru_maxrss"


def _reset_peak_memory():
    """Resets `VmHWM` to the current resident size (Linux >= 4.0)."""
    try:
        pathlib.Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def measure_step_memory(case, candidate):
    """The memory of one model's training steps, in this process.

    Meant for a fresh process (`python -m benchmarks.memory`): what was
    allocated before counts in none of the figures, but what the allocator
    kept from it is reused.

    Args:
        case: the `benchmarks.cases.Case`.
        candidate: the name of one of its candidates.

    Returns:
        dict: in MiB, `first_step_peak_increase_mib`, the peak resident
        size during the first step (tracing and compilation included) over
        the resident size just before it; `step_peak_increase_mib`, the same
        over the next steps, with the peak reset after the first (what a
        step allocates beyond what stays resident between steps);
        `resident_before_mib`; and the `method`. On JAX, the `xla_*` buffer
        sizes of the compiled step too.
    """
    model, x, y = bench_cases.make_model(case, candidate)
    # Optimizer variables exist before the first step is measured.
    model.optimizer.build(model.trainable_variables)
    resettable = _reset_peak_memory()
    before, peak_before, method = _memory_kib()
    if before is None:
        before = peak_before
    model.train_on_batch(x, y)
    after_first, first_peak, _ = _memory_kib()
    if after_first is None or not _reset_peak_memory():
        after_first = first_peak
    for _ in range(MEMORY_STEPS - 1):
        model.train_on_batch(x, y)
    _, steps_peak, _ = _memory_kib()
    mib = 1024.0
    result = {
        "method": method if resettable else "ru_maxrss",
        "resident_before_mib": before / mib,
        "first_step_peak_increase_mib": max(first_peak - before, 0) / mib,
        "step_peak_increase_mib": max(steps_peak - after_first, 0) / mib,
    }
    if keras.backend.backend() == "jax":
        result.update(_xla_memory_analysis(model, x, y))
    return result


def _xla_memory_analysis(model, x, y):
    """Buffer sizes of the compiled JAX training step (SGD on the MSE)."""
    import jax

    def step(trainable, non_trainable, x, y):
        def loss_fn(trainable):
            y_pred, new_non_trainable = model.stateless_call(
                trainable, non_trainable, x, training=True
            )
            loss = keras.ops.mean(keras.ops.square(y_pred - y))
            return loss, new_non_trainable

        (loss, new_non_trainable), grads = jax.value_and_grad(
            loss_fn, has_aux=True
        )(trainable)
        trainable = [
            v - bench_cases.LEARNING_RATE * g for v, g in zip(trainable, grads)
        ]
        return loss, trainable, new_non_trainable

    trainable = [v.value for v in model.trainable_variables]
    non_trainable = [v.value for v in model.non_trainable_variables]
    analysis = (
        jax.jit(step)
        .lower(trainable, non_trainable, x, y)
        .compile()
        .memory_analysis()
    )
    if analysis is None:
        return {}
    mib = 1024 * 1024
    out = {
        "xla_temp_mib": analysis.temp_size_in_bytes / mib,
        "xla_argument_mib": analysis.argument_size_in_bytes / mib,
        "xla_output_mib": analysis.output_size_in_bytes / mib,
    }
    out["xla_total_mib"] = sum(out.values())
    return out


def _measure_in_subprocess(case, candidate, mode):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.memory",
            case.name,
            candidate,
            "--mode",
            mode,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ),
        cwd=provenance.REPO_ROOT,
    )
    lines = [
        line
        for line in proc.stdout.splitlines()
        if line.startswith(RESULT_PREFIX)
    ]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(
            f"memory measurement of {candidate} on {case.name} failed "
            f"(exit {proc.returncode}):\n{proc.stderr[-3000:]}"
        )
    return json.loads(lines[-1][len(RESULT_PREFIX) :])


def measure_memory(case, mode, candidates, log):
    """The memory of some candidates of a case, one fresh process each.

    Args:
        case: the `benchmarks.cases.Case` (one of `mode`'s).
        mode: the run's mode, which names the case's shapes.
        candidates: the names to measure, the case's baseline among them.
        log: callable taking one line of progress (str).

    Returns:
        dict: per candidate, the `measure_step_memory` record, with the
        ratio of each of `MEMORY_KEYS` to the baseline's
        (`*_ratio`, where `memory_ratio` gives one).

    Raises:
        RuntimeError: where a measuring process fails.
    """
    results = {}
    for candidate in candidates:
        results[candidate] = _measure_in_subprocess(case, candidate, mode)
        log(
            f"[{case.name}] memory {candidate}: "
            f"{results[candidate]['first_step_peak_increase_mib']:.1f} MiB "
            "first step, "
            f"{results[candidate]['step_peak_increase_mib']:.1f} MiB after"
        )
    base = results[case.baseline]
    for entry in results.values():
        for key in MEMORY_KEYS:
            ratio = memory_ratio(entry, base, key)
            if ratio is not None:
                entry[key.replace("_mib", "_ratio")] = ratio
    return results


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Peak memory of one benchmark model's training steps, "
        "printed as one MEMORY_RESULT JSON line (backend from KERAS_BACKEND)."
    )
    parser.add_argument("case", help="the case's name, e.g. conv_32x32x64_64")
    parser.add_argument("model", help="the candidate's name, e.g. Conv2D")
    parser.add_argument(
        "--mode",
        default="full",
        choices=sorted(bench_cases.MODES),
        help="the run whose shapes the case has (default: full)",
    )
    args = parser.parse_args(argv)
    try:
        case = bench_cases.case_named(args.case, args.mode)
    except ValueError as error:
        parser.error(str(error))
    if args.model not in case.candidates:
        parser.error(
            f"{args.model!r} is not a model of {args.case}. Expected one of "
            f"{list(case.candidates)}."
        )
    result = measure_step_memory(case, args.model)
    print(RESULT_PREFIX + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
