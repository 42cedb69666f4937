"""The learning-rate bracketing search: the algorithm and its oracle."""

import dataclasses
import math
import random

import keras
import keras_tuner
import pytest

from tuning import bracketing
from tuning import oracles
from tuning.bracketing import Action
from tuning.bracketing import Point

# Nothing here depends on the Keras backend: run once (conftest.py).
pytestmark = pytest.mark.backend_independent

LOW, HIGH = 1e-3, 1.0
LIMIT_LOW, LIMIT_HIGH = bracketing.DEFAULT_LIMITS
DIVERGES_ABOVE = 0.5
MAX_TRIALS = 40


@dataclasses.dataclass(frozen=True)
class Synthetic:
    """A synthetic objective of `x = log10(learning_rate)`.

    `"bump"`: a parabola with its top at `peak`; `"flat"`: constant;
    `"rising"`: increasing, with noise too small to break the order of two
    rates a factor `2 ** (1 / 8)` apart. Rates above `diverges_above`
    diverge (and still report their score).
    """

    kind: str
    peak: float = 1.0
    diverges_above: float | None = None

    def __call__(self, learning_rate):
        x = math.log10(learning_rate)
        if self.kind == "bump":
            score = 0.9 - 0.2 * (x - math.log10(self.peak)) ** 2
        elif self.kind == "flat":
            score = 0.5
        else:
            score = 0.5 + 0.05 * x + 0.0005 * math.sin(997 * x)
        diverged = (
            self.diverges_above is not None
            and learning_rate > self.diverges_above
        )
        return score, diverged


PEAKS = {
    "below_window": Synthetic("bump", peak=5e-5),
    "above_window": Synthetic("bump", peak=5.0),
    "inside_next_to_divergence": Synthetic(
        "bump", peak=0.2, diverges_above=DIVERGES_ABOVE
    ),
}
CLIFF = Synthetic("bump", peak=3.0, diverges_above=DIVERGES_ABOVE)
FLAT = Synthetic("flat")
RISING = Synthetic("rising")


def evaluate(objective, learning_rate):
    score, diverged = objective(learning_rate)
    if diverged:
        return Point(learning_rate, "diverged")
    return Point(learning_rate, "ok", score)


def run_search(objective, max_trials=MAX_TRIALS, **settings):
    """Runs `next_action` to its end: `(points, last action)`.

    The last action is `None` when `max_trials` ran out first.
    """
    settings = {"low": LOW, "high": HIGH, **settings}
    points = []
    while len(points) < max_trials:
        action = bracketing.next_action(points, **settings)
        if action.kind == "stop":
            return points, action
        assert action.kind == "try", action
        points.append(evaluate(objective, action.learning_rate))
    return points, None


def ok(*rates_and_scores):
    return [Point(lr, "ok", score) for lr, score in rates_and_scores]


# `initial_grid` and the arguments.


def test_initial_grid_half_decades():
    grid = bracketing.initial_grid(1e-3, 1.0)
    assert grid[0] == 1e-3
    assert grid == pytest.approx(
        [10 ** (-3 + k / 2) for k in range(7)], rel=1e-12
    )


