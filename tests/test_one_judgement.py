"""One judgement per run, rendered everywhere: on every shared real log and every
planted run, the verdict per failure mode, the collapse step and the plateau statement agree
across ``diagnose``, ``watch --once``, a replay through the Trainer callback, ``fit``,
``forecast``, ``compare`` and the API.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from grpofit.core.vocabulary import MODES
from tests.conftest import run_cli
from tests.reallogs import REAL_LOGS

ROOT = Path(__file__).resolve().parents[1]


REAL = REAL_LOGS
#: every failure mode of the vocabulary, the controls, a collapse that recovers, and a healthy run
#: with a rerun appended after it in the same file
PLANTED = ("healthy", *MODES, "dead", "recovery", "appended")


def real_files() -> list[Path]:
    if not REAL.is_dir():
        return []
    return sorted(p for p in REAL.iterdir() if p.is_file() and p.suffix != ".md")


def planted_file(tmp: Path, mode: str) -> Path:
    from grpofit.testing.planted import make_dead_run, make_planted_run

    if mode == "dead":
        table = make_dead_run(seed=1)
    elif mode == "recovery":  # a collapse the run recovers from
        table = make_planted_run("dynamical_instability", seed=1, kind="recovery")
    elif mode == "appended":  # a healthy run, then a rerun into the same file that collapses and recovers
        first = make_planted_run(None, seed=2)
        second = make_planted_run("dynamical_instability", seed=1, kind="recovery")
        table = {k: np.concatenate([first[k], second[k]]) for k in first}
    else:
        table = make_planted_run(None if mode == "healthy" else mode, seed=1)
    path = tmp / f"planted_{mode}.csv"
    cols = list(table)
    rows = np.column_stack([np.asarray(table[c], float) for c in cols])
    with open(path, "w") as f:
        f.write(",".join(cols) + "\n")
        for r in rows:
            f.write(",".join("" if not np.isfinite(x) else repr(float(x)) for x in r) + "\n")
    return path


def _json(capsys, *args) -> dict:
    code, out, err = run_cli(capsys, *args, "--format", "json")
    assert code in (0, 1), err
    return json.loads(out)


def _plateau_of(fit_entry: dict | None):
    """(kind, value) of the preferred law's plateau as ``fit`` states it."""
    if not fit_entry or not fit_entry.get("preferred"):
        return None
    p = fit_entry["models"][fit_entry["preferred"]]["params"].get("plateau") or {}
    if p.get("value") is None:
        return None
    kind = p.get("kind", "estimate")
    return kind, (p["bound"] if kind in ("lower_bound", "upper_bound") else p["value"])


def _collapse_of(entry: dict | None):
    """``(step, recovered_step)`` of the collapse an entry names (recovered_step None unless it
    recovered), or None."""
    c = (entry or {}).get("collapse")
    if not c:
        return None
    return c.get("step"), (c.get("recovered_step") if c.get("recovered") else None)


def _callback_verdicts(run) -> dict:
    """A replay of the run's logged rows through the Trainer callback, judged at the end."""
    from types import SimpleNamespace

    from grpofit.integrations import GrpofitCallback

    cb = GrpofitCallback(every=10**9, forecast=False, background=False, name=run.name)
    state = SimpleNamespace(global_step=0, max_steps=0, log_history=[])
    control = SimpleNamespace(should_training_stop=False)
    cols = {k: np.asarray(v, float) for k, v in run.metrics.items() if k in run.numeric_columns()}
    for i, step in enumerate(run.steps):
        state.global_step = float(step)
        logs = {k: float(v[i]) for k, v in cols.items() if np.isfinite(v[i])}
        if logs:
            cb.on_log(None, state, control, logs=logs)
    cb.update()
    return dict(cb.monitor.runs[run.name].verdicts)


