"""grpofit: fit, forecast and diagnose GRPO training runs from their logs.

The Python API (see :mod:`grpofit.api`) loads lazily, so ``import grpofit`` stays instant:

    import grpofit
    runs = grpofit.read("logs/")
    res = grpofit.fit(runs[0])
"""

__version__ = "0.1.0"

#: public names and the module each one lives in (imported on first use)
_API = {
    "read": "grpofit.api",
    "fit": "grpofit.api",
    "diagnose": "grpofit.api",
    "forecast": "grpofit.api",
    "backtest": "grpofit.api",
    "predict": "grpofit.api",
    "Fit": "grpofit.api",
    "Diagnosis": "grpofit.api",
    "Forecast": "grpofit.api",
    "Backtest": "grpofit.api",
    "Prediction": "grpofit.api",
    "Document": "grpofit.api",
    "Run": "grpofit.core.runs",
}

__all__ = ["__version__", *_API]


def __getattr__(name: str):
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'grpofit' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_API))
