import math
import shutil

import numpy as np
import pytest

from tuning import comparisons
from tuning import provenance
from tuning import report
from tuning import result_rows
from tuning import statistics

# Nothing here depends on the Keras backend: run once (conftest.py).
pytestmark = pytest.mark.backend_independent

CELL_KEYS = {
    "condition",
    "arm",
    "comparator",
    "diff",
    "low",
    "high",
    "p_non_inferior",
    "p_superior",
    "p_inferior",
    "detectable",
    "level",
    "detectable_at_level",
    "verdict",
}
# Per-seed offsets: every arm has the same spread.
NOISE = (-0.004, 0.0, 0.004)


def _row(
    arm,
    seed,
    acc,
    condition=None,
    batch_size=64,
    depth=None,
    below="2.0",
    above="1.5",
    steps="100",
    v2=True,
):
    row = {
        "study": "s",
        "arm": arm,
        "seed": str(seed),
        "test_accuracy": repr(acc),
        "learning_rate": "0.01",
        "optimizer": "sgd",
        "kernel_scale": "",
        "epochs": "2",
        "train_samples": "1000",
        "batch_size": str(batch_size),
        "dataset_label": "CIFAR-10 (JPEG copy)",
        "backend": "jax",
    }
    if condition is not None:
        row["condition"] = condition
    if depth is not None:
        row["depth"] = str(depth)
    if v2:
        row.update(
            bracketed=str(bool(below and above)),
            lr_below_factor=below,
            lr_above_factor=above,
            search_trials="6",
            steps=steps,
            schedule="cosine",
            diverged="False",
            tuner="bracket",
        )
    return row


def _cell(arm, mean, **kwargs):
    return [_row(arm, seed, mean + e, **kwargs) for seed, e in enumerate(NOISE)]


def _summary(compare, grid=None):
    config = {
        "compare": {"family": "mlp", **compare},
        "search": {"tuner": "bracket"},
        "fixed": {"schedule": "cosine"},
    }
    if grid:
        config["grid"] = grid
    return {
        "study": "s",
        "git_commit": "0123456789abcdef",
        "git_dirty": True,
        "command": "python -m tuning.sweep s",
        "wall_time_s": 120,
        "backend": "jax",
        "config": config,
    }


V2_COMPARE = {
    "arms": ["affine_like", "norm_like", "batch_norm", "dense"],
    "comparators": ["batch_norm"],
    "margin": 0.02,
}


def _v2_runs():
    return (
        _cell("affine_like", 0.60)
        + _cell("norm_like", 0.495, above="")
        + _cell("batch_norm", 0.50)
        + _cell("dense", 0.70)
    )


def test_render_v2_without_grid():
    runs = _v2_runs()
    search = [
        {
            "arm": arm,
            "trial_id": str(i),
            "learning_rate": "0.01",
            "diverged": str(i == 0),
        }
        for arm in ("affine_like", "norm_like", "batch_norm", "dense")
        for i in range(6)
    ]
    text = report.render(runs, search, _summary(V2_COMPARE))
    assert "Commit: `0123456789` (dirty tree). Wall time: 2.0 min." in text
    # Where the summary sums the cells (a study run over several
    # sittings), the header gives that sum first.
    summary = dict(_summary(V2_COMPARE), cells_wall_time_s=900)
    assert (
        "Wall time: 15.0 min summed over the cells' searches and seed "
        "reruns (every sitting that finished them); 2.0 min the last sitting."
        in report.render(_v2_runs(), [], summary)
    )
    assert "`bracket` tuner" in text and "schedule: `cosine`" in text
    assert "Comparators, declared by the study: `batch_norm`." in text
    assert "Non-inferiority margin: 0.02 (accuracy), declared" in text
    # 2 comparisons (ours x the one declared comparator), 3 tests each.
    assert "Holm–Bonferroni over all 6 p-values" in text
    assert "3 tests for each of 2 comparisons" in text
    # The arm table: every seed, the bracket, search trials and divergence.
    assert (
        "| affine_like | 0.6000 ± 0.0040 | 0.5960, 0.6000, 0.6040 "
        "| 0.01 | sgd | - | 6 (1 diverged) | /2.00 | x1.50 | yes "
        "| 0/3 |"
    ) in text
    assert "| norm_like | 0.4950 ± 0.0040 |" in text
    assert "| /2.00 | none | no | 0/3 |" in text
    # Tests only against the declared comparator: `dense` is better, but it
    # was not declared, so it is not tested.
    assert "| affine_like - batch_norm | +0.1000 |" in text
    assert "| norm_like - batch_norm | -0.0050 |" in text
    assert " - dense |" not in text
    assert "| superior |" in text and "| non-inferior |" in text
    # The one unbracketed cell.
    assert "- `norm_like`: nothing above." in text
    assert "Every (condition, arm) cell is bracketed" not in text
    assert "## Batch size" not in text
    assert "| affine_like - batch_norm | 1 | 0 | 0 | 0 |" in text
    assert "| norm_like - batch_norm | 0 | 1 | 0 | 0 |" in text


