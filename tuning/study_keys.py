"""The keys of a study file and the values they take.

The tables and keys a study file may have, the names its values choose
from (tuners, schedules, datasets, optimisers, protocols), the defaults of
the keys that may be left out, the limits of seeds and dataset sizes, and
`StudyError`, which a study that breaks them raises.
"""

TUNERS = ("bracket", "random", "bayesian")
SCHEDULES = ("constant", "cosine")
DATASETS = ("cifar10", "fashion_mnist")
OPTIMIZERS = ("sgd", "adam")
TABLES = (
    "description",
    "protocol",
    "compare",
    "search",
    "fixed",
    "grid",
    "quick",
    "full",
)
OVERRIDE_TABLES = ("quick", "full")
COMPARE_KEYS = (
    "family",
    "arms",
    "comparators",
    "margin",
    "selects",
    "extends",
)
# The `selects` value of a selection study that chooses among its arms
# (`tuning.selection_study`), rather than a `[grid]` key.
ARM = "arm"
PROTOCOLS = (2, 3)
DEFAULT_PROTOCOL = 2
# Search trial `t` of a study with search seed `s` trains from seed
# `s * TRIAL_SEED_BASE + t`; under protocol 3, seed rerun `i` from
# `RERUN_SEED_BASE + i`, which no search seed below
# `RERUN_SEED_BASE // TRIAL_SEED_BASE` reaches.
TRIAL_SEED_BASE = 100_000
RERUN_SEED_BASE = 1_000_000_000
# `keras.utils.set_random_seed` takes seeds up to `MAX_SEED` (NumPy's);
# with at most `TRIAL_SEED_BASE` trials per search, every trial seed of a
# search seed up to `MAX_SEARCH_SEED` stays within it.
MAX_SEED = 2**32 - 1
MAX_SEARCH_SEED = (MAX_SEED + 1) // TRIAL_SEED_BASE - 1
# The images of each dataset: its training split (which the validation
# samples come from), its test split, and the side of its square images (a
# CNN pools each side by 2 per stage).
DATASET_SIZES = {
    "cifar10": {"train": 50_000, "test": 10_000, "side": 32},
    "fashion_mnist": {"train": 60_000, "test": 10_000, "side": 28},
}
# Where a study's repeated searches go, inside its results and runs folders.
REPEATS_DIR = "repeats"
COMPARE_REQUIRED = ("family", "arms")
DEFAULT_MARGIN = 0.01
SEARCH_KEYS = (
    "tuner",
    "max_trials",
    "learning_rate",
    "optimizers",
    "kernel_scales",
    "seed",
    "lr_step",
    "learning_rate_limits",
)
# Keys that may be left out, with their defaults (`None`: not set).
SEARCH_DEFAULTS = {
    "kernel_scales": None,
    "lr_step": 0.5,
    "learning_rate_limits": [1e-6, 100.0],
}
FIXED_DEFAULTS = {
    "schedule": "constant",
    "warmup_epochs": 0,
    "momentum": 0.9,
    "kernel_scale": None,
    "baseline_kernel_scale": None,
}
FIXED_KEYS = {
    "mlp": (
        "dataset",
        "train_samples",
        "val_samples",
        "test_samples",
        "depth",
        "width",
        "activation",
        "epochs",
        "batch_size",
        "seeds",
        *FIXED_DEFAULTS,
    ),
    "cnn": (
        "dataset",
        "train_samples",
        "val_samples",
        "test_samples",
        "depth",
        "filters",
        "activation",
        "epochs",
        "batch_size",
        "seeds",
        *FIXED_DEFAULTS,
    ),
}
MODEL_KEYS = {
    "mlp": ("depth", "width", "activation"),
    "cnn": ("depth", "filters", "activation"),
}


def grid_keys(family):
    """The keys a `[grid]` may vary: `[fixed]` keys but `seeds`, and
    `optimizers`."""
    return tuple(k for k in FIXED_KEYS[family] if k != "seeds") + (
        "optimizers",
    )


class StudyError(ValueError):
    """A study that cannot be found or read."""


def families():
    """The model families a study may compare (`models.FAMILIES`)."""
    from keras_affine_div import models

    return models.FAMILIES


def arm_names(family, ours=None):
    """The arms of `family` (`models.arm_names`): all of them (`ours=None`),
    our layers' (`True`) or the baselines (`False`)."""
    # Imported here so that reading a study does not import Keras.
    from keras_affine_div import models

    return models.arm_names(family, ours=ours)