@pytest.mark.parametrize(
    "low, high, step, expected",
    [
        (1e-3, 0.5, 0.5, [1e-3, 10**-2.5, 1e-2, 10**-1.5, 0.1, 10**-0.5]),
        (1e-3, 1e-1, 1.0, [1e-3, 1e-2, 1e-1]),
        (0.1, 0.2, 0.5, [0.1]),
        # `high` is reached within the relative tolerance of 1e-9.
        (1.0, 10 * (1 - 1e-12), 1.0, [1.0, 10.0]),
    ],
    ids=["high_off_grid", "decades", "low_only", "high_within_tolerance"],
)
def test_initial_grid(low, high, step, expected):
    assert bracketing.initial_grid(low, high, step) == pytest.approx(
        expected, rel=1e-12
    )


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (
            {"step": 0},
            r"argument `step`. Expected a positive number. "
            r"Received: step=0",
        ),
        ({"step": -0.5}, r"Received: step=-0.5"),
        (
            {"low": 0.0},
            r"argument `low`. Expected a positive number. "
            r"Received: low=0.0",
        ),
        ({"high": math.inf}, r"Expected a finite number. Received: high=inf"),
        ({"low": math.nan}, r"Received: low=nan"),
        (
            {"low": 1.0, "high": 0.1},
            r"Expected `low < high`. Received: low=1.0, high=0.1",
        ),
        ({"low": 0.1, "high": 0.1}, r"Received: low=0.1, high=0.1"),
    ],
    ids=[
        "step_zero",
        "step_negative",
        "low_zero",
        "high_inf",
        "low_nan",
        "low_above_high",
        "low_equals_high",
    ],
)
def test_initial_grid_invalid_arguments(kwargs, match):
    kwargs = {"low": LOW, "high": HIGH, **kwargs}
    with pytest.raises(ValueError, match=match):
        bracketing.initial_grid(**kwargs)
    with pytest.raises(ValueError, match=match):
        bracketing.next_action([], **kwargs)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (
            {"limits": (1e-2, 100.0)},
            r"Expected `limits\[0\] <= low < high <= limits\[1\]`. Received: "
            r"limits=\(0.01, 100.0\), low=0.001, high=1.0",
        ),
        ({"limits": (1e-6, 0.5)}, r"Received: limits=\(1e-06, 0.5\)"),
        (
            {"limits": (0.0, 100.0)},
            r"argument `limits`. Expected a positive number. Received: "
            r"limits=\(0.0, 100.0\)",
        ),
        (
            {"min_factor": 1.0},
            r"Expected a finite number greater than 1. Received: min_factor=1.0",
        ),
    ],
    ids=["limit_above_low", "limit_below_high", "limit_zero", "min_factor_one"],
)
def test_next_action_invalid_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        bracketing.next_action([], LOW, HIGH, **kwargs)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (
            {"step": "0.5"},
            r"invalid type for argument `step`. Expected a "
            r"positive number. Received: step='0.5'",
        ),
        ({"low": True}, r"Received: low=True"),
        (
            {"limits": 100.0},
            r"Expected a pair `\(min, max\)`. Received: "
            r"limits=100.0",
        ),
        ({"limits": (1e-6, 1.0, 100.0)}, r"Received: limits=\(1e-06"),
        ({"min_factor": None}, r"Received: min_factor=None"),
    ],
    ids=[
        "step_str",
        "low_bool",
        "limits_number",
        "limits_triple",
        "min_factor_none",
    ],
)
def test_next_action_invalid_types(kwargs, match):
    kwargs = {"low": LOW, "high": HIGH, **kwargs}
    with pytest.raises(TypeError, match=match):
        bracketing.next_action([], **kwargs)


def test_next_action_rejects_non_points():
    with pytest.raises(
        TypeError,
        match=r"Expected `Point` instances. "
        r"Received: points\[1\]=0.1",
    ):
        bracketing.next_action([Point(0.01, "pending"), 0.1], LOW, HIGH)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (
            {"learning_rate": 0.0, "status": "failed"},
            ValueError,
            r"Expected a positive number. Received: learning_rate=0.0",
        ),
        (
            {"learning_rate": 0.1, "status": "done"},
            ValueError,
            r"Expected one of \('ok', 'diverged', 'failed', 'pending'\). "
            r"Received: status='done'",
        ),
        (
            {"learning_rate": 0.1, "status": "ok"},
            ValueError,
            r"Expected a finite number for a point with status 'ok'. "
            r"Received: score=None, learning_rate=0.1",
        ),
        (
            {"learning_rate": 0.1, "status": "ok", "score": math.nan},
            ValueError,
            r"Received: score=nan",
        ),
        (
            {"learning_rate": "0.1", "status": "ok", "score": 1.0},
            TypeError,
            r"Received: learning_rate='0.1'",
        ),
    ],
    ids=[
        "rate_zero",
        "unknown_status",
        "ok_without_score",
        "ok_nan_score",
        "rate_str",
    ],
)
def test_point_invalid(kwargs, error, match):
    with pytest.raises(error, match=match):
        Point(**kwargs)


