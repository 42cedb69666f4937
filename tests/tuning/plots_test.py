"""`tuning.plots`: a study's plots drawn again from its results folder, with
the arms of the study it extends."""

import errno

import matplotlib
import pytest

from tests.tuning import common
from tuning import plots
from tuning import records
from tuning import result_rows
from tuning import schema
from tuning import study as study_module

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# Nothing here depends on the Keras backend: run once (conftest.py).
pytestmark = pytest.mark.backend_independent

LABEL = "CIFAR-10 (JPEG copy)"
_NAMES = (plots.ACCURACY_PNG, plots.LEARNING_CURVES_PNG, plots.LR_SWEEP_PNG)


def _runs(condition, arm, accuracies):
    return [
        {
            "condition": condition,
            "arm": arm,
            "seed": str(seed),
            "test_accuracy": str(accuracy),
            "val_accuracy": str(accuracy),
            "learning_rate": "0.1",
            "search_val_accuracy": str(accuracy),
            "dataset": "cifar10",
            "dataset_label": LABEL,
            "backend": "jax",
        }
        for seed, accuracy in enumerate(accuracies)
    ]


def _curves(condition, arm):
    return [
        {
            "condition": condition,
            "arm": arm,
            "seed": "0",
            "epoch": str(epoch),
            "loss": str(2.0 - epoch / 2),
            "val_accuracy": str(0.3 + epoch / 10),
        }
        for epoch in (1, 2)
    ]


def _search(condition, arm):
    return [
        {
            "condition": condition,
            "arm": arm,
            "optimizer": "sgd",
            "learning_rate": rate,
            "val_accuracy": "0.5",
            "diverged": "False",
            "loss": "1.0",
        }
        for rate in ("0.05", "0.1", "0.2")
    ]


def _write(folder, summary, runs, curves, search):
    folder.mkdir(parents=True)
    records.write_json(str(folder / schema.SUMMARY_JSON), summary)
    for name, rows in (
        (schema.TRIALS_CSV, runs),
        (schema.CURVES_CSV, curves),
        (schema.SEARCH_TRIALS_CSV, search),
    ):
        records.write_csv(str(folder / name), list(rows[0]), rows)


@pytest.fixture
def drawn(monkeypatch):
    """What each plot was given, by plot; the plots are still drawn."""
    calls = {}

    def recording(name):
        original = getattr(plots, name)

        def record(*args, **kwargs):
            calls[name] = args
            return original(*args, **kwargs)

        return record

    for name in ("plot_accuracy", "plot_learning_curves", "plot_lr_sweep"):
        monkeypatch.setattr(plots, name, recording(name))
    return calls


def test_an_extension_is_drawn_with_the_others_arms_first(tmp_path, drawn):
    results = tmp_path / "results"
    # The other study: two conditions, three declared arms, one of which
    # has no rows.
    theirs = {
        c: _runs(c, "batch_norm", [0.60, 0.61]) + _runs(c, "dense", [0.5, 0.52])
        for c in ("c1", "c2")
    }
    their_curves = {
        c: _curves(c, "batch_norm") + _curves(c, "dense") for c in ("c1", "c2")
    }
    their_search = {
        c: _search(c, "batch_norm") + _search(c, "dense") for c in ("c1", "c2")
    }
    _write(
        results / "parent",
        {
            "backend": "jax",
            "config": {
                "compare": {"arms": ["dense", "layer_norm", "batch_norm"]},
                "grid": {"width": [1, 2]},
            },
        },
        theirs["c1"] + theirs["c2"],
        their_curves["c1"] + their_curves["c2"],
        their_search["c1"] + their_search["c2"],
    )
    # The extension ran c2 only.
    ours = _runs("c2", "affine_like", [0.55, 0.56])
    _write(
        results / "ours",
        {
            "backend": "jax",
            "config": {
                "compare": {"arms": ["affine_like"], "extends": "parent"},
                "grid": {"width": [2]},
            },
        },
        ours,
        _curves("c2", "affine_like"),
        _search("c2", "affine_like"),
    )
    paths = plots.redraw(str(results / "ours"))

    assert paths == [str(results / "ours" / name) for name in _NAMES]
    for path in paths:
        assert (tmp_path / path).stat().st_size > 0
    path, title, arms, runs, conditions, metric = drawn["plot_accuracy"]
    assert title == f"ours: {LABEL}, jax, with the arms of parent"
    # The other study's declared order (its arm without rows left out),
    # then this study's.
    assert arms == ["dense", "batch_norm", "affine_like"]
    assert runs == theirs["c2"] + ours
    assert (conditions, metric) == (["c2"], "test_accuracy")
    curves = drawn["plot_learning_curves"][3]
    assert curves == their_curves["c2"] + _curves("c2", "affine_like")
    search = drawn["plot_lr_sweep"][3]
    assert search == their_search["c2"] + _search("c2", "affine_like")


