"""One benchmark run: every case of a mode, timed, and its result file.

The result holds the provenance (`tuning.provenance`: git
commit and whether the code differs from it, library versions, machine),
the settings, the load average at the start and the end, every case's
record (`benchmarks.timing.run_case`, with `memory` where measured) and the
verdict on each target. It is written whole (`write_atomic`) to
`benchmarks.report.result_path`.
"""

import datetime
import json
import os
import time

import keras

from benchmarks import cases as bench_cases
from benchmarks import memory
from benchmarks import report
from benchmarks import targets
from benchmarks import timing
from keras_affine_div._files import write_atomic
from tuning import provenance as _provenance

SCHEMA_VERSION = 1
# The environment variables a result records (thread counts, oneDNN, XLA).
ENVIRONMENT_VARIABLES = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "TF_ENABLE_ONEDNN_OPTS",
    "XLA_FLAGS",
    "KERAS_BACKEND",
)


def mode_settings(mode, rounds=None):
    """The settings of a run.

    Args:
        mode: `"full"`, `"quick"` or `"smoke"` (`benchmarks.cases.MODES`).
        rounds: timed rounds per case, or `None` for the mode's.

    Returns:
        dict: `rounds`, `warmup_steps`, `round_seconds`, `max_steps` and
        `memory`.
    """
    settings = dict(bench_cases.MODES[mode])
    if rounds is not None:
        settings["rounds"] = rounds
    return settings


def backend_threads():
    """The thread counts the backend uses, where it says (dict)."""
    backend = keras.backend.backend()
    if backend == "torch":
        import torch

        return {
            "torch_num_threads": torch.get_num_threads(),
            "torch_num_interop_threads": torch.get_num_interop_threads(),
        }
    if backend == "tensorflow":
        import tensorflow as tf

        threading = tf.config.threading
        return {
            "tf_intra_op_threads": threading.get_intra_op_parallelism_threads(),
            "tf_inter_op_threads": threading.get_inter_op_parallelism_threads(),
        }
    return {}


def provenance():
    """Where a result comes from, as the result records it.

    Returns:
        dict: `machine` (`_provenance.machine_name()`), `git` (`commit` and
        `dirty`, from `_provenance.git_state()`), `versions`
        (`_provenance.library_versions()`) and `platform`
        (`_provenance.machine()`).
    """
    commit, dirty = _provenance.git_state()
    return {
        "machine": _provenance.machine_name(),
        "git": {"commit": commit, "dirty": dirty},
        "versions": _provenance.library_versions(),
        "platform": _provenance.machine(),
    }


def _recorded_settings(settings):
    """The result's `settings`: the run's and how the models are run."""
    return {
        **settings,
        "jit_compile": "auto",
        "optimizer": f"SGD(learning_rate={bench_cases.LEARNING_RATE})",
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
            name: os.environ.get(name) for name in ENVIRONMENT_VARIABLES
        },
        "threads": backend_threads(),
        "memory_method": memory.MEMORY_METHOD if settings["memory"] else None,
    }


def _memory_candidates(case, setting):
    """The models of `case` whose memory is measured, per the `memory`
    setting: none, all (True) or the tuple named."""
    if not setting or case.family != "conv":
        return ()
    return case.candidates if setting is True else tuple(setting)


def run_benchmark(mode, output, rounds=None, command=()):
    """Times every case of `mode`, writes the result and prints its tables.

    Args:
        mode: `"full"`, `"quick"` or `"smoke"`.
        output: the folder of the result file.
        rounds: timed rounds per case, or `None` for the mode's.
        command: the command line, recorded in the result.

    Returns:
        pathlib.Path: the result file written.
    """
    settings = mode_settings(mode, rounds)
    started = time.time()
    load_start = os.getloadavg()
    keras.utils.set_random_seed(0)

    def log(message):
        print(f"{time.time() - started:7.1f}s {message}", flush=True)

    backend = keras.backend.backend()
    log(f"backend {backend}, load average {load_start}")
    case_records = []
    for case in bench_cases.cases_for(mode):
        record = timing.run_case(case, settings, log)
        measured = _memory_candidates(case, settings["memory"])
        if measured:
            record["memory"] = memory.measure_memory(case, mode, measured, log)
        case_records.append(record)

    origin = provenance()
    result = {
        "schema_version": SCHEMA_VERSION,
        "benchmark": "layer_overhead",
        "mode": mode,
        "machine": origin["machine"],
        "backend": backend,
        "command": list(command),
        "git": origin["git"],
        "versions": origin["versions"],
        "platform": origin["platform"],
        "settings": _recorded_settings(settings),
        "load_average": {
            "start": list(load_start),
            "end": list(os.getloadavg()),
        },
        "started_at": datetime.datetime.fromtimestamp(
            started, datetime.UTC
        ).isoformat(timespec="seconds"),
        "duration_s": time.time() - started,
        "cases": case_records,
        "targets": targets.evaluate_targets(case_records),
    }
    path = report.result_path(output, origin["machine"], backend, mode)
    write_atomic(path, json.dumps(result, indent=1) + "\n")
    print()
    print(report.format_tables(result))
    print(f"\nwrote {path}")
    return path