def test_cell_verdicts_holm_over_the_whole_study():
    runs = (
        _cell("affine_like", 0.60, condition="c1")
        + _cell("batch_norm", 0.50, condition="c1")
        + _cell("dense", 0.51, condition="c1")
        + _cell("affine_like", 0.49, condition="c2")
        + _cell("batch_norm", 0.50, condition="c2")
        + _cell("affine_like", 0.40, condition="c3")
        + _cell("batch_norm", 0.50, condition="c3")
    )
    compare = {
        "arms": ["affine_like", "batch_norm", "dense"],
        "comparators": ["batch_norm", "dense"],
        "margin": 0.02,
    }
    cells = comparisons.cell_verdicts(runs, _summary(compare))
    assert [(c["condition"], c["arm"], c["comparator"]) for c in cells] == [
        ("c1", "affine_like", "batch_norm"),
        ("c1", "affine_like", "dense"),
        ("c2", "affine_like", "batch_norm"),
        ("c3", "affine_like", "batch_norm"),
    ]
    assert all(set(c) == CELL_KEYS for c in cells)
    raw = []
    for c in cells:
        a = [
            float(r["test_accuracy"])
            for r in runs
            if (r["condition"], r["arm"]) == (c["condition"], "affine_like")
        ]
        b = [
            float(r["test_accuracy"])
            for r in runs
            if (r["condition"], r["arm"]) == (c["condition"], c["comparator"])
        ]
        raw += [
            statistics.non_inferiority(a, b, 0.02),
            statistics.superiority(a, b),
            statistics.inferiority(a, b, 0.02),
        ]
        w = statistics.welch(a, b)
        assert c["diff"] == pytest.approx(w["diff"])
        assert (c["low"], c["high"]) == pytest.approx((w["low"], w["high"]))
        assert c["detectable"] == pytest.approx(
            statistics.detectable_difference(a, b)
        )
    # One Holm family of all 12 p-values, not one per condition.
    adjusted = statistics.holm(raw)
    assert [
        c[k]
        for c in cells
        for k in ("p_non_inferior", "p_superior", "p_inferior")
    ] == (pytest.approx(adjusted))
    # c2 is non-inferior before the adjustment, not after it.
    assert raw[6] < 0.05 < cells[2]["p_non_inferior"]
    # The level Holm held each comparison to: 0.05 / (m - rank + 1) for the
    # rank (from 1) of its smallest p-value among all 12, and what its
    # seeds detect at that level.
    ranked = sorted(range(len(raw)), key=lambda i: raw[i])
    for j, c in enumerate(cells):
        first = min(range(3 * j, 3 * j + 3), key=lambda i: raw[i])
        rank = ranked.index(first) + 1
        assert c["level"] == pytest.approx(0.05 / (len(raw) - rank + 1))
        a = [
            float(r["test_accuracy"])
            for r in runs
            if (r["condition"], r["arm"]) == (c["condition"], "affine_like")
        ]
        b = [
            float(r["test_accuracy"])
            for r in runs
            if (r["condition"], r["arm"]) == (c["condition"], c["comparator"])
        ]
        assert c["detectable_at_level"] == pytest.approx(
            statistics.detectable_difference(a, b, alpha=c["level"])
        )
        assert c["detectable_at_level"] > c["detectable"]
    assert [c["verdict"] for c in cells] == [
        "superior",
        "superior",
        # What its seeds detect at its Holm level (0.010 at 0.05).
        "inconclusive (could detect >= 0.017)",
        "inferior",
    ]


