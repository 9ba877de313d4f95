"""The one thing pyproject.toml cannot say: grpofit's optional compiled kernel.

``grpofit/_filter.c`` (the state-space intervals' per-cell arithmetic: columns, transitions,
Kalman filter, levels, mixture quantiles) is built where a C compiler is available; where it is
not, the build goes on without it (``optional=True``) and grpofit runs the same arithmetic in
numpy (grpofit.runtime.compiled.compiled_filter), equal to round-off.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("grpofit._filter", ["grpofit/_filter.c"], optional=True)])
