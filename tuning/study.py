"""Study files: what a study compares, searches and fixes.

A study is a TOML file (data, never code) in `tuning/studies/`, or any path
ending in `.toml`. It has four tables:

- `[compare]`: `family` (`"mlp"` or `"cnn"`) and `arms`, the model variants
  compared (the scientific choice, one KerasTuner project per arm);
  optionally `comparators`, the arms our arms are tested against (declared
  before any data; default: every arm that is not one of ours), and
  `margin`, the non-inferiority margin in accuracy (default `0.01`).
- `[search]`: the nuisance hyperparameters, searched alike for every arm:
  `tuner` (`"bracket"`, `"random"` or `"bayesian"`), `max_trials` per arm,
  `learning_rate` (`[low, high]`: the initial log grid of `"bracket"`, the
  log-uniform range of the others), `optimizers`, and the oracle `seed`.
  `learning_rate` may also be a table of one window per optimiser
  (`{sgd = [0.03, 0.3], adam = [1e-3, 1e-2]}`) where each condition
  searches one optimiser, as the bracketing search does.
  `"bracket"` (protocol v2) searches the learning rate alone, with
  `lr_step` (decades between grid points, default `0.5`) and
  `learning_rate_limits` (how far it may extend, default `[1e-6, 100]`);
  each condition then names one optimiser. `"random"` and `"bayesian"` may
  also search `kernel_scales` (our arms only).
- `[fixed]`: `dataset`, the subset sizes `train_samples`, `val_samples`,
  `test_samples`, the model size (`depth` and `width` for MLPs, `depth` and
  `filters` for CNNs), `activation`, `epochs`, `batch_size`, and `seeds`,
  the number of seeds the best setting of each arm is retrained on;
  optionally the training protocol, the same for every arm: `schedule`
  (`"constant"`, the default, or `"cosine"`), `warmup_epochs` (default 0),
  `momentum` of SGD (default 0.9), `kernel_scale`, the fixed kernel
  scale of our arms (a number for all of them, or a table of one per arm,
  `{affine_like = 0.125, norm_like = 0.25}`; default: the layers' own
  initialiser), and
  `baseline_kernel_scale`, a fixed multiplier on the Glorot kernels of the
  plain baseline (`dense`, `conv`; default: Keras' own).
- `[grid]` (optional): the conditions. Each key is a `[fixed]` key (other
  than `seeds`) or `optimizers`, mapped to a list of values; the study runs
  every combination of them (a *condition*) for every arm, each (condition,
  arm) with its own search. A grid value replaces the `[fixed]` one (which
  may then be left out); an `optimizers` value is one optimiser name, the
  only one that condition searches. Without `[grid]`, the study has one
  implicit condition.
- `[quick]` and `[full]` (optional): overrides of `[search]` and `[fixed]`
  keys used by `--quick` (a pipeline check in minutes) and `--full` (a GPU
  or Colab: the full data, more epochs and trials). Grid values are
  overridden in a `[quick.grid]` or `[full.grid]` table, key by key.

Two top-level keys besides `description`:

- `protocol` (`2`, the default, or `3`): under protocol 3 the seed reruns
  of a cell train from seeds `RERUN_SEED_BASE + i` (`i` = 0, 1, ...), apart
  from every search trial's (`seed * TRIAL_SEED_BASE + trial`), so that no
  rerun replays the trial that won the search; under protocol 2 rerun `i`
  trains from seed `i`, which is search trial `i`'s seed when the search
  seed is 0.
- `selects` in `[compare]`: the `[grid]` keys a *selection study* (a pilot)
  chooses, or `"arm"`: a choice among its arms, each layer of ours among
  the nets built on it (a CNN's all-ours net and its stem and head
  variants). Its report ranks the values on validation accuracy only and
  shows no test number.
- `extends` in `[compare]`: another study whose cells this one adds arms
  to (a comparator it lacked, or a variant of one of our layers), with the
  same `[search]`, `[fixed]` (but `seeds`) and conditions it runs; its
  `comparators` may name the other study's arms. Its report runs, on both
  studies' rows, the tests with an arm of its own: the other study's arms
  of ours against the comparators it adds, and the arms of ours it adds
  against every comparator it names.

Every value of the file is checked when it is read, before any data loads,
against what the runner takes later: each value alone (its type and range:
names of arms, optimisers, schedules, datasets and Keras activations;
integers that are not booleans or floats; finite numbers; a `seed` whose
trial seeds stay within `MAX_SEED`), also a `[fixed]` or `[search]` value
that the grid replaces, every grid value, and the overrides of `[quick]`
and `[full]` whether or not they are applied; then the values together, for
the study as written and with each override table (a warm-up shorter than
the run, subsets that fit in the dataset's splits, a CNN no deeper than its
images allow, ...). A bad value raises `StudyError`, one line naming the
key, the value received and what the key takes.

This module is the one to import: it gathers the names of
`tuning.study_keys` (the tables, keys, choices, defaults and limits, and
`StudyError`), `tuning.study_types` (`Study`, `Condition` and their seeds),
`tuning.study_files` (`load_study`, `list_studies`) and
`tuning.study_checks` (`check_values`).
"""

