"""The studies of keras-affine-div: study files, the sweep runner, results.

`python -m tuning.sweep STUDY` runs one study (see `tuning/README.md`).
"""
