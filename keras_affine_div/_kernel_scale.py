"""The kernel initialisers of the models' `kernel_scale` (private)."""

import keras

from keras_affine_div import _validation


def initializer_factory(arm, kernel_scale, arms):
    """Checks `kernel_scale` and returns a function that makes one layer's
    kernel initialiser.

    `arms` is the registry `arm` comes from (`models.ARMS`), named in the
    error for an arm that does not take a scale. Each call makes a new
    initialiser: an unseeded Keras initialiser draws
    its seed when it is made, so one instance shared by several layers
    would give every one of them the same random values.
    """
    if kernel_scale is None:
        return lambda: None
    if not arm.scale_sensitive:
        raise ValueError(
            "Received an invalid value for argument `kernel_scale`. Expected "
            f"None for {arm.name!r}: its normaliser divides out the scale of "
            "the kernel before it, so the scale changes nothing the model "
            "computes. Variants that take it: "
            f"{', '.join(a.name for a in arms if a.family == arm.family and a.scale_sensitive)}. "
            f"Received: variant={arm.name!r}, kernel_scale={kernel_scale!r}"
        )
    kernel_scale = _validation.positive_float(kernel_scale, "kernel_scale")
    if arm.ours:
        return lambda: keras.initializers.RandomNormal(stddev=kernel_scale)
    # Keras' default, GlorotUniform, with its limit times `kernel_scale`.
    return lambda: keras.initializers.VarianceScaling(
        scale=kernel_scale**2, mode="fan_avg", distribution="uniform"
    )
