"""The README's "Contributing" examples are real: each code block is planted as the module it
names, its registry row is added, and the result is checked end to end."""

from __future__ import annotations

import json
import re
import sys
import types
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.doc_pages import docs_text

ROOT = Path(__file__).resolve().parents[1]
HEALTHY = ROOT / "sample_logs" / "healthy_slow_start.csv"


def _example(marker: str) -> str:
    """The python block after ``<!-- contributing:MARKER -->`` in CONTRIBUTING.md."""
    text = docs_text()
    found = re.search(rf"<!-- contributing:{marker} -->\s*```python\n(.*?)```", text, re.S)
    assert found, f"README lost its {marker} example"
    return found.group(1)


def _plant(monkeypatch, name: str, code: str) -> types.ModuleType:
    module = types.ModuleType(name)
    exec(compile(code, f"README:{name}", "exec"), module.__dict__)
    monkeypatch.setitem(sys.modules, name, module)
    return module


def test_the_format_example_is_sniffed_read_and_discovered(tmp_path, monkeypatch, capsys):
    from grpofit.readers import discover, registry

    steplog = _plant(monkeypatch, "grpofit.readers.steplog", _example("format"))
    row = registry.Format("steplog", "grpofit.readers.steplog:read_steplog", steplog.is_steplog, suffixes=(".steplog",))
    table = (row,) + registry.FORMATS_TABLE
    monkeypatch.setattr(registry, "FORMATS_TABLE", table)
    monkeypatch.setattr(registry, "_BY_NAME", {f.name: f for f in table})
    discover_module = sys.modules["grpofit.readers.discover"]
    monkeypatch.setattr(discover_module, "_SUFFIXES", None)
    path = tmp_path / "run.steplog"
    lines = [f"{s} {0.8 - 0.6 * 0.97**s:.4f}" for s in range(0, 300, 2)]
    path.write_text("#steplog\n" + "\n".join(lines) + "\n")
    code, out, err = run_cli(capsys, "inspect", path, "--format", "json")
    assert code == 0, err
    info = json.loads(out)
    assert info["format"] == "steplog" and info["runs"][0]["n_steps"] == 150
    code, out, err = run_cli(capsys, "fit", tmp_path, "--format", "json")  # found in a folder too
    assert code == 0, err
    fit = json.loads(out)["runs"][0]
    assert abs(fit["models"]["exponential"]["params"]["plateau"]["value"] - 0.8) < 0.01
    assert [s.path for s in discover([str(tmp_path)])] == [str(path)]
    monkeypatch.setattr(discover_module, "_SUFFIXES", None)


def test_the_rule_example_adds_its_finding_to_the_mode(monkeypatch, capsys):
    from grpofit.diagnostics import registry

    module = _plant(monkeypatch, "grpofit.diagnostics.reward_floor", _example("rule"))
    mode = "dynamical_instability"
    monkeypatch.setitem(registry.RULE_MODULES, mode, registry.RULE_MODULES[mode] + ("reward_floor",))
    monkeypatch.setitem(registry.RULES, mode, registry._load_rules()[mode])
    assert registry.RULES[mode][-1] is module.rules
    code, out, err = run_cli(capsys, "diagnose", HEALTHY, "--format", "json")
    rule = json.loads(out)["runs"][0]["diagnostics"][mode]["rules"]["reward_floor"]
    assert rule["status"] == "pass" and "above its start" in rule["evidence"]


def _law_run(path, law, seed):
    """A 400-step reward run of ``law`` (plateau 0.8 from 0.2, timescale 60) with seeded noise."""
    import numpy as np

    steps = np.arange(0, 800, 2.0)
    values = law(steps, 0.8, 0.2, 60.0) + np.random.default_rng(seed).normal(0.0, 0.01, steps.size)
    path.write_text("step,reward\n" + "".join(f"{s:g},{v:.6f}\n" for s, v in zip(steps, values)))
    return path


@pytest.mark.slow
def test_the_law_example_is_fitted_selected_tabled_and_plotted(tmp_path, monkeypatch, capsys):
    import grpofit
    from grpofit.laws import registry as laws
    from grpofit.laws.models import exponential

    law = _plant(monkeypatch, "grpofit.laws.hyperbolic", _example("law"))
    monkeypatch.setattr(laws, "LAWS", laws.LAWS + (law.HYPERBOLIC,))
    monkeypatch.setitem(laws.MODELS, "hyperbolic", law.HYPERBOLIC)
    hyper = _law_run(tmp_path / "hyper.csv", law.hyperbolic, 1)
    code, out, err = run_cli(capsys, "fit", hyper, "--format", "json")
    assert code == 0, err
    run = json.loads(out)["runs"][0]
    assert list(run["models"]) == ["exponential", "oscillator", "hyperbolic"]
    fitted = run["models"]["hyperbolic"]
    assert run["preferred"] == "hyperbolic", run["preferred_reason"]
    assert run["preferred_reason"].startswith("BIC lower by")
    assert abs(fitted["params"]["plateau"]["value"] - 0.8) < 0.02
    assert abs(fitted["params"]["timescale"]["value"] - 60.0) < 6.0
    lo, hi = fitted["params"]["timescale"]["ci95"]
    assert lo < 60.0 < hi and "regime" not in fitted
    assert fitted["r2"] > run["models"]["exponential"]["r2"]
    # the table has its column, its parameters under the registry's titles
    code, out, err = run_cli(capsys, "fit", hyper)
    assert code == 0, err
    assert "hyperbolic (preferred)" in out and "timescale 1/K_eff" in out
    # an exponential run: the hyperbolic law is fitted too but not preferred
    expo = _law_run(tmp_path / "expo.csv", exponential, 2)
    code, out, err = run_cli(capsys, "fit", expo, "--format", "json")
    run = json.loads(out)["runs"][0]
    assert run["preferred"] != "hyperbolic" and run["models"]["hyperbolic"]["params"]["plateau"]["value"] is not None
    # the plot draws it in its registry style
    fig = grpofit.fit(grpofit.read(str(hyper))[0]).plot()
    ax = fig.axes[0]
    lines = {line.get_label().split(" ")[0]: line for line in ax.get_lines()}
    assert lines["hyperbolic"].get_color() == "tab:green" and lines["hyperbolic"].get_linestyle() == ":"
