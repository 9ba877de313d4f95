"""The README's memory table is the recorded ``scripts/memory_check.py --record`` run, rendered:
it cannot drift from ``docs/memory.json``, and every "met" follows from its own numbers."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("memory_check", ROOT / "scripts" / "memory_check.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_readme_memory_table_is_the_record():
    mc = _script()
    doc = json.loads(mc.RECORD.read_text())
    text = mc.README.read_text()
    assert text.count(mc.README_START) == 1 and text.count(mc.README_END) == 1
    assert mc.readme_block(doc) in text
    assert [r["rows"] for r in doc["runs"]] == sorted(r["rows"] for r in doc["runs"])
    for r in doc["runs"]:
        assert r["n_points"] == r["rows"]  # the whole file was fitted
        assert r["target_mb"] == round(mc.target_mb(r["file_mb"]), 1)
        assert r["met"] == (r["peak_rss_mb"] <= r["target_mb"])
    assert {r["rows"] for r in doc["runs"]} >= {1_000_000, 10_000_000}  # the two sizes the issues name


def test_record_rewrites_only_the_block(tmp_path):
    mc = _script()
    readme, rec = tmp_path / "README.md", tmp_path / "memory.json"
    readme.write_text(f"# x\n\nbefore\n{mc.README_START}\nold\n{mc.README_END}\nafter\n")
    doc = {
        "recorded": "2026-01-01",
        "machine": {"python": "3.11", "numpy": "2", "load_average_at_start": 1.0},
        "runs": [
            {
                "rows": 10,
                "n_points": 10,
                "file_mb": 1.0,
                "peak_rss_mb": 120.0,
                "target_mb": 103.0,
                "wall_s": 1.0,
                "met": False,
            }
        ],
    }
    mc.record(doc, rec, readme)
    text = readme.read_text()
    assert text.startswith("# x\n\nbefore\n") and text.endswith(f"{mc.README_END}\nafter\n") and "old" not in text
    assert "| 10 | 1.0 MB | 120 MB | 103 MB | NO |" in text
    assert json.loads(rec.read_text()) == doc
