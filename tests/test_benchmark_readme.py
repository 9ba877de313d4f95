"""The README's performance table is the recorded benchmark's, rendered: it cannot drift."""

from __future__ import annotations

import json

from benchmarks.__main__ import (
    README,
    README_END,
    README_START,
    RECORD,
    SECTIONS,
    Report,
    _row_section,
    readme_block,
    record,
)


def test_readme_table_is_the_recorded_benchmark():
    """``python -m benchmarks --record`` wrote docs/benchmark.json and the README's table
    from it; a hand edit of either shows here."""
    text = README.read_text()
    assert text.count(README_START) == 1 and text.count(README_END) == 1
    if not RECORD.exists():  # nothing recorded yet: nothing may stand between the markers
        assert f"{README_START}\n{README_END}" in text
        return
    doc = json.loads(RECORD.read_text())
    assert readme_block(doc) in text
    assert {r["section"] for r in doc["rows"]} and set(doc["sections"]) <= set(SECTIONS)
    assert {_row_section(r["section"]) for r in doc["rows"]} <= set(SECTIONS)


def _report(sections, rows):
    rep = Report(
        machine={
            "cpu": "c",
            "cores": 2,
            "usable_cores": 2,
            "memory_gb": 1,
            "python": "3",
            "numpy": "2",
            "scipy": "1",
            "grpofit": "0",
            "load_average_at_start": [1.0],
        },
        config={"quick": False, "repeats": 3, "sections": sections},
    )
    for r in rows:
        rep.add(*r)
    return rep


def test_record_merges_sections_and_rewrites_only_the_block(tmp_path):
    readme, rec = tmp_path / "README.md", tmp_path / "bench.json"
    readme.write_text(f"# x\n\nbefore\n{README_START}\nold table\n{README_END}\nafter\n")
    record(_report(["fit"], [("1 fit", "120 runs", "1.2 s", "plain 1 s", "<= 1.0", "MISS")]), rec, readme)
    record(_report(["readers"], [("4b readers", "csv", "2 ms", "pandas 1 ms", "<= 1.5x", "ok")]), rec, readme)
    doc = json.loads(rec.read_text())
    assert [r["section"] for r in doc["rows"]] == ["1 fit", "4b readers"]  # fit kept, table order
    text = readme.read_text()
    assert text.startswith("# x\n\nbefore\n") and text.endswith(f"{README_END}\nafter\n")
    assert "old table" not in text and readme_block(doc) in text
    assert "- 1 fit, 120 runs: 1.2 s against plain 1 s (target <= 1.0)" in text  # the misses are listed
    record(_report(["fit"], [("1 fit", "120 runs", "0.9 s", "plain 1 s", "<= 1.0", "ok")]), rec, readme)
    doc = json.loads(rec.read_text())
    assert [r["result"] for r in doc["rows"]] == ["0.9 s", "2 ms"]  # a section run again replaces its rows


def test_every_section_of_the_table_maps_back_to_its_benchmark(tmp_path):
    """Re-recording a section replaces its rows, for every section the benchmark has (the watch
    section's rows used to pile up: its table name did not map back)."""
    from benchmarks.__main__ import SECTIONS

    labels = {
        "fit": "1 fit",
        "startup": "2 start-up",
        "sweep": "3 sweep",
        "reading": "4 reading",
        "readers": "4b readers",
        "long_fit": "4c long run",
        "growth": "5 growth",
        "watch": "6 watch",
        "forecast": "7 forecast",
        "fitcost": "8 fitcost",
        "peers": "9 peers",
        "plots": "10 plots",
        "callback": "11 callback",
    }
    assert set(labels) == set(SECTIONS)
    readme, rec = tmp_path / "README.md", tmp_path / "bench.json"
    readme.write_text(f"{README_START}\n{README_END}\n")
    for name, label in labels.items():
        assert _row_section(label) == name
        for result in ("1 s", "2 s"):
            record(_report([name], [(label, "m", result, "", "", "")]), rec, readme)
    doc = json.loads(rec.read_text())
    assert [r["section"] for r in doc["rows"]] == list(labels.values())
    assert {r["result"] for r in doc["rows"]} == {"2 s"}
