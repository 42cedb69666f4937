"""The validation hold-out, the subsets and the standardisation.

`split_and_standardize` turns the full decoded splits of a source into a
`Dataset`: seeded subsets, a seeded validation hold-out of the training
images, and every split standardised per channel with the statistics of
the returned training images.
"""

import numpy as np

from keras_affine_div.datasets.dataset import Dataset


def split_and_standardize(
    raw, validation_split, seed, max_train_samples, max_test_samples
):
    """Holds out validation images, draws subsets and standardises.

    One generator seeded with `seed` permutes the training images, then the
    test images. The first `max_train_samples` permuted training images (all
    of them if `None`) are kept, and the first `validation_split` of those
    (at least one) are the validation images. The test subset keeps the
    original order.

    Args:
        raw: a `RawSplits`, the full decoded splits.
        validation_split: float in (0, 1), the fraction held out.
        seed: non-negative int, seeds the hold-out and the subsets.
        max_train_samples: int >= 2 or `None`, the number of training
            images considered, at most those of the training split.
        max_test_samples: positive int or `None`, the number of test images,
            at most those of the test split.

    Returns:
        Dataset: `float32` images standardised with the training images'
        per-channel mean and standard deviation, `int32` labels.

    Raises:
        ValueError: if a subset asks for more images than its split holds,
            or if no training image is left after the hold-out.
    """
    _check_subset(max_train_samples, len(raw.x_train), "max_train_samples", raw)
    _check_subset(max_test_samples, len(raw.x_test), "max_test_samples", raw)
    rng = np.random.default_rng(seed)
    train_perm = rng.permutation(len(raw.x_train))
    test_perm = rng.permutation(len(raw.x_test))
    if max_train_samples is not None:
        train_perm = train_perm[:max_train_samples]
    if max_test_samples is not None:
        # Keep the original order: a subset, not a shuffle.
        test_perm = np.sort(test_perm[:max_test_samples])
    else:
        test_perm = np.arange(len(raw.x_test))
    num_val = max(1, int(round(validation_split * len(train_perm))))
    if num_val >= len(train_perm):
        raise ValueError(
            "Expected at least one training image left after the validation "
            f"hold-out of {num_val} of {len(train_perm)} images. Received: "
            f"validation_split={validation_split!r}, "
            f"max_train_samples={max_train_samples!r}"
        )
    val_idx, train_idx = train_perm[:num_val], train_perm[num_val:]

    x_train = raw.x_train[train_idx]
    mean, std = _channel_stats(x_train)
    return Dataset(
        name=raw.name,
        label=raw.label,
        x_train=_standardize(x_train, mean, std),
        y_train=raw.y_train[train_idx],
        x_val=_standardize(raw.x_train[val_idx], mean, std),
        y_val=raw.y_train[val_idx],
        x_test=_standardize(raw.x_test[test_perm], mean, std),
        y_test=raw.y_test[test_perm],
        class_names=tuple(raw.class_names),
        source=raw.source,
    )


def _check_subset(requested, available, name, raw):
    """Refuses a subset larger than its split: never fewer images than asked."""
    if requested is not None and requested > available:
        split = "training" if name == "max_train_samples" else "test"
        raise ValueError(
            f"Received an invalid value for argument `{name}`. Expected at "
            f"most {available}, the images in the {split} split of "
            f"{raw.label}. Received: {name}={requested!r}"
        )


def _channel_stats(x):
    """Per-channel mean and standard deviation of uint8 NHWC images.

    Computed exactly from a 256-bin histogram per channel, without a float
    copy of the images.
    """
    values = np.arange(256, dtype=np.float64)
    mean, std = [], []
    for c in range(x.shape[-1]):
        counts = np.bincount(x[..., c].ravel(), minlength=256)
        m = counts @ values / counts.sum()
        var = counts @ (values - m) ** 2 / counts.sum()
        mean.append(m)
        std.append(np.sqrt(var))
    std = np.maximum(np.asarray(std), 1e-6)
    return np.asarray(mean, np.float32), std.astype(np.float32)


def _standardize(x, mean, std):
    out = x.astype(np.float32)
    out -= mean
    out /= std
    return out
