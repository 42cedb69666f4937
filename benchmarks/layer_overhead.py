"""What our layers cost next to Dense, Conv2D and the built-in normalisers.

Times a training step (forward, backward and a plain SGD update, through
`model.train_on_batch` on a model compiled with `jit_compile="auto"`) and an
inference step (`model.predict_on_batch`) for one-layer models (behind a
trainable per-feature scale, so that the backward pass computes the layer's
input gradient as it would inside a network):

- dense, batch 256, 3072->1024 and 512->512: `Dense`, `AffineLikeDense`,
  `NormLikeDense`, `Dense`+`LayerNormalization`, `Dense`+`BatchNormalization`,
  `UnitNormalization`+`Dense`;
- conv, batch 64, 3x3, same padding, 32x32x64->64 and 16x16x128->128:
  `Conv2D`, `PatchNormConv2D`, `AffineLikeConv2D`, `Conv2D`+
  `BatchNormalization`, `Conv2D`+`GroupNormalization`, and two naive
  PatchNorms built from explicit patches (`keras.ops.image.extract_patches`,
  and shifted slices concatenated), to show why we do not do that.

The machine is shared, so absolute times mean little: every model of a case
is timed in the same process, interleaved round by round (A B C ... then
B C ... A, the order rotating so that no model always runs first), and the
result is the median over rounds of the per-round ratio to the baseline
(`Dense` or `Conv2D`). Each round times several steps of one model (as many
as fill about `--round-seconds`, calibrated during warm-up) and records the
time per step.

Peak memory of a training step (conv cases) is measured in a fresh process
per model: the increase of the process' peak resident set size (`VmHWM`,
reset through /proc/self/clear_refs) during the first training step, and
during the next two. On JAX the compiled training step's own buffers, from
XLA's `memory_analysis()`, are reported too. See benchmarks/README.md for
what these numbers include.

Usage (the backend comes from `KERAS_BACKEND`):

    python benchmarks/layer_overhead.py [--quick | --smoke] [--output DIR]
        [--rounds N]
    python benchmarks/layer_overhead.py --report [--output DIR] [--readme F]

Writes `<machine>-<backend>.json` (`-quick`, `-smoke` for the short modes)
under `--output` (default `benchmarks/results`) and prints a table.
`--report` rewrites the tables of `benchmarks/README.md` from the JSON files.
"""

import argparse
import datetime
import json
import math
import os
import pathlib
import platform
import re
import resource
import statistics
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_OUTPUT = REPO_ROOT / "benchmarks" / "results"
DEFAULT_README = REPO_ROOT / "benchmarks" / "README.md"
SCHEMA_VERSION = 1
LEARNING_RATE = 1e-4
MEMORY_STEPS = 3
README_BEGIN = "<!-- results: begin (written by layer_overhead.py --report) -->"
README_END = "<!-- results: end -->"

# Run settings per mode. `round_seconds` is the time one model runs per
# round; `max_steps` caps the steps that fill it.
MODES = {
    "full": dict(
        rounds=15, warmup_steps=3, round_seconds=0.3, max_steps=20, memory=True
    ),
    "quick": dict(
        rounds=5, warmup_steps=1, round_seconds=0.0, max_steps=1, memory=False
    ),
    "smoke": dict(
        rounds=1,
        warmup_steps=1,
        round_seconds=0.0,
        max_steps=1,
        memory=("Conv2D", "PatchNormConv2D"),
    ),
}

# (name, family, batch size, input shape, units or filters). The smoke mode
# runs one case per family, with tiny shapes under the same names.
CASES = {
    "default": [
        ("dense_3072_1024", "dense", 256, (3072,), 1024),
        ("dense_512_512", "dense", 256, (512,), 512),
        ("conv_32x32x64_64", "conv", 64, (32, 32, 64), 64),
        ("conv_16x16x128_128", "conv", 64, (16, 16, 128), 128),
    ],
    "smoke": [
        ("dense_3072_1024", "dense", 4, (24,), 8),
        ("conv_32x32x64_64", "conv", 2, (6, 6, 4), 4),
    ],
}

DENSE_CANDIDATES = (
    "Dense",
    "AffineLikeDense",
    "NormLikeDense",
    "Dense+LayerNormalization",
    "Dense+BatchNormalization",
    "UnitNormalization+Dense",
)
CONV_CANDIDATES = (
    "Conv2D",
    "PatchNormConv2D",
    "AffineLikeConv2D",
    "Conv2D+BatchNormalization",
    "Conv2D+GroupNormalization",
    "NaivePatchNorm(extract_patches)",
    "NaivePatchNorm(slices)",
)

