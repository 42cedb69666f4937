"""The benchmark's cases and its registry of candidate models."""

import dataclasses

import pytest

from benchmarks import cases

# Nothing here depends on the Keras backend: run once (conftest.py).
pytestmark = pytest.mark.backend_independent


def test_every_case_names_registered_candidates_baseline_first():
    for mode in cases.MODES:
        for case in cases.cases_for(mode):
            assert case.family in ("dense", "conv")
            assert (
                case.baseline
                == {"dense": "Dense", "conv": "Conv2D"}[case.family]
            )
            for candidate in case.candidates:
                assert candidate in cases.CANDIDATES, candidate


def test_smoke_cases_have_the_names_of_full_ones():
    full = {case.name for case in cases.cases_for("full")}
    assert {case.name for case in cases.cases_for("smoke")} <= full


def test_case_record_names_units_or_filters():
    dense = cases.case_named("dense_512_512")
    assert dense.record() == {
        "name": "dense_512_512",
        "family": "dense",
        "batch_size": 256,
        "input_shape": [512],
        "units": 512,
    }
    conv = cases.case_named("conv_32x32x64_64", "smoke")
    assert conv.record()["filters"] == 4


def test_case_named_refuses_an_unknown_name():
    with pytest.raises(ValueError, match="Received: name='conv_1x1'"):
        cases.case_named("conv_1x1")


def test_registry_builds_new_layers_each_time():
    first = cases.CANDIDATES.layers("Dense+LayerNormalization", 3)
    second = cases.CANDIDATES.layers("Dense+LayerNormalization", 3)
    assert [type(layer).__name__ for layer in first] == [
        "Dense",
        "LayerNormalization",
    ]
    assert first[0] is not second[0]


def test_registry_copy_extends_without_changing_the_original():
    registry = cases.CANDIDATES.copy()
    registry.register("Nothing", lambda units: [])
    assert "Nothing" in registry and "Nothing" not in cases.CANDIDATES
    assert registry.names() == cases.CANDIDATES.names() + ("Nothing",)


def test_registry_refuses_a_second_candidate_of_a_name():
    registry = cases.CANDIDATES.copy()
    with pytest.raises(ValueError, match="Received: name='Dense'"):
        registry.register("Dense", lambda units: [])


def test_registry_refuses_an_unknown_candidate():
    with pytest.raises(ValueError, match="Received: name='NoSuchLayer'"):
        cases.CANDIDATES.layers("NoSuchLayer", 4)


def test_make_model_builds_a_registered_candidate():
    registry = cases.CANDIDATES.copy()
    registry.register(
        "Conv2D+Conv2D",
        lambda filters: cases.CANDIDATES.layers("Conv2D", filters) * 2,
    )
    case = dataclasses.replace(
        cases.case_named("conv_32x32x64_64", "smoke"),
        candidates=("Conv2D", "Conv2D+Conv2D"),
    )
    model, x, y = cases.make_model(case, "Conv2D+Conv2D", registry)
    assert model.name == "Conv2D_Conv2D"
    assert [type(layer).__name__ for layer in model.layers] == [
        "InputScale",
        "Conv2D",
        "Conv2D",
    ]
    assert tuple(x.shape) == (2, 6, 6, 4)
    assert tuple(y.shape) == (2, 6, 6, 4)
