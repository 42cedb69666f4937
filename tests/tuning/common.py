"""Helpers of the tuning tests: a tiny image folder, a shrunk study, runs."""

import os
import pathlib
import subprocess
import sys

import numpy as np

from keras_affine_div.datasets import cifar10
from tuning import provenance

REPO_ROOT = provenance.REPO_ROOT
CLASSES = cifar10.CLASS_NAMES

TINY_STUDY = """
description = "The smoke study, shrunk for the tests."

[compare]
family = "mlp"
arms = ["dense", "affine_like"]

[search]
{search}
max_trials = {max_trials}
seed = 0

[fixed]
dataset = "cifar10"
train_samples = {train_samples}
val_samples = 20
test_samples = 20
depth = 1
width = 8
activation = "tanh"
epochs = {epochs}
batch_size = 16
seeds = 2
{fixed}
[quick]
max_trials = 1
seeds = 1
"""


def write_image_folder(root, per_class=(6, 2), seed=0):
    """Writes a CIFAR-10 image-folder layout of random 32x32 JPEGs.

    Args:
        root: the folder to create.
        per_class: images per class in `train/` and `test/`.
        seed: seeds the pixels.

    Returns:
        str: `root`.
    """
    from PIL import Image

    rng = np.random.default_rng(seed)
    for split, n in zip(("train", "test"), per_class):
        for c, name in enumerate(CLASSES):
            folder = os.path.join(root, split, name)
            os.makedirs(folder, exist_ok=True)
            for i in range(n):
                # A class-dependent mean makes the task learnable.
                pixels = rng.normal(25 * c, 40, (32, 32, 3)).clip(0, 255)
                Image.fromarray(pixels.astype("uint8")).save(
                    os.path.join(folder, f"{i:04d}.jpg")
                )
    return str(root)


# The search of the tiny study: KerasTuner's random search over the
# learning rate, the optimiser and the kernel scale (protocol v1), or the
# bracketing search of the learning rate alone (protocol v2), on a window
# where the tiny model learns within an epoch or two.
SEARCHES = {
    "random": """tuner = "random"
learning_rate = [1e-4, 1.0]
optimizers = ["sgd", "adam"]
kernel_scales = [0.5, 1.0, 2.0]""",
    "bracket": """tuner = "bracket"
learning_rate = [0.01, 0.1]
lr_step = 0.5
optimizers = ["adam"]""",
}
FIXED = {
    "random": "",
    "bracket": """schedule = "cosine"
warmup_epochs = 1
kernel_scale = 0.5
""",
}


def write_study(
    path, max_trials=2, train_samples=40, epochs=1, grid=None, tuner="random"
):
    """Writes the tiny study to `path` (a `.toml` file) and returns it.

    `grid`, a str, is appended as the body of a `[grid]` table; `tuner` is
    `"random"` or `"bracket"` (whose cosine schedule needs `epochs >= 2`).
    """
    text = TINY_STUDY.format(
        max_trials=max_trials,
        train_samples=train_samples,
        epochs=epochs,
        search=SEARCHES[tuner],
        fixed=FIXED[tuner],
    )
    if grid is not None:
        text += f"\n[grid]\n{grid}\n"
    pathlib.Path(path).write_text(text)
    return str(path)


def sweep_env(tmp_path, **extra):
    """The environment of a runner subprocess: one thread, its own cache."""
    env = dict(os.environ)
    env.update(
        OMP_NUM_THREADS="1",
        TF_CPP_MIN_LOG_LEVEL="2",
        TF_ENABLE_ONEDNN_OPTS="0",
        XLA_FLAGS="--xla_cpu_multi_thread_eigen=false",
        KERAS_AFFINE_DIV_CACHE=str(tmp_path / "cache"),
        PYTHONUNBUFFERED="1",
    )
    env.pop("KERAS_AFFINE_DIV_CIFAR10_DIR", None)
    for name in (
        "KERASTUNER_TUNER_ID",
        "KERASTUNER_ORACLE_IP",
        "KERASTUNER_ORACLE_PORT",
    ):
        env.pop(name, None)
    env.update(extra)
    return env


def sweep_args(study, data_dir, root, *extra):
    """The runner's arguments for `study` on the image folder `data_dir`.

    Results go to `root/results` and KerasTuner's projects to `root/runs`;
    `extra` (more flags and their values) follows.
    """
    root = pathlib.Path(root)
    return (
        study,
        "--data-dir",
        data_dir,
        "--results-dir",
        root / "results",
        "--runs-dir",
        root / "runs",
        *extra,
    )


def sweep_command(*args):
    return [sys.executable, "-m", "tuning.sweep", *map(str, args)]


# `python -m tuning.sweep ARGS` that SIGKILLs itself as soon as it has
# written a line holding `sys.argv[1]`: from inside, so the kill lands at
# that line whatever else runs on the machine's cores (a kill sent by the
# test on reading the line could land a step later on a busy machine).
_KILLED_AFTER = """
import os, runpy, signal, sys

part = sys.argv.pop(1)


class _KillAfter:
    def __init__(self, stream):
        self._stream = stream

    def write(self, text):
        n = self._stream.write(text)
        if part in text:
            if not text.endswith("\\n"):
                self._stream.write("\\n")
            self._stream.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        return n

    def __getattr__(self, name):
        return getattr(self._stream, name)


sys.stdout = _KillAfter(sys.stdout)
sys.argv[0] = "tuning.sweep"
runpy.run_module("tuning.sweep", run_name="__main__", alter_sys=True)
"""


def sweep_command_killed_after(line_part, *args):
    """`sweep_command(*args)`, killed (SIGKILL) by itself right after it
    writes a line containing `line_part`."""
    return [sys.executable, "-c", _KILLED_AFTER, line_part, *map(str, args)]


def run_sweep(tmp_path, *args, timeout=600, **env):
    """Runs `python -m tuning.sweep ARGS` to completion."""
    return subprocess.run(
        sweep_command(*args),
        cwd=REPO_ROOT,
        env=sweep_env(tmp_path, **env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def hold_lock(folder):
    """A separate process holding the study lock of `folder`; kill it to
    let go."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from tuning import lock\n"
            "with lock.StudyLock([sys.argv[1]]):\n"
            "    print('locked', flush=True)\n"
            "    time.sleep(300)\n",
            str(folder),
        ],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "locked"
    return holder