def test_action_invalid_kind():
    with pytest.raises(
        ValueError,
        match=r"Expected one of \('try', 'wait', "
        r"'stop'\). Received: kind='go'",
    ):
        Action("go")


# `next_action`, rule by rule.


def test_grid_first_in_ascending_order_even_while_pending():
    grid = bracketing.initial_grid(LOW, HIGH)
    points = [Point(grid[0], "pending"), Point(grid[2], "diverged")]
    assert bracketing.next_action(points, LOW, HIGH) == Action(
        "try", learning_rate=grid[1]
    )
    # A rate within the relative tolerance of 1e-9 counts as tried.
    points = [Point(grid[0] * (1 + 1e-12), "failed")]
    assert bracketing.next_action(points, LOW, HIGH).learning_rate == grid[1]


def test_waits_for_pending_points_after_the_grid():
    points = [
        evaluate(PEAKS["inside_next_to_divergence"], lr)
        for lr in bracketing.initial_grid(LOW, HIGH)
    ]
    points.append(Point(0.05, "pending"))
    assert bracketing.next_action(points, LOW, HIGH) == Action("wait")


def test_no_ok_point_extends_downwards_then_stops_at_the_limit():
    grid = bracketing.initial_grid(0.1, 1.0)
    points = [Point(lr, "diverged") for lr in grid]
    action = bracketing.next_action(points, 0.1, 1.0)
    assert action.kind == "try"
    assert action.learning_rate == pytest.approx(10**-1.5)
    # Clamped to the lower limit.
    action = bracketing.next_action(points, 0.1, 1.0, limits=(0.05, 1.0))
    assert action.learning_rate == pytest.approx(0.05)
    points.append(Point(0.05, "failed"))
    assert bracketing.next_action(
        points, 0.1, 1.0, limits=(0.05, 1.0)
    ) == Action("stop", bracketed=False)


def test_far_neighbour_halves_the_distance():
    points = ok((0.1, 0.5), (1.0, 0.9), (10.0, 0.4))
    assert bracketing.next_action(points, 0.1, 10.0, step=1.0) == Action(
        "try", learning_rate=0.5
    )
    points += ok((0.5, 0.6))
    assert bracketing.next_action(points, 0.1, 10.0, step=1.0) == Action(
        "try", learning_rate=2.0
    )
    points += ok((2.0, 0.7))
    assert bracketing.next_action(points, 0.1, 10.0, step=1.0) == Action(
        "stop", bracketed=True
    )


def test_far_diverged_neighbour_halves_the_distance():
    points = ok((0.1, 0.5), (0.5, 0.6), (1.0, 0.9))
    points.append(Point(10.0, "diverged"))
    assert bracketing.next_action(points, 0.1, 10.0, step=1.0) == Action(
        "try", learning_rate=2.0
    )


@pytest.mark.parametrize("status", ["diverged", "failed"])
def test_close_bad_neighbour_takes_the_midpoint_down_to_min_factor(status):
    points = ok((0.5, 0.5), (1.0, 0.9), (0.1, 0.1), (10.0, 0.1))
    points.append(Point(2.0, status))
    settings = {"low": 0.1, "high": 10.0, "step": 1.0}
    assert bracketing.next_action(points, **settings) == Action(
        "try", learning_rate=pytest.approx(2**0.5)
    )
    points.append(Point(2**0.5, status))
    assert bracketing.next_action(
        points, **settings
    ).learning_rate == pytest.approx(2**0.25)
    # A ratio of exactly min_factor ** 2 is still split...
    points.append(Point(2**0.25, status))
    assert bracketing.next_action(
        points, **settings
    ).learning_rate == pytest.approx(2**0.125)
    # ... but not a narrower one: the best sits against a cliff.
    points.append(Point(2**0.125, status))
    assert bracketing.next_action(points, **settings) == Action(
        "stop", bracketed=False
    )
    # A coarser min_factor stops earlier.
    assert bracketing.next_action(
        points[:6], **settings, min_factor=2**0.5
    ) == Action("stop", bracketed=False)