def test_undefined_tests_are_left_out_of_holm():
    runs = (
        _cell("affine_like", 0.60)
        + _cell("batch_norm", 0.50)
        + [_row("norm_like", 0, 0.5)]
    )
    compare = dict(V2_COMPARE)
    cells = comparisons.cell_verdicts(runs, _summary(compare))
    one_seed = cells[1]
    assert one_seed["arm"] == "norm_like"
    assert math.isnan(one_seed["p_superior"])
    assert one_seed["verdict"] == "inconclusive (could detect >= n/a)"
    text = report.render(runs, [], _summary(compare))
    assert "Holm–Bonferroni over all 3 p-values" in text


def _batch_runs(steps=True):
    runs = []
    for depth in (1, 2):
        for bs, drop in ((32, 0.0), (64, 0.02), (256, 0.05)):
            cond = f"depth-{depth}_batch_size-{bs}"
            kwargs = dict(
                condition=cond,
                batch_size=bs,
                depth=depth,
                steps=str(2 * math.ceil(1000 / bs)) if steps else "",
            )
            runs += _cell("affine_like", 0.50, **kwargs)
            runs += _cell("batch_norm", 0.55 - drop, **kwargs)
    return runs


def _batch_summary():
    compare = {
        "arms": ["affine_like", "batch_norm"],
        "comparators": ["batch_norm"],
        "margin": 0.01,
    }
    return _summary(
        compare, grid={"depth": [1, 2], "batch_size": [32, 64, 256]}
    )


def test_render_v2_with_batch_size_grid():
    summary = _batch_summary()
    text = report.render(_batch_runs(), [], summary)
    assert "## depth-1_batch_size-32" in text
    assert "Holm–Bonferroni over all 18 p-values" in text
    assert "Every (condition, arm) cell is bracketed" in text
    assert "## Batch size" in text
    assert "### depth 1" in text and "### depth 2" in text
    assert "| affine_like | 32 | 0.01 | /2.00 | x1.50 | 64 | 0.5000 |" in text
    assert "| batch_norm | 256 | 0.01 | /2.00 | x1.50 | 8 | 0.5000 |" in text
    # Ours keeps its accuracy from 32 to 256, batch_norm loses 0.05.
    assert "| comparison | ours 256 - 32 | comparator 256 - 32 |" in text
    i = statistics.interaction(
        [0.496, 0.5, 0.504],
        [0.496, 0.5, 0.504],
        [0.546, 0.55, 0.554],
        [0.496, 0.5, 0.504],
    )
    # Holm over both tails of the 2 interactions (one per depth): the
    # positive tail is the smaller p, times 4.
    detectable = statistics.detectable(i["se"], i["df"])
    row = (
        f"| affine_like - batch_norm | +0.0000 | -0.0500 | +0.0500 "
        f"| [{i['low']:+.4f}, {i['high']:+.4f}] | 1 "
        f"| {min(1.0, 4 * i['p_above']):.3g} | {detectable:.4f} "
        "| ours fares better |"
    )
    assert text.count(row) == 2  # one per depth
    assert "of all these interactions of the study:" in text
    # Each arm's own change: ours flat, batch_norm falls by 0.05 (Holm over
    # both tails of 4 changes: the falling tail is the smallest of 8).
    w = statistics.welch([0.496, 0.5, 0.504], [0.546, 0.55, 0.554])
    assert "| affine_like | +0.0000 | [" in text
    assert (
        f"| batch_norm | -0.0500 | [{w['low']:+.4f}, {w['high']:+.4f}] "
        f"| {8 * w['p_below']:.3g} | 1 "
        f"| {statistics.detectable(w['se'], w['df']):.4f} | falls |"
    ) in text
    assert "log2" not in text


