"""Help text built from the code's own registries (mode names, threshold names), so ``--help``
cannot drift from what the options accept. Built only when a help page or an error needs it."""

from __future__ import annotations


def threshold_names() -> list[str]:
    """Every ``--threshold`` name, sorted."""
    from grpofit.diagnostics.thresholds import Thresholds

    return sorted(d["name"] for d in Thresholds.documentation())


def diagnose_epilog() -> list[str]:
    """Paragraphs closing ``grpofit diagnose --help``: modes, statuses, the gate and thresholds."""
    from grpofit.core.vocabulary import MODES

    return [
        "Modes (for --fail-on): " + ", ".join(MODES) + ".",
        "Gate: a run fails when a --fail-on mode is fail (with --strict: warn too) or its R² is below "
        "--min-r2; a fail in another mode is shown and counts as a warning. Exit 0 passed, 1 failed, "
        "2 bad input.",
        "Thresholds (for --threshold NAME=VALUE; defaults and meanings in the README): "
        + ", ".join(threshold_names())
        + ".",
    ]
