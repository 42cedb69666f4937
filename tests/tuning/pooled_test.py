import math

import numpy as np
import pytest
from scipy import stats

from tuning import pooled
from tuning import records
from tuning import schema

# Nothing here depends on the Keras backend: run once (conftest.py).
pytestmark = pytest.mark.backend_independent


def _rows(study, condition, depth, arm, accs, optimizer="sgd"):
    return [
        {
            "study": study,
            "condition": condition,
            "depth": str(depth),
            "optimizers": optimizer,
            "arm": arm,
            "seed": str(seed),
            "test_accuracy": repr(acc),
        }
        for seed, acc in enumerate(accs)
    ]


def _write(root, name, rows, comparators, margin=0.01):
    out = root / name
    out.mkdir()
    columns = list(rows[0])
    records.write_csv(str(out / schema.TRIALS_CSV), columns, rows)
    records.write_json(
        str(out / schema.SUMMARY_JSON),
        {
            "study": name,
            "git_commit": "0123456789abcdef",
            "config": {
                "compare": {
                    "arms": sorted({r["arm"] for r in rows}),
                    "comparators": comparators,
                    "margin": margin,
                }
            },
        },
    )
    return str(out)


# Two studies (an optimizer each), two depths each; affine_like and
# batch_norm everywhere, dense in the sgd study only.
SEEDS = {
    ("sgd", 3): {
        "affine_like": [0.51, 0.52, 0.50],
        "batch_norm": [0.50, 0.50, 0.49],
        "dense": [0.47, 0.49, 0.48],
    },
    ("sgd", 8): {
        "affine_like": [0.53, 0.54, 0.535],
        "batch_norm": [0.55, 0.545, 0.56],
        "dense": [0.45, 0.46, 0.44],
    },
    ("adam", 3): {
        "affine_like": [0.55, 0.56, 0.54, 0.555],
        "batch_norm": [0.54, 0.55, 0.545, 0.55],
    },
    ("adam", 8): {
        "affine_like": [0.56, 0.57, 0.565],
        "batch_norm": [0.56, 0.555, 0.57],
    },
}


@pytest.fixture
def studies(tmp_path):
    for optimizer in ("sgd", "adam"):
        rows = []
        for depth in (3, 8):
            for arm, accs in SEEDS[(optimizer, depth)].items():
                rows += _rows(
                    f"s-{optimizer}",
                    f"depth-{depth}",
                    depth,
                    arm,
                    accs,
                    optimizer,
                )
        _write(tmp_path, f"s-{optimizer}", rows, ["batch_norm", "dense"])
    return tmp_path


def _welch_by_hand(a, b):
    a, b = np.asarray(a), np.asarray(b)
    diff = a.mean() - b.mean()
    se = math.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size)
    return diff, se


def _random_effects_by_hand(d, se):
    """DerSimonian–Laird with the max(1, q) Hartung–Knapp error, in NumPy."""
    d, v = np.asarray(d), np.asarray(se) ** 2
    w = 1 / v
    fixed = np.average(d, weights=w)
    q = np.sum(w * (d - fixed) ** 2)
    tau2 = max(0.0, (q - (d.size - 1)) / (w.sum() - (w**2).sum() / w.sum()))
    w_r = 1 / (v + tau2)
    mean = np.average(d, weights=w_r)
    scale = np.sum(w_r * (d - mean) ** 2) / (d.size - 1)
    se_r = math.sqrt(max(1.0, scale) / w_r.sum())
    half = stats.t.ppf(0.975, d.size - 1) * se_r
    return mean, mean - half, mean + half


def _load(root, *names):
    return [pooled.load_results(str(root / n)) for n in names]


def test_differences_are_welch_per_condition(studies):
    diffs = pooled.condition_differences(_load(studies, "s-sgd", "s-adam"))
    got = {(d["study"], d["condition"], d["comparator"]): d for d in diffs}
    # dense is a comparator only where it was trained.
    assert len(diffs) == 2 * 2 + 2
    assert ("s-adam", "depth-3", "dense") not in got
    for (optimizer, depth), arms in SEEDS.items():
        for comparator in ("batch_norm", "dense"):
            if comparator not in arms:
                continue
            d = got[(f"s-{optimizer}", f"depth-{depth}", comparator)]
            diff, se = _welch_by_hand(arms["affine_like"], arms[comparator])
            assert d["arm"] == "affine_like"
            assert d["diff"] == pytest.approx(diff)
            assert d["se"] == pytest.approx(se)


