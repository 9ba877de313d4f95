"""Test data generators: seeded synthetic reward curves and runs with planted failures.

Not part of the analysis: the library never imports this package. Tests, benchmarks
(``tests/benchmarks``) and ``scripts/make_sample_logs.py`` use it to make data whose answer
is known: :mod:`grpofit.testing.synthetic` (the two laws plus noise) and
:mod:`grpofit.testing.planted` (whole runs, each with one failure mode planted at a known step).
"""
