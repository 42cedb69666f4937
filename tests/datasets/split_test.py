"""Tests of the validation hold-out, the subsets and the standardisation."""

import numpy as np
import pytest

from keras_affine_div import datasets
from keras_affine_div.datasets import split
from keras_affine_div.datasets.dataset import RawSplits
from tests.datasets import common

# Nothing here depends on the Keras backend: run once (conftest.py).
pytestmark = pytest.mark.backend_independent


def _raw(n_train=40, n_test=12, channels=3):
    rng = np.random.default_rng(1)
    shape = (8, 8, channels)
    return RawSplits(
        name="cifar10",
        label="CIFAR-10",
        source="test",
        class_names=datasets.CIFAR10_CLASS_NAMES,
        x_train=rng.integers(0, 256, (n_train, *shape), dtype=np.uint8),
        y_train=(np.arange(n_train) % 10).astype(np.int32),
        x_test=rng.integers(0, 256, (n_test, *shape), dtype=np.uint8),
        y_test=(np.arange(n_test) % 10).astype(np.int32),
    )


@pytest.mark.parametrize(
    "max_train_samples,max_test_samples",
    [(None, None), (20, 5)],
    ids=["all", "subsets"],
)
def test_matches_a_numpy_reference(max_train_samples, max_test_samples):
    raw = _raw()
    ds = split.split_and_standardize(
        raw,
        validation_split=0.25,
        seed=7,
        max_train_samples=max_train_samples,
        max_test_samples=max_test_samples,
    )
    rng = np.random.default_rng(7)
    train_perm = rng.permutation(40)[:max_train_samples]
    test_perm = rng.permutation(12)
    if max_test_samples is None:
        test_idx = np.arange(12)
    else:
        test_idx = np.sort(test_perm[:max_test_samples])
    num_val = round(0.25 * len(train_perm))
    val_idx, train_idx = train_perm[:num_val], train_perm[num_val:]
    train = raw.x_train[train_idx].astype(np.float64)
    mean, std = train.mean(axis=(0, 1, 2)), train.std(axis=(0, 1, 2))
    for x, ref in (
        (ds.x_train, raw.x_train[train_idx]),
        (ds.x_val, raw.x_train[val_idx]),
        (ds.x_test, raw.x_test[test_idx]),
    ):
        assert x.dtype == np.float32
        np.testing.assert_allclose(x, (ref - mean) / std, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(ds.y_train, raw.y_train[train_idx])
    np.testing.assert_array_equal(ds.y_val, raw.y_train[val_idx])
    np.testing.assert_array_equal(ds.y_test, raw.y_test[test_idx])
    assert (ds.name, ds.label, ds.source) == ("cifar10", "CIFAR-10", "test")
    assert ds.class_names == datasets.CIFAR10_CLASS_NAMES


def test_constant_channel_is_not_divided_by_zero():
    raw = _raw(channels=1)
    raw.x_train[...] = 7
    ds = split.split_and_standardize(raw, 0.1, 0, None, None)
    assert np.all(np.isfinite(ds.x_test))
    np.testing.assert_array_equal(ds.x_train, 0.0)


def test_standardised_with_train_statistics(image_folder, tmp_path):
    ds = datasets.load("cifar10", data_dir=image_folder, cache_dir=tmp_path)
    mean = ds.x_train.mean(axis=(0, 1, 2), dtype=np.float64)
    std = ds.x_train.std(axis=(0, 1, 2), dtype=np.float64)
    np.testing.assert_allclose(mean, 0.0, atol=1e-5)
    np.testing.assert_allclose(std, 1.0, atol=1e-5)
    # Validation and test images use the same (train) statistics: an image
    # equal to a training image is standardised to the same values.
    train = {tuple(np.round(x[0, 0], 4)): x for x in ds.x_train}
    matched = [x for x in ds.x_test if tuple(np.round(x[0, 0], 4)) in train]
    assert matched
    for x in matched:
        np.testing.assert_allclose(x, train[tuple(np.round(x[0, 0], 4))])


def test_split_is_disjoint_and_deterministic(image_folder, tmp_path):
    a = datasets.load(
        "cifar10", data_dir=image_folder, seed=3, cache_dir=tmp_path
    )
    b = datasets.load(
        "cifar10", data_dir=image_folder, seed=3, cache_dir=tmp_path
    )
    c = datasets.load(
        "cifar10", data_dir=image_folder, seed=4, cache_dir=tmp_path
    )
    assert len(a.x_val) == 4 and len(a.x_train) == 36
    train_ids, val_ids = common.image_ids(a.x_train), common.image_ids(a.x_val)
    assert len(train_ids) == 36 and len(val_ids) == 4
    assert not train_ids & val_ids
    for name in ("x_train", "y_train", "x_val", "y_val", "x_test", "y_test"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    # Another seed holds out other images; the test split is unchanged.
    assert common.image_ids(c.x_val) != val_ids
    np.testing.assert_array_equal(a.y_test, c.y_test)


def test_max_samples_take_seeded_subsets(image_folder, tmp_path):
    kwargs = dict(
        data_dir=image_folder,
        validation_split=0.25,
        max_train_samples=20,
        max_test_samples=7,
        cache_dir=tmp_path,
    )
    a = datasets.load("cifar10", **kwargs)
    b = datasets.load("cifar10", **kwargs)
    assert (len(a.x_train), len(a.x_val), len(a.x_test)) == (15, 5, 7)
    np.testing.assert_array_equal(a.y_train, b.y_train)
    np.testing.assert_array_equal(a.y_test, b.y_test)
    assert not common.image_ids(a.x_train) & common.image_ids(a.x_val)
    # Statistics of the subset it returns: still standardised.
    np.testing.assert_allclose(
        a.x_train.mean(axis=(0, 1, 2), dtype=np.float64), 0.0, atol=1e-5
    )
    c = datasets.load("cifar10", **{**kwargs, "seed": 1})
    assert common.image_ids(a.x_val) != common.image_ids(c.x_val)


def test_the_whole_split_is_allowed(image_folder, tmp_path):
    ds = datasets.load(
        "cifar10",
        data_dir=image_folder,
        max_train_samples=40,
        max_test_samples=20,
        cache_dir=tmp_path,
    )
    assert (len(ds.x_train), len(ds.x_val), len(ds.x_test)) == (36, 4, 20)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (
            {"max_train_samples": 41},
            r"`max_train_samples`. Expected at most 40, the images in the "
            r"training split of .*Received: max_train_samples=41",
        ),
        (
            {"max_test_samples": 21},
            r"`max_test_samples`. Expected at most 20, the images in the "
            r"test split of .*Received: max_test_samples=21",
        ),
    ],
)
def test_subset_larger_than_the_split(image_folder, tmp_path, kwargs, match):
    # Never fewer images than asked for: a request beyond the split used to
    # give the whole split and a validation hold-out of another size.
    with pytest.raises(ValueError, match=match):
        datasets.load(
            "cifar10", data_dir=image_folder, cache_dir=tmp_path, **kwargs
        )


def test_no_training_image_left(image_folder, tmp_path):
    with pytest.raises(
        ValueError,
        match=r"at least one training image left after the validation "
        r"hold-out of 2 of 2 images. Received: validation_split=0.9, "
        r"max_train_samples=2",
    ):
        datasets.load(
            "cifar10",
            data_dir=image_folder,
            validation_split=0.9,
            max_train_samples=2,
            cache_dir=tmp_path,
        )
