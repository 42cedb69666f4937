"""Tests of the image-folder reader, through CIFAR-10 image folders."""

import os
import re

import numpy as np
import pytest

from keras_affine_div import datasets
from keras_affine_div.datasets import image_folder as image_folder_lib
from tests.datasets import common

# Nothing here depends on the Keras backend: run once (conftest.py).
pytestmark = pytest.mark.backend_independent


def test_image_folder_arrays(image_folder, tmp_path):
    ds = datasets.load(
        "cifar10",
        data_dir=image_folder,
        validation_split=0.25,
        cache_dir=tmp_path,
    )
    assert ds.name == "cifar10"
    assert ds.label == "CIFAR-10 (PNG copy)"
    assert ds.source == os.path.realpath(image_folder)
    assert ds.class_names == datasets.CIFAR10_CLASS_NAMES
    assert ds.num_classes == 10
    assert ds.input_shape == (32, 32, 3)
    assert ds.x_train.shape == (30, 32, 32, 3)
    assert ds.x_val.shape == (10, 32, 32, 3)
    assert ds.x_test.shape == (20, 32, 32, 3)
    assert ds.y_train.shape == (30,) and ds.y_val.shape == (10,)
    assert ds.y_test.shape == (20,)
    for x in (ds.x_train, ds.x_val, ds.x_test):
        assert x.dtype == np.float32
    for y in (ds.y_train, ds.y_val, ds.y_test):
        assert y.dtype == np.int32
    assert np.bincount(ds.y_test, minlength=10).tolist() == [2] * 10
    assert (
        np.bincount(
            np.concatenate([ds.y_train, ds.y_val]), minlength=10
        ).tolist()
        == [4] * 10
    )
    assert "x_train" not in repr(ds)


def test_listing(image_folder):
    root = os.path.realpath(image_folder)
    listing = image_folder_lib.list_images(
        root, datasets.CIFAR10_CLASS_NAMES, "CIFAR-10", "data_dir", root
    )
    assert sorted(listing) == ["test", "train"]
    assert tuple(listing["train"]) == datasets.CIFAR10_CLASS_NAMES
    names = [f for f, _, _ in listing["train"]["cat"]]
    assert names == ["0000.png", "0001.png", "0002.png", "0003.png"]
    assert image_folder_lib.encoding(listing) == "PNG"
    assert image_folder_lib.fingerprint(listing) == (
        image_folder_lib.fingerprint(dict(reversed(listing.items())))
    )


def test_labels_follow_class_order(image_folder, tmp_path):
    ds = datasets.load("cifar10", data_dir=image_folder, cache_dir=tmp_path)
    for x, y in (
        (ds.x_train, ds.y_train),
        (ds.x_val, ds.y_val),
        (ds.x_test, ds.y_test),
    ):
        code = common.raw_class_code(x)
        # Channel 0 is 10 + 20 * class id: increasing with the label.
        per_class = {}
        for c, label in zip(code, y):
            per_class.setdefault(int(label), set()).add(round(float(c), 4))
        assert all(len(v) == 1 for v in per_class.values()), per_class
        ordered = [per_class[k].pop() for k in sorted(per_class)]
        assert ordered == sorted(ordered)
        assert len(set(ordered)) == len(ordered)


def test_jpeg_folder_is_labelled_jpeg_copy(tmp_path):
    root = common.write_image_folder(tmp_path / "jpeg", 2, 1, ext=".jpg")
    ds = datasets.load("cifar10", data_dir=root, cache_dir=tmp_path / "c")
    assert ds.label == "CIFAR-10 (JPEG copy)"
    assert ds.x_train.shape[1:] == (32, 32, 3)
    assert len(ds.x_test) == 10


def test_data_dir_without_splits(tmp_path):
    (tmp_path / "data" / "train" / "cat").mkdir(parents=True)
    with pytest.raises(
        ValueError,
        match=r"`train/` and `test/` sub-folders.*it lacks test/. "
        r"Received: data_dir=",
    ):
        datasets.load("cifar10", data_dir=tmp_path / "data", cache_dir=tmp_path)


def test_data_dir_with_other_classes(tmp_path):
    root = common.write_image_folder(
        tmp_path / "data", 1, 1, classes=("cat", "dog")
    )
    with pytest.raises(
        ValueError,
        match=r"one folder per CIFAR-10 class, named airplane, .*truck; "
        r"found \['cat', 'dog'\]. Received: data_dir=",
    ):
        datasets.load("cifar10", data_dir=root, cache_dir=tmp_path)


def test_data_dir_with_an_empty_class(tmp_path):
    root = common.write_image_folder(tmp_path / "data", 1, 1)
    for name in os.listdir(os.path.join(root, "test", "ship")):
        os.remove(os.path.join(root, "test", "ship", name))
    with pytest.raises(
        ValueError,
        match=r"Expected JPEG or PNG images in `test/ship/`; found none. "
        r"Received: data_dir=",
    ):
        datasets.load("cifar10", data_dir=root, cache_dir=tmp_path)


def test_data_dir_with_wrong_image_size(tmp_path):
    root = common.write_image_folder(tmp_path / "data", 1, 1, size=16)
    with pytest.raises(
        ValueError,
        match=r"Expected CIFAR-10 images of shape \(32, 32, 3\) \(32x32 RGB\) "
        r"in `train/`.*Received: data_dir=" + re.escape(repr(root)) + "$",
    ):
        datasets.load("cifar10", data_dir=root, cache_dir=tmp_path / "c")
    assert not (tmp_path / "c").exists()


def test_wrong_image_size_names_the_environment_variable(tmp_path, monkeypatch):
    root = common.write_image_folder(tmp_path / "data", 1, 1, size=16)
    monkeypatch.setenv(datasets.CIFAR10_DIR_ENV, root)
    with pytest.raises(
        ValueError,
        match=r"Expected CIFAR-10 images of shape \(32, 32, 3\).*in `train/`"
        r".*Received: KERAS_AFFINE_DIV_CIFAR10_DIR=" + re.escape(repr(root)),
    ):
        datasets.load("cifar10", cache_dir=tmp_path / "c")
    assert not (tmp_path / "c").exists()


def test_a_corrupt_image_is_named(tmp_path):
    root = common.write_image_folder(tmp_path / "data", 2, 1)
    class_dir = os.path.join(
        root, "train", sorted(os.listdir(os.path.join(root, "train")))[1]
    )
    victim = sorted(os.listdir(class_dir))[0]
    with open(os.path.join(class_dir, victim), "wb") as f:
        f.write(np.random.default_rng(0).bytes(300))
    with pytest.raises(ValueError) as info:
        datasets.load("cifar10", data_dir=root, cache_dir=tmp_path / "c")
    message = str(info.value)
    where = f"`train/{os.path.basename(class_dir)}/{victim}`"
    assert f"{where} is not a readable image" in message, message
    assert "\n" not in message
    assert not (tmp_path / "c").exists()


def test_a_wrong_sized_image_is_named(tmp_path):
    root = common.write_image_folder(tmp_path / "data", 1, 1, size=16)
    with pytest.raises(ValueError, match=r"`train/.*` is of shape \(16, 16"):
        datasets.load("cifar10", data_dir=root, cache_dir=tmp_path / "c")
