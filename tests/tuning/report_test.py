import math
import shutil

import numpy as np
import pytest
from scipy import stats

from tuning import records
from tuning import report


def test_welch_matches_scipy():
    a = [0.41, 0.43, 0.40, 0.45]
    b = [0.47, 0.46, 0.49]
    w = report.welch(a, b)
    ref = stats.ttest_ind(a, b, equal_var=False)
    assert w["t"] == pytest.approx(ref.statistic)
    assert w["p"] == pytest.approx(ref.pvalue)
    assert w["diff"] == pytest.approx(np.mean(a) - np.mean(b))
    assert w["low"] < w["diff"] < w["high"] < 0


def test_welch_without_spread_is_nan():
    w = report.welch([0.5], [0.4, 0.6])
    assert w["diff"] == pytest.approx(-0.0)
    assert math.isnan(w["p"])


def test_slope_matches_polyfit():
    x = [5, 5, 6, 6, 7, 7, 8, 8]
    y = [0.50, 0.52, 0.49, 0.50, 0.47, 0.48, 0.44, 0.46]
    s = report.slope(x, y)
    assert s["slope"] == pytest.approx(np.polyfit(x, y, 1)[0])
    assert s["low"] < s["slope"] < s["high"] < 0


def _row(condition, arm, seed, acc, lr, batch_size=64):
    return {"study": "s", "condition": condition, "arm": arm,
            "seed": str(seed), "test_accuracy": str(acc),
            "learning_rate": str(lr), "optimizer": "sgd", "kernel_scale": "",
            "batch_size": str(batch_size), "dataset_label":
            "CIFAR-10 (JPEG copy)", "backend": "jax"}


def test_render_tables_and_batch_size_slopes():
    runs, search = [], []
    for bs in (32, 64, 128):
        cond = f"batch_size-{bs}"
        for seed in range(3):
            runs.append(_row(cond, "affine_like", seed,
                             0.5 - 0.02 * math.log2(bs) + 0.001 * seed, 0.1, bs))
            runs.append(_row(cond, "batch_norm", seed, 0.45 + 0.002 * seed,
                             1e-3, bs))
        for lr in (1e-3, 0.1, 0.05):
            search.append({"condition": cond, "arm": "affine_like",
                           "learning_rate": str(lr)})
            search.append({"condition": cond, "arm": "batch_norm",
                           "learning_rate": str(lr)})
    summary = {"study": "s", "git_commit": "abc", "command": "cmd",
               "wall_time_s": 120, "config": {"grid": {"batch_size": [32]}}}
    text = report.render(runs, search, summary)
    assert "## batch_size-32" in text
    assert "| affine_like - batch_norm |" in text
    # The affine-like arm chose the highest lr it tried; batch_norm the lowest.
    assert "| 0.1 | sgd | - | highest |" in text
    assert "| 0.001 | sgd | - | lowest |" in text
    assert "Test accuracy against log2(batch size)" in text
    assert "| affine_like | -0.0200 |" in text
    assert "| batch_norm | +0.0000 |" in text


def test_report_on_committed_smoke_results(tmp_path):
    src = records.REPO_ROOT + "/tuning/results/smoke"
    shutil.copytree(src, tmp_path / "smoke")
    assert report.main(["smoke", "--results-dir", str(tmp_path)]) == 0
    text = (tmp_path / "smoke" / "report.md").read_text()
    assert "| dense |" in text and "| affine_like |" in text
    assert "CIFAR-10 (JPEG copy)" in text


def test_missing_results(tmp_path, capsys):
    assert report.main(["nothing", "--results-dir", str(tmp_path)]) == 2
    assert "Expected a finished study" in capsys.readouterr().err
