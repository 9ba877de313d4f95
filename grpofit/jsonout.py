"""JSON output that honours the contract: one document, never NaN or infinity."""

from __future__ import annotations

import json
import math
from typing import Any


def jsonable(obj: Any) -> Any:
    """Recursively convert numpy scalars/arrays and tuples to plain JSON types; NaN/inf -> None."""
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, int):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    # numpy without importing it: scalars have .item(), arrays have .tolist()
    if hasattr(obj, "tolist"):
        return jsonable(obj.tolist())
    if hasattr(obj, "item"):
        return jsonable(obj.item())
    return str(obj)


def dumps(obj: Any, indent: int | None = 2) -> str:
    """Serialise ``obj`` as strict JSON (``allow_nan=False`` after cleaning)."""
    return json.dumps(jsonable(obj), indent=indent, allow_nan=False)
