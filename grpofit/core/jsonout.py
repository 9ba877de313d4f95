"""JSON output that honours the contract: one document, never NaN or infinity.

A large document (``diagnose`` of a thousand runs) is mostly its runs' entries. An entry can be
an :class:`Encoded` dict, whose JSON text is made once, where it was built (a ``--jobs`` worker,
in parallel); :func:`dumps` splices those texts into the document instead of encoding them again.
The output is byte for byte what ``json.dumps(doc, indent=2)`` gives (:func:`indented`).
"""

from __future__ import annotations

import json
import math
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
            cached = self.__dict__["_text"] = indented(dict(self))
        return cached


def dumps(obj: Any, indent: int | None = _INDENT) -> str:
    """Serialise ``obj`` as strict JSON (``allow_nan=False`` after cleaning)."""
    clean = jsonable(obj)
    if indent != _INDENT:
        return json.dumps(clean, indent=indent, allow_nan=False)
    return indented(clean)


class _Unusual(Exception):
    """A value :func:`_encode` leaves to the json module (a non-string key, an exotic type)."""


_ENCODE_STR = json.encoder.encode_basestring_ascii  # the C function json.dumps itself uses
_INF = float("inf")


def indented(obj: Any) -> str:
    """``json.dumps(obj, indent=2, allow_nan=False)``, byte for byte, in a fraction of its time.

    With an indent the json module encodes in pure Python, through a chain of generators (about
    a third of a millisecond per fitted run); this walks the tree once, appending to one list, and
    splices each :class:`Encoded` value's own text instead of encoding it again. Anything it does
    not handle the same way (a key that is not a string, a type json would reject or convert,
    NaN) is left to ``json.dumps`` itself, which then gives the same text or the same error."""
    parts: list[str] = []
    try:
        _encode(obj, parts, "\n")
    except (_Unusual, RecursionError):
        return json.dumps(obj, indent=_INDENT, allow_nan=False)
    return "".join(parts)


def _encode(o: Any, parts: list[str], pad: str) -> None:
    """Append the indented JSON of ``o``; ``pad`` is a line break plus the current indent."""
    if isinstance(o, str):
        parts.append(_ENCODE_STR(o))
    elif o is None:
        parts.append("null")
    elif o is True:
        parts.append("true")
    elif o is False:
        parts.append("false")
    elif isinstance(o, int):
        parts.append(int.__repr__(o))
    elif isinstance(o, float):
        if o != o or o == _INF or o == -_INF:
            raise _Unusual
        parts.append(float.__repr__(o))
    elif isinstance(o, (list, tuple)):
        if not o:
            parts.append("[]")
            return
        inner = pad + "  "
        sep = "[" + inner
        for v in o:
            parts.append(sep)
            _encode(v, parts, inner)
            sep = "," + inner
        parts.append(pad + "]")
    elif isinstance(o, dict):
        if isinstance(o, Encoded) and "_text" in o.__dict__:
            text = o.__dict__["_text"]
            parts.append(text if pad == "\n" else text.replace("\n", pad))
            return
        if not o:
            parts.append("{}")
            return
        inner = pad + "  "
        sep = "{" + inner
        for k, v in o.items():
            if not isinstance(k, str):
                raise _Unusual
            parts.append(sep)
            parts.append(_ENCODE_STR(k))
            parts.append(": ")
            _encode(v, parts, inner)
            sep = "," + inner
        parts.append(pad + "}")
    else:
        raise _Unusual


_RUNS = '"runs": []'


class RunsStream:
    """A document ``{"schema": ..., "runs": [...], ...}`` written as its runs come: the opening
    and each run's entry text (:attr:`Encoded.text`) at once, the rest of the document at
    :meth:`close`. The bytes are those :func:`dumps` gives for the whole document with the
    entries written as its runs (and a final line break), so a fleet's output needs no copy of
    all its entries at once."""

    def __init__(self, write, schema: str):
        self.write = write
        self.schema = schema
        self.count = 0

    def add(self, text: str) -> None:
        """Write one run's entry, given as ``json.dumps(entry, indent=2)``."""
        if not self.count:
            head = indented({"schema": self.schema, "runs": []}).partition(_RUNS)[0]
            self.write(head + '"runs": [\n    ')
        else:
            self.write(",\n    ")
        self.write(text.replace("\n", "\n    "))
        self.count += 1

    def close(self, doc: dict) -> None:
        """Write the rest of ``doc`` (its ``runs`` are the entries written, whatever it holds)."""
        rest = {"schema": self.schema, "runs": [], **{k: v for k, v in doc.items() if k not in ("schema", "runs")}}
        text = dumps(rest)
        if self.count:
            text = "\n  ]" + text.partition(_RUNS)[2]
        self.write(text + "\n")