def test_best_at_a_limit_stops_unbracketed():
    points = ok((0.1, 0.5), (10**-0.5, 0.6), (0.5, 0.7), (1.0, 0.9))
    assert bracketing.next_action(
        points, 0.1, 1.0, limits=(1e-3, 1.0)
    ) == Action("stop", bracketed=False)
    points = ok((0.1, 0.9), (0.2, 0.7), (10**-0.5, 0.6), (1.0, 0.5))
    assert bracketing.next_action(
        points, 0.1, 1.0, limits=(0.1, 10.0)
    ) == Action("stop", bracketed=False)


def test_missing_side_extends_by_one_step_clamped():
    points = ok((0.1, 0.5), (10**-0.5, 0.6), (1.0, 0.9), (0.5, 0.7))
    action = bracketing.next_action(points, 0.1, 1.0)
    assert action.learning_rate == pytest.approx(10**0.5)
    action = bracketing.next_action(points, 0.1, 1.0, limits=(0.01, 2.0))
    assert action.learning_rate == pytest.approx(2.0)


def test_order_of_points_does_not_matter():
    points, _ = run_search(CLIFF)
    rng = random.Random(0)
    for n in range(len(points)):
        shuffled = points[:n]
        rng.shuffle(shuffled)
        assert bracketing.next_action(
            shuffled, LOW, HIGH
        ) == bracketing.next_action(points[:n], LOW, HIGH)


# `summarize`.


def test_summarize():
    assert bracketing.summarize([]) == {
        "chosen": None,
        "score": None,
        "below": None,
        "above": None,
        "bracketed": False,
    }
    assert bracketing.summarize([Point(0.1, "diverged")])["chosen"] is None
    summary = bracketing.summarize(
        ok((0.05, 0.5), (0.1, 0.8), (0.2, 0.8), (0.3, 0.1))
    )
    # Ties go to the lower rate.
    assert summary == {
        "chosen": 0.1,
        "score": 0.8,
        "below": 2.0,
        "above": 2.0,
        "bracketed": True,
    }


def test_summarize_needs_ok_neighbours_on_both_sides_within_two():
    points = ok((0.1, 0.5), (0.3, 0.9), (0.5, 0.4))
    summary = bracketing.summarize(points)
    assert summary["below"] == pytest.approx(3.0)
    assert summary["above"] == pytest.approx(5 / 3)
    assert not summary["bracketed"]
    # A diverged point is no neighbour, whatever it scored.
    points = ok((0.2, 0.5), (0.3, 0.9)) + [Point(0.5, "diverged", 1.0)]
    summary = bracketing.summarize(points)
    assert summary["chosen"] == 0.3
    assert summary["above"] is None
    assert not summary["bracketed"]


# Whole searches.


@pytest.mark.parametrize("name", list(PEAKS))
def test_search_brackets_the_peak(name):
    objective = PEAKS[name]
    points, action = run_search(objective)
    assert action == Action("stop", bracketed=True)
    summary = bracketing.summarize(points)
    assert summary["bracketed"]
    assert 1 / 2 <= summary["chosen"] / objective.peak <= 2
    assert summary["below"] <= 2 and summary["above"] <= 2
    assert len(points) <= 20
    # Every rate tried once.
    rates = sorted(p.learning_rate for p in points)
    assert all(b / a > 1.01 for a, b in zip(rates, rates[1:]))