def test_pool_over_studies_and_by_depth(studies):
    loaded = _load(studies, "s-sgd", "s-adam")
    results = pooled.pool(pooled.condition_differences(loaded, by=("depth",)))
    by_key = {(r["group"], r["comparator"]): r for r in results}
    assert set(by_key) == {
        (("3",), "batch_norm"),
        (("8",), "batch_norm"),
        (("3",), "dense"),
        (("8",), "dense"),
    }
    for depth in (3, 8):
        r = by_key[((str(depth),), "batch_norm")]
        assert r["k"] == 2
        hand = [
            _welch_by_hand(
                SEEDS[(o, depth)]["affine_like"],
                SEEDS[(o, depth)]["batch_norm"],
            )
            for o in ("sgd", "adam")
        ]
        mean, low, high = _random_effects_by_hand(*zip(*hand))
        assert r["diff"] == pytest.approx(mean)
        assert r["low"] == pytest.approx(low)
        assert r["high"] == pytest.approx(high)
    # One condition: an estimate, no interval.
    single = by_key[(("3",), "dense")]
    assert single["k"] == 1 and math.isnan(single["low"])


def test_pool_without_groups_pools_every_condition(studies):
    loaded = _load(studies, "s-sgd", "s-adam")
    results = pooled.pool(pooled.condition_differences(loaded))
    r = next(r for r in results if r["comparator"] == "batch_norm")
    assert r["group"] == () and r["k"] == 4


def test_conditions_without_spread_are_left_out(tmp_path):
    rows = []
    for depth, (ours, theirs) in {
        3: ([0.5, 0.51], [0.49, 0.5]),
        8: ([0.5, 0.5], [0.5, 0.5]),  # no spread: no standard error
        5: ([0.52, 0.50, 0.51], [0.50, 0.49, 0.5]),
    }.items():
        rows += _rows("s", f"depth-{depth}", depth, "affine_like", ours)
        rows += _rows("s", f"depth-{depth}", depth, "dense", theirs)
    _write(tmp_path, "s", rows, ["dense"])
    (result,) = pooled.pool(pooled.condition_differences(_load(tmp_path, "s")))
    assert result["k"] == 2 and result["left_out"] == 1
    text = pooled.render(_load(tmp_path, "s"))
    assert "2 (+1 without spread)" in text


@pytest.mark.parametrize(
    "low, high, expected",
    [
        (0.001, 0.02, "above 0"),
        (-0.005, 0.02, "above -0.01"),
        (-0.03, -0.011, "below -0.01"),
        (-0.03, -0.002, "below 0"),
        (-0.03, 0.02, "spans 0"),
        (math.nan, math.nan, "n/a"),
    ],
)
def test_describe(low, high, expected):
    assert pooled.describe({"low": low, "high": high}, 0.01) == expected


def test_render_and_cli(studies, capsys):
    out = studies / "pooled.md"
    code = pooled.main(
        [
            "s-sgd",
            "s-adam",
            "--by",
            "depth",
            "--results-dir",
            str(studies),
            "--out",
            str(out),
        ]
    )
    assert code == 0
    text = out.read_text()
    assert text.startswith("# Pooled over conditions: `s-sgd`, `s-adam`")
    assert "python -m tuning.pooled s-sgd s-adam --by depth" in text
    assert "## depth = 3" in text and "## depth = 8" in text
    assert "`0123456789`" in text
    # One table row per (group, our arm, comparator), one per condition.
    assert text.count("| affine_like | batch_norm | 2 |") == 2
    assert text.count("| s-sgd | depth-") == 4
    # Standard output without --out.
    assert pooled.main(["s-sgd", "--results-dir", str(studies)]) == 0
    assert "| affine_like | dense | 2 |" in capsys.readouterr().out


def test_cli_errors(studies, capsys):
    code = pooled.main(["nope", "--results-dir", str(studies)])
    assert code == 2
    assert "trials.csv" in capsys.readouterr().err
    code = pooled.main(
        ["s-sgd", "--by", "width", "--results-dir", str(studies)]
    )
    assert code == 2
    assert "Received: --by width" in capsys.readouterr().err


def test_missing_results_folder(tmp_path, capsys):
    with pytest.raises(pooled.PooledError, match="Received: results folder"):
        pooled.load_results(str(tmp_path / "nothing"))
    assert pooled.main(["nothing", "--results-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("error: Expected a finished")
