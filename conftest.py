"""Root pytest configuration: backend in the header, seeds, markers.

The suite runs on one Keras backend per process (`KERAS_BACKEND` is read at
import); `scripts/test_all_backends.sh` runs it once per backend.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import keras  # noqa: E402
import pytest  # noqa: E402

BACKENDS = ("tensorflow", "jax", "torch")
# The pass that runs the backend-independent tests (statistics, study files,
# reports, datasets, ...): once, not once per backend. PyTorch's, where the
# end-to-end sweeps they start take about half JAX's time on a CPU (JAX
# compiles each new shape).
# `KERAS_AFFINE_DIV_EVERY_BACKEND=1` runs them on every backend.
HOME_BACKEND = "torch"


def pytest_report_header(config):
    return (
        f"keras backend: {keras.backend.backend()} (keras {keras.__version__})"
    )


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: a test that takes > 10 s")
    config.addinivalue_line(
        "markers",
        "requires_backend(*names): run only on the named Keras backends",
    )
    config.addinivalue_line(
        "markers",
        "backend_independent: nothing the test checks depends on the Keras "
        f"backend; runs in the {HOME_BACKEND} pass only",
    )


def pytest_collection_modifyitems(config, items):
    backend = keras.backend.backend()
    every = os.environ.get("KERAS_AFFINE_DIV_EVERY_BACKEND") == "1"
    for item in items:
        if (
            item.get_closest_marker("backend_independent") is not None
            and backend != HOME_BACKEND
            and not every
        ):
            item.add_marker(
                pytest.mark.skip(
                    reason="backend-independent: runs in the "
                    f"{HOME_BACKEND} pass"
                )
            )
            continue
        marker = item.get_closest_marker("requires_backend")
        if marker is not None and backend not in marker.args:
            item.add_marker(
                pytest.mark.skip(
                    reason=f"requires backend {marker.args}, not {backend}"
                )
            )


@pytest.fixture(autouse=True)
def _seed_and_reset():
    keras.utils.set_random_seed(1337)
    yield
    keras.config.set_dtype_policy("float32")
    keras.backend.clear_session(free_memory=False)
