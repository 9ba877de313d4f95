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


def _readme_section() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("## The paper's exact reduction, reproduced")
    return text[start:text.index("\n## ", start + 5)]


def test_bandit_sweep_numbers_quoted_in_readme_and_doc_are_recomputed():
    import re

    import numpy as np

    from grpofit import dynamics as dyn
    from grpofit import simulation as sim

    b = _load("bandit_sweep")
    readme = _readme_section()
    doc = (ROOT / "docs" / "bandit_sweep.md").read_text(encoding="utf-8")
    fp = sim.fixed_point(b.ARMS, b.CORRECT, b.BETA, 0)
    K = fp.curvature
    # "p* = 0.514, K = 0.278, so eta K = 0.028"
    m = re.search(r"`p\* = ([\d.]+)`, `K = ([\d.]+)`, so `eta K = ([\d.]+)`", readme)
    assert m, "README no longer states p*, K, eta K in the expected form"
    assert m.groups() == (f"{fp.p:.3f}", f"{K:.3f}", f"{b.LR * K:.3f}")
    # threshold table: closed form, exact fixed delay, exact sawtooth, simulation
    thr = b.thresholds(fp)
    for t in thr:
        mu = f"{t['mu']:g}"
        row = re.search(rf"^\| {re.escape(mu)} \| ([^|]+) \| ([^|]+) \| ([^|]+) \| ([^|]+) \|$", readme, re.M)
        assert row, f"README threshold row for mu={mu} missing"
        assert [c.strip() for c in row.groups()] == [f"{t['cf']:.2g}", str(t["fx"]), str(t["sw"]), str(t["sim"])]
        cells = [t["mu"], t["cf"], t["fx"], t["theory_fx"], t["sw"], t["theory_sw"], t["sim"]]
        assert "| " + " | ".join(b.fmt(c) for c in cells) + " |" in doc
    # per-step growth: simulated linear response vs exact sawtooth, over the whole sweep
    diffs = []
    for mu in b.MOMENTA:
        for kref in b.KREFS:
            g = b.linear_growth(fp, mu, kref)
            if g is not None:
                diffs.append(abs(g - dyn.exact_sawtooth(b.LR, mu, kref, K, with_threshold=False).spectral_radius))
    worst = max(diffs)
    assert np.isfinite(worst)
    assert f"to within\n  {worst:.1e}".replace("e-0", "e-") in readme
    assert f"max |difference| = {worst:.2e} over {len(diffs)} runs" in doc
    # regime agreement counts the README quotes come from the doc's sweep table
    n = len(b.MOMENTA) * len(b.KREFS)
    assert f"sawtooth regime in {n}/{n} runs" in doc and f"matches all {n} runs" in readme
    cf = re.search(r"closed-form regime \(overdamped->monotone, underdamped->oscillatory\) in (\d+)/(\d+)", doc)
    assert cf and f"regime matches {cf.group(1)} of {cf.group(2)} runs" in readme