def test_batch_size_estimates_without_diverged_seeds():
    runs = [r for r in _batch_runs() if r["depth"] == "1"]
    # One seed of affine_like at batch 256 diverged (chance accuracy).
    bad = next(
        r
        for r in runs
        if r["arm"] == "affine_like" and r["batch_size"] == "256"
    )
    bad.update(test_accuracy="0.1", diverged="True")
    summary = _summary(
        {
            "arms": ["affine_like", "batch_norm"],
            "comparators": ["batch_norm"],
            "margin": 0.01,
        },
        grid={"batch_size": [32, 64, 256]},
    )
    text = report.render(runs, [], summary)
    assert "Without the diverged seeds (`affine_like` at 256: 1)" in text
    kept, small = [0.5, 0.504], [0.496, 0.5, 0.504]
    w = statistics.welch(kept, small)
    assert (
        f"| affine_like 256 - 32 | {w['diff']:+.4f} "
        f"| [{w['low']:+.4f}, {w['high']:+.4f}] |"
    ) in text
    i = statistics.interaction(
        small, kept, [0.546, 0.55, 0.554], [0.496, 0.5, 0.504]
    )
    assert (
        f"| interaction affine_like - batch_norm | {i['diff']:+.4f} "
        f"| [{i['low']:+.4f}, {i['high']:+.4f}] |"
    ) in text
    # The tests above keep the diverged seed.
    w_all = statistics.welch([0.1, 0.5, 0.504], small)
    assert f"| affine_like | {w_all['diff']:+.4f} | [" in text
    # Nothing of the kind without diverged seeds.
    assert "Without the diverged seeds" not in report.render(
        [r for r in _batch_runs() if r["depth"] == "1"], [], summary
    )


def test_batch_size_steps_without_the_steps_column():
    runs = [r for r in _batch_runs(steps=False) if r["depth"] == "1"]
    summary = _summary(
        {"arms": ["affine_like", "batch_norm"]},
        grid={"batch_size": [32, 64, 256]},
    )
    text = report.render(runs, [], summary)
    # epochs * ceil(train_samples / batch_size) = 2 * ceil(1000 / 32).
    assert "| affine_like | 32 | 0.01 | /2.00 | x1.50 | 64 | 0.5000 |" in text
    assert "| affine_like | 64 | 0.01 | /2.00 | x1.50 | 32 | 0.5000 |" in text


def test_render_v1_rows():
    runs = (
        _cell("dense", 0.52, v2=False)
        + _cell("affine_like", 0.50, v2=False)
        + _cell("batch_norm", 0.55, v2=False)
    )
    summary = _summary({"arms": ["dense", "affine_like", "batch_norm"]})
    del summary["config"]["search"], summary["config"]["fixed"]
    summary["git_dirty"] = False
    text = report.render(runs, [], summary)
    assert "Commit: `0123456789`. Wall time" in text
    assert "Comparators: not declared in these files" in text
    assert "of ours: `dense`, `batch_norm`." in text
    assert "Non-inferiority margin: not declared in these files; 0.01" in text
    assert "schedule: `not recorded`" in text
    assert "| n/a | n/a | n/a | n/a |" in text  # bracket and divergence
    assert "| affine_like - dense | -0.0200 |" in text
    assert "| affine_like - batch_norm | -0.0500 |" in text
    assert "Learning-rate brackets" not in text
    assert "## Batch size" not in text


