"""The one place with backend-specific code.

Everything else in the package is `keras.ops`. Two things need more:

- `value_and_gradients`: Keras 3 has no public, backend-agnostic gradient
  call, so this wraps each backend's own.
- `squared_norm`: the `sum(x**2)` behind every layer's divisor, in one pass
  over `x` forward and one backward where the backend does not fuse the
  plain expression itself.
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


def squared_norm(x, axis=-1):
    """`sum(x**2, axis=axis, keepdims=True)`, one pass over `x` each way.

    Every layer divides by `sqrt(|x|^2 + c)` (or the patch version), and on a
    backend that runs ops one by one the plain expression costs more passes
    over the full-size input than the layer's matmul can hide: forward,
    `square` writes a copy of `x` that `sum` reads back; backward, autodiff
    broadcasts the upstream gradient to the input's shape, multiplies `x` by
    2, then multiplies the two.

    - JAX, and TensorFlow inside an XLA-compiled function (`jit_compile`):
      the plain expression. XLA fuses it (and on JAX forward-mode
      differentiation keeps working, which a custom gradient would end).
    - TensorFlow without XLA, and PyTorch: the backend's one-pass Euclidean
      norm reduction, squared, with the exact gradient `2 x u` (`u` the
      upstream gradient, broadcast in the same multiply) as a custom
      gradient. The gradient is written in differentiable ops, so second
      derivatives work.

    Args:
        x: a floating-point tensor (the layers pass float32 or float64).
        axis: the axis to reduce (an int).

    Returns:
        A tensor of `x`'s dtype and rank, of size 1 along `axis`.
    """
    backend = keras.backend.backend()
    if backend == "tensorflow" and not _in_tensorflow_xla_context():
        import tensorflow as tf

        def norm(x):
            return tf.math.reduce_euclidean_norm(x, axis=axis, keepdims=True)

    elif backend == "torch":
        import torch

        def norm(x):
            return torch.linalg.vector_norm(x, dim=axis, keepdim=True)

    else:
        return keras.ops.sum(keras.ops.square(x), axis=axis, keepdims=True)

    @keras.ops.custom_gradient
    def _squared_norm(x):
        n = norm(x)

        def grad(*args, upstream=None):
            # TensorFlow passes the upstream gradient positionally, PyTorch
            # by keyword (after the forward's inputs).
            if upstream is None:
                (upstream,) = args
            return x * (2.0 * upstream)

        return n * n, grad

    return _squared_norm(x)


def _in_tensorflow_xla_context():
    """Whether TensorFlow is tracing a function for XLA (`jit_compile`).

    XLA has no kernel for `EuclideanNorm`. TensorFlow exposes the check only
    privately; if that ever moves, this answers True, and `squared_norm`
    takes the plain path, which is correct everywhere.
    """
    try:
        import tensorflow as tf
        from tensorflow.python.ops import control_flow_util

        return bool(
            control_flow_util.GraphOrParentsInXlaContext(
                tf.compat.v1.get_default_graph()
            )
        )
    except Exception:  # noqa: BLE001 - fall back to the path that always works
        return True
