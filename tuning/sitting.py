"""One process' run of a study as its steps see it: its cells, and what
every step shares.

`cells_of(study)` lists the study's (condition, arm) cells in the order a run
takes them, each a `Cell`; a `Sitting` holds what the steps of one run
need (the study, its options and folders, the results folder's
`ResultsState`, the data loaded so far).
"""

import dataclasses
import os


@dataclasses.dataclass(frozen=True)
class Cell:
    """One (condition, arm) cell of a study, and its place in the study.

    Attributes:
        index: its place among the study's cells (the port offset of its
            distributed search).
        c: its condition's place among the study's conditions.
        condition: its condition (`study.Condition`).
        i: its arm's place among the study's arms.
        arm: its arm.
        at: the study at its condition (`Study.at`).
        label: how the console names it, e.g. `"arm 2/3 batch_norm"`.
    """

    index: int
    c: int
    condition: object
    i: int
    arm: str
    at: object
    label: str

    @property
    def key(self):
        """(condition name, arm): the cell's key in the results files."""
        return self.condition.name, self.arm


@dataclasses.dataclass(frozen=True)
class Sitting:
    """What the steps of one process' run of a study share.

    Attributes:
        study: the `Study`.
        options: the run's `runner.Options`.
        role: `"chief"`, `"worker"` or `None` (`distributed.role`).
        backend: the Keras backend.
        runs_dir: the study's KerasTuner projects folder.
        out_dir: the study's results folder.
        git_at_start: `provenance.git_state()` when the run started.
        start: `time.perf_counter()` when the run started.
        state: the `results_state.ResultsState` of `out_dir`.
        datas: the data of each condition loaded so far, by condition name.
        loaded: the dataset subsets loaded so far (`data_loading.data_of`).
    """

    study: object
    options: object
    role: str
    backend: str
    runs_dir: str
    out_dir: str
    git_at_start: tuple
    start: float
    state: object
    datas: dict = dataclasses.field(default_factory=dict)
    loaded: dict = dataclasses.field(default_factory=dict)

    @property
    def tensorboard_dir(self):
        """The study's TensorBoard log folder, or `None` without one."""
        if not self.options.tensorboard:
            return None
        return os.path.join(self.options.tensorboard, self.study.results_name)


def cells_of(study):
    """Every cell of `study`, condition by condition and arm by arm.

    Returns:
        list: of `Cell`.
    """
    conditions = study.conditions()
    pairs = [
        (c, condition, i, arm)
        for c, condition in enumerate(conditions)
        for i, arm in enumerate(study.arms)
    ]
    return [
        Cell(
            index,
            c,
            condition,
            i,
            arm,
            study.at(condition),
            _label(study, conditions, c, condition, i, arm),
        )
        for index, (c, condition, i, arm) in enumerate(pairs)
    ]


def _label(study, conditions, c, condition, i, arm):
    where = (
        f"condition {c + 1}/{len(conditions)} {condition.name} "
        if study.grid
        else ""
    )
    return f"{where}arm {i + 1}/{len(study.arms)} {arm}"
