"""Test data generators: seeded synthetic reward curves, runs with planted failures, and
writers of the binary log formats.

Not part of the analysis: the library never imports this package. Tests, benchmarks
(``tests/benchmarks``) and ``scripts/make_sample_logs.py`` use it to make data whose answer
is known: :mod:`grpofit.testing.synthetic` (the two laws plus noise),
:mod:`grpofit.testing.planted` (whole runs, each with one failure mode planted at a known step)
and :mod:`grpofit.testing.writers` (TensorBoard event files and W&B ``.wandb`` files, which the
readers in :mod:`grpofit.readers` only read).
"""
