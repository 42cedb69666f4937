"""The one place with backend-specific code: gradients of a scalar function.

Everything else in the package is `keras.ops`. Keras 3 has no public,
backend-agnostic gradient call, so this module wraps each backend's own.
"""

import keras


def value_and_gradients(fn, args):
    """Evaluates `fn(*args)` and its gradients with respect to `args`.

    Args:
        fn: a function of tensors returning a scalar tensor. It may call Keras
            layers and models (their weights are treated as constants).
        args: a list of arrays or tensors to differentiate with respect to.

    Returns:
        tuple: `(value, grads)`, `value` a float and `grads` a list of NumPy
        arrays, one per entry of `args`, with their shapes.

    Raises:
        ValueError: for a backend other than tensorflow, jax or torch.
    """
    backend = keras.backend.backend()
    args = [keras.ops.convert_to_tensor(a) for a in args]
    if backend == "tensorflow":
        import tensorflow as tf

        with tf.GradientTape() as tape:
            for a in args:
                tape.watch(a)
            value = fn(*args)
        grads = tape.gradient(value, args)
    elif backend == "jax":
        import jax

        value, grads = jax.value_and_grad(
            lambda *xs: fn(*xs), argnums=tuple(range(len(args)))
        )(*args)
    elif backend == "torch":
        import torch

        args = [a.detach().clone().requires_grad_(True) for a in args]
        with torch.enable_grad():
            value = fn(*args)
            grads = torch.autograd.grad(value, args, allow_unused=True)
    else:
        raise ValueError(
            "Expected the tensorflow, jax or torch Keras backend, for which "
            f"gradients are implemented. Received: backend={backend!r}"
        )
    grads = [
        keras.ops.convert_to_numpy(keras.ops.zeros_like(a))
        if g is None
        else keras.ops.convert_to_numpy(g)
        for a, g in zip(args, grads)
    ]
    return float(keras.ops.convert_to_numpy(value)), grads
