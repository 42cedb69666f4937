"""Runs every notebook in notebooks/ top to bottom in small-data mode.

Each notebook executes in a fresh kernel of this interpreter, in
`notebooks/`, with `KERAS_AFFINE_DIV_SMALL=1` and the backend of this test
process. No cell may raise, and every plot cell (tagged `plot`, or calling
`plt.show()`) must display an image. The notebooks on disk are not changed.

The quickstart runs on every backend; each other notebook on one
(`BACKENDS`), taken in turn: their code is backend-agnostic Keras, and the
layers, diagnostics and tuner code under them run on every backend in
their own tests.
"""

import json
import pathlib
import sys

import keras
import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
jupyter_client = pytest.importorskip("jupyter_client")

NOTEBOOKS_DIR = pathlib.Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))
CELL_TIMEOUT_S = 600
ALL_BACKENDS = ("tensorflow", "jax", "torch")
# The backends each notebook runs on.
BACKENDS = {
    "01_quickstart": ALL_BACKENDS,
    "02_affine_divergence": ("torch",),
    "03_tuner_sweep": ("tensorflow",),
    "04_patchnorm": ("tensorflow",),
    "05_attention": ("torch",),
    "06_keras_hub": ("jax",),
}
KERNEL_NAME = "keras-affine-div-test"


def _is_plot_cell(cell):
    return cell.cell_type == "code" and (
        "plot" in cell.metadata.get("tags", []) or "plt.show()" in cell.source
    )


def _kernel_manager(kernel_dir):
    """A kernel manager running this interpreter, whatever is installed.

    A `python3` kernelspec of the user's could point at another Python;
    this one is written to a temporary folder and is the only one seen.
    """
    spec_dir = kernel_dir / KERNEL_NAME
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [
                    sys.executable,
                    "-m",
                    "ipykernel_launcher",
                    "-f",
                    "{connection_file}",
                ],
                "display_name": "keras-affine-div tests",
                "language": "python",
            }
        )
    )
    spec_manager = jupyter_client.kernelspec.KernelSpecManager(
        kernel_dirs=[str(kernel_dir)], ensure_native_kernel=False
    )
    return jupyter_client.manager.AsyncKernelManager(
        kernel_name=KERNEL_NAME, kernel_spec_manager=spec_manager
    )


def test_there_are_notebooks():
    assert [p.name for p in NOTEBOOKS] == [
        "01_quickstart.ipynb",
        "02_affine_divergence.ipynb",
        "03_tuner_sweep.ipynb",
        "04_patchnorm.ipynb",
        "05_attention.ipynb",
        "06_keras_hub.ipynb",
    ]


def test_every_notebook_runs_on_some_backend():
    assert set(BACKENDS) == {p.stem for p in NOTEBOOKS}
    for backends in BACKENDS.values():
        assert backends and set(backends) <= set(ALL_BACKENDS)


@pytest.mark.slow
@pytest.mark.parametrize(
    "path",
    [
        pytest.param(
            p, marks=pytest.mark.requires_backend(*BACKENDS.get(p.stem, ()))
        )
        for p in NOTEBOOKS
    ],
    ids=[p.stem for p in NOTEBOOKS],
)
def test_notebook_runs_in_small_mode(path, tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_AFFINE_DIV_SMALL", "1")
    monkeypatch.setenv("KERAS_BACKEND", keras.backend.backend())
    # The inline backend, even where the environment asks for Agg.
    monkeypatch.setenv(
        "MPLBACKEND", "module://matplotlib_inline.backend_inline"
    )
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        km=_kernel_manager(tmp_path / "kernels"),
        timeout=CELL_TIMEOUT_S,
        resources={"metadata": {"path": str(NOTEBOOKS_DIR)}},
    )
    client.execute()  # raises CellExecutionError on the first failing cell

    errors = [
        output
        for cell in nb.cells
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
        if output.output_type == "error"
    ]
    assert not errors, errors
    plot_cells = [cell for cell in nb.cells if _is_plot_cell(cell)]
    assert plot_cells, f"{path.name} has no plot cell"
    for cell in plot_cells:
        images = [
            output
            for output in cell.get("outputs", [])
            if "image/png" in output.get("data", {})
        ]
        assert images, (
            f"{path.name}: this plot cell displayed no image:\n{cell.source}"
        )
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.execution_count is not None, cell.source