def test_search_never_chooses_a_diverging_rate():
    points, action = run_search(CLIFF)
    assert action == Action("stop", bracketed=False)
    assert all(
        p.status == "diverged"
        for p in points
        if p.learning_rate > DIVERGES_ABOVE
    )
    summary = bracketing.summarize(points)
    assert summary["chosen"] <= DIVERGES_ABOVE
    # It got as close to the cliff as `min_factor` allows.
    assert summary["chosen"] > DIVERGES_ABOVE / 2**0.25
    assert not summary["bracketed"]


@pytest.mark.parametrize(
    "objective, edge",
    [(FLAT, LIMIT_LOW), (RISING, LIMIT_HIGH)],
    ids=["flat", "rising"],
)
def test_search_without_a_peak_stops_unbracketed(objective, edge):
    points, action = run_search(objective)
    assert action == Action("stop", bracketed=False)
    summary = bracketing.summarize(points)
    assert summary["chosen"] == pytest.approx(edge)
    assert not summary["bracketed"]
    # With a smaller budget, the trials run out first.
    points, action = run_search(objective, max_trials=10)
    assert action is None and len(points) == 10
    assert not bracketing.summarize(points)["bracketed"]


def test_search_is_deterministic():
    for objective in (*PEAKS.values(), CLIFF, FLAT, RISING):
        assert run_search(objective) == run_search(objective)


# `BracketOracle`, driven directly.


def make_oracle(tmp_path, **kwargs):
    kwargs = {
        "objective": "val_accuracy",
        "max_trials": MAX_TRIALS,
        "wait_s": 0,
        **kwargs,
    }
    oracle = oracles.BracketOracle(**kwargs)
    # What `keras_tuner.Tuner` does to its oracle on construction.
    oracle._set_project_dir(str(tmp_path), "oracle")
    oracle.verbose = 0
    return oracle


def report(oracle, trial, objective):
    score, diverged = objective(trial.hyperparameters.get("learning_rate"))
    oracle.update_trial(
        trial.trial_id,
        {"val_accuracy": score, oracles.DIVERGED_METRIC: float(diverged)},
    )
    trial.status = "COMPLETED"
    oracle.end_trial(trial)


def drive(oracle, objective):
    """Runs the oracle to its end; returns the rates in trial order."""
    rates = []
    while True:
        trial = oracle.create_trial("tuner0")
        if trial.status == "STOPPED":
            return rates
        assert trial.status == "RUNNING"
        rates.append(trial.hyperparameters.get("learning_rate"))
        report(oracle, trial, objective)


@pytest.mark.parametrize("name", [*PEAKS, "cliff", "flat", "rising"])
def test_oracle_follows_the_algorithm(tmp_path, name):
    objective = {**PEAKS, "cliff": CLIFF, "flat": FLAT, "rising": RISING}[name]
    oracle = make_oracle(tmp_path)
    rates = drive(oracle, objective)
    points, _ = run_search(objective)
    assert rates == [p.learning_rate for p in points]
    assert oracle.points() == points
    summary = oracle.summary()
    assert summary == bracketing.summarize(points)
    best = oracle.get_best_trials(1)[0]
    assert best.hyperparameters.get("learning_rate") == summary["chosen"]
    assert best.score == summary["score"]
    assert summary["bracketed"] == (name in PEAKS)


def test_oracle_best_trials_skip_diverged_and_tie_to_lower_rate(tmp_path):
    oracle = make_oracle(tmp_path, learning_rate=(0.1, 1.0))
    scores = {0.1: (0.7, False), 10**-0.5: (0.7, False), 1.0: (0.99, True)}

    def objective(lr):
        return min(scores.items(), key=lambda kv: abs(kv[0] - lr))[1]

    for _ in scores:
        report(oracle, oracle.create_trial("tuner0"), objective)
    best = oracle.get_best_trials(3)
    assert [
        t.hyperparameters.get("learning_rate") for t in best
    ] == pytest.approx([0.1, 10**-0.5])
    assert [p.status for p in oracle.points()] == ["ok", "ok", "diverged"]
    assert oracle.summary()["chosen"] == 0.1


