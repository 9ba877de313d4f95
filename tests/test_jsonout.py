"""Strict JSON output, and entries encoded once where they were built."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from grpofit.core.jsonout import Encoded, dumps, jsonable


def test_jsonable_cleans_numpy_tuples_and_non_finite():
    doc = jsonable({"a": np.float64(1.5), "b": (1, np.int64(2)), "c": math.nan, "d": np.array([1.0, np.inf]), 1: None})
    assert doc == {"a": 1.5, "b": [1, 2], "c": None, "d": [1.0, None], "1": None}
    json.dumps(doc, allow_nan=False)


@pytest.mark.parametrize(
    "doc",
    [
        {
            "schema": "s",
            "runs": [{"a": 1, "b": [1, 2, {"c": None}], "d": {}}, {"z": "q\u0000grpofit:0\u0000"}],
            "gate": {"passed": True, "why": {"x": [1, {"y": 2.5}]}},
            "s": "\u0000",
            "empty": [],
        },
        {"runs": []},
        [{"k": "v"}, [{"deep": {"deeper": [1, 2]}}]],
    ],
)
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


def _random_tree(rng, depth=0):
    kind = rng.integers(0, 9 if depth < 4 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return bool(rng.integers(0, 2))
    if kind == 2:
        return int(rng.integers(-(10**12), 10**12)) * int(rng.choice([1, 10**9]))
    if kind == 3:
        return float(rng.choice([0.0, -0.0, 1e-300, 1e300, 0.1, 2.5])) * float(rng.standard_normal())
    if kind in (4, 5):
        return "".join(rng.choice(list('ab"\\\n\t\u0000é☃𝄞 /'), size=int(rng.integers(0, 6))))
    if kind == 6:
        return [_random_tree(rng, depth + 1) for _ in range(int(rng.integers(0, 4)))]
    keys = ["k", "é", 'a"b', "", "x\n"]
    return {str(rng.choice(keys)) + str(i): _random_tree(rng, depth + 1) for i in range(int(rng.integers(0, 4)))}


def test_indented_is_json_dumps_byte_for_byte():
    """The fast indented encoder gives json.dumps(indent=2)'s exact text, and its errors."""
    from grpofit.core.jsonout import indented

    rng = np.random.default_rng(7)
    for _ in range(400):
        doc = _random_tree(rng)
        assert indented(doc) == json.dumps(doc, indent=2, allow_nan=False)
    odd = {1: "int key", None: [1.5, True], "t": (1, 2), "nested": Encoded.of({"a": [1, {"b": None}]})}
    assert indented(odd) == json.dumps(odd, indent=2, allow_nan=False)
    made = Encoded.of({"a": [1, {"b": "x\ny"}], "c": {}})
    assert made.text  # its own text, spliced at any depth with the depth's indent
    doc = {"runs": [made, {"deeper": [made]}], "one": made}
    assert dumps(doc) == indented(doc) == json.dumps(doc, indent=2, allow_nan=False)
    with pytest.raises(ValueError):
        indented({"a": [math.nan]})
