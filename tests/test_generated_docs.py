"""Generated files and the numbers the docs quote must match what the scripts produce now."""

from __future__ import annotations

import difflib
import importlib.util
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.doc_pages import docs_text

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"_script_{name}", ROOT / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


#: a number in a text log (CSV, JSONL, the .meta.json sidecars)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def _same_log(rebuilt: Path, committed: Path) -> str | None:
    """None when ``rebuilt`` is ``committed`` up to round-off (CPUs and BLAS builds differ in the
    last bits: the simulator's columns by about 1e-15, the sidecars' fitted values by 1e-9), else
    why not. Text files: the same text between the numbers, each number within 1e-6 relative;
    binary logs (TensorBoard, W&B): the same runs read back, values within 1e-6."""
    new, old = rebuilt.read_bytes(), committed.read_bytes()
    if new == old:
        return None
    try:
        new_text, old_text = new.decode(), old.decode()
    except UnicodeDecodeError:
        from grpofit.readers import read_path

        new_runs, old_runs = read_path(str(rebuilt)), read_path(str(committed))
        if [r.name.replace(str(rebuilt), "") for r in new_runs] != [
            r.name.replace(str(committed), "") for r in old_runs
        ]:
            return "other runs"
        for a, b in zip(new_runs, old_runs):
            if list(a.metrics) != list(b.metrics) or not np.allclose(a.steps, b.steps, rtol=1e-6):
                return "other steps or columns"
            if not all(
                np.allclose(a.metrics[k], b.metrics[k], rtol=1e-6, atol=1e-12, equal_nan=True) for k in a.metrics
            ):
                return "other values"
        return None
    if _NUMBER.sub("#", new_text) != _NUMBER.sub("#", old_text):
        return "other text"
    new_nums = np.array([float(x) for x in _NUMBER.findall(new_text)])
    old_nums = np.array([float(x) for x in _NUMBER.findall(old_text)])
    if not np.allclose(new_nums, old_nums, rtol=1e-6, atol=1e-12):
        return f"numbers differ by up to {np.max(np.abs(new_nums - old_nums)):.3g}"
    return None


@pytest.mark.slow
def test_sample_logs_rebuild(tmp_path):
    """The committed sample logs are what scripts/make_sample_logs.py writes now, to round-off."""
    out = tmp_path / "sample_logs"
    _load("make_sample_logs").main(out)
    committed = sorted(p.relative_to(ROOT / "sample_logs") for p in (ROOT / "sample_logs").rglob("*") if p.is_file())
    rebuilt = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    assert rebuilt == committed
    differ = {str(rel): why for rel in committed if (why := _same_log(out / rel, ROOT / "sample_logs" / rel))}
    assert differ == {}, f"rerun `python scripts/make_sample_logs.py`; these differ: {differ}"


def test_a_changed_sample_log_is_caught(tmp_path):
    old = tmp_path / "old.csv"
    old.write_text("step,reward\n1,0.5\n2,0.25000000000000006\n")
    new = tmp_path / "new.csv"
    new.write_text("step,reward\n1,0.5\n2,0.25\n")
    assert _same_log(new, old) is None
    new.write_text("step,reward\n1,0.5\n2,0.2501\n")
    assert "differ" in _same_log(new, old)
    new.write_text("step,score\n1,0.5\n2,0.25\n")
    assert _same_log(new, old) == "other text"


def _readme_section() -> str:
    text = docs_text()
    start = text.index("# The paper's exact reduction, reproduced")
    end = text.find("\n# ", start + 5)
    return text[start : end if end > 0 else len(text)]


@pytest.fixture(scope="module")
def sweep():
    """scripts/bandit_sweep.py's whole computation (about 20 s of CPU), done once for these tests."""
    b = _load("bandit_sweep")
    return b, b.build()


@pytest.mark.slow
def test_bandit_sweep_doc_is_what_the_script_writes_now(sweep):
    _, built = sweep
    committed = (ROOT / "docs" / "bandit_sweep.md").read_text(encoding="utf-8")
    if built["md"] != committed:
        diff = difflib.unified_diff(
            committed.splitlines(), built["md"].splitlines(), "committed", "now", lineterm="", n=0
        )
        pytest.fail(
            "rerun `python scripts/bandit_sweep.py`; docs/bandit_sweep.md differs:\n" + "\n".join(list(diff)[:40])
        )


def _e(x: float) -> str:
    return f"{x:.1e}".replace("e-0", "e-")


