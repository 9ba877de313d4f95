"""The command line end to end: every command, every output format, the gate's exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from grpofit.laws.registry import MODELS
from tests.conftest import run_cli
from tests.doc_pages import docs_text
from tests.reallogs import REAL_LOGS

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_logs"
REAL = REAL_LOGS


def write_csv(path: Path, rows: list[tuple]) -> Path:
    path.write_text("step,reward\n" + "\n".join(f"{s},{r}" for s, r in rows) + "\n")
    return path


@pytest.fixture
def healthy_csv(tmp_path):
    from grpofit.testing.planted import make_planted_run

    table = make_planted_run(None, seed=1, n_steps=200)
    keys = list(table)
    lines = [",".join(keys)] + [
        ",".join("" if v != v else repr(float(v)) for v in (table[k][i] for k in keys)) for i in range(200)
    ]
    path = tmp_path / "healthy.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.slow
@pytest.mark.subprocess
def test_help_and_version_do_not_import_heavy_modules():
    code = (
        "import sys\n"
        "from grpofit.cli import main\n"
        "for argv in (['--help'], ['--version'], ['fit', '--help']):\n"
        "    try:\n"
        "        main(argv)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "heavy = [m for m in ('scipy', 'lmfit', 'pandas', 'matplotlib', 'numpy') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "HEAVY []" in out
    assert "grpofit 0." in out


@pytest.mark.slow
@pytest.mark.subprocess
def test_fit_path_imports_no_solver_library_and_uses_one_blas_thread(healthy_csv):
    """``grpofit fit`` imports neither scipy, lmfit, pandas nor pydantic (start-up), and sets
    one BLAS thread unless the user chose a number."""
    code = (
        "import os, sys\n"
        "from grpofit.cli import main\n"
        "try:\n"
        f"    main(['fit', {str(healthy_csv)!r}, '--format', 'json'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = [m for m in ('scipy', 'lmfit', 'pandas', 'pydantic', 'matplotlib') if m in sys.modules]\n"
        "print('HEAVY', heavy, 'BLAS', os.environ.get('OPENBLAS_NUM_THREADS'))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    assert "HEAVY [] BLAS 1" in out
    env["OPENBLAS_NUM_THREADS"] = "2"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    assert "BLAS 2" in out


@pytest.mark.subprocess
def test_python_dash_m_works():
    proc = subprocess.run([sys.executable, "-m", "grpofit", "--version"], capture_output=True, text=True)
    assert proc.returncode == 0
    assert proc.stdout.startswith("grpofit ")


def test_every_command_has_help_with_an_example(capsys):
    for command in (["fit"], ["diagnose"], ["predict"], ["inspect"], ["simulate", "bandit"]):
        code, out, _ = run_cli(capsys, *command, "--help")
        assert code == 0
        assert "Example" in out, command


def test_readme_documents_every_command():
    readme = docs_text()
    for command in ("grpofit fit", "grpofit diagnose", "grpofit predict", "grpofit simulate bandit", "grpofit inspect"):
        assert command in readme, command


def test_fit_json_matches_the_contract(capsys, healthy_csv):
    code, out, _ = run_cli(capsys, "fit", healthy_csv, "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["schema"] == "grpofit.fit/1"
    (run,) = doc["runs"]
    assert run["run"] == str(healthy_csv)
    assert run["metric"] == "reward" and run["step_column"] == "step"
    assert run["n_points"] == 200 and run["steps"] == [1, 200]
    assert set(run["models"]) == set(MODELS)
    assert set(run["models"]["exponential"]["params"]) == {"plateau", "initial", "timescale"}
    osc = run["models"]["oscillator"]
    assert set(osc["params"]) == {"plateau", "initial", "timescale", "inertia", "damping_ratio"}
    assert osc["regime"] in ("overdamped", "critical", "underdamped", "indeterminate")
    assert run["preferred"] in MODELS
    for model in run["models"].values():
        assert {"r2", "aic", "bic", "params"} <= set(model)
        for p in model["params"].values():
            assert {"value", "stderr", "ci95"} <= set(p)
    assert "NaN" not in out and "Infinity" not in out


def test_fit_several_runs_in_one_call_and_table(capsys, healthy_csv):
    code, out, _ = run_cli(capsys, "fit", healthy_csv, SAMPLES / "bandit_g16.csv")
    assert code == 0
    assert "plateau p*" in out and "oscillator" in out and "noise floor" in out
    assert out.count("quantity") == 2


@pytest.mark.slow
@pytest.mark.subprocess
def test_fit_reads_standard_input(healthy_csv):
    proc = subprocess.run(
        [sys.executable, "-m", "grpofit", "fit", "-", "--format", "json"],
        input=healthy_csv.read_bytes(),
        capture_output=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["runs"][0]["n_points"] == 200


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".png", ".svg", ".pdf"])
def test_fit_plot_formats(capsys, healthy_csv, tmp_path, suffix):
    out_file = tmp_path / f"fit{suffix}"
    code, _, _ = run_cli(capsys, "fit", healthy_csv, "--plot", out_file)
    assert code == 0
    assert out_file.stat().st_size > 1000


def test_fit_plot_with_unknown_suffix_is_a_usage_error(capsys, healthy_csv, tmp_path):
    code, _, err = run_cli(capsys, "fit", healthy_csv, "--plot", tmp_path / "fit.gif")
    assert code == 2
    assert "fit.gif" in err and ".png" in err


def test_fit_metric_override_and_missing_metric(capsys, healthy_csv):
    code, out, _ = run_cli(capsys, "fit", healthy_csv, "--metric", "entropy", "--format", "json")
    assert code == 0 and json.loads(out)["runs"][0]["metric"] == "entropy"
    code, _, err = run_cli(capsys, "fit", healthy_csv, "--metric", "nope")
    assert code == 2
    assert "nope" in err and "reward" in err and "--metric" in err
    assert len(err.strip().splitlines()) == 1


def _diagnose_json(capsys, *args):
    code, out, err = run_cli(capsys, "diagnose", *args, "--format", "json")
    return code, json.loads(out), err


@pytest.mark.slow
def test_diagnose_sample_logs_catches_each_planted_failure(capsys):
    code, doc, _ = _diagnose_json(capsys, SAMPLES)
    assert code == 1
    assert doc["schema"] == "grpofit.diagnose/1"
    runs = {Path(r["run"]).name if "::" not in r["run"] else r["run"]: r for r in doc["runs"]}
    by_name = {k.split("/")[-1]: v for k, v in runs.items()}
    assert by_name["healthy_slow_start.csv"]["verdict"] == "pass"
    assert by_name["checkpoint-400"]["diagnostics"]["dynamical_instability"]["status"] == "fail"
    assert by_name["dead_run"]["diagnostics"]["advantage_degeneracy"]["status"] == "fail"
    assert by_name["run-20261129_120000-hack01"]["diagnostics"]["train_eval_decoupling"]["status"] == "fail"
    for r in doc["runs"]:
        assert set(r["diagnostics"]) == {
            "train_eval_decoupling",
            "advantage_degeneracy",
            "policy_concentration",
            "dynamical_instability",
        }
        for d in r["diagnostics"].values():
            assert d["status"] in ("pass", "warn", "fail", "unknown") and d["evidence"]
        assert set(r["fit"]["models"]) == set(MODELS)
    assert doc["gate"]["passed"] is False
    assert set(doc["gate"]["failed_runs"]) == {r["run"] for r in doc["runs"] if r["verdict"] == "fail"}
    gs = doc["group_size"]  # the bandit at G = 4, 16, 32: its plateau moves with G (see the README)
    assert gs["testable"] and gs["experiment"].endswith("group_sweep")
    assert gs["plateau"]["verdict"] == "depends on G"
    assert gs["variance_scaling"]["consistent_with_1_over_G"]


@pytest.mark.slow
def test_diagnose_gate_codes(capsys, healthy_csv):
    code, doc, _ = _diagnose_json(capsys, healthy_csv)
    assert code == 0 and doc["gate"]["passed"] is True and doc["gate"]["failed_runs"] == []
    code, doc, _ = _diagnose_json(capsys, healthy_csv, "--min-r2", "0.9999")
    assert code == 1 and doc["gate"]["failed_runs"] == [str(healthy_csv)]
    dead = SAMPLES / "dead_run"
    code, _, _ = _diagnose_json(capsys, dead)
    assert code == 1
    code, _, _ = _diagnose_json(capsys, dead, "--fail-on", "dynamical_instability")
    assert code == 0
    code, _, err = run_cli(capsys, "diagnose", dead, "--fail-on", "bogus")
    assert code == 2 and "bogus" in err


@pytest.mark.slow
def test_diagnose_threshold_override_changes_a_verdict(capsys):
    run = SAMPLES / "collapse_run"
    code, doc, _ = _diagnose_json(capsys, run)
    assert code == 1 and doc["runs"][0]["diagnostics"]["dynamical_instability"]["status"] == "fail"
    assert "grad_norm" in doc["runs"][0]["diagnostics"]["dynamical_instability"]["evidence"]
    code, doc, _ = _diagnose_json(
        capsys, run, "--threshold", "rise_fail=100", "--threshold", "rise_warn=100", "--threshold", "spike_warn=100"
    )
    evidence = doc["runs"][0]["diagnostics"]["dynamical_instability"]["evidence"]
    assert "grad_norm" not in evidence and "reward collapses" in evidence
    code, _, err = run_cli(capsys, "diagnose", run, "--threshold", "nonsense=1")
    assert code == 2 and "nonsense" in err


@pytest.mark.slow
def test_diagnose_markdown_and_junit(capsys, tmp_path):
    junit = tmp_path / "report.xml"
    code, out, _ = run_cli(capsys, "diagnose", SAMPLES, "--format", "markdown", "--junit", junit)
    assert code == 1
    assert out.startswith("## grpofit diagnose")
    assert "| run | R² |" in out and "❌ fail" in out and "**Gate: failed**" in out
    _, doc, _ = _diagnose_json(capsys, SAMPLES)
    n_runs = len(doc["runs"])
    assert out.count("\n| ") == n_runs + 1  # header and one row per run
    root = ET.parse(junit).getroot()
    suites = root.findall("testsuite")
    assert len(suites) == n_runs
    cases = root.findall(".//testcase")
    assert len(cases) == n_runs * 4
    failures = root.findall(".//failure")
    assert any("dead run" in f.get("message", "") for f in failures)
    assert sum(int(s.get("failures")) for s in suites) == len(failures)


@pytest.mark.slow
def test_diagnose_table_is_one_table_with_evidence(capsys):
    code, out, _ = run_cli(capsys, "diagnose", SAMPLES)
    assert code == 1
    assert out.count("grpofit diagnose") == 1
    assert "verdict" in out and "dead run" in out
    assert "\x1b[" not in out  # no colour codes off a terminal


@pytest.mark.slow
def test_diagnose_jobs_two_gives_the_same_document(capsys):
    _, one, _ = _diagnose_json(capsys, SAMPLES, "--jobs", "1")
    _, two, _ = _diagnose_json(capsys, SAMPLES, "--jobs", "2")
    assert one == two


@pytest.mark.slow
def test_diagnose_plot_dir(capsys, tmp_path):
    code, _, _ = run_cli(capsys, "diagnose", SAMPLES / "collapse_run", "--plot-dir", tmp_path / "figs")
    assert code == 1
    (figure,) = list((tmp_path / "figs").iterdir())
    assert figure.suffix == ".png" and figure.stat().st_size > 10_000


def test_diagnose_one_unreadable_run_does_not_hide_the_others(capsys, tmp_path, healthy_csv):
    (tmp_path / "broken.jsonl").write_text('{"step": 1, "reward": 0.1}\n{"step": 2, "rew\n{"step": 3}\n')
    code, doc, err = _diagnose_json(capsys, tmp_path)
    assert code == 2
    assert [r["run"] for r in doc["runs"]] == [str(healthy_csv)]
    assert doc["errors"][0]["run"].endswith("broken.jsonl")
    assert "broken.jsonl" in err


@pytest.mark.slow
@pytest.mark.real_logs
def test_diagnose_joins_panel_exports_by_run_name_and_finds_the_collapse(capsys):
    code, doc, _ = _diagnose_json(
        capsys,
        REAL / "heterorl_qwen3_1p7b_grpo_gepo_gspo.wandb_TrainReward.csv",
        REAL / "heterorl_qwen3_1p7b_grpo_gepo_gspo.wandb_GradNorm.csv",
    )
    assert code == 1
    assert len(doc["runs"]) == 3
    grpo = next(r for r in doc["runs"] if r["run"].endswith("GRPO_online"))
    assert "TrainReward" in grpo["run"]
    inst = grpo["diagnostics"]["dynamical_instability"]
    assert inst["status"] == "fail"
    assert "749" in inst["evidence"]
    assert 850 <= grpo["collapse"]["step"] <= 950
    plateau = grpo["fit"]["models"]["oscillator"]["params"]["plateau"]["value"]
    assert 0.3 < plateau < 0.93  # within the observed range
    gepo = next(r for r in doc["runs"] if r["run"].endswith("GEPO_online"))
    assert gepo["collapse"] is None


def test_inspect_json(capsys):
    code, out, _ = run_cli(capsys, "inspect", SAMPLES / "healthy_slow_start.csv", "--format", "json")
    assert code == 0
    (info,) = json.loads(out)["runs"]
    assert info["format"] == "csv" and info["step_column"] == "step"
    assert info["roles"]["reward"]["column"] == "reward"
    assert info["roles"]["entropy"]["column"] == "entropy"


def test_predict_json_contract_keys(capsys):
    code, out, _ = run_cli(
        capsys,
        "predict",
        "--lr",
        "1e-6",
        "--momentum",
        "0.9",
        "--refresh-interval",
        "4",
        "--curvature",
        "2000",
        "--format",
        "json",
    )
    assert code == 0
    doc = json.loads(out)
    for key in (
        "schema",
        "mass",
        "damping",
        "stiffness",
        "damping_ratio",
        "regime",
        "stable",
        "critical_refresh_interval",
        "timescale",
        "inertia",
    ):
        assert key in doc
    assert doc["schema"] == "grpofit.predict/1"
    # M = (1 + mu + eta K Kref^2)/2, C = 1 - mu - eta K Kref, K_eff = eta K (delta = 1)
    assert doc["mass"] == pytest.approx(0.5 * (1.9 + 2e-3 * 16))
    assert doc["damping"] == pytest.approx(0.1 - 2e-3 * 4)
    assert doc["stiffness"] == pytest.approx(2e-3)
    assert doc["critical_refresh_interval"] == pytest.approx(0.1 / 2e-3)


def test_predict_reports_the_finite_group_plateau_of_the_bandit(capsys):
    code, out, _ = run_cli(
        capsys,
        "predict",
        "--lr",
        "0.1",
        "--momentum",
        "0.5",
        "--refresh-interval",
        "1",
        "--curvature",
        "0.278",
        "--group-size",
        "4",
        "--beta",
        "1",
        "--format",
        "json",
    )
    assert code == 0
    group = json.loads(out)["group"]
    # std-normalised advantages at G = 4 weaken the reward pull: the fixed point moves down
    assert group["plateau_exact"] == pytest.approx(0.5136, abs=1e-3)
    assert group["plateau_at_group_size"] == pytest.approx(0.4189, abs=1e-3)
    assert group["noise_temperature"] == pytest.approx(0.25)


def test_predict_missing_options_is_a_usage_error(capsys):
    code, _, err = run_cli(capsys, "predict", "--lr", "1e-6")
    assert code == 2 and "--momentum" in err and "--curvature" in err


@pytest.mark.slow
def test_predict_from_run_with_what_if_plot(capsys, tmp_path):
    figure = tmp_path / "whatif.png"
    code, out, _ = run_cli(
        capsys,
        "predict",
        "--from-run",
        SAMPLES / "bandit_g16.csv",
        "--lr",
        "0.05",
        "--momentum",
        "0.5",
        "--refresh-interval",
        "1",
        "--what-if-refresh-interval",
        "8",
        "--plot",
        figure,
        "--format",
        "json",
    )
    assert code == 0
    doc = json.loads(out)
    assert doc["from_run"]["curvature"] > 0
    assert "predicted_inertia" in doc["from_run"] and "what_if" in doc
    assert figure.stat().st_size > 5000


def test_predict_from_run_refuses_a_timescale_the_fit_cannot_identify(capsys):
    # rasbt 7_3: a fall with no plateau; `fit` prints its timescale as not identifiable, so a
    # curvature (and a what-if regime) measured from the point value would be a confident guess
    log = REAL_LOGS / "rasbt_grpo_qwen3-0.6b_7_3_tracking.csv"
    args = ("--lr", "1e-5", "--momentum", "0.9", "--refresh-interval", "1", "--what-if-lr", "4e-5")
    code, out, err = run_cli(capsys, "predict", "--from-run", log, *args)
    assert code == 2 and out == ""
    assert "not identifiable" in err and "--curvature" in err and log.name in err


@pytest.mark.slow
def test_simulate_bandit_writes_a_log_that_fits(capsys, tmp_path):
    out_file = tmp_path / "bandit.jsonl"
    code, out, _ = run_cli(
        capsys,
        "simulate",
        "bandit",
        "--arms",
        "8",
        "--correct",
        "1",
        "--lr",
        "0.05",
        "--momentum",
        "0.5",
        "--refresh-interval",
        "1",
        "--group-size",
        "16",
        "--beta",
        "1",
        "--steps",
        "200",
        "--seed",
        "3",
        "--out",
        out_file,
        "--format",
        "json",
    )
    assert code == 0
    meta = json.loads((tmp_path / "bandit.jsonl.meta.json").read_text())
    assert 0.4 < meta["fixed_point"] < 0.6 and meta["curvature"] > 0
    first = json.loads(out_file.read_text().splitlines()[0])
    assert {"step", "reward", "reward_std", "frac_reward_zero_std", "entropy", "kl", "grad_norm"} <= set(first)
    code, out, _ = run_cli(capsys, "fit", out_file, "--format", "json")
    plateau = json.loads(out)["runs"][0]["models"]["exponential"]["params"]["plateau"]["value"]
    assert plateau == pytest.approx(meta["fixed_point"], abs=0.05)


@pytest.mark.slow
def test_diagnose_fit_is_the_same_object_as_the_fit_entry(capsys):
    """The contract: diagnose's ``fit`` is one entry of fit's ``runs`` (collapse included)."""
    run = SAMPLES / "collapse_run"
    _, out, _ = run_cli(capsys, "fit", run, "--format", "json")
    entry = json.loads(out)["runs"][0]
    _, doc, _ = _diagnose_json(capsys, run)
    nested = doc["runs"][0]["fit"]
    assert nested["collapse"] is not None and nested["collapse"] == entry["collapse"]
    assert nested["collapse"] == doc["runs"][0]["collapse"]
    entry.pop("fit_check"), entry.pop("trend")  # the diagnose entry carries these beside its fit
    assert nested == entry