def test_oracle_minimised_objective(tmp_path):
    oracle = make_oracle(
        tmp_path,
        objective=keras_tuner.Objective("val_loss", "min"),
        learning_rate=(0.1, 1.0),
    )
    for loss in (0.3, 0.2, 0.4):
        trial = oracle.create_trial("tuner0")
        oracle.update_trial(trial.trial_id, {"val_loss": loss})
        trial.status = "COMPLETED"
        oracle.end_trial(trial)
    assert oracle.get_best_trials(1)[0].score == 0.2
    summary = oracle.summary()
    assert summary["chosen"] == pytest.approx(10**-0.5)
    assert summary["score"] == 0.2


def test_oracle_failed_trial_is_a_failed_point(tmp_path):
    oracle = make_oracle(tmp_path, learning_rate=(0.1, 1.0))
    trial = oracle.create_trial("tuner0")
    trial.status = "FAILED"
    oracle.end_trial(trial)
    assert oracle.points() == [Point(0.1, "failed")]
    assert oracle.get_best_trials(1) == []


def test_oracle_waits_for_running_trials_after_the_grid(tmp_path):
    objective = PEAKS["inside_next_to_divergence"]
    oracle = make_oracle(tmp_path, learning_rate=(1e-2, 1e-1))
    # The three grid rates go out at once, one per worker.
    trials = [oracle.create_trial(tuner_id) for tuner_id in "abc"]
    assert [t.status for t in trials] == ["RUNNING"] * 3
    report(oracle, trials[0], objective)
    assert [p.status for p in oracle.points()] == ["ok", "pending", "pending"]
    assert oracle.populate_space("3") == {"status": "IDLE", "values": None}
    assert oracle.create_trial("d").status == "IDLE"
    assert len(oracle.trials) == 3
    for trial in trials[1:]:
        report(oracle, trial, objective)
    assert oracle.create_trial("d").status == "RUNNING"


def test_oracle_values_keep_other_hyperparameters_at_default(tmp_path):
    hps = keras_tuner.HyperParameters()
    hps.Float("learning_rate", LIMIT_LOW, LIMIT_HIGH, sampling="log")
    hps.Choice("optimizer", ["adam", "sgd"])
    hps.Int("units", 8, 64, default=16)
    oracle = make_oracle(tmp_path, hyperparameters=hps)
    assert oracle.populate_space("0") == {
        "status": "RUNNING",
        "values": {"learning_rate": LOW, "optimizer": "adam", "units": 16},
    }


def test_oracle_rejects_a_narrower_declared_range(tmp_path):
    hps = keras_tuner.HyperParameters()
    hps.Float("learning_rate", 1e-4, 1.0, sampling="log")
    oracle = make_oracle(tmp_path, hyperparameters=hps)
    with pytest.raises(
        ValueError,
        match=r"declare `learning_rate` as a "
        r"`Float` over at least "
        r"`learning_rate_limits`",
    ):
        oracle.populate_space("0")


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (
            {"learning_rate": (1.0, 0.1)},
            ValueError,
            r"Expected `learning_rate\[0\] < learning_rate\[1\]`. Received: "
            r"learning_rate\[0\]=1.0, learning_rate\[1\]=0.1",
        ),
        (
            {"learning_rate": 0.1},
            TypeError,
            r"Expected a pair `\(low, high\)`. Received: learning_rate=0.1",
        ),
        (
            {"lr_step": 0},
            ValueError,
            r"argument `lr_step`. Expected a positive number. "
            r"Received: lr_step=0",
        ),
        (
            {"learning_rate_limits": (1e-2, 100.0)},
            ValueError,
            r"Received: learning_rate_limits=\(0.01, 100.0\)",
        ),
        (
            {"hyperparameter": ""},
            ValueError,
            r"Expected a non-empty string. Received: hyperparameter=''",
        ),
        (
            {"wait_s": -1},
            ValueError,
            r"Expected a non-negative number. Received: wait_s=-1",
        ),
    ],
    ids=[
        "low_above_high",
        "not_a_pair",
        "step_zero",
        "limits_above_low",
        "empty_name",
        "negative_wait",
    ],
)
def test_oracle_invalid_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        oracles.BracketOracle(objective="val_accuracy", **kwargs)


