"""JSON output that honours the contract: one document, never NaN or infinity.

A large document (``diagnose`` of a thousand runs) is mostly its runs' entries. An entry can be
an :class:`Encoded` dict, whose JSON text is made once, where it was built (a ``--jobs`` worker,
in parallel); :func:`dumps` splices those texts into the document instead of encoding them again.
The output is byte for byte what encoding the whole document would give.
"""

from __future__ import annotations

import json
import math
import re
import secrets
from typing import Any

_INDENT = 2


def jsonable(obj: Any) -> Any:
    """Recursively convert numpy scalars/arrays and tuples to plain JSON types; NaN/inf -> None."""
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, int):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Encoded):
        return obj  # already clean
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


class Encoded(dict):
    """A clean (:func:`jsonable`) dict that keeps its own JSON text once it is asked for."""

    @classmethod
    def of(cls, obj: Any) -> "Encoded":
        return cls(jsonable(obj))

    @property
    def text(self) -> str:
        """``json.dumps(self, indent=2)``, made on first use."""
        cached = self.__dict__.get("_text")
        if cached is None:
            cached = self.__dict__["_text"] = json.dumps(dict(self), indent=_INDENT, allow_nan=False)
        return cached


def dumps(obj: Any, indent: int | None = _INDENT) -> str:
    """Serialise ``obj`` as strict JSON (``allow_nan=False`` after cleaning)."""
    clean = jsonable(obj)
    if indent != _INDENT:
        return json.dumps(clean, indent=indent, allow_nan=False)
    texts: list[str] = []
    # a fresh random tag per call: text from the logs (column names, run names) cannot know it,
    # so it can never be taken for a placeholder
    tag = secrets.token_hex(12)
    out = json.dumps(_placeholders(clean, texts, tag), indent=indent, allow_nan=False)
    if not texts:
        return out
    pattern = re.compile(r'^( *)([^\n]*?)"\\u0000grpofit-' + tag + r':(\d+)\\u0000"', re.M)

    def splice(m: re.Match) -> str:
        # the entry's further lines are indented like the line its placeholder is on
        pad = m.group(1)
        return m.group(1) + m.group(2) + texts[int(m.group(3))].replace("\n", "\n" + pad)

    spliced, n = pattern.subn(splice, out)
    if n != len(texts):  # pragma: no cover - a placeholder not on a line of its own
        return json.dumps(clean, indent=indent, allow_nan=False)
    return spliced


def _placeholders(obj: Any, texts: list[str], tag: str) -> Any:
    """``obj`` with every :class:`Encoded` replaced by a placeholder string (its text kept)."""
    if isinstance(obj, Encoded):
        texts.append(obj.text)
        return f"\0grpofit-{tag}:{len(texts) - 1}\0"
    if isinstance(obj, dict):
        return {k: _placeholders(v, texts, tag) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_placeholders(v, texts, tag) for v in obj]
    return obj
