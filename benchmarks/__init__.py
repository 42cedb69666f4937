"""What the layers cost: the layer-overhead benchmark and its profiling.

Run its modules from the repository root, `python -m benchmarks.<module>`
(see benchmarks/README.md). TensorFlow's C++ logging is quietened here,
before any module of the package imports Keras.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
