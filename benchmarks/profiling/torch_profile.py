"""PyTorch profiler table of a training step (profiling, not run in CI).

The per-op times quoted in benchmarks/README.md for PyTorch: the models of
the benchmark (`benchmarks.cases`; conv 32x32x64->64 by default), 3
warm-up steps, then 5 profiled `train_on_batch` steps, ops sorted by their
own CPU time.

    KERAS_BACKEND=torch python -m benchmarks.profiling.torch_profile \\
        [--case conv_32x32x64_64] [--models Conv2D,PatchNormConv2D]
"""

import argparse

import keras
from torch.profiler import ProfilerActivity
from torch.profiler import profile

from benchmarks import cases as bench_cases


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", default="conv_32x32x64_64")
    parser.add_argument("--models", default="Conv2D,PatchNormConv2D")
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args(argv)
    if keras.backend.backend() != "torch":
        parser.error("run with KERAS_BACKEND=torch")
    case = bench_cases.case_named(args.case)
    for candidate in args.models.split(","):
        model, x, y = bench_cases.make_model(case, candidate)
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
