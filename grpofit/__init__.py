"""grpofit: fit, forecast and diagnose GRPO training runs from their logs."""

__version__ = "0.1.0"