# (candidate, reference, bound, threshold, cases, what it checks).
TARGETS = [
    (
        "AffineLikeDense",
        "Dense",
        "<=",
        1.05,
        ("dense_3072_1024",),
        "AffineLikeDense <= 1.05x Dense at 3072->1024",
    ),
    (
        "NormLikeDense",
        "Dense",
        "<=",
        1.05,
        ("dense_3072_1024",),
        "NormLikeDense <= 1.05x Dense at 3072->1024",
    ),
    (
        "AffineLikeDense",
        "Dense+LayerNormalization",
        "<=",
        1.0,
        ("dense_3072_1024", "dense_512_512"),
        "AffineLikeDense no slower than Dense+LayerNormalization",
    ),
    (
        "NormLikeDense",
        "Dense+LayerNormalization",
        "<=",
        1.0,
        ("dense_3072_1024", "dense_512_512"),
        "NormLikeDense no slower than Dense+LayerNormalization",
    ),
    (
        "PatchNormConv2D",
        "Conv2D",
        "<=",
        1.10,
        ("conv_32x32x64_64", "conv_16x16x128_128"),
        "PatchNormConv2D <= 1.10x Conv2D",
    ),
    (
        "AffineLikeConv2D",
        "Conv2D",
        "<=",
        1.10,
        ("conv_32x32x64_64", "conv_16x16x128_128"),
        "AffineLikeConv2D <= 1.10x Conv2D",
    ),
    (
        "PatchNormConv2D",
        "Conv2D+BatchNormalization",
        "<=",
        1.0,
        ("conv_32x32x64_64", "conv_16x16x128_128"),
        "PatchNormConv2D no slower than Conv2D+BatchNormalization",
    ),
    (
        "AffineLikeConv2D",
        "Conv2D+BatchNormalization",
        "<=",
        1.0,
        ("conv_32x32x64_64", "conv_16x16x128_128"),
        "AffineLikeConv2D no slower than Conv2D+BatchNormalization",
    ),
    (
        "NaivePatchNorm(extract_patches)",
        "PatchNormConv2D",
        ">=",
        5.0,
        ("conv_32x32x64_64", "conv_16x16x128_128"),
        "naive (extract_patches) PatchNorm >= 5x slower than PatchNormConv2D",
    ),
]

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


def _import_keras():
    """Imports keras and the layers (after argument parsing, as it is slow)."""
    import keras

    from keras_affine_div import layers as kad_layers

    return keras, kad_layers


def naive_patch_norm_layers(keras):
    """The two naive PatchNorm layers, built on first use (they need keras).

    Both compute exactly `PatchNormConv2D` (3x3 and larger windows, stride 1,
    channels_last, groups=1): they materialise every patch, `(batch, height,
    width, kh * kw * channels)`, then take the norms and a matmul with the
    flattened kernel.

    Returns:
        dict: `{"extract_patches": cls, "slices": cls}`.
    """
    ops = keras.ops

    class _NaivePatchNorm(keras.layers.Layer):
        def __init__(
            self, filters, kernel_size, padding="same", epsilon=1e-3, **kwargs
        ):
            super().__init__(**kwargs)
            self.filters = filters
            self.kernel_size = kernel_size
            self.padding = padding
            self.epsilon = epsilon

        def build(self, input_shape):
            self.kernel = self.add_weight(
                name="kernel",
                shape=(
                    self.kernel_size,
                    self.kernel_size,
                    input_shape[-1],
                    self.filters,
                ),
                initializer=keras.initializers.RandomNormal(stddev=1.0),
            )
            self.bias = self.add_weight(
                name="bias", shape=(self.filters,), initializer="zeros"
            )

        def call(self, inputs):
            patches = self._patches(inputs)
            sq_norms = ops.sum(
                ops.square(ops.cast(patches, "float32")),
                axis=-1,
                keepdims=True,
            )
            kernel = ops.reshape(self.kernel, (-1, self.filters))
            outputs = ops.matmul(patches, kernel)
            outputs = outputs * ops.cast(
                ops.rsqrt(sq_norms + self.epsilon), outputs.dtype
            )
            return outputs + self.bias

        def compute_output_shape(self, input_shape):
            return tuple(input_shape[:-1]) + (self.filters,)

    class NaivePatchNormExtractPatches(_NaivePatchNorm):
        """Patches from `keras.ops.image.extract_patches`."""

        def _patches(self, inputs):
            return ops.image.extract_patches(
                inputs,
                size=self.kernel_size,
                strides=1,
                padding=self.padding,
                data_format="channels_last",
            )

    class NaivePatchNormSlices(_NaivePatchNorm):
        """Patches as `kh * kw` shifted slices, concatenated."""

        def _patches(self, inputs):
            k = self.kernel_size
            height, width = inputs.shape[1], inputs.shape[2]
            if self.padding == "same":
                before = (k - 1) // 2
                inputs = ops.pad(
                    inputs,
                    (
                        (0, 0),
                        (before, k - 1 - before),
                        (before, k - 1 - before),
                        (0, 0),
                    ),
                )
            else:
                height, width = height - k + 1, width - k + 1
            shifted = [
                inputs[:, i : i + height, j : j + width, :]
                for i in range(k)
                for j in range(k)
            ]
            return ops.concatenate(shifted, axis=-1)

    return {
        "extract_patches": NaivePatchNormExtractPatches,
        "slices": NaivePatchNormSlices,
    }


