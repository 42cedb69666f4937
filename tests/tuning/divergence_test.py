import shutil

import pytest

from tests.tuning import common
from tuning import divergence
from tuning import provenance
from tuning import records
from tuning import study as study_module


@pytest.mark.slow
@pytest.mark.requires_backend("tensorflow")
def test_divergence_of_the_smoke_study(tmp_path):
    # The smoke study's sizes: 512 + 256 training and 256 test images, no
    # fewer (the runner never trains on less data than a study declares).
    data_dir = common.write_image_folder(
        tmp_path / "cifar10", per_class=(77, 26)
    )
    shutil.copytree(
        str(provenance.REPO_ROOT / "tuning" / "results" / "smoke"),
        tmp_path / "results" / "smoke",
        ignore=shutil.ignore_patterns(".runner.lock"),
    )
    status = divergence.main(
        [
            "smoke",
            "--data-dir",
            data_dir,
            "--results-dir",
            str(tmp_path / "results"),
            # One image: the single-sample step, where the multipliers
            # are exact (a batch adds the cross-sample terms).
            "--batch",
            "1",
        ]
    )
    assert status == 0
    out = tmp_path / "results" / "smoke"
    rows = records.read_csv(out / "divergence.csv")
    # Two arms x two phases x (2 hidden layers + the output layer).
    assert len(rows) == 2 * 2 * 3
    by = {(r["arm"], r["phase"], r["position"]): r for r in rows}
    # The affine-like hidden layers step at the ideal rate; Dense's first
    # layer at |x|^2 + 1 (3072 standardised pixels).
    assert abs(float(by[("affine_like", "init", "0")]["mean_scale"]) - 1) < 1e-2
    assert float(by[("dense", "init", "0")]["mean_scale"]) > 100
    text = (out / "divergence.md").read_text()
    assert "| affine_like | trained |" in text
    # The output layer's class is named: plain Dense in both smoke arms.
    assert text.count("| Dense |") == 4


def test_divergence_needs_a_finished_mlp_study(tmp_path, capsys):
    assert divergence.main(["smoke", "--results-dir", str(tmp_path)]) == 2
    assert "Expected a finished study" in capsys.readouterr().err
    assert divergence.main(["cifar10-cnn", "--results-dir", str(tmp_path)]) == 2
    assert "Expected an MLP study" in capsys.readouterr().err


def test_merge_keeps_other_cells_and_replaces_remeasured_ones():
    study = study_module.load_study("cifar10-mlp-v2")
    first, fifth = (c.name for c in study.conditions()[:5:4])

    def rows(condition, arm, command, layers=2):
        return [
            {
                "condition": condition,
                "arm": arm,
                "seed": "0",
                "phase": phase,
                "position": str(p),
                "command": command,
            }
            for phase in ("init", "trained")
            for p in range(layers)
        ]

    old = rows(fifth, "dense", "a") + rows(first, "dense", "a")
    old += rows(first, "affine_like", "a")
    new = rows(first, "affine_like", "b", layers=3)
    merged = divergence.merge(old, new, study)
    # Study order (the first condition, then the fifth; dense before
    # affine_like); the re-measured cell replaced whole, the others kept.
    keys = [(r["condition"], r["arm"], r["command"]) for r in merged]
    assert keys == (
        [(first, "dense", "a")] * 4
        + [(first, "affine_like", "b")] * 6
        + [(fifth, "dense", "a")] * 4
    )
    # Each cell's layers keep the order they were measured in.
    assert [(r["phase"], r["position"]) for r in merged[4:10]] == [
        (phase, str(p)) for phase in ("init", "trained") for p in range(3)
    ]

    def measured(rows):
        return [
            dict(
                r,
                layer="l",
                mean_scale=str(1 + int(r["position"])),
                cv_scale="0",
                mean_cosine="1",
                **{"class": "Dense"},
            )
            for r in rows
        ]

    text = divergence.render(measured(merged), study, "b", "jax")
    assert "Commands: `a`; `b` (backend jax)" in text
    # Hidden layers averaged (positions 0 and 1 of 3: scales 1 and 2), the
    # output layer (scale 3) apart.
    assert f"| {first} | affine_like | init | 0 | 1.5 |" in text
    assert "| Dense | 3 | 0 |" in text
    # Two seeds of one cell are two lines, never averaged together; rows
    # of a file written before rows named their command say so.
    seed1 = [dict(r, seed="1") for r in rows(first, "dense", "c")]
    old = [
        {k: v for k, v in r.items() if k != "command"}
        for r in rows(first, "dense", "a")
    ]
    merged = divergence.merge(old, seed1, study)
    assert [r["seed"] for r in merged] == ["0"] * 4 + ["1"] * 4
    text = divergence.render(measured(merged), study, "c", "torch")
    assert f"Commands: `{divergence.NOT_RECORDED}`; `c` (backend torch)" in text
    for seed in ("0", "1"):
        assert f"| {first} | dense | trained | {seed} | 1 |" in text
