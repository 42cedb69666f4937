"""Setting aside some arms' results, and the runner running them again."""

import json

import pytest

from tests.tuning import common
from tuning import lock
from tuning import records
from tuning import study as study_module
from tuning import supersede

ROW_FILES = ("cells.csv", "trials.csv", "search_trials.csv", "curves.csv")


def _rows(folder):
    return {name: records.read_csv(folder / name) for name in ROW_FILES}


@pytest.mark.requires_backend("torch")
def test_superseded_arms_run_again_and_the_others_stay(tmp_path, capsys):
    data_dir = common.write_image_folder(tmp_path / "cifar10")
    study = common.write_study(tmp_path / "tiny.toml")
    args = common.sweep_args(study, data_dir, tmp_path)
    first = common.run_sweep(tmp_path, *args)
    assert first.returncode == 0, first.stdout + first.stderr
    out = tmp_path / "results" / "tiny"
    before = _rows(out)
    summary = (out / "summary.json").read_text()
    assert (tmp_path / "runs" / "tiny" / "affine_like").is_dir()

    code = supersede.main(
        [
            study,
            "--arms",
            "affine_like",
            "--as",
            "tied-kernels",
            "--reason",
            "made before the fix",
            "--results-dir",
            tmp_path / "results",
            "--runs-dir",
            tmp_path / "runs",
        ]
    )
    assert code == 0
    assert "set aside affine_like of tiny as 'tied-kernels'" in (
        capsys.readouterr().out
    )
    aside = out / "superseded" / "tied-kernels"
    for name, rows in before.items():
        assert records.read_csv(aside / name) == [
            r for r in rows if r["arm"] == "affine_like"
        ], name
        assert records.read_csv(out / name) == [
            r for r in rows if r["arm"] == "dense"
        ], name
    # The study-wide files go with the set-aside rows.
    for name in ("summary.json", "report.md", "accuracy.png"):
        assert (aside / name).is_file(), name
        assert not (out / name).exists(), name
    assert (aside / "summary.json").read_text() == summary
    record = json.loads((aside / "superseded.json").read_text())
    assert record["arms"] == ["affine_like"]
    assert record["reason"] == "made before the fix"
    assert record["rows"]["trials.csv"] == 2
    assert record["rows"]["cells.csv"] == 1
    assert record["git_commit"]
    assert "tuning.supersede" in record["command"]
    # Its project is gone, the other arm's kept.
    assert not (tmp_path / "runs" / "tiny" / "affine_like").exists()
    assert (tmp_path / "runs" / "tiny" / "dense").is_dir()

    again = common.run_sweep(tmp_path, *args)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "dense: trial 1 of 2 started" not in again.stdout
    assert "affine_like: trial 1 of 2 started" in again.stdout
    after = _rows(out)
    for name, rows in before.items():
        assert [r for r in after[name] if r["arm"] == "dense"] == [
            r for r in rows if r["arm"] == "dense"
        ], name
        assert [r["arm"] for r in after[name]].count("affine_like") == [
            r["arm"] for r in rows
        ].count("affine_like"), name
    assert (out / "summary.json").is_file()
    assert (out / "report.md").is_file()
    # What was set aside is left as it was.
    assert records.read_csv(aside / "trials.csv") == [
        r for r in before["trials.csv"] if r["arm"] == "affine_like"
    ]


def _tiny(tmp_path, arms=("dense", "affine_like")):
    """The tiny study and a results folder with a cells.csv of `arms`."""
    study = study_module.load_study(common.write_study(tmp_path / "tiny.toml"))
    out = tmp_path / "results" / study.results_name
    out.mkdir(parents=True)
    records.write_csv(
        out / "cells.csv",
        ("arm", "learning_rate"),
        [{"arm": arm, "learning_rate": 0.1} for arm in arms],
    )
    return study


def _supersede(study, tmp_path, arms=("affine_like",), name="x", reason="r"):
    return supersede.supersede(
        study,
        arms,
        name,
        reason,
        str(tmp_path / "results"),
        str(tmp_path / "runs"),
    )


def test_columns_and_order_are_kept(tmp_path):
    study = _tiny(tmp_path, arms=("affine_like", "dense", "affine_like"))
    record = _supersede(study, tmp_path)
    assert record["rows"] == {"cells.csv": 2}
    out = tmp_path / "results" / "tiny"
    header = (out / "cells.csv").read_text().splitlines()[0]
    assert header == "arm,learning_rate"
    assert (out / "superseded" / "x" / "cells.csv").read_text() == (
        "arm,learning_rate\naffine_like,0.1\naffine_like,0.1\n"
    )


def test_unknown_arm(tmp_path):
    study = _tiny(tmp_path)
    with pytest.raises(
        supersede.SupersedeError,
        match=r"Expected arms of study 'tiny': dense, affine_like\. "
        r"Received: arms=\['batch_norm'\]",
    ):
        _supersede(study, tmp_path, arms=("batch_norm",))


def test_bad_name_and_reason(tmp_path):
    study = _tiny(tmp_path)
    with pytest.raises(supersede.SupersedeError, match=r"Received: name='a/b'"):
        _supersede(study, tmp_path, name="a/b")
    with pytest.raises(supersede.SupersedeError, match=r"Received: reason=' '"):
        _supersede(study, tmp_path, reason=" ")


def test_a_used_name_is_refused(tmp_path):
    study = _tiny(tmp_path)
    _supersede(study, tmp_path)
    with pytest.raises(
        supersede.SupersedeError,
        match=r"each setting-aside needs a name of its own\. Received: "
        r"name='x'",
    ):
        _supersede(study, tmp_path, arms=("dense",))


def test_nothing_to_set_aside(tmp_path):
    study = _tiny(tmp_path, arms=("dense",))
    with pytest.raises(
        supersede.SupersedeError,
        match=r"no row of affine_like in .*: nothing to set aside",
    ):
        _supersede(study, tmp_path)
    assert not (tmp_path / "results" / "tiny" / "superseded").exists()


def test_a_running_study_is_refused(tmp_path):
    study = _tiny(tmp_path)
    out = tmp_path / "results" / "tiny"
    with lock.StudyLock([str(tmp_path / "runs" / "tiny"), str(out)]):
        with pytest.raises(
            supersede.SupersedeError, match="another runner is using this study"
        ):
            _supersede(study, tmp_path)
    assert len(records.read_csv(out / "cells.csv")) == 2


def test_command_line_errors(tmp_path, capsys):
    study_path = common.write_study(tmp_path / "tiny.toml")
    code = supersede.main(
        [
            study_path,
            "--arms",
            "nope",
            "--as",
            "x",
            "--reason",
            "r",
            "--results-dir",
            tmp_path / "results",
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: Received an invalid value for argument")
    assert "Traceback" not in err
