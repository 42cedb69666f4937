"""Protocol v3's rules, each on a study where breaking it would show.

- Seeds apart: under protocol 2 a seed rerun replays the search's chosen
  trial bit for bit; under protocol 3 none does, and `replays.replaying_rows`
  finds exactly the replays. `tuning.fresh_seeds` trains a fresh seed for
  each, and the report gives the verdicts both ways.
- Only validation chooses: the report of a selection study ranks its
  values on the seed reruns' validation accuracy and shows no test number,
  even where the test split would choose otherwise.
"""

import csv
import pathlib

import pytest

from tests.tuning import common
from tuning import comparisons
from tuning import fresh_seeds
from tuning import records
from tuning import replays
from tuning import report
from tuning import result_rows
from tuning import runner
from tuning import schema
from tuning import selection_study
from tuning import study as study_module

# The end-to-end cases run on one backend: the rules do not depend on it
# (tests/tuning/sweep_test.py runs a whole study on each).
ONE_BACKEND = pytest.mark.requires_backend("torch")


def _tiny(tmp_path, protocol=None, seed=0):
    # The random tuner with one trial: that trial is the choice, and under
    # protocol 2 its seed (0) is rerun 0's.
    path = common.write_study(
        tmp_path / f"tiny{protocol or ''}.toml", max_trials=1
    )
    text = pathlib.Path(path).read_text().replace("seed = 0", f"seed = {seed}")
    if protocol is not None:
        text = f"protocol = {protocol}\n" + text
    pathlib.Path(path).write_text(text)
    return study_module.load_study(path)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The tiny study run under protocols 2 and 3: {protocol: out_dir}."""
    tmp = tmp_path_factory.mktemp("protocol")
    data_dir = common.write_image_folder(tmp / "cifar10")
    out = {}
    for protocol in (2, 3):
        study = _tiny(tmp, protocol)
        runner.run(
            study,
            runner.Options(
                data_dir=data_dir,
                results_dir=str(tmp / "results"),
                runs_dir=str(tmp / "runs"),
            ),
        )
        out[protocol] = (study, tmp / "results" / study.results_name, data_dir)
    return out


def _rows(out_dir, name=schema.TRIALS_CSV):
    return records.read_csv(out_dir / name)


@ONE_BACKEND
def test_protocol_2_replays_the_chosen_trial_and_3_does_not(runs):
    for protocol, (study, out_dir, _) in runs.items():
        rows = _rows(out_dir)
        search = _rows(out_dir, schema.SEARCH_TRIALS_CSV)
        replaying = replays.replaying_rows(rows, study.config())
        for row in rows:
            (trial,) = [
                t
                for t in search
                if t["arm"] == row["arm"]
                and t["trial_id"] == row["search_trial_id"]
            ]
            same = row["val_loss"] == trial["val_loss"]
            if protocol == 2 and row["seed"] == "0":
                # Trial 0 trained from seed 0, and so did rerun 0: the same
                # run, to the last bit.
                assert same and row in replaying
            else:
                assert not same and row not in replaying
        assert len(replaying) == (2 if protocol == 2 else 0)


@ONE_BACKEND
def test_reports_say_which_seeds_trained(runs):
    text = (runs[2][1] / schema.REPORT_MD).read_text()
    assert "## Seeds" in text
    assert "bit for bit: 2 of 2 cells here." in text
    assert "| dense | 0, 1 | 0, 1 | 0 (0) | 0 | not yet |" in text
    assert "## Verdicts with fresh seeds" in text
    text = (runs[3][1] / schema.REPORT_MD).read_text()
    base = study_module.RERUN_SEED_BASE
    assert f"seed {base} + i, apart from every search trial's" in text
    assert f"| dense | 0, 1 | {base}, {base + 1} | 0 (0) | none | - |" in text
    assert "## Verdicts with fresh seeds" not in text


@ONE_BACKEND
def test_fresh_seeds_stand_in_for_the_replays(runs, capsys):
    study, out_dir, data_dir = runs[2]
    options = fresh_seeds.Options(
        results_dir=str(out_dir.parent), data_dir=data_dir
    )
    assert (
        fresh_seeds.run(study, dataclass_replace(options, dry_run=True)) == []
    )
    assert (
        "2 replaying rerun(s) without a fresh seed" in capsys.readouterr().out
    )
    assert not (out_dir / schema.FRESH_SEEDS_CSV).exists()

    written = fresh_seeds.run(study, options)
    rows = _rows(out_dir, schema.FRESH_SEEDS_CSV)
    assert [r["arm"] for r in rows] == ["dense", "affine_like"]
    replayed = {r["arm"]: r for r in _rows(out_dir) if r["seed"] == "0"}
    for row in rows:
        assert row["seed"] == str(study_module.RERUN_SEED_BASE)
        assert row["replaces_seed"] == "0"
        assert row["val_loss"] != replayed[row["arm"]]["val_loss"]
        assert row["learning_rate"] == replayed[row["arm"]]["learning_rate"]
    assert len(written) == 2
    # Done once: a second run trains nothing.
    assert fresh_seeds.run(study, options) == []
    assert fresh_seeds.pending(study, str(out_dir)) == []

    text = report.render_folder(str(out_dir))
    assert "## Verdicts with fresh seeds" in text
    assert "(2 of 2 have one, `fresh_seeds.csv`)" in text
    fresh = {r["arm"]: r for r in rows}
    assert (
        f"| {study_module.RERUN_SEED_BASE}: "
        f"{float(fresh['dense']['test_accuracy']):.4f} "
        f"({float(replayed['dense']['test_accuracy']):.4f}) |"
    ) in text
    replaced = report.with_fresh_seeds(_rows(out_dir), rows)
    assert [r["seed"] for r in replaced] == [
        str(study_module.RERUN_SEED_BASE),
        "1",
        str(study_module.RERUN_SEED_BASE),
        "1",
    ]


def dataclass_replace(options, **changes):
    import dataclasses

    return dataclasses.replace(options, **changes)


@ONE_BACKEND
def test_fresh_seeds_errors(runs, tmp_path, capsys):
    study, out_dir, _ = runs[2]
    with pytest.raises(fresh_seeds.FreshSeedsError, match="run the study"):
        fresh_seeds.pending(study, str(tmp_path))
    with pytest.raises(
        fresh_seeds.FreshSeedsError, match=r"Received: arms=\['conv'\]"
    ):
        fresh_seeds.pending(study, str(out_dir), arms=("conv",))
    with pytest.raises(
        fresh_seeds.FreshSeedsError, match=r"Received: conditions=\['c'\]"
    ):
        fresh_seeds.pending(study, str(out_dir), conditions=("c",))
    assert fresh_seeds.main(["no-such-study"]) == 2
    assert "Unknown study" in capsys.readouterr().err


def test_replays_need_the_chosen_trials_seed():
    runs = [
        {"arm": "a", "seed": "3", "search_trial_id": "03"},
        {"arm": "a", "seed": "2", "search_trial_id": "03"},
        {"arm": "b", "seed": "1", "search_trial_id": ""},
    ]
    config = {"search": {"seed": 0}}
    assert replays.replaying_rows(runs, config) == [runs[0]]
    assert replays.replaying_rows(runs, {"search": {"seed": 1}}) == []
    assert replays.replaying_rows(runs, dict(config, protocol=3)) == []


# The study file's rules.


def test_protocol_3_seeds_are_apart_from_every_search_seed(tmp_path):
    study = _tiny(tmp_path, 3, seed=9999)
    base = study_module.RERUN_SEED_BASE
    assert study.protocol == 3 and study.rerun_seed(4) == base + 4
    assert study.trial_seed(99_999) < study.rerun_seed(0)
    assert study.config()["protocol"] == 3
    # Protocol 2 stays what it was, and its config does not name it.
    old = _tiny(tmp_path, None)
    assert old.protocol == 2 and old.rerun_seed(4) == 4
    assert "protocol" not in old.config()
    with pytest.raises(
        study_module.StudyError,
        match=r"the search trials' seeds .* `seed` must be below 10000. "
        r"Received: seed=10000",
    ):
        _tiny(tmp_path, 3, seed=10_000)


@pytest.mark.parametrize(
    "text, match",
    [
        ("protocol = 4\n", r"`protocol` must be one of \[2, 3\]. "),
        ("protocol = true\n", r"Received: protocol=True"),
        ("protocol = '3'\n", r"Received: protocol='3'"),
    ],
    ids=["four", "bool", "string"],
)
def test_bad_protocol(tmp_path, text, match):
    path = common.write_study(tmp_path / "bad.toml")
    pathlib.Path(path).write_text(text + pathlib.Path(path).read_text())
    with pytest.raises(study_module.StudyError, match=match):
        study_module.load_study(path)


@pytest.mark.parametrize(
    "selects, match",
    [
        ('["depth"]', r"Received: selects=\['depth'\]"),
        ('"epochs"', r"Received: selects='epochs'"),
        ('["epochs", "epochs"]', r"Received: selects=\['epochs', 'epochs'\]"),
    ],
    ids=["not_a_grid_key", "not_a_list", "twice"],
)
def test_bad_selects(tmp_path, selects, match):
    path = common.write_study(tmp_path / "bad.toml", grid="epochs = [1, 2]")
    text = pathlib.Path(path).read_text()
    text = text.replace(
        'arms = ["dense", "affine_like"]',
        (f'arms = ["dense", "affine_like"]\nselects = {selects}'),
    )
    pathlib.Path(path).write_text(text)
    with pytest.raises(
        study_module.StudyError,
        match=r"`selects` must be a list of distinct \[grid\] keys.*" + match,
    ):
        study_module.load_study(path)


def test_selects_is_not_part_of_what_a_resume_compares(tmp_path):
    path = common.write_study(tmp_path / "s.toml", grid="epochs = [1, 2]")
    plain = study_module.load_study(path)
    text = (
        pathlib.Path(path)
        .read_text()
        .replace(
            'arms = ["dense", "affine_like"]',
            'arms = ["dense", "affine_like"]\nselects = ["epochs"]',
        )
    )
    pathlib.Path(path).write_text(text)
    selecting = study_module.load_study(path)
    assert selecting.selects == ("epochs",)
    assert schema.fingerprint(plain) != schema.fingerprint(selecting)
    assert schema.same_study(
        schema.fingerprint(plain), schema.fingerprint(selecting)
    )
    changed = dict(schema.fingerprint(plain), protocol=3)
    assert not schema.same_study(changed, schema.fingerprint(plain))


@pytest.mark.parametrize(
    "value, match",
    [
        ("0", r"Received: baseline_kernel_scale=0"),
        ("-1.5", r"Received: baseline_kernel_scale=-1.5"),
        ('"2"', r"Received: baseline_kernel_scale='2'"),
    ],
    ids=["zero", "negative", "string"],
)
def test_bad_baseline_kernel_scale(tmp_path, value, match):
    path = common.write_study(tmp_path / "bad.toml")
    text = (
        pathlib.Path(path)
        .read_text()
        .replace("seeds = 2", f"seeds = 2\nbaseline_kernel_scale = {value}")
    )
    pathlib.Path(path).write_text(text)
    with pytest.raises(
        study_module.StudyError,
        match=r"`baseline_kernel_scale` must be a positive number. " + match,
    ):
        study_module.load_study(path)


def test_baseline_kernel_scale_leaves_older_configs_as_they_were(tmp_path):
    path = common.write_study(tmp_path / "s.toml")
    study = study_module.load_study(path)
    assert study.fixed["baseline_kernel_scale"] is None
    assert "baseline_kernel_scale" not in study.config()["fixed"]
    text = (
        pathlib.Path(path)
        .read_text()
        .replace("seeds = 2", "seeds = 2\nbaseline_kernel_scale = 2.0")
    )
    pathlib.Path(path).write_text(text)
    study = study_module.load_study(path)
    assert study.config()["fixed"]["baseline_kernel_scale"] == 2.0


# Only validation chooses.


def _selection_rows():
    # Scale 0.5 wins on validation, 1.0 on test: the report must choose 0.5
    # and show neither test number.
    rows = []
    for value, val, test in ((0.5, 0.61, 0.4321), (1.0, 0.55, 0.8765)):
        rows.append(
            {
                "study": "pilot",
                "condition": f"kernel_scale-{value}",
                "kernel_scale": str(value),
                "arm": "affine_like",
                "seed": "0",
                "test_accuracy": str(test),
                "val_accuracy": str(val),
                "search_val_accuracy": str(val + 0.01),
                "search_trial_id": "02",
                "learning_rate": "0.1",
                "bracketed": "True",
                "lr_below_factor": "2.0",
                "lr_above_factor": "2.0",
            }
        )
    return rows


def _selection_summary():
    return {
        "study": "pilot",
        "config": {
            "compare": {
                "family": "mlp",
                "arms": ["affine_like"],
                "comparators": [],
                "selects": ["kernel_scale"],
            },
            "search": {"tuner": "bracket", "seed": 0},
            "fixed": {},
            "grid": {"kernel_scale": [0.5, 1.0]},
        },
    }


def test_a_selection_study_chooses_on_validation_and_shows_no_test():
    rows = _selection_rows()
    (choice,) = report.choices(rows, _selection_summary(), ("kernel_scale",))
    assert choice["chosen"] == "kernel_scale=0.5"
    text = report.render(rows, [], _selection_summary())
    assert (
        "| kernel_scale=0.5 | 0.1 | True | 0.6200 | 0.6100 | 1 | **chosen** |"
        in text
    )
    assert "| kernel_scale=1.0 | 0.1 | True | 0.5600 | 0.5500 | 1 |  |" in text
    for test in ("0.4321", "0.8765", "0.432", "0.877", "test accuracy |"):
        assert test not in text
    # The same rows in a comparison would show the test numbers.
    summary = _selection_summary()
    del summary["config"]["compare"]["selects"]
    assert "0.4321" in report.render(rows, [], summary)


def _arm_rows():
    # On validation `patch_norm_stem` and `affine_like_conv` win their
    # layers; on test the others would.
    cells = (
        ("patch_norm", 0.57, 0.9111),
        ("patch_norm_stem", 0.62, 0.4222),
        ("patch_norm_head", 0.59, 0.9333),
        ("affine_like_conv", 0.65, 0.4444),
        ("affine_like_conv_stem_head", 0.64, 0.9555),
    )
    return [
        dict(
            _selection_rows()[0],
            study="variants",
            condition="epochs-40",
            kernel_scale="",
            epochs="40",
            arm=arm,
            val_accuracy=str(val),
            search_val_accuracy=str(val + 0.01),
            test_accuracy=str(test),
        )
        for arm, val, test in cells
    ]


def _arm_summary():
    summary = _selection_summary()
    compare = summary["config"]["compare"]
    compare.update(family="cnn", selects=["arm"])
    summary["config"]["grid"] = {"epochs": [40]}
    return dict(summary, study="variants")


def test_a_selection_among_arms_groups_each_layers_nets():
    assert selection_study.base_arm("patch_norm_stem_head") == ("patch_norm")
    assert selection_study.base_arm("affine_like_head") == "affine_like"
    assert selection_study.base_arm("conv") == "conv"
    rows = _arm_rows()
    pn, alc = report.choices(rows, _arm_summary(), ("arm",))
    assert pn["group"] == "patch_norm epochs=40"
    assert [o["value"] for o in pn["options"]] == [
        "arm=patch_norm",
        "arm=patch_norm_stem",
        "arm=patch_norm_head",
    ]
    assert pn["chosen"] == "arm=patch_norm_stem"
    assert alc["group"] == "affine_like_conv epochs=40"
    assert alc["chosen"] == "arm=affine_like_conv"
    text = report.render(rows, [], _arm_summary())
    assert "among the nets built on each layer of ours" in text
    assert "| arm=patch_norm_stem | 0.1 | True | 0.6300 | 0.6200 | 1 |" in text
    for test in ("0.9111", "0.4222", "0.9333", "0.4444", "0.9555", "0.911"):
        assert test not in text


def test_a_selection_joins_the_rows_of_the_study_it_extends():
    # The all-ours nets come from the study extended; their rows compete.
    rows = _arm_rows()
    theirs = [r for r in rows if r["arm"] in ("patch_norm", "affine_like_conv")]
    ours = [r for r in rows if r not in theirs]
    joined = {"name": "epochs-pilot", "runs": theirs, "search": []}
    text = report.render(ours, [], _arm_summary(), joined=joined)
    assert "This study adds arms to `epochs-pilot`" in text
    chosen = "| 0.1 | True | {} | 1 | **chosen** |"
    assert "| arm=affine_like_conv " + chosen.format("0.6600 | 0.6500") in text
    alone = report.render(ours, [], _arm_summary())
    assert (
        "| arm=affine_like_conv_stem_head " + chosen.format("0.6500 | 0.6400")
        in alone
    )
    assert "arm=affine_like_conv |" not in alone


def test_an_extending_study_may_add_its_arms_kernel_scales(tmp_path):
    # The variants pilot adds its arms' scales to the table of the study it
    # extends; a changed scale of that study's own arms is refused.
    name = "cifar10-cnn-v3-pilot-variants"
    study = study_module.load_study(name)
    assert study.selects == ("arm",)
    assert study.fixed["kernel_scale"]["patch_norm_stem"] == 1.0
    text = (common.REPO_ROOT / f"tuning/studies/{name}.toml").read_text()
    old = "kernel_scale = { patch_norm = 1.0,"
    assert old in text
    path = tmp_path / "bad.toml"
    path.write_text(text.replace(old, "kernel_scale = { patch_norm = 0.5,"))
    with pytest.raises(
        study_module.StudyError, match=r"must have its family.*other settings"
    ):
        study_module.load_study(str(path))


def test_selection_is_read_from_the_study_file_of_older_results():
    # Results written before `selects` existed: the study file says it.
    summary = {"study": "cifar10-mlp-v2-pilot-sgd", "config": {}}
    assert report.selected_keys(summary) == ("kernel_scale",)
    assert report.selected_keys({"study": "smoke"}) == ()
    assert report.selected_keys({}, "cifar10-cnn-v2-pilot-epochs") == (
        "epochs",
    )


# Selection noise carried.


@ONE_BACKEND
def test_a_repeated_search_goes_apart_and_into_the_report(runs):
    study, out_dir, data_dir = runs[3]
    repeat = study.repeat(1)
    assert repeat.results_name == f"{study.name}/repeats/search-seed-1"
    assert repeat.protocol == 3 and repeat.search["seed"] == 1
    assert repeat.config()["repeat_of"] == 0
    runner.run(
        repeat,
        runner.Options(
            data_dir=data_dir,
            results_dir=str(out_dir.parent),
            runs_dir=str(out_dir.parent.parent / "runs"),
            arms=("affine_like",),
        ),
    )
    folder = out_dir / "repeats" / "search-seed-1"
    rows = _rows(folder)
    assert [(r["arm"], r["seed"]) for r in rows] == [
        ("affine_like", "0"),
        ("affine_like", "1"),
    ]
    # Its one search trial trained from seed 1 * 100000 + 0, not 0.
    (trial,) = _rows(folder, schema.SEARCH_TRIALS_CSV)
    (original,) = [
        t
        for t in _rows(out_dir, schema.SEARCH_TRIALS_CSV)
        if t["arm"] == "affine_like"
    ]
    assert trial["val_loss"] != original["val_loss"]
    assert report.read_repeats(str(out_dir)) == {1: rows}
    text = report.render_folder(str(out_dir))
    assert "## Selection noise" in text
    assert "| affine_like | 1 |" in text


def test_a_repeated_cell_still_training_stays_out_of_the_noise(tmp_path):
    folder = tmp_path / "study" / "repeats" / "search-seed-1"
    folder.mkdir(parents=True)
    finished = _cell_rows("c1", "dense", [0.5, 0.51])
    training = _cell_rows("c1", "affine_like", [0.6])
    with open(folder / schema.TRIALS_CSV, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(finished[0]))
        writer.writeheader()
        writer.writerows(finished + training)
    # A searched cell's row counts its seeds only once they are all done.
    (folder / schema.CELLS_CSV).write_text(
        "condition,arm,seeds\nc1,dense,2\nc1,affine_like,\n"
    )
    assert report.read_repeats(str(tmp_path / "study")) == {1: finished}
    (folder / schema.CELLS_CSV).unlink()
    assert report.read_repeats(str(tmp_path / "study")) == {}


def test_repeat_needs_another_search_seed(tmp_path):
    study = _tiny(tmp_path, 3)
    for seed in (0, -1, 10_000, "1", True):
        with pytest.raises(
            study_module.StudyError,
            match=r"needs a search seed other than the study's \(0\).* "
            rf"Received: search_seed={seed!r}",
        ):
            study.repeat(seed)
    with pytest.raises(study_module.StudyError, match="not from another"):
        study.repeat(1).repeat(2)


def _cell_rows(condition, arm, accs, rate="0.1"):
    return [
        {
            "condition": condition,
            "arm": arm,
            "seed": str(i),
            "test_accuracy": str(a),
            "learning_rate": rate,
            "search_trial_id": "01",
        }
        for i, a in enumerate(accs)
    ]


SPREAD = (-0.002, 0.0, 0.002, -0.001, 0.001)


def test_fragile_verdicts_flip_or_sit_within_the_noise():
    summary = {
        "config": {
            "compare": {
                "arms": ["affine_like", "dense"],
                "comparators": ["dense"],
                "margin": 0.01,
            },
            "search": {"seed": 0},
        }
    }
    runs = (
        # c1: clearly superior, and still so when repeated.
        _cell_rows("c1", "affine_like", [0.60 + e for e in SPREAD])
        + _cell_rows("c1", "dense", [0.50 + e for e in SPREAD])
        # c2: superior by 1 point; the repeat lands 2 points lower, on the
        # margin: inconclusive.
        + _cell_rows("c2", "affine_like", [0.51 + e for e in SPREAD])
        + _cell_rows("c2", "dense", [0.50 + e for e in SPREAD])
        # c3: superior by 0.5 point, never repeated.
        + _cell_rows("c3", "affine_like", [0.505 + e for e in SPREAD])
        + _cell_rows("c3", "dense", [0.50 + e for e in SPREAD])
    )
    repeats = {
        1: _cell_rows("c1", "affine_like", [0.59 + e for e in SPREAD], "0.2")
        + _cell_rows("c2", "affine_like", [0.49 + e for e in SPREAD], "0.2")
    }
    result = report.selection_noise(runs, summary, repeats, 0.01)
    diffs = [c["diff"] for c in result["cells"]]
    assert diffs == pytest.approx([-0.01, -0.02])
    assert result["noise"] == pytest.approx(((0.01**2 + 0.02**2) / 2) ** 0.5)
    verdicts = {v["condition"]: v for v in result["verdicts"]}
    assert verdicts["c1"]["verdict"] == "superior"
    assert verdicts["c1"]["repeated"] == {1: "superior"}
    assert verdicts["c1"]["fragile"] == []
    assert verdicts["c2"]["verdict"] == "superior"
    assert verdicts["c2"]["repeated"][1].startswith("inconclusive")
    assert verdicts["c2"]["fragile"][0] == (
        "flips under the repeat from search seed 1"
    )
    # Not repeated, but 0.5 point from its boundary (0) with a selection
    # noise of 1.6 points.
    assert verdicts["c3"]["verdict"] == "superior"
    assert verdicts["c3"]["repeated"] == {}
    assert verdicts["c3"]["fragile"] == [
        "within the selection noise (0.0158) of +0"
    ]
    text = report.render(runs, [], summary, repeats={})
    assert "## Selection noise" not in text
    text = report.render(runs, [], summary, repeats=repeats)
    assert "Fragile verdicts: c2 affine_like - dense (superior); " in text


# A study that adds an arm to another.


def test_an_extending_study_tests_the_others_arms_against_its_own(tmp_path):
    import json
    import shutil

    results = tmp_path / "results"
    parent = results / "cifar10-mlp-wide-v2"
    shutil.copytree(
        common.REPO_ROOT / "tuning/results/cifar10-mlp-wide-v2",
        parent,
        ignore=shutil.ignore_patterns(".runner.lock"),
    )
    # As run: the parent's own tables compare its rows as run.
    (parent / schema.FRESH_SEEDS_CSV).unlink(missing_ok=True)
    rows = [
        dict(r, arm="rms_norm", study="cifar10-mlp-wide-v3-rms-norm")
        for r in _rows(parent)
        if r["arm"] == "layer_norm"
    ]
    folder = results / "cifar10-mlp-wide-v3-rms-norm"
    folder.mkdir()
    records.write_csv(str(folder / "trials.csv"), list(rows[0]), rows)
    config = study_module.load_study("cifar10-mlp-wide-v3-rms-norm").config()
    (folder / "summary.json").write_text(
        json.dumps({"study": "cifar10-mlp-wide-v3-rms-norm", "config": config})
    )
    text = report.render_folder(str(folder))
    assert "This study adds arms to `cifar10-mlp-wide-v2`" in text
    # The parent's verdicts against LayerNorm, now against the same rows
    # named rms_norm: the same differences and intervals.
    parent_text = report.render_folder(str(parent))
    for depth in ("3", "8"):
        for arm in ("affine_like", "affine_like_head"):
            line = next(
                line
                for line in parent_text.split(f"## depth-{depth}")[
                    1
                ].splitlines()
                if line.startswith(f"| {arm} - layer_norm |")
            )
            diff, interval = line.split(" | ")[1:3]
            ours = text.split(f"## depth-{depth}")[1]
            assert f"| {arm} - rms_norm | {diff} | {interval} |" in ours
    assert (
        " - batch_norm |"
        not in text.split("## Learning-rate")[0].split("## depth-3")[1]
    )
    assert "## Seeds" in text and "Protocol 3" in text
    # The parent's repeated searches carry its selection noise to the
    # extension's tests: the same noise, and the verdicts with each
    # repeated cell in place.
    noise = text.split("## Selection noise")[1].split("## Verdicts")[0]
    parent_noise = parent_text.split("## Selection noise")[1]
    assert "The repeated searches of `cifar10-mlp-wide-v2`" in noise
    (line,) = [s for s in parent_noise.splitlines() if "root mean" in s]
    assert line in noise
    assert "| depth-8 | affine_like_head - rms_norm | " in noise
    assert "| depth-8 | affine_like - rms_norm | " in noise
    assert " - layer_norm |" not in noise


def test_an_extension_reads_the_others_repeats_at_its_conditions(tmp_path):
    results = tmp_path / "results"
    parent, folder = results / "parent", results / "ours"
    for path in (parent, folder):
        path.mkdir(parents=True)
    theirs = _cell_rows("c1", "dense", [0.50 + e for e in SPREAD]) + _cell_rows(
        "c2", "dense", [0.50 + e for e in SPREAD]
    )
    records.write_csv(str(parent / "trials.csv"), list(theirs[0]), theirs)
    repeat = parent / "repeats" / "search-seed-1"
    repeat.mkdir(parents=True)
    again = _cell_rows("c1", "dense", [0.49 + e for e in SPREAD], "0.2")
    again += _cell_rows("c2", "dense", [0.48 + e for e in SPREAD], "0.2")
    records.write_csv(str(repeat / "trials.csv"), list(again[0]), again)
    (repeat / schema.CELLS_CSV).write_text(
        "condition,arm,seeds\nc1,dense,5\nc2,dense,5\n"
    )
    ours = _cell_rows("c2", "affine_like", [0.505 + e for e in SPREAD])
    summary = {"config": {"compare": {"extends": "parent"}}}
    joined = result_rows.read_extended(str(folder), summary, ours)
    # Only the conditions the extension ran.
    assert joined["runs"] == theirs[5:]
    assert joined["repeats"] == {1: again[5:]}
    own = {1: _cell_rows("c2", "affine_like", [0.50] * 5, "0.2")}
    assert result_rows.merge_repeats(joined["repeats"], own, {2: []}) == {
        1: again[5:] + own[1],
        2: [],
    }
    summary["config"] = {
        "compare": {
            "arms": ["affine_like"],
            "comparators": ["dense"],
            "margin": 0.01,
            "extends": "parent",
        },
        "search": {"seed": 0},
    }
    text = report.render(ours, [], summary, joined=joined)
    noise = text.split("## Selection noise")[1]
    # The parent's one repeated cell at c2 (-2 points) is the noise; the
    # extension's +0.5-point verdict is superior with the repeat in place
    # (+2.5) but within that noise of 0.
    assert "root mean square of the 1 differences: 0.0200" in noise
    assert (
        "| c2 | affine_like - dense | superior | +0.0050 | seed 1: superior "
        "| within the selection noise (0.0200) of +0 |"
    ) in noise
    assert "| c1 |" not in noise


@pytest.mark.parametrize(
    "size, folder",
    [
        ({}, "parent"),
        ({"quick": True}, "parent-quick"),
        ({"full": True}, "parent-full"),
    ],
    ids=["default", "quick", "full"],
)
def test_an_extension_reads_the_other_study_at_its_own_size(
    tmp_path, size, folder
):
    results = tmp_path / "results"
    accuracies = {"parent": 0.6, "parent-quick": 0.2, "parent-full": 0.8}
    for name, accuracy in accuracies.items():
        (results / name).mkdir(parents=True)
        rows = _cell_rows("", "dense", [accuracy] * 2)
        records.write_csv(
            str(results / name / "trials.csv"), list(rows[0]), rows
        )
    summary = {"config": {"compare": {"extends": "parent"}, **size}}
    ours = _cell_rows("", "affine_like", [0.5] * 2)
    joined = result_rows.read_extended(str(results / "ours"), summary, ours)
    # A quick run is never compared with the full results, nor the reverse.
    assert joined["name"] == folder
    assert {r["test_accuracy"] for r in joined["runs"]} == {
        str(accuracies[folder])
    }


@pytest.mark.parametrize(
    "old, new, match",
    [
        (
            'extends = "cifar10-mlp-wide-v2"',
            'extends = "no-such-study"',
            r"`extends` must name another study",
        ),
        (
            'arms = ["rms_norm"]',
            'arms = ["rms_norm", "dense"]',
            r"must be new to it. Received: arms=\['dense'\]",
        ),
        (
            "width = 1024",
            "width = 512",
            r"must have its family, \[search\].*other settings",
        ),
        (
            "depth = [3, 8]",
            "depth = [3, 4]",
            r"Received: conditions=\['depth-4'\]",
        ),
    ],
    ids=["unknown", "shared_arm", "other_width", "other_condition"],
)
def test_bad_extends(tmp_path, old, new, match):
    text = (
        common.REPO_ROOT / "tuning/studies/cifar10-mlp-wide-v3-rms-norm.toml"
    ).read_text()
    assert old in text
    path = tmp_path / "bad.toml"
    path.write_text(text.replace(old, new))
    with pytest.raises(study_module.StudyError, match=match):
        study_module.load_study(str(path))


def test_an_extending_study_tests_the_arms_of_ours_it_adds():
    # A variant of ours added to a study: tested against that study's
    # comparators, on its rows; the study's own pairs stay its own tests.
    theirs = (
        _cell_rows("c", "patch_norm", [0.55 + e for e in SPREAD])
        + _cell_rows("c", "batch_norm", [0.60 + e for e in SPREAD])
        + _cell_rows("c", "conv", [0.58 + e for e in SPREAD])
    )
    ours = _cell_rows("c", "patch_norm_stem_head", [0.62 + e for e in SPREAD])
    summary = {
        "config": {
            "compare": {
                "arms": ["patch_norm_stem_head"],
                "comparators": ["batch_norm", "conv"],
                "margin": 0.01,
                "extends": "parent",
            },
            "search": {"seed": 0},
        }
    }
    joined = {"name": "parent", "runs": theirs, "search": []}
    runs = theirs + ours
    cells = comparisons.cell_verdicts(runs, summary)
    assert [(c["arm"], c["comparator"]) for c in cells] == [
        ("patch_norm_stem_head", "batch_norm"),
        ("patch_norm_stem_head", "conv"),
    ]
    assert [c["verdict"] for c in cells] == ["superior", "superior"]
    assert [c["diff"] for c in cells] == pytest.approx([0.02, 0.04])
    # Holm over its own two cells' tests only: the same p-values as a
    # study of these two pairs alone (patch_norm's rows left out).
    own = comparisons.cell_verdicts(runs[5:], summary)
    for key in comparisons.TESTS:
        assert [c[key] for c in cells] == [c[key] for c in own]
    text = report.render(ours, [], summary, joined=joined)
    assert "| patch_norm_stem_head - batch_norm | +0.0200 |" in text
    assert "| patch_norm - batch_norm |" not in text
    # Without `extends`, the same rows test every arm of ours.
    plain = {
        "config": {
            "compare": dict(
                summary["config"]["compare"],
                arms=[
                    "patch_norm",
                    "patch_norm_stem_head",
                    "batch_norm",
                    "conv",
                ],
            ),
            "search": {"seed": 0},
        }
    }
    del plain["config"]["compare"]["extends"]
    pairs = [
        (c["arm"], c["comparator"])
        for c in comparisons.cell_verdicts(runs, plain)
    ]
    assert ("patch_norm", "batch_norm") in pairs and len(pairs) == 4


def test_an_extension_may_name_the_others_comparators(tmp_path):
    text = (common.REPO_ROOT / "tuning/studies/cifar10-cnn-v3.toml").read_text()
    old = """arms = ["conv", "patch_norm", "affine_like_conv", "batch_norm", "group_norm", "layer_norm"]"""
    assert old in text
    text = text.replace(
        old,
        'arms = ["patch_norm_stem_head"]\nextends = "cifar10-cnn-v3"',
    )
    path = tmp_path / "variants.toml"
    path.write_text(text)
    study = study_module.load_study(str(path))
    assert study.arms == ("patch_norm_stem_head",)
    assert study.comparators == (
        "batch_norm",
        "group_norm",
        "layer_norm",
        "conv",
    )
    assert study.config()["compare"]["extends"] == "cifar10-cnn-v3"
    for comparators, match in [
        # Not a CNN arm.
        ('["batch_norm", "rms_norm"]', r"that are not ours"),
        # One of ours is never a comparator.
        ('["batch_norm", "patch_norm"]', r"that are not ours"),
    ]:
        bad = text.replace(
            'comparators = ["batch_norm", "group_norm", "layer_norm", "conv"]',
            f"comparators = {comparators}",
        )
        assert bad != text
        path.write_text(bad)
        with pytest.raises(study_module.StudyError, match=match):
            study_module.load_study(str(path))
    # An arm of neither study: the variants pilot's parent runs only our
    # all-ours nets.
    pilot = (
        common.REPO_ROOT / "tuning/studies/cifar10-cnn-v3-pilot-variants.toml"
    ).read_text()
    assert "comparators = []\n" in pilot
    path.write_text(
        pilot.replace("comparators = []\n", 'comparators = ["batch_norm"]\n')
    )
    with pytest.raises(
        study_module.StudyError,
        match=r"`comparators` must be arms of this study or of "
        r"'cifar10-cnn-v3-pilot-epochs'.*Received: comparators=\['batch_norm'\]",
    ):
        study_module.load_study(str(path))
    # Without `extends`, a comparator must be an arm of the study itself.
    path.write_text(text.replace('extends = "cifar10-cnn-v3"', ""))
    with pytest.raises(study_module.StudyError, match=r"that are not ours"):
        study_module.load_study(str(path))


# Every arm gets the initialisation its pilot chose.


def test_each_arm_gets_its_validated_kernel_scale():
    import types

    from tuning import training

    study = study_module.load_study("cifar10-mlp-v3-adam")
    at = study.at(study.conditions()[0])
    data = types.SimpleNamespace(input_shape=(4, 4, 3), num_classes=10)
    expected = {
        "dense": (None, 0.5),
        "affine_like": ((0.125,), None),
        "affine_like_head": ((0.125,), None),
        "norm_like": ((0.25,), None),
        "batch_norm": (None, None),
        "layer_norm": (None, None),
        "rms_norm": (None, None),
    }
    for arm, (scales, baseline) in expected.items():
        hypermodel = training.make_hypermodel(at, arm, data)
        ours = hypermodel.kernel_scales if hypermodel.arm.ours else None
        assert (ours, hypermodel.baseline_kernel_scale) == (scales, baseline)


@pytest.mark.parametrize(
    "value",
    ["{ dense = 0.5 }", "{ affine_like = 0 }", "{}", '"0.5"'],
    ids=["baseline_arm", "zero", "empty", "string"],
)
def test_bad_kernel_scale_table(tmp_path, value):
    path = common.write_study(tmp_path / "bad.toml")
    text = (
        pathlib.Path(path)
        .read_text()
        .replace("seeds = 2", f"seeds = 2\nkernel_scale = {value}")
    )
    pathlib.Path(path).write_text(text)
    with pytest.raises(
        study_module.StudyError,
        match=r"`kernel_scale` must be a positive number, or a table of one "
        r"for each of some of our arms",
    ):
        study_module.load_study(path)
