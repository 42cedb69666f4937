"""Time of each op the layers add, on TensorFlow in graph mode (profiling).

The component times quoted in benchmarks/README.md ("Targets missed, and
why"): each expression alone under `tf.function` (no XLA, as
`jit_compile="auto"` resolves on a CPU-only TensorFlow), the median over 9
rounds of 30 calls, at the benchmark's shapes: conv 32x32x64->64 batch 64,
dense 3072->1024 batch 256.

    python -m benchmarks.profiling.tf_components [--calls 30]
"""

import argparse
import time

import numpy as np
import tensorflow as tf


def median_ms(fn, calls, rounds=9):
    fn()
    fn()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - start) / calls)
    return float(np.median(times)) * 1e3


def conv_components():
    x = tf.random.normal((64, 32, 32, 64))
    w = tf.random.normal((3, 3, 64, 64))
    b = tf.random.normal((64,))
    ones = tf.ones((3, 3, 1, 1))
    sq = tf.random.normal((64, 32, 32, 1)) ** 2
    s = tf.random.normal((64, 32, 32, 1))

    def conv(x, w):
        return tf.nn.conv2d(x, w, 1, "SAME")

    scale_and_shift = tf.function(jit_compile=True)(lambda c: c * s + b)
    divide_and_shift = tf.function(jit_compile=True)(
        lambda c, sq_norms: c * tf.math.rsqrt(sq_norms + 1e-3) + b
    )

    def patch_norm():
        n = tf.math.reduce_euclidean_norm(x, -1, keepdims=True)
        return conv(x, w) * tf.math.rsqrt(conv(n * n, ones) + 1e-3) + b

    def patch_norm_xla_tail():
        n = tf.math.reduce_euclidean_norm(x, -1, keepdims=True)
        return divide_and_shift(conv(x, w), conv(n * n, ones))

    return {
        "conv 32x32x64->64": lambda: conv(x, w),
        "conv + bias": lambda: conv(x, w) + b,
        "euclidean norm over channels": lambda: tf.math.reduce_euclidean_norm(
            x, -1, keepdims=True
        ),
        "square + sum over channels": lambda: tf.reduce_sum(
            tf.square(x), -1, keepdims=True
        ),
        "single-channel 3x3 conv": lambda: conv(sq, ones),
        "multiply by (b,h,w,1)": lambda: x * s,
        "bias add": lambda: x + b,
        "multiply + bias add": lambda: x * s + b,
        "multiply + bias add under XLA": lambda: scale_and_shift(x),
        "PatchNorm forward, all of it": patch_norm,
        "PatchNorm forward, tail under XLA": patch_norm_xla_tail,
    }


def dense_components():
    x = tf.random.normal((256, 3072))
    w = tf.random.normal((3072, 1024))
    g = tf.random.normal((256, 1024))
    u = tf.random.normal((256, 1))
    y = tf.random.normal((256, 3072))
    return {
        "matmul x @ W": lambda: tf.matmul(x, w),
        "matmul g @ W^T (input grad)": lambda: tf.matmul(
            g, w, transpose_b=True
        ),
        "matmul x^T @ g (kernel grad)": lambda: tf.matmul(
            x, g, transpose_a=True
        ),
        "euclidean norm of x": lambda: tf.math.reduce_euclidean_norm(
            x, -1, keepdims=True
        ),
        "x * (2u)": lambda: x * (2.0 * u),
        "add two (256, 3072)": lambda: x + y,
        "g * s (256, 1024)": lambda: g * u,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=30)
    args = parser.parse_args(argv)
    for title, components in (
        ("conv", conv_components()),
        ("dense", dense_components()),
    ):
        print(title)
        for name, fn in components.items():
            print(
                f"  {name:32s} {median_ms(tf.function(fn), args.calls):7.3f}"
                " ms",
                flush=True,
            )


if __name__ == "__main__":
    main()