def input_scale_layer(keras):
    """A trainable per-feature scale, `x * s` with `s` initialised to ones.

    Every benchmark model starts with one, so that its training step
    computes the gradient with respect to the measured layer's input, as it
    would inside a network (the batch itself needs no gradient, and the
    backends skip what nobody needs). It costs every model the same.
    """

    class InputScale(keras.layers.Layer):
        def build(self, input_shape):
            self.scale = self.add_weight(
                name="scale", shape=(input_shape[-1],), initializer="ones"
            )

        def call(self, inputs):
            return inputs * self.scale

    return InputScale(name="input_scale")


def build_layers(keras, kad_layers, candidate, units):
    """The layers of one candidate model, for `units` outputs or filters."""
    L = keras.layers
    conv = dict(kernel_size=3, padding="same")
    if candidate.startswith("NaivePatchNorm"):
        kind = candidate[len("NaivePatchNorm(") : -1]
        return [naive_patch_norm_layers(keras)[kind](units, **conv)]
    builders = {
        "Dense": lambda: [L.Dense(units)],
        "AffineLikeDense": lambda: [kad_layers.AffineLikeDense(units)],
        "NormLikeDense": lambda: [kad_layers.NormLikeDense(units)],
        "Dense+LayerNormalization": lambda: [
            L.Dense(units),
            L.LayerNormalization(),
        ],
        "Dense+BatchNormalization": lambda: [
            L.Dense(units),
            L.BatchNormalization(),
        ],
        "UnitNormalization+Dense": lambda: [
            L.UnitNormalization(),
            L.Dense(units),
        ],
        "Conv2D": lambda: [L.Conv2D(units, **conv)],
        "PatchNormConv2D": lambda: [kad_layers.PatchNormConv2D(units, **conv)],
        "AffineLikeConv2D": lambda: [
            kad_layers.AffineLikeConv2D(units, **conv)
        ],
        "Conv2D+BatchNormalization": lambda: [
            L.Conv2D(units, **conv),
            L.BatchNormalization(),
        ],
        "Conv2D+GroupNormalization": lambda: [
            L.Conv2D(units, **conv),
            L.GroupNormalization(min(32, units)),
        ],
    }
    return builders[candidate]()


def candidates_of(family):
    return DENSE_CANDIDATES if family == "dense" else CONV_CANDIDATES


def make_model(keras, kad_layers, case, candidate):
    """A compiled one-layer model and a batch `(x, y)` as backend tensors."""
    _, family, batch_size, input_shape, units = case
    model = keras.Sequential(
        [keras.Input(input_shape), input_scale_layer(keras)]
        + build_layers(keras, kad_layers, candidate, units),
        name=re.sub(r"\W+", "_", candidate),
    )
    model.compile(
        optimizer=keras.optimizers.SGD(learning_rate=LEARNING_RATE),
        loss="mse",
        jit_compile="auto",
    )
    rng = keras.random.SeedGenerator(0)
    x = keras.random.normal((batch_size,) + tuple(input_shape), seed=rng)
    y = keras.random.normal(
        (batch_size,) + tuple(model.output_shape[1:]), seed=rng
    )
    return model, x, y