@pytest.mark.slow
def test_bandit_sweep_numbers_quoted_in_readme_are_recomputed(sweep):
    from grpofit import dynamics as dyn

    b, built = sweep
    readme = _readme_section()
    flat = " ".join(readme.split())
    doc = built["md"]
    fp, rows, thr, gs = built["fp"], built["rows"], built["thr"], built["gs"]
    K = fp.curvature
    # "p* = 0.514, K = 0.278, so eta K = 0.028"
    m = re.search(r"`p\* = ([\d.]+)`, `K = ([\d.]+)`, so `eta K = ([\d.]+)`", readme)
    assert m, "README no longer states p*, K, eta K in the expected form"
    assert m.groups() == (f"{fp.p:.3f}", f"{K:.3f}", f"{b.LR * K:.3f}")
    # threshold table: closed form, exact fixed delay, exact sawtooth, simulation
    for t in thr:
        mu = f"{t['mu']:g}"
        row = re.search(rf"^\| {re.escape(mu)} \| ([^|]+) \| ([^|]+) \| ([^|]+) \| ([^|]+) \|$", readme, re.M)
        assert row, f"README threshold row for mu={mu} missing"
        assert [c.strip() for c in row.groups()] == [f"{t['cf']:.2g}", str(t["fx"]), str(t["sw"]), str(t["sim"])]
    assert f"predicts its stability threshold exactly ({', '.join(str(t['sw']) for t in thr)})" in flat
    assert all(t["sw"] == t["sim"] for t in thr)
    # per-step growth: simulated linear response vs exact sawtooth, over the whole sweep
    diffs = [abs(r["sim_growth"] - r["sw_rho"]) for r in rows if r["sim_growth"] is not None]
    worst = max(diffs)
    assert np.isfinite(worst) and worst == max(
        abs(r["sim_growth"] - dyn.exact_sawtooth(b.LR, r["mu"], r["kref"], K, with_threshold=False).spectral_radius)
        for r in rows
        if r["sim_growth"] is not None
    )
    assert f"to within {_e(worst)} across the sweep" in flat
    assert f"max |difference| = {worst:.2e} over {len(diffs)} runs" in doc
    # regime agreement counts and the closed form's misses
    n = len(rows)
    assert sum(r["sim_label"] == r["sw_regime"] for r in rows) == n
    assert f"sawtooth regime in {n}/{n} runs" in doc and f"matches all {n} runs" in flat
    cf_ok = sum(b._cf_label(r["cf_regime"]) == r["sim_label"] for r in rows)
    assert f"closed-form regime (overdamped->monotone, underdamped->oscillatory) in {cf_ok}/{n}" in doc
    assert f"regime matches {cf_ok} of {n} runs" in flat
    unstable = sum(r["cf_regime"] == "unstable" and r["sim_label"] != "unstable" for r in rows)
    under = sum(r["cf_regime"] == "underdamped" and r["sim_label"] == "monotone" for r in rows)
    assert f"it calls {unstable} decaying runs unstable and {under} monotone runs underdamped" in flat
    ratios = [r["fit"]["timescale"] / r["cf_T"] for r in rows if r["fit"] and r["cf_T"] and r["fit"].get("timescale")]
    assert f"Fitted timescales are {min(ratios):.1f}-{max(ratios):.1f}x the closed form's" in flat
    # KL on the current policy: no threshold up to the longest refresh interval tried
    assert all(t["sw_split"] is None and "K_ref=512" in str(t["sim"]) for t in built["thr_cur"])
    assert "no threshold exists up to 512" in flat
    # group size: README table, signal factors, curvatures, variance ratio
    by_g = {r["G"]: r for r in gs}
    for G, label in ((4, "4"), (16, "16")):
        r = by_g[G]
        assert f"| {label} | {r['theory']:.3f} | {r['sim']:.3f} | {_e(r['var'])} |" in readme, G
    r0 = by_g[0]
    assert f"| exact (G -> inf) | {r0['theory']:.3f} | {r0['sim']:.3f} | 0 |" in readme
    assert f"the signal factor is {by_g[4]['signal']:.2f} for `G = 4`, {by_g[16]['signal']:.2f} for `G = 16`" in flat
    assert f"({by_g[4]['K']:.3f}, {by_g[16]['K']:.3f}, {by_g[0]['K']:.3f})" in flat
    ratio = by_g[4]["var"] / by_g[16]["var"]
    assert f"falls {ratio:.0f}-fold from `G = 4` to `G = 16`" in flat
    assert f"Late-run variance ratio G=4/G=16 = {ratio:.1f}" in doc


@pytest.mark.slow
@pytest.mark.subprocess
def test_sample_log_script_never_replaces_a_folder_it_did_not_write(tmp_path):
    import subprocess
    import sys

    keep = tmp_path / "docs"
    keep.mkdir()
    (keep / "notes.md").write_text("mine")
    p = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "make_sample_logs.py"), str(keep)], capture_output=True, text=True
    )
    assert p.returncode == 2 and "not a folder this script wrote" in p.stderr
    assert (keep / "notes.md").read_text() == "mine"
    p = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "make_sample_logs.py"), "--help"], capture_output=True, text=True
    )
    assert p.returncode == 0 and "usage" in p.stdout and not (ROOT / "--help").exists()