# `BracketOracle` in a `keras_tuner.Tuner`.


def build_model(hp):
    learning_rate = hp.Float(
        "learning_rate", LIMIT_LOW, LIMIT_HIGH, sampling="log"
    )
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    model.compile(
        optimizer=keras.optimizers.SGD(learning_rate=learning_rate), loss="mse"
    )
    return model


class SyntheticTuner(keras_tuner.Tuner):
    """Reports a synthetic objective of the learning rate; trains nothing."""

    def __init__(self, objective_fn, **kwargs):
        self.objective_fn = objective_fn
        self.rates_run = []
        super().__init__(**kwargs)

    def run_trial(self, trial, *args, **kwargs):
        hp = trial.hyperparameters
        model = self.hypermodel.build(hp)
        self.rates_run.append(
            (
                hp.get("learning_rate"),
                float(
                    keras.ops.convert_to_numpy(model.optimizer.learning_rate)
                ),
            )
        )
        score, diverged = self.objective_fn(hp.get("learning_rate"))
        return {"val_accuracy": score, oracles.DIVERGED_METRIC: float(diverged)}


def make_tuner(
    directory,
    max_trials,
    overwrite,
    objective=PEAKS["inside_next_to_divergence"],
):
    return SyntheticTuner(
        objective_fn=objective,
        oracle=oracles.BracketOracle(
            objective="val_accuracy", max_trials=max_trials, wait_s=0
        ),
        hypermodel=build_model,
        directory=str(directory),
        project_name="lr",
        overwrite=overwrite,
    )


@pytest.fixture
def no_distribution(monkeypatch):
    for name in (
        "KERASTUNER_TUNER_ID",
        "KERASTUNER_ORACLE_IP",
        "KERASTUNER_ORACLE_PORT",
    ):
        monkeypatch.delenv(name, raising=False)


def tried_rates(tuner):
    return sorted(p.learning_rate for p in tuner.oracle.points())


@pytest.mark.usefixtures("no_distribution")
def test_tuner_search_stops_bracketed_and_reloads(tmp_path):
    tuner = make_tuner(tmp_path, MAX_TRIALS, overwrite=True)
    tuner.search(verbose=0)
    summary = tuner.oracle.summary()
    assert summary["bracketed"]
    assert 0.1 <= summary["chosen"] <= 0.4
    best = tuner.get_best_hyperparameters(1)[0]
    assert best.get("learning_rate") == summary["chosen"]
    points, _ = run_search(PEAKS["inside_next_to_divergence"])
    assert len(tuner.rates_run) == len(points)
    # The model was compiled with the rate of its trial.
    for requested, compiled in tuner.rates_run:
        assert compiled == pytest.approx(requested, rel=1e-6)

    reloaded = make_tuner(tmp_path, MAX_TRIALS, overwrite=False)
    reloaded.search(verbose=0)
    assert reloaded.rates_run == []
    assert tried_rates(reloaded) == tried_rates(tuner)
    assert reloaded.oracle.summary() == summary


@pytest.mark.usefixtures("no_distribution")
def test_tuner_search_interrupted_continues_to_the_same_trials(tmp_path):
    whole = make_tuner(tmp_path / "whole", MAX_TRIALS, overwrite=True)
    whole.search(verbose=0)

    first = make_tuner(tmp_path / "resumed", 4, overwrite=True)
    first.search(verbose=0)
    assert len(first.rates_run) == 4
    assert not first.oracle.summary()["bracketed"]
    resumed = make_tuner(tmp_path / "resumed", MAX_TRIALS, overwrite=False)
    resumed.search(verbose=0)
    assert len(resumed.rates_run) == len(whole.rates_run) - 4
    assert tried_rates(resumed) == tried_rates(whole)
    assert resumed.oracle.summary() == whole.oracle.summary()
