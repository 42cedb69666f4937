"""PyTorch profiler table of a training step (profiling, not run in CI).

The per-op times quoted in benchmarks/README.md for PyTorch: the models of
`layer_overhead.py` (conv 32x32x64->64 by default), 3 warm-up steps, then
5 profiled `train_on_batch` steps, ops sorted by their own CPU time.

    KERAS_BACKEND=torch python benchmarks/profiling/torch_profile.py \\
        [--case conv_32x32x64_64] [--models Conv2D,PatchNormConv2D]
"""

import argparse
import pathlib
import sys

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "benchmarks"))

import keras  # noqa: E402
import layer_overhead as lo  # noqa: E402
from torch.profiler import ProfilerActivity  # noqa: E402
from torch.profiler import profile  # noqa: E402

from keras_affine_div import layers as kad  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", default="conv_32x32x64_64")
    parser.add_argument("--models", default="Conv2D,PatchNormConv2D")
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args(argv)
    if keras.backend.backend() != "torch":
        parser.error("run with KERAS_BACKEND=torch")
    case = next(c for c in lo.CASES["default"] if c[0] == args.case)
    for candidate in args.models.split(","):
        model, x, y = lo.make_model(keras, kad, case, candidate)
        for _ in range(3):
            model.train_on_batch(x, y)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(args.steps):
                model.train_on_batch(x, y)
        print(f"===== {candidate}, {args.steps} steps")
        print(
            prof.key_averages().table(
                sort_by="self_cpu_time_total",
                row_limit=14,
                max_name_column_width=40,
            )
        )


if __name__ == "__main__":
    main()