from tuning.study_checks import check_values
from tuning.study_files import STUDIES_DIR
from tuning.study_files import list_studies
from tuning.study_files import load_study
from tuning.study_keys import ARM
from tuning.study_keys import COMPARE_KEYS
from tuning.study_keys import COMPARE_REQUIRED
from tuning.study_keys import DATASET_SIZES
from tuning.study_keys import DATASETS
from tuning.study_keys import DEFAULT_MARGIN
from tuning.study_keys import DEFAULT_PROTOCOL
from tuning.study_keys import FIXED_DEFAULTS
from tuning.study_keys import FIXED_KEYS
from tuning.study_keys import MAX_SEARCH_SEED
from tuning.study_keys import MAX_SEED
from tuning.study_keys import MODEL_KEYS
from tuning.study_keys import OPTIMIZERS
from tuning.study_keys import OVERRIDE_TABLES
from tuning.study_keys import PROTOCOLS
from tuning.study_keys import REPEATS_DIR
from tuning.study_keys import RERUN_SEED_BASE
from tuning.study_keys import SCHEDULES
from tuning.study_keys import SEARCH_DEFAULTS
from tuning.study_keys import SEARCH_KEYS
from tuning.study_keys import TABLES
from tuning.study_keys import TRIAL_SEED_BASE
from tuning.study_keys import TUNERS
from tuning.study_keys import StudyError
from tuning.study_keys import grid_keys
from tuning.study_types import Condition
from tuning.study_types import Study
from tuning.study_types import rerun_seed
from tuning.study_types import trial_seed

__all__ = [
    "ARM",
    "COMPARE_KEYS",
    "COMPARE_REQUIRED",
    "DATASETS",
    "DATASET_SIZES",
    "DEFAULT_MARGIN",
    "DEFAULT_PROTOCOL",
    "FIXED_DEFAULTS",
    "FIXED_KEYS",
    "MAX_SEARCH_SEED",
    "MAX_SEED",
    "MODEL_KEYS",
    "OPTIMIZERS",
    "OVERRIDE_TABLES",
    "PROTOCOLS",
    "REPEATS_DIR",
    "RERUN_SEED_BASE",
    "SCHEDULES",
    "SEARCH_DEFAULTS",
    "SEARCH_KEYS",
    "STUDIES_DIR",
    "TABLES",
    "TRIAL_SEED_BASE",
    "TUNERS",
    "Condition",
    "Study",
    "StudyError",
    "check_values",
    "grid_keys",
    "list_studies",
    "load_study",
    "rerun_seed",
    "trial_seed",
]