def test_a_study_that_extends_none_is_drawn_alone(tmp_path, drawn):
    folder = tmp_path / "alone"
    runs = _runs("", "dense", [0.5, 0.52]) + _runs("", "batch_norm", [0.6])
    _write(
        folder,
        {
            "backend": "torch",
            "config": {
                "compare": {"arms": ["batch_norm", "dense"], "selects": ["arm"]}
            },
        },
        runs,
        _curves("", "dense"),
        _search("", "dense"),
    )
    plots.redraw(str(folder))
    path, title, arms, rows, conditions, metric = drawn["plot_accuracy"]
    assert title == f"alone: {LABEL}, torch"
    assert arms == ["batch_norm", "dense"] and rows == runs
    # A selection study shows validation accuracy; no grid, one panel.
    assert (conditions, metric) == (None, "val_accuracy")


def test_the_command_draws_and_fails_in_one_line(tmp_path, capsys):
    folder = tmp_path / "results" / "done"
    _write(
        folder,
        {"backend": "jax", "config": {"compare": {"arms": ["dense"]}}},
        _runs("", "dense", [0.5]),
        _curves("", "dense"),
        _search("", "dense"),
    )
    argv = ["--results-dir", str(tmp_path / "results")]
    assert plots.main(["done", *argv]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [f"wrote {folder / name}" for name in _NAMES]
    assert plots.main(["missing", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: Expected a finished study") and (
        err.count("\n") == 1
    )


@pytest.mark.parametrize("count", [6, plots.MAX_RATE_TICKS + 1])
def test_the_learning_rate_axis_names_the_rates_tried(count):
    rates = [0.25 * 2**i for i in range(count)]
    trials = [
        dict(_search("", "dense")[0], learning_rate=str(rate)) for rate in rates
    ]
    fig, ax = plt.subplots()
    plots._draw_lr_sweep(ax, ["dense"], trials)
    fig.canvas.draw()
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    plt.close(fig)
    if count <= plots.MAX_RATE_TICKS:
        assert ticks == ["0.25", "0.5", "1", "2", "4", "8"]
    else:
        # Too many to name: the log axis labels its decades.
        assert "0.25" not in ticks and any("10" in t for t in ticks)


def test_the_runner_draws_a_committed_extension_with_the_others_arms():
    # The runner reads the other study from the study it runs (its
    # config), as `redraw` does from `summary.json`.
    study = study_module.load_study("cifar10-mlp-wide-v3-rms-norm")
    out_dir = str(common.REPO_ROOT / "tuning/results" / study.results_name)
    runs = records.read_csv(f"{out_dir}/{schema.TRIALS_CSV}")
    joined = result_rows.read_extended(
        out_dir, {"config": study.config()}, runs
    )
    assert joined["name"] == "cifar10-mlp-wide-v2"
    assert joined["arms"] == [
        "dense",
        "affine_like",
        "affine_like_head",
        "batch_norm",
        "layer_norm",
    ]
    # Five seeds of each arm at each depth, fresh seeds in place of the
    # reruns that replayed their search (as in the report's tables); the
    # curves are those of `curves.csv`, the reruns'.
    assert len(joined["runs"]) == 5 * 5 * 2
    fresh = [r for r in joined["runs"] if r.get("replaces_seed")]
    assert fresh

    def keys(rows, seed="seed"):
        return {(r["arm"], r[seed], r["condition"]) for r in rows}

    assert keys(joined["curves"]) == keys(
        r for r in joined["runs"] if not r.get("replaces_seed")
    ) | keys(fresh, "replaces_seed")


def test_a_failed_write_leaves_the_old_plot_and_no_partial_file(tmp_path):
    path = str(tmp_path / "accuracy.png")
    with open(path, "wb") as f:
        f.write(b"old plot")
    fig, _ = plt.subplots()

    def full_disk(name, **kwargs):
        with open(name, "wb") as f:
            f.write(b"\x89PNG half")
        raise OSError(errno.ENOSPC, "No space left on device")

    fig.savefig = full_disk
    with pytest.raises(OSError, match="No space left"):
        plots._save(fig, path)
    assert open(path, "rb").read() == b"old plot"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["accuracy.png"]