def test_v1_comparators_from_the_rows_without_a_summary():
    runs = _cell("affine_like", 0.5, v2=False) + _cell(
        "rms_norm", 0.5, v2=False
    )
    cells = comparisons.cell_verdicts(runs, {})
    assert [(c["arm"], c["comparator"]) for c in cells] == [
        ("affine_like", "rms_norm")
    ]
    assert "affine_like_head" in comparisons.OUR_ARMS


def test_report_on_committed_smoke_results(tmp_path):
    src = str(provenance.REPO_ROOT / "tuning" / "results" / "smoke")
    shutil.copytree(
        src, tmp_path / "smoke", ignore=shutil.ignore_patterns(".runner.lock")
    )
    assert report.main(["smoke", "--results-dir", str(tmp_path)]) == 0
    text = (tmp_path / "smoke" / report.REPORT_MD).read_text()
    assert "| dense |" in text and "| affine_like |" in text
    assert "| affine_like - dense |" in text
    assert "CIFAR-10 (JPEG copy)" in text
    # Protocol v2: the comparators come from the study, every cell is
    # bracketed, and the committed report is what the files give.
    assert "Comparators, declared by the study: `dense`" in text
    assert "Every (condition, arm) cell is bracketed" in text
    assert text == open(src + "/" + report.REPORT_MD).read()


def test_missing_results(tmp_path, capsys):
    assert report.main(["nothing", "--results-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: Expected a finished study")
    assert "Received: results folder=" in err
    with pytest.raises(
        result_rows.ReportError, match="Received: results folder"
    ):
        report.write_report(str(tmp_path / "nothing"))


def test_read_results_of_committed_smoke_results(tmp_path):
    src = str(provenance.REPO_ROOT / "tuning" / "results" / "smoke")
    shutil.copytree(
        src, tmp_path / "smoke", ignore=shutil.ignore_patterns(".runner.lock")
    )
    runs, search, summary = result_rows.read_results(str(tmp_path / "smoke"))
    assert {r["arm"] for r in runs} == {"dense", "affine_like"}
    assert search and all("learning_rate" in r for r in search)
    assert summary["study"] == "smoke"
    # Only trials.csv is required: the others read as empty.
    (tmp_path / "smoke" / "summary.json").unlink()
    (tmp_path / "smoke" / "search_trials.csv").unlink()
    runs2, search2, summary2 = result_rows.read_results(str(tmp_path / "smoke"))
    assert runs2 == runs and search2 == [] and summary2 == {}


def test_at_a_glance_table_of_a_grid_study():
    summary = _batch_summary()
    runs = _batch_runs()
    # One condition lacks the comparator: its cells read "-".
    runs = [
        r
        for r in runs
        if not (
            r["condition"] == "depth-2_batch_size-64"
            and r["arm"] == "batch_norm"
        )
    ]
    text = report.render(runs, [], summary)
    glance = text[text.index("## At a glance") : text.index("## depth-1")]
    std = float(np.std(np.array(NOISE) + 0.5, ddof=1))
    assert "| condition | affine_like | batch_norm |" in glance
    assert (
        f"| depth-1_batch_size-32 | 0.5000 ± {std:.4f} (0.01) "
        f"| 0.5500 ± {std:.4f} (0.01) |"
    ) in glance
    assert (
        f"| depth-2_batch_size-64 | 0.5000 ± {std:.4f} (0.01) | - |"
    ) in glance
    verdicts = {
        c["condition"]: c["verdict"].split(" ")[0]
        for c in comparisons.cell_verdicts(runs, summary)
    }
    assert verdicts["depth-1_batch_size-32"] == "inferior"
    assert "| condition | affine_like - batch_norm |" in glance
    for condition in ("depth-1_batch_size-32", "depth-2_batch_size-256"):
        assert f"| {condition} | {verdicts[condition]} |" in glance
    assert "| depth-2_batch_size-64 | - |" in glance


def test_no_glance_table_for_one_condition():
    text = report.render(_v2_runs(), [], _summary(V2_COMPARE))
    assert "## At a glance" not in text
