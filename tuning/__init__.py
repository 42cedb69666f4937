"""The studies of keras-affine-div: study files, the sweep runner, results.

`python -m tuning.sweep STUDY` runs one study (see `tuning/README.md`).
Every tool is a module of this package, so this runs before any of them
imports TensorFlow (directly, through tensorflow-datasets or as the Keras
backend): TensorFlow's start-up messages are silenced unless the
environment says otherwise.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
