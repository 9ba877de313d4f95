"""Numbers for JSON documents: one coercion used by every result builder.

JSON has no NaN or infinity, and a result must never show a made-up number, so a value that
is missing, not a number, NaN or infinite becomes ``None`` (the documents' "unknown").
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["finite"]


def finite(x: Any, *, whole: bool = False) -> float | int | None:
    """``x`` as a JSON-safe float: ``None`` for ``None``, NaN, infinity and anything ``float()``
    cannot read (a string, a sequence). With ``whole=True`` an integral value comes back as an
    ``int`` (a step, a count), so JSON shows ``120`` and not ``120.0``.

    >>> finite(float("nan")) is None, finite("x") is None, finite(3), finite(3.0, whole=True)
    (True, True, 3.0, 3)
    """
    if x is None:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(v):
        return None
    return int(v) if whole and v.is_integer() else v
