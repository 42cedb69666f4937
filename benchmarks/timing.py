"""Interleaved timing of the candidates of one case.

All models of a case are built in one process and timed in rounds: each
round runs every model once, the order rotated by one each round so that no
model always follows the same one. A model's record holds its time per step
in every round, the per-round ratios to the baseline in the same round, and
their medians (see benchmarks/README.md, "Method").
"""

import math
import statistics
import time

import keras

from benchmarks import cases as bench_cases

PHASES = ("train", "inference")


def time_steps(step, steps):
    """Wall and process CPU seconds per call of `step`.

    `step` returns host values (NumPy), so each call has finished when it
    returns. The CPU time sums all threads of the process: it does not count
    time spent descheduled by other load, but it does count spin-waiting.

    Args:
        step: callable without arguments.
        steps: how many calls to time.

    Returns:
        tuple: `(wall, cpu)`, seconds per call (floats).
    """
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(steps):
        step()
    return (
        (time.perf_counter() - wall) / steps,
        (time.process_time() - cpu) / steps,
    )


def summarise(times, baseline_times):
    """Per-round times and ratios to the baseline, with their medians.

    Args:
        times: list of `(wall, cpu)` seconds per step, one per round.
        baseline_times: the baseline's, from the same rounds.

    Returns:
        dict: the record of one model in one phase.
    """
    wall = [t[0] for t in times]
    cpu = [t[1] for t in times]
    ratios = [t[0] / b[0] for t, b in zip(times, baseline_times)]
    cpu_ratios = [t[1] / b[1] for t, b in zip(times, baseline_times)]
    quartiles = (
        statistics.quantiles(ratios, n=4, method="inclusive")
        if len(ratios) > 1
        else [ratios[0]] * 3
    )
    return {
        "round_times_s": wall,
        "median_time_s": statistics.median(wall),
        "ratios": ratios,
        "median_ratio": statistics.median(ratios),
        "ratio_quartiles": [quartiles[0], quartiles[2]],
        "round_cpu_times_s": cpu,
        "cpu_ratios": cpu_ratios,
        "median_cpu_ratio": statistics.median(cpu_ratios),
    }


def _step(model, x, y, phase):
    if phase == "train":
        return lambda: model.train_on_batch(x, y)
    return lambda: model.predict_on_batch(x)


def _calibrate(step, settings):
    """Warms `step` up, then times one step to choose the steps per round.

    Returns:
        tuple: the warm-up's seconds, the seconds of one step and the steps
        per round (as many as fill `round_seconds`, at most `max_steps`).
    """
    start = time.perf_counter()
    for _ in range(settings["warmup_steps"]):
        step()
    first = time.perf_counter() - start
    per_step = time_steps(step, 1)[0]
    steps = max(1, math.ceil(settings["round_seconds"] / per_step))
    return first, per_step, min(steps, settings["max_steps"])


def run_case(case, settings, log, registry=bench_cases.CANDIDATES):
    """Times every candidate of `case`, interleaved.

    Args:
        case: the `benchmarks.cases.Case`.
        settings: dict with `rounds`, `warmup_steps`, `round_seconds`
            (the time one model runs per round) and `max_steps` (the most
            steps that fill it).
        log: callable taking one line of progress (str).
        registry: the `benchmarks.cases.Registry` that builds the
            candidates. Defaults to `benchmarks.cases.CANDIDATES`.

    Returns:
        dict: the case's record (its shape, then per candidate and phase
        the `summarise` record and `steps_per_round`, the final loss, the
        layers and the parameter count; `jit_compile` as resolved).
    """
    candidates = list(case.candidates)
    log(f"[{case.name}] building {len(candidates)} models")
    models = {
        candidate: bench_cases.make_model(case, candidate, registry)
        for candidate in candidates
    }
    record = {
        **case.record(),
        "baseline": case.baseline,
        "candidates": {candidate: {} for candidate in candidates},
    }
    for phase in PHASES:
        steps = {}
        steps_per_round = {}
        for candidate, (model, x, y) in models.items():
            steps[candidate] = _step(model, x, y, phase)
            first, per_step, steps_per_round[candidate] = _calibrate(
                steps[candidate], settings
            )
            log(
                f"[{case.name}] {phase} warm-up {candidate}: {first:.2f} s, "
                f"{per_step * 1e3:.1f} ms/step -> "
                f"{steps_per_round[candidate]} steps/round"
            )
        times = {candidate: [] for candidate in candidates}
        for r in range(settings["rounds"]):
            shift = r % len(candidates)
            for candidate in candidates[shift:] + candidates[:shift]:
                times[candidate].append(
                    time_steps(steps[candidate], steps_per_round[candidate])
                )
            log(
                f"[{case.name}] {phase} round {r + 1}/{settings['rounds']}: "
                + ", ".join(
                    f"{c} {times[c][-1][0] * 1e3:.1f} ms" for c in candidates
                )
            )
        for candidate in candidates:
            entry = record["candidates"][candidate]
            entry[phase] = summarise(times[candidate], times[case.baseline])
            entry[phase]["steps_per_round"] = steps_per_round[candidate]
        if phase == "train":
            for candidate, (model, x, y) in models.items():
                entry = record["candidates"][candidate]
                entry["final_loss"] = float(model.train_on_batch(x, y))
                entry["layers"] = [type(la).__name__ for la in model.layers]
                entry["params"] = int(model.count_params())
    record["jit_compile"] = bool(models[case.baseline][0].jit_compile)
    keras.backend.clear_session()
    return record
