"""`from_config` of a Keras `Dense` or `Conv*D` config builds our layers.

Every key of the Keras layer's config is accepted and kept, the kernel
initialiser included (with a warning when it is a fan-in scaled one, as
Keras' default Glorot is); quantization is refused, never dropped.
"""

import warnings

import keras
import numpy as np
import pytest

from keras_affine_div import layers
from tests import testing

# (our class, a Keras layer with non-default arguments, input shape).
_DENSE = lambda: keras.layers.Dense(
    5,
    activation="relu",
    bias_initializer="ones",
    kernel_regularizer="l2",
    bias_constraint="non_neg",
    name="dense_in",
)
_CONV1D = lambda: keras.layers.Conv1D(
    4, 3, padding="causal", dilation_rate=2, activation="tanh", name="c1"
)
_CONV2D = lambda: keras.layers.Conv2D(
    4,
    3,
    strides=2,
    padding="same",
    groups=2,
    use_bias=False,
    activity_regularizer="l1",
    name="c2",
)
_CONV3D = lambda: keras.layers.Conv3D(
    2, (2, 3, 2), strides=(1, 2, 1), kernel_constraint="max_norm", name="c3"
)
CASES = [
    pytest.param(layers.AffineLikeDense, _DENSE, (2, 3), id="affine_dense"),
    pytest.param(layers.NormLikeDense, _DENSE, (2, 6, 3), id="norm_dense"),
    pytest.param(layers.AffineLikeConv1D, _CONV1D, (2, 9, 3), id="al_conv1d"),
    pytest.param(layers.PatchNormConv1D, _CONV1D, (2, 9, 3), id="pn_conv1d"),
    pytest.param(
        layers.AffineLikeConv2D, _CONV2D, (2, 7, 7, 4), id="al_conv2d"
    ),
    pytest.param(layers.PatchNormConv2D, _CONV2D, (2, 7, 7, 4), id="pn_conv2d"),
    pytest.param(
        layers.AffineLikeConv3D, _CONV3D, (1, 4, 6, 4, 2), id="al_conv3d"
    ),
    pytest.param(
        layers.PatchNormConv3D, _CONV3D, (1, 4, 6, 4, 2), id="pn_conv3d"
    ),
]
# Each class with its smallest arguments.
MINIMAL = [
    pytest.param(cls, kwargs, id=cls.__name__)
    for cls, kwargs in (
        (layers.AffineLikeDense, {"units": 2}),
        (layers.NormLikeDense, {"units": 2}),
        (layers.AffineLikeConv1D, {"filters": 2, "kernel_size": 1}),
        (layers.PatchNormConv1D, {"filters": 2, "kernel_size": 1}),
        (layers.AffineLikeConv2D, {"filters": 2, "kernel_size": 1}),
        (layers.PatchNormConv2D, {"filters": 2, "kernel_size": 1}),
        (layers.AffineLikeConv3D, {"filters": 2, "kernel_size": 1}),
        (layers.PatchNormConv3D, {"filters": 2, "kernel_size": 1}),
    )
]
_NO_QUANTIZATION = "do not implement quantization"


@pytest.mark.parametrize("cls,make_keras_layer,input_shape", CASES)
def test_from_keras_config_keeps_every_argument(
    cls, make_keras_layer, input_shape
):
    keras_layer = make_keras_layer()
    config = keras_layer.get_config()
    with pytest.warns(UserWarning, match="kernel_initializer=GlorotUniform"):
        layer = cls.from_config(config)
    ours = layer.get_config()
    for key, value in config.items():
        if key in ("dtype", "quantization_config"):
            continue
        assert ours[key] == value, key
    assert layer.dtype_policy.name == keras_layer.dtype_policy.name
    x = np.random.default_rng(0).standard_normal(input_shape)
    y = testing.to_numpy(layer(x.astype("float32")))
    assert y.shape == keras_layer.compute_output_shape(input_shape)
    assert np.isfinite(y).all()


@pytest.mark.parametrize("cls,make_keras_layer,input_shape", CASES[::3])
def test_keras_config_without_its_initializer_takes_the_default(
    cls, make_keras_layer, input_shape
):
    config = make_keras_layer().get_config()
    config["kernel_initializer"] = None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        layer = cls.from_config(config)
    assert isinstance(layer.kernel_initializer, keras.initializers.RandomNormal)
    assert layer.kernel_initializer.stddev == 0.5


def test_keras_config_with_a_unit_scale_initializer_does_not_warn():
    dense = keras.layers.Dense(3, kernel_initializer="random_normal")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        layers.AffineLikeDense.from_config(dense.get_config())


@pytest.mark.parametrize("cls,kwargs", MINIMAL)
def test_our_own_glorot_config_reloads_without_a_warning(cls, kwargs):
    layer = cls(**kwargs, kernel_initializer="glorot_uniform")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        revived = cls.from_config(layer.get_config())
    assert isinstance(
        revived.kernel_initializer, keras.initializers.GlorotUniform
    )


def test_glorot_from_a_keras_config_shrinks_the_outputs():
    # Why `from_config` warns: behind the division by the patch norm a
    # Glorot kernel gives outputs of std ~ sqrt(2 / (fan_in + fan_out)),
    # both fans counted over the 3x3 window (32 and 64 channels).
    conv = keras.layers.Conv2D(64, 3)
    x = np.random.default_rng(0).standard_normal((4, 10, 10, 32))
    x = x.astype("float32")
    stds = {}
    for initializer in ("glorot", None):
        config = conv.get_config()
        if initializer is None:
            config["kernel_initializer"] = None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            layer = layers.PatchNormConv2D.from_config(config)
        stds[initializer] = testing.to_numpy(layer(x)).std()
    expected = np.sqrt(2.0 / (3 * 3 * (32 + 64)))
    np.testing.assert_allclose(stds["glorot"], expected, rtol=0.1)
    np.testing.assert_allclose(stds[None], 0.5, rtol=0.1)


def test_keras_lora_config_keeps_lora():
    config = keras.layers.Dense(4, lora_rank=2, lora_alpha=4).get_config()
    layer = layers.AffineLikeDense.from_config(config)
    layer.build((None, 3))
    assert layer.lora_enabled
    assert (layer.lora_rank, layer.lora_alpha) == (2, 4)


@pytest.mark.parametrize("cls,kwargs", MINIMAL)
def test_quantization_config_must_be_none(cls, kwargs):
    cls(**kwargs, quantization_config=None)
    with pytest.raises(
        ValueError, match=f"{_NO_QUANTIZATION}.*Received: quantization_config"
    ):
        cls(**kwargs, quantization_config={"mode": "int8"})


@pytest.mark.parametrize("cls,kwargs", MINIMAL)
def test_quantized_dtype_policy_raises(cls, kwargs):
    with pytest.raises(
        ValueError, match=f"{_NO_QUANTIZATION}.*Received: dtype=.*int8"
    ):
        cls(**kwargs, dtype="int8_from_float32")


@pytest.mark.parametrize("cls", [layers.AffineLikeDense, layers.NormLikeDense])
def test_from_config_of_a_quantized_dense_raises(cls):
    dense = keras.layers.Dense(3)
    dense.build((None, 4))
    dense.quantize("int8")
    # `from_config` re-raises the constructor's error as a `TypeError`.
    with pytest.raises(TypeError, match=_NO_QUANTIZATION):
        cls.from_config(dense.get_config())