def check_one_path(capsys, tmp_path, path: Path) -> None:
    import grpofit

    code, out, _ = run_cli(capsys, "diagnose", path, "--format", "json")
    if code == 2:  # nothing to judge (the HeteroRL grad-norm export has no reward): a clean error everywhere
        assert run_cli(capsys, "watch", path, "--once")[0] == 2
        return
    diag = json.loads(out)
    fit = _json(capsys, "fit", path)
    fc = _json(capsys, "forecast", path)
    api = grpofit.diagnose(str(path)).doc
    jsonl = tmp_path / f"{path.name}.jsonl"
    code, _, err = run_cli(capsys, "watch", path, "--once", "--no-forecast", "--jsonl", jsonl, "--exit-on", "fail")
    gate_failed = not diag["gate"]["passed"]
    assert code == (1 if gate_failed else 0), (path.name, code, err)  # watch --once exits as the gate does
    events = [json.loads(line) for line in jsonl.read_text().splitlines()]
    watched, watched_collapse, alerts = {}, {}, {}
    for e in events:
        if e["event"] == "alert":
            alerts[(e["run"], e["mode"])] = e
        if e["event"] == "forecast":
            watched[e["run"]] = e["verdicts"]
            watched_collapse[e["run"]] = _collapse_of(e)
    fits = {r["run"]: r for r in fit["runs"]}
    forecasts = {r["run"]: r for r in fc["runs"]}
    api_runs = {r["run"]: r for r in api["runs"]}
    runs = {r.name: r for r in grpofit.read(str(path))}
    for r in diag["runs"]:
        name = r["run"]
        verdicts = {m: v["status"] for m, v in r["diagnostics"].items()}
        where = f"{path.name} :: {name}"
        assert {m: v["status"] for m, v in api_runs[name]["diagnostics"].items()} == verdicts, where
        assert watched.get(name) == verdicts, where
        for mode, v in r["diagnostics"].items():  # a whole run's alerts quote diagnose's evidence and onset
            a = alerts.get((name, mode))
            assert (a is not None) == (v["status"] in ("warn", "fail")), (where, mode)
            if a is not None:
                assert (a["status"], a["evidence"], a["onset"]) == (v["status"], v["evidence"], v["start_step"]), where
        if name in runs:
            assert _callback_verdicts(runs[name]) == verdicts, where
        collapse = _collapse_of(r)
        assert _collapse_of(fits[name]) == collapse, where
        assert watched_collapse.get(name) == collapse, where
        assert _collapse_of(api_runs[name]) == collapse, where
        if name in forecasts:
            assert _collapse_of(forecasts[name]) == collapse, where
            fp = forecasts[name].get("plateau") or {}
            if fp.get("source") == "fit":  # the forecast states the fit's plateau
                want = _plateau_of(fits[name])
                assert want is not None and fp["kind"] == want[0], where
                assert fp["value"] == pytest.approx(want[1], rel=1e-9), where
        assert _plateau_of(r.get("fit")) == _plateau_of(fits[name]), where
        if name in runs and fits[name].get("preferred"):
            statement = grpofit.fit(runs[name]).plateau
            want = _plateau_of(fits[name])
            assert (statement is None) == (want is None), where
            if want is not None:
                assert statement["kind"] == want[0] and statement["value"] == pytest.approx(want[1], rel=1e-9), where


@pytest.mark.slow
@pytest.mark.parametrize("mode", PLANTED)
def test_planted_runs_get_one_judgement(capsys, tmp_path, mode):
    check_one_path(capsys, tmp_path, planted_file(tmp_path, mode))


@pytest.mark.slow
@pytest.mark.parametrize("name", [p.name for p in real_files()])
def test_real_logs_get_one_judgement(capsys, tmp_path, name):
    check_one_path(capsys, tmp_path, REAL / name)


@pytest.mark.slow
@pytest.mark.skipif(
    not (REAL / "heterorl_qwen3_1p7b_grpo_gepo_gspo.wandb_TrainReward.csv").exists(), reason="no shared real logs"
)
def test_compare_names_the_collapse_fit_names(capsys):
    hetero = REAL / "heterorl_qwen3_1p7b_grpo_gepo_gspo.wandb_TrainReward.csv"
    doc = _json(capsys, "compare", f"{hetero}::[paper]GRPO_online", f"{hetero}::[paper]GEPO_online")
    fit = {r["run"]: r for r in _json(capsys, "fit", hetero)["runs"]}
    grpo = next(v for k, v in fit.items() if k.endswith("GRPO_online"))
    assert [c["step"] for c in doc["a"]["collapses"]] == [grpo["collapse"]["step"]] == [892]
    assert doc["b"]["collapses"] == []
    assert "A collapses" in doc["summary"] and "at step 892" in doc["summary"]


@pytest.mark.slow
def test_a_collapse_that_recovered_is_named_the_same_everywhere(capsys, tmp_path):
    """A generated run whose reward falls back to its start at step ~121 and climbs back to its
    plateau at ~196 (the real dip-and-recover run reported no collapse): every surface names
    the collapse and its recovery at the same steps; the gate warns, it does not fail."""
    import grpofit

    path = planted_file(tmp_path, "recovery")
    check_one_path(capsys, tmp_path, path)
    diag = _json(capsys, "diagnose", path)
    r = diag["runs"][0]
    c = r["collapse"]
    assert c["recovered"] and 110 <= c["step"] <= 125 and 190 <= c["recovered_step"] <= 205
    dyn = r["diagnostics"]["dynamical_instability"]
    assert dyn["status"] == "warn" and diag["gate"]["passed"]
    assert f"collapsed at step {c['step']:g}" in dyn["evidence"]
    assert f"recovered by step {c['recovered_step']:g}" in dyn["evidence"]
    code, out, _ = run_cli(capsys, "fit", path)
    assert f"reward collapsed at step {c['step']:g}, recovered by step {c['recovered_step']:g}" in " ".join(out.split())
    fc = _json(capsys, "forecast", path, "--horizon", "600")["runs"][0]
    assert "recovered by step" in fc["note"] and "after the recovery" in fc["note"]
    doc = _json(capsys, "compare", path, path)
    assert doc["a"]["collapses"][0]["recovered_step"] == c["recovered_step"]
    assert f"recovered by step {c['recovered_step']:g}" in doc["summary"]
    run = grpofit.read(str(path))[0]
    assert _callback_verdicts(run)["dynamical_instability"] == "warn"
    assert grpofit.fit(run).collapse["recovered_step"] == c["recovered_step"]
