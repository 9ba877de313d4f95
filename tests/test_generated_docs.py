"""Generated files and the numbers the docs quote must match what the scripts produce now."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"_script_{name}", ROOT / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_sample_logs_rebuild_byte_for_byte(tmp_path):
    out = tmp_path / "sample_logs"
    _load("make_sample_logs").main(out)
    committed = sorted(p.relative_to(ROOT / "sample_logs") for p in (ROOT / "sample_logs").rglob("*") if p.is_file())
    rebuilt = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    assert rebuilt == committed
    differ = [str(rel) for rel in committed if (out / rel).read_bytes() != (ROOT / "sample_logs" / rel).read_bytes()]
    assert differ == [], f"rerun `python scripts/make_sample_logs.py`; these differ: {differ}"
