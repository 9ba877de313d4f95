"""Strict JSON output, and entries encoded once where they were built."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from grpofit.jsonout import Encoded, dumps, jsonable


def test_jsonable_cleans_numpy_tuples_and_non_finite():
    doc = jsonable({"a": np.float64(1.5), "b": (1, np.int64(2)), "c": math.nan, "d": np.array([1.0, np.inf]),
                    1: None})
    assert doc == {"a": 1.5, "b": [1, 2], "c": None, "d": [1.0, None], "1": None}
    json.dumps(doc, allow_nan=False)


@pytest.mark.parametrize("doc", [
    {"schema": "s", "runs": [{"a": 1, "b": [1, 2, {"c": None}], "d": {}}, {"z": "q\u0000grpofit:0\u0000"}],
     "gate": {"passed": True, "why": {"x": [1, {"y": 2.5}]}}, "s": "\u0000", "empty": []},
    {"runs": []},
    [{"k": "v"}, [{"deep": {"deeper": [1, 2]}}]],
])
def test_encoded_entries_splice_to_the_same_bytes(doc):
    """Entries given as :class:`Encoded` (in a list, as a dict value, nested) give exactly the
    document ``json.dumps(indent=2)`` gives, whatever their content."""
    want = json.dumps(doc, indent=2, allow_nan=False)

    def encode(obj, depth=0):
        if isinstance(obj, dict):
            inner = {k: encode(v, depth + 1) for k, v in obj.items()}
            return Encoded.of(inner) if depth else inner
        if isinstance(obj, list):
            return [encode(v, depth + 1) for v in obj]
        return obj

    assert dumps(encode(doc)) == want
    assert dumps(doc) == want
    assert dumps(encode(doc), indent=None) == json.dumps(doc, allow_nan=False)


def test_encoded_text_is_made_once():
    e = Encoded.of({"a": np.float64(2.0), "b": math.inf})
    assert e == {"a": 2.0, "b": None}
    assert e.text is e.text and json.loads(e.text) == e
