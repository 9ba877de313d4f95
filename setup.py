"""The one thing pyproject.toml cannot say: grpofit's optional compiled kernel.

``grpofit/_filter.c`` (the state-space intervals' per-cell arithmetic: columns, transitions,
Kalman filter, levels, mixture quantiles) is built where a C compiler is available; where it is
not, the build goes on without it (``optional=True``) and grpofit runs the same arithmetic in
numpy (grpofit.runtime.compiled.compiled_filter). It must be built
without fused multiply-add or fast-math, so that it gives the numpy code's bits.
"""

import sys

from setuptools import Extension, setup

flags = [] if sys.platform == "win32" else ["-O2", "-ffp-contract=off", "-fno-fast-math"]

setup(ext_modules=[Extension("grpofit._filter", ["grpofit/_filter.c"], extra_compile_args=flags, optional=True)])
