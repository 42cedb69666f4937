"""Where a result came from: the code, the libraries and the machine.

The tuning studies and the benchmarks record the same provenance with the
same meaning:

- `git_state()`: the commit checked out, and whether the code that ran
  differs from it ("dirty"): a tracked Python, TOML or requirements file
  (the package, the studies, the benchmarks, the build) changed and not
  committed. Result files, notebooks' outputs and documentation do not
  count, so a study that writes its own results stays clean.
- `library_versions()`: Python and every library a result depends on that
  is installed.
- `machine()`: the operating system, the processor and its cores, and the
  accelerator the Keras backend sees.

`REPO_ROOT` is the checkout holding `tuning/`, the one place the
repository's root is defined; `git_state` reports `(None, None)` where it
is not a git checkout. It lives with the research tools, not in the
library: the wheel of `keras_affine_div` carries no git code.
"""

import importlib.metadata
import os
import pathlib
import platform
import re
import subprocess

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]

# What "dirty" looks at: the files that decide what runs.
CODE_PATTERNS = ("*.py", "*.toml", "requirements*.txt", "Makefile")

# The libraries whose versions are recorded, where installed: the name a
# result records (the module's import name) and the distributions that
# provide it (TensorFlow's CPU build is `tensorflow-cpu`).
LIBRARIES = (
    ("keras", ("keras",)),
    ("keras_tuner", ("keras-tuner",)),
    ("numpy", ("numpy",)),
    ("scipy", ("scipy",)),
    ("tensorflow", ("tensorflow", "tensorflow-cpu")),
    ("tensorflow_datasets", ("tensorflow-datasets",)),
    ("jax", ("jax",)),
    ("jaxlib", ("jaxlib",)),
    ("torch", ("torch",)),
)


def _git(root, *args):
    return subprocess.run(
        ["git", *args],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=30,
    )


def git_state(root=None):
    """Returns `(commit, dirty)` of the checkout, or `(None, None)`.

    Args:
        root: the checkout; defaults to `REPO_ROOT`.

    Returns:
        tuple: the full commit hash (str) and whether a tracked code file
        (`CODE_PATTERNS`) differs from it (bool); `(None, None)` outside a
        git checkout or without git.
    """
    root = pathlib.Path(root or REPO_ROOT)
    if not (root / ".git").exists():
        return None, None
    try:
        head = _git(root, "rev-parse", "HEAD")
        if head.returncode != 0:
            return None, None
        diff = _git(root, "diff", "--quiet", "HEAD", "--", *CODE_PATTERNS)
    except (OSError, subprocess.SubprocessError):
        return None, None
    return head.stdout.strip(), diff.returncode != 0


def library_versions():
    """Returns the versions of Python and of the libraries installed.

    Returns:
        dict: `"python"`, `"keras_affine_div"` and each installed library
        of `LIBRARIES`, import name to version string.
    """
    from keras_affine_div import version

    versions = {
        "python": platform.python_version(),
        "keras_affine_div": version.__version__,
    }
    for name, distributions in LIBRARIES:
        for distribution in distributions:
            try:
                versions[name] = importlib.metadata.version(distribution)
                break
            except importlib.metadata.PackageNotFoundError:
                pass
    return versions


def accelerator():
    """Returns the name of the GPU the Keras backend uses, or `None`."""
    import keras

    backend = keras.backend.backend()
    try:
        if backend == "jax":
            import jax

            device = jax.devices()[0]
            if device.platform == "gpu":
                return device.device_kind
        elif backend == "torch":
            import torch

            if torch.cuda.is_available():
                return torch.cuda.get_device_name(0)
        elif backend == "tensorflow":
            import tensorflow as tf

            gpus = tf.config.list_physical_devices("GPU")
            if gpus:
                details = tf.config.experimental.get_device_details(gpus[0])
                return details.get("device_name", "gpu")
    except Exception:  # noqa: BLE001 - a label only: never fail a record
        return None
    return None


def machine_name():
    """`cpu-<n>core`, or `gpu-<model>` where the backend sees a GPU."""
    gpu = accelerator()
    if gpu:
        return "gpu-" + re.sub(r"[^a-z0-9]+", "-", gpu.lower()).strip("-")
    return f"cpu-{os.cpu_count()}core"


def cpu_model():
    """The processor's model name (from `/proc/cpuinfo`), else `platform`'s."""
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def usable_cpus():
    """The number of cores this process may run on (its CPU affinity, as
    `taskset` sets it), else `os.cpu_count()`."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


def machine():
    """Returns the machine a result ran on.

    Returns:
        dict: `system`, `release`, `machine` (the architecture),
        `processor`, `cpu_count`, `cpus_usable` (the cores this process
        may run on: XLA's CPU convolutions can round differently with it)
        and `accelerator` (the GPU the Keras backend uses, or `None`).
    """
    return {
        "system": platform.system(),
        "release": platform.release(),
        "machine": platform.machine(),
        "processor": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": usable_cpus(),
        "accelerator": accelerator(),
    }