def time_steps(step, steps):
    """Wall and process CPU seconds per call of `step`.

    `step` returns host values (NumPy), so each call has finished when it
    returns. The CPU time sums all threads of the process: it does not count
    time spent descheduled by other load, but it does count spin-waiting.
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


def run_case(keras, kad_layers, case, settings, log):
    """Times every candidate of `case`, interleaved; returns its record."""
    name, family, batch_size, input_shape, units = case
    candidates = candidates_of(family)
    log(f"[{name}] building {len(candidates)} models")
    models = {}
    for candidate in candidates:
        model, x, y = make_model(keras, kad_layers, case, candidate)
        models[candidate] = (model, x, y)

    record = {
        "name": name,
        "family": family,
        "batch_size": batch_size,
        "input_shape": list(input_shape),
        "units" if family == "dense" else "filters": units,
        "baseline": candidates[0],
        "candidates": {},
    }
    for phase in ("train", "inference"):
        steps_fns = {}
        steps_per_round = {}
        for candidate, (model, x, y) in models.items():
            if phase == "train":
                fn = lambda m=model, x=x, y=y: m.train_on_batch(x, y)
            else:
                fn = lambda m=model, x=x: m.predict_on_batch(x)
            start = time.perf_counter()
            for _ in range(settings["warmup_steps"]):
                fn()
            first = time.perf_counter() - start
            per_step = time_steps(fn, 1)[0]
            steps = max(1, math.ceil(settings["round_seconds"] / per_step))
            steps_per_round[candidate] = min(steps, settings["max_steps"])
            steps_fns[candidate] = fn
            log(
                f"[{name}] {phase} warm-up {candidate}: {first:.2f} s, "
                f"{per_step * 1e3:.1f} ms/step -> "
                f"{steps_per_round[candidate]} steps/round"
            )
        times = {candidate: [] for candidate in candidates}
        for r in range(settings["rounds"]):
            shift = r % len(candidates)
            order = candidates[shift:] + candidates[:shift]
            for candidate in order:
                times[candidate].append(
                    time_steps(steps_fns[candidate], steps_per_round[candidate])
                )
            log(
                f"[{name}] {phase} round {r + 1}/{settings['rounds']}: "
                + ", ".join(
                    f"{c} {times[c][-1][0] * 1e3:.1f} ms" for c in candidates
                )
            )
        for candidate in candidates:
            entry = record["candidates"].setdefault(candidate, {})
            entry[phase] = summarise(times[candidate], times[candidates[0]])
            entry[phase]["steps_per_round"] = steps_per_round[candidate]
        if phase == "train":
            for candidate, (model, x, y) in models.items():
                loss = float(model.train_on_batch(x, y))
                entry = record["candidates"][candidate]
                entry["final_loss"] = loss
                entry["layers"] = [
                    type(layer).__name__ for layer in model.layers
                ]
                entry["params"] = int(model.count_params())
    record["jit_compile"] = bool(models[candidates[0]][0].jit_compile)
    keras.backend.clear_session()
    return record


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


def memory_child(case_name, candidate, mode):
    """Runs in a fresh process: the memory of one model's training step.

    Prints one `MEMORY_RESULT {json}` line with, in MiB:
    `first_step_peak_increase`, the peak resident size during the first
    step (tracing and compilation included) over the resident size just
    before it; `step_peak_increase`, the same over the next steps, with the
    peak reset after the first (what a step allocates beyond what stays
    resident between steps).
    """
    keras, kad_layers = _import_keras()
    case = next(c for c in cases_for(mode) if c[0] == case_name)
    model, x, y = make_model(keras, kad_layers, case, candidate)
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
        result.update(_xla_memory_analysis(keras, model, x, y))
    print("MEMORY_RESULT " + json.dumps(result))


def _xla_memory_analysis(keras, model, x, y):
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
        trainable = [v - LEARNING_RATE * g for v, g in zip(trainable, grads)]
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


def measure_memory(case, mode, settings_memory, log):
    """Memory of every candidate of a conv case, one fresh process each."""
    results = {}
    candidates = candidates_of(case[1])
    if isinstance(settings_memory, tuple):
        candidates = settings_memory
    for candidate in candidates:
        cmd = [
            sys.executable,
            str(pathlib.Path(__file__).resolve()),
            "--memory-child",
            case[0],
            candidate,
            "--mode",
            mode,
        ]
        proc = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=600,
            env=dict(os.environ),
        )
        lines = [
            line
            for line in proc.stdout.splitlines()
            if line.startswith("MEMORY_RESULT ")
        ]
        if proc.returncode != 0 or not lines:
            raise RuntimeError(
                f"memory measurement of {candidate} on {case[0]} failed "
                f"(exit {proc.returncode}):\n{proc.stderr[-3000:]}"
            )
        results[candidate] = json.loads(lines[-1][len("MEMORY_RESULT ") :])
        log(
            f"[{case[0]}] memory {candidate}: "
            f"{results[candidate]['first_step_peak_increase_mib']:.1f} MiB "
            "first step, "
            f"{results[candidate]['step_peak_increase_mib']:.1f} MiB after"
        )
    base = results[candidates_of(case[1])[0]]
    for entry in results.values():
        for key in MEMORY_KEYS:
            ratio = _memory_ratio(entry, base, key)
            if ratio is not None:
                entry[key.replace("_mib", "_ratio")] = ratio
    return results


MEMORY_KEYS = (
    "first_step_peak_increase_mib",
    "step_peak_increase_mib",
    "xla_total_mib",
)
# Below this, a baseline's memory figure is noise: no ratio is given.
MEMORY_RATIO_FLOOR_MIB = 8.0


def _memory_ratio(entry, base, key):
    if key not in entry or base.get(key, 0.0) < MEMORY_RATIO_FLOOR_MIB:
        return None
    return entry[key] / base[key]


def cases_for(mode):
    return CASES["smoke" if mode == "smoke" else "default"]


def machine_name(keras):
    """`cpu-<n>core`, or `gpu-<model>` where the backend sees a GPU."""
    backend = keras.backend.backend()
    gpu = None
    try:
        if backend == "jax":
            import jax

            device = jax.devices()[0]
            if device.platform == "gpu":
                gpu = device.device_kind
        elif backend == "torch":
            import torch

            if torch.cuda.is_available():
                gpu = torch.cuda.get_device_name(0)
        elif backend == "tensorflow":
            import tensorflow as tf

            gpus = tf.config.list_physical_devices("GPU")
            if gpus:
                gpu = tf.config.experimental.get_device_details(gpus[0]).get(
                    "device_name", "gpu"
                )
    except Exception:  # noqa: BLE001 - a label only
        gpu = None
    if gpu:
        return "gpu-" + re.sub(r"[^a-z0-9]+", "-", gpu.lower()).strip("-")
    return f"cpu-{os.cpu_count()}core"


def versions(keras):
    import importlib.metadata as md

    import numpy as np

    import keras_affine_div

    out = {
        "python": platform.python_version(),
        "keras": keras.__version__,
        "numpy": np.__version__,
        "keras_affine_div": keras_affine_div.__version__,
    }
    for dist in ("tensorflow-cpu", "tensorflow", "jax", "jaxlib", "torch"):
        try:
            out[dist] = md.version(dist)
        except md.PackageNotFoundError:
            pass
    return out


def git_commit():
    def git(*args):
        return subprocess.run(
            ["git", *args],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=30,
        )

    head = git("rev-parse", "HEAD")
    if head.returncode != 0:
        return {"commit": None, "dirty": None}
    # Modified only if the code that ran differs from the commit: the
    # package and the benchmark scripts, not the results or the README.
    dirty = (
        git(
            "diff",
            "--quiet",
            "HEAD",
            "--",
            "keras_affine_div",
            "benchmarks/*.py",
        ).returncode
        != 0
    )
    return {"commit": head.stdout.strip(), "dirty": dirty}


def backend_threads(keras):
    backend = keras.backend.backend()
    if backend == "torch":
        import torch

        return {
            "torch_num_threads": torch.get_num_threads(),
            "torch_num_interop_threads": torch.get_num_interop_threads(),
        }
    if backend == "tensorflow":
        import tensorflow as tf

        return {
            "tf_intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
            "tf_inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads(),
        }
    return {}


def evaluate_targets(cases):
    """Each target in each of its cases and phases: median ratio and verdict.

    A ratio between two non-baseline candidates is the median over rounds
    of their per-round ratio (both ran in the same rounds).
    """
    by_name = {case["name"]: case for case in cases}
    out = []
    for candidate, reference, bound, threshold, case_names, text in TARGETS:
        for case_name in case_names:
            case = by_name.get(case_name)
            if case is None:
                continue
            for phase in ("train", "inference"):
                cand = case["candidates"][candidate][phase]
                ref = case["candidates"][reference][phase]
                ratio = statistics.median(
                    c / r
                    for c, r in zip(cand["round_times_s"], ref["round_times_s"])
                )
                cpu_ratio = statistics.median(
                    c / r
                    for c, r in zip(
                        cand["round_cpu_times_s"], ref["round_cpu_times_s"]
                    )
                )
                met = (
                    ratio <= threshold
                    if bound == "<="
                    else (ratio >= threshold)
                )
                out.append(
                    {
                        "target": text,
                        "case": case_name,
                        "phase": phase,
                        "candidate": candidate,
                        "reference": reference,
                        "median_ratio": ratio,
                        "median_cpu_ratio": cpu_ratio,
                        "bound": bound,
                        "threshold": threshold,
                        "met": bool(met),
                    }
                )
    return out


def _ratio(value):
    return "n/a" if value is None else f"{value:.2f}x"


def format_tables(result):
    """Plain-text tables of one run: ratios, times, memory and targets."""
    lines = [
        f"backend {result['backend']} on {result['machine']} "
        f"({result['mode']}, {result['settings']['rounds']} rounds, "
        f"jit_compile={result['cases'][0]['jit_compile']}, load average "
        f"{result['load_average']['start'][0]:.2f} -> "
        f"{result['load_average']['end'][0]:.2f})"
    ]
    for case in result["cases"]:
        lines.append("")
        lines.append(
            f"{case['name']} (batch {case['batch_size']}, "
            f"baseline {case['baseline']})"
        )
        lines.append(
            f"  {'model':34s} {'train':>7s} {'(cpu)':>7s} "
            f"{'ms':>9s} {'infer':>7s} {'(cpu)':>7s} {'ms':>9s}"
        )
        for name, entry in case["candidates"].items():
            t, i = entry["train"], entry["inference"]
            lines.append(
                f"  {name:34s} {t['median_ratio']:6.2f}x "
                f"{t['median_cpu_ratio']:6.2f}x "
                f"{t['median_time_s'] * 1e3:9.2f} "
                f"{i['median_ratio']:6.2f}x {i['median_cpu_ratio']:6.2f}x "
                f"{i['median_time_s'] * 1e3:9.2f}"
            )
        if case.get("memory"):
            lines.append(
                "  peak memory increase of a training step (MiB, "
                "ratio): first step, later steps[, XLA buffers]"
            )
            base = case["memory"][case["baseline"]]
            for name, entry in case["memory"].items():
                cells = [
                    f"{entry[key]:8.1f} "
                    f"{_ratio(_memory_ratio(entry, base, key)):>6s}"
                    for key in MEMORY_KEYS
                    if key in entry
                ]
                lines.append(f"    {name:32s} " + "   ".join(cells))
    lines.append("")
    lines.append("targets (median ratio in this run):")
    for target in result["targets"]:
        lines.append(
            f"  {'MET   ' if target['met'] else 'MISSED'} {target['target']}"
            f" [{target['case']}, {target['phase']}]: "
            f"{target['median_ratio']:.3f} {target['bound']} "
            f"{target['threshold']} (cpu time {target['median_cpu_ratio']:.3f})"
        )
    return "\n".join(lines)


def run_benchmark(args):
    settings = dict(MODES[args.mode])
    if args.rounds is not None:
        settings["rounds"] = args.rounds
    started = time.time()
    load_start = os.getloadavg()
    keras, kad_layers = _import_keras()
    keras.utils.set_random_seed(0)

    def log(message):
        print(f"{time.time() - started:7.1f}s {message}", flush=True)

    log(f"backend {keras.backend.backend()}, load average {load_start}")
    cases = []
    for case in cases_for(args.mode):
        record = run_case(keras, kad_layers, case, settings, log)
        if case[1] == "conv" and settings["memory"]:
            record["memory"] = measure_memory(
                case, args.mode, settings["memory"], log
            )
        cases.append(record)

    backend = keras.backend.backend()
    machine = machine_name(keras)
    result = {
        "schema_version": SCHEMA_VERSION,
        "benchmark": "layer_overhead",
        "mode": args.mode,
        "machine": machine,
        "backend": backend,
        "command": [pathlib.Path(sys.executable).name] + sys.argv,
        "git": git_commit(),
        "versions": versions(keras),
        "platform": {
            "system": platform.system(),
            "release": platform.release(),
            "machine": platform.machine(),
            "processor": _cpu_model(),
            "cpu_count": os.cpu_count(),
        },
        "settings": {
            **settings,
            "jit_compile": "auto",
            "optimizer": f"SGD(learning_rate={LEARNING_RATE})",
            "loss": "mse",
            "dtype_policy": keras.config.dtype_policy().name,
            "image_data_format": keras.config.image_data_format(),
            "train_step": "model.train_on_batch(x, y), x and y backend "
            "tensors; time per step = round time / steps",
            "inference_step": "model.predict_on_batch(x)",
            "model": "Input -> trainable per-feature scale (so that the "
            "input gradient of the measured layer is computed) "
            "-> the candidate's layers",
            "interleaving": "all models of a case in every round, the order "
            "rotated by one each round",
            "environment": {
                name: os.environ.get(name)
                for name in (
                    "OMP_NUM_THREADS",
                    "MKL_NUM_THREADS",
                    "TF_ENABLE_ONEDNN_OPTS",
                    "XLA_FLAGS",
                    "KERAS_BACKEND",
                )
            },
            "threads": backend_threads(keras),
            "memory_method": MEMORY_METHOD if settings["memory"] else None,
        },
        "load_average": {
            "start": list(load_start),
            "end": list(os.getloadavg()),
        },
        "started_at": datetime.datetime.fromtimestamp(
            started, datetime.UTC
        ).isoformat(timespec="seconds"),
        "duration_s": time.time() - started,
        "cases": cases,
    }
    result["targets"] = evaluate_targets(cases)
    suffix = "" if args.mode == "full" else f"-{args.mode}"
    output = pathlib.Path(args.output)
    output.mkdir(parents=True, exist_ok=True)
    path = output / f"{machine}-{backend}{suffix}.json"
    path.write_text(json.dumps(result, indent=1) + "\n")
    print()
    print(format_tables(result))
    print(f"\nwrote {path}")
    return path


def _cpu_model():
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def markdown_report(results):
    """Markdown tables for a list of result dicts (one per backend)."""
    out = []
    for result in results:
        settings = result["settings"]
        load = result["load_average"]
        commit = (result["git"]["commit"] or "unknown")[:10]
        if result["git"].get("dirty"):
            commit += " (modified)"
        out.append(
            f"### {result['backend']} on {result['machine']}"
            + ("" if result["mode"] == "full" else f" ({result['mode']})")
        )
        out.append("")
        out.append(
            f"Keras {result['versions'].get('keras')}, "
            + ", ".join(
                f"{k} {result['versions'][k]}"
                for k in ("tensorflow-cpu", "tensorflow", "jax", "torch")
                if k in result["versions"]
                and k.split("-")[0] == result["backend"]
            )
            + f"; jit_compile resolved to "
            f"`{result['cases'][0]['jit_compile']}`; "
            f"{settings['rounds']} rounds; load average "
            f"{load['start'][0]:.2f} at the start, {load['end'][0]:.2f} at "
            f"the end; commit `{commit}`; {result['started_at']}."
        )
        out.append("")
        out.append(
            "Median per-round ratio to the baseline (`Dense` or "
            "`Conv2D`), and median time per step:"
        )
        out.append("")
        out.append(
            "| case | model | train | (CPU time) | train ms | "
            "inference | (CPU time) | inference ms |"
        )
        out.append("|---|---|---:|---:|---:|---:|---:|---:|")
        for case in result["cases"]:
            for name, entry in case["candidates"].items():
                t, i = entry["train"], entry["inference"]
                out.append(
                    f"| {case['name']} | `{name}` | "
                    f"{t['median_ratio']:.2f}x | "
                    f"{t['median_cpu_ratio']:.2f}x | "
                    f"{t['median_time_s'] * 1e3:.1f} | "
                    f"{i['median_ratio']:.2f}x | "
                    f"{i['median_cpu_ratio']:.2f}x | "
                    f"{i['median_time_s'] * 1e3:.1f} |"
                )
        memory_cases = [c for c in result["cases"] if c.get("memory")]
        if memory_cases:
            has_xla = any(
                "xla_total_mib" in e
                for c in memory_cases
                for e in c["memory"].values()
            )
            out.append("")
            out.append(
                "Peak memory increase of a training step (see "
                "Method; no ratio where the baseline's figure is "
                f"under {MEMORY_RATIO_FLOOR_MIB:.0f} MiB):"
            )
            out.append("")
            header = (
                "| case | model | first step, MiB | ratio | "
                "later steps, MiB | ratio |"
            )
            rule = "|---|---|---:|---:|---:|---:|"
            if has_xla:
                header += " XLA buffers, MiB | ratio |"
                rule += "---:|---:|"
            out.append(header)
            out.append(rule)
            keys = MEMORY_KEYS if has_xla else MEMORY_KEYS[:2]
            for case in memory_cases:
                base = case["memory"][case["baseline"]]
                for name, entry in case["memory"].items():
                    cells = [
                        f"{entry[key]:.1f} | "
                        f"{_ratio(_memory_ratio(entry, base, key))}"
                        if key in entry
                        else "n/a | n/a"
                        for key in keys
                    ]
                    out.append(
                        f"| {case['name']} | `{name}` | "
                        + " | ".join(cells)
                        + " |"
                    )
        out.append("")
        out.append("Targets:")
        out.append("")
        out.append(
            "| target | case | phase | median ratio | met | (CPU-time ratio) |"
        )
        out.append("|---|---|---|---:|---|---:|")
        for target in result["targets"]:
            out.append(
                f"| {target['target']} | {target['case']} | "
                f"{target['phase']} | {target['median_ratio']:.3f} "
                f"({target['bound']} {target['threshold']}) | "
                f"{'yes' if target['met'] else '**no**'} | "
                f"{target['median_cpu_ratio']:.3f} |"
            )
        out.append("")
    return "\n".join(out)


def write_report(output, readme):
    """Rewrites the results section of `readme` from the JSON in `output`."""
    order = {"tensorflow": 0, "jax": 1, "torch": 2}
    results = [
        json.loads(p.read_text())
        for p in sorted(pathlib.Path(output).glob("*.json"))
    ]
    results.sort(
        key=lambda r: (r["machine"], order.get(r["backend"], 9), r["mode"])
    )
    body = markdown_report(results) if results else "No results yet.\n"
    readme = pathlib.Path(readme)
    text = readme.read_text() if readme.exists() else ""
    section = f"{README_BEGIN}\n\n{body}\n{README_END}"
    if README_BEGIN in text and README_END in text:
        head, rest = text.split(README_BEGIN, 1)
        tail = rest.split(README_END, 1)[1]
        text = head + section + tail
    else:
        text = text + ("\n" if text else "") + section + "\n"
    readme.write_text(text)
    print(f"wrote {len(results)} result tables into {readme}")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description="Train-step and inference cost of the keras-affine-div "
        "layers next to Dense, Conv2D and the Keras normalisers "
        "(backend from KERAS_BACKEND).",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--quick",
        dest="mode",
        action="store_const",
        const="quick",
        help="a short run (about a minute)",
    )
    mode.add_argument(
        "--smoke",
        dest="mode",
        action="store_const",
        const="smoke",
        help="tiny shapes, one round (tests)",
    )
    mode.add_argument(
        "--report",
        dest="mode",
        action="store_const",
        const="report",
        help="write the README tables from the JSON files",
    )
    mode.add_argument(
        "--mode", dest="mode", choices=sorted(MODES), help=argparse.SUPPRESS
    )
    parser.add_argument(
        "--output",
        default=str(DEFAULT_OUTPUT),
        help="directory of the JSON results (default: benchmarks/results)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=None,
        help="timed rounds per case (default: 15 full, 5 quick, 1 smoke)",
    )
    parser.add_argument(
        "--readme",
        default=str(DEFAULT_README),
        help="the file --report rewrites",
    )
    parser.add_argument(
        "--memory-child",
        nargs=2,
        metavar=("CASE", "MODEL"),
        help=argparse.SUPPRESS,
    )
    args = parser.parse_args(argv)
    if args.mode is None:
        args.mode = "full"
    if args.rounds is not None and args.rounds < 1:
        parser.error(f"--rounds must be >= 1. Received: {args.rounds}")
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.memory_child:
        memory_child(*args.memory_child, args.mode)
    elif args.mode == "report":
        write_report(args.output, args.readme)
    else:
        run_benchmark(args)


if __name__ == "__main__":
    main()
