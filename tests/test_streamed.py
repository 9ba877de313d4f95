"""``diagnose`` of a fleet writes each run's entry as it is judged, in the input's order, and
keeps only what its tables and gate read: the output is the same bytes as the whole document's."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.reallogs import real_log

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "sample_logs"


def _entry(i: int) -> dict:
    return {"run": f"logs/r{i}.csv", "fit": {"models": {"a": {"r2": 0.5 + i / 10, "params": {}}}}, "tags": [i, None]}


@pytest.mark.parametrize("n", [0, 1, 3])
def test_a_streamed_document_is_the_bytes_of_the_whole_document(n):
    from grpofit.core.jsonout import Encoded, RunsStream, dumps

    entries = [Encoded.of(_entry(i)) for i in range(n)]
    rest = {"gate": {"passed": n == 0, "failed_runs": [], "reason": None}, "errors": [{"run": "x", "error": "bad"}]}
    doc = {"schema": "grpofit.diagnose/1", "runs": entries, **rest}
    written: list[str] = []
    stream = RunsStream(written.append, "grpofit.diagnose/1")
    for e in entries:
        stream.add(e.text)
    stream.close({"schema": "grpofit.diagnose/1", "runs": ["ignored"], **rest})
    assert "".join(written) == dumps(doc) + "\n"
    assert json.loads("".join(written))["runs"] == [_entry(i) for i in range(n)]


def _slow_first(item: int, extra) -> int:
    if item == 0:
        time.sleep(0.3)  # the first item finishes last
    return item * extra


def test_map_items_hands_each_result_on_in_the_items_order():
    from grpofit.commands.pipeline import map_items

    got: list[int] = []
    kept = map_items(_slow_first, list(range(40)), 3, jobs=2, lost=lambda i: None, chunk=1, sink=got.append)
    assert got == [3 * i for i in range(40)]
    assert kept == []  # handed on, not kept
    assert map_items(_slow_first, list(range(5)), 2, jobs=2, lost=lambda i: None) == [0, 2, 4, 6, 8]


def _render_all(doc: dict) -> tuple:
    import io

    from rich.console import Console

    from grpofit.render import tables

    out = []
    for width in (90, 200):
        console = Console(file=io.StringIO(), width=width, highlight=False, soft_wrap=False)
        console.print(tables.diagnose_table(doc, width=width))
        eval_table = tables.eval_table(doc, width=width)
        if eval_table is not None:
            console.print(eval_table)
        out.append(console.file.getvalue())
    return (
        *out,
        tables.diagnose_markdown(doc),
        tables.diagnose_junit(doc),
        tables.diagnose_evidence(doc),
        tables.gate_text(doc),
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "options",
    [{}, {"min_r2": 0.9, "strict": True, "fail_on": ("dynamical_instability",)}, {"forecast": True}],
)
def test_the_tables_junit_and_gate_read_only_the_shown_entries(options):
    from grpofit.commands.pipeline import diagnose_paths
    from grpofit.diagnostics.gating import GatePolicy, gate_document
    from grpofit.render.tables import shown_entry

    paths = [str(SAMPLES), str(real_log("verl_grpo_gsm8k_qwen2-7b_trtllm.tfevents"))]  # two eval series
    doc, _ = diagnose_paths(paths, **options)
    light, _ = diagnose_paths(paths, light=True, **options)
    assert light["runs"] == [shown_entry(r) for r in doc["runs"]]
    assert light["gate"] == doc["gate"] and light.get("group_size") == doc.get("group_size")
    policy = GatePolicy(options.get("fail_on"), options.get("min_r2"), options.get("strict", False))
    assert gate_document(light["runs"], policy) == gate_document(doc["runs"], policy)
    assert _render_all(light) == _render_all(doc)
    assert any(len(r.get("evals") or []) >= 2 for r in light["runs"])  # the eval table was drawn
    assert any(r["verdict"] == "fail" for r in light["runs"]) and any(r["verdict"] == "pass" for r in light["runs"])


def test_group_size_inputs_give_the_analysis_of_the_diagnoses():
    from grpofit.diagnostics import diagnose_run
    from grpofit.diagnostics.groupsize import GroupSizeInputs, group_size_by_experiment
    from grpofit.readers import read_path

    runs = [r for p in sorted((SAMPLES / "group_sweep").iterdir()) if p.suffix == ".csv" for r in read_path(str(p))]
    full = [diagnose_run(r) for r in runs]
    analysis = group_size_by_experiment([GroupSizeInputs.of(d) for d in full])
    assert analysis == group_size_by_experiment(full)
    assert analysis["testable"]  # the sweep's G differ: the tests ran on the inputs' estimates


@pytest.mark.slow
def test_diagnose_json_with_jobs_prints_the_whole_document(capsys):
    from grpofit.api import diagnose
    from grpofit.core.jsonout import dumps

    folder = SAMPLES / "group_sweep"
    code, out, _ = run_cli(capsys, "diagnose", folder, "--format", "json", "--jobs", "2")
    assert code == 0
    assert out == dumps(diagnose([str(folder)]).doc) + "\n"
    assert json.loads(out)["group_size"]["testable"]


def _fail_to_save(diagnosis, run, plot_dir, thresholds, entry=None):
    from grpofit.core.errors import UsageError

    raise UsageError(f"cannot write the figure of {diagnosis.name}", fix="choose a writable path")


@pytest.mark.slow
def test_figures_drawn_in_a_second_process_are_those_drawn_in_place(tmp_path, monkeypatch):
    """``diagnose --jobs 1 --plot-dir``: the figures drawn by the figure process (in parallel with
    the judging) are byte for byte those drawn in the parent, one per run."""
    import grpofit.commands.pipeline as pipeline
    from grpofit.diagnostics import Thresholds
    from grpofit.diagnostics.gating import GatePolicy

    sent = []
    submit = pipeline.FigureProcess.submit
    monkeypatch.setattr(pipeline.FigureProcess, "submit", lambda self, *a, **k: sent.append(a) or submit(self, *a, **k))
    folder = str(SAMPLES / "group_sweep")
    pipeline.diagnose_paths([folder], plot_dir=tmp_path / "forked")
    assert len(sent) == 3  # every figure was handed to the figure process (drawn there, or here when two wait)
    options = pipeline.JudgeOptions(
        diagnose=pipeline.DiagnoseOptions(Thresholds.from_overrides({})),
        plot_dir=str(tmp_path / "here"),
        policy=GatePolicy(),
    )
    for item in pipeline.plan_work([folder])[0]:
        pipeline.judge_item(item, options)  # outside judge_items: drawn in this process
    forked = sorted(p.name for p in (tmp_path / "forked").iterdir())
    assert len(forked) == 3 and forked == sorted(p.name for p in (tmp_path / "here").iterdir())
    for name in forked:
        assert (tmp_path / "forked" / name).read_bytes() == (tmp_path / "here" / name).read_bytes(), name


@pytest.mark.slow
def test_an_error_drawing_a_figure_in_the_second_process_is_the_commands_error(tmp_path, monkeypatch, capsys):
    import grpofit.render.plotting as plotting

    monkeypatch.setattr(plotting, "save_diagnosis_figure", _fail_to_save)
    code, out, err = run_cli(capsys, "diagnose", SAMPLES / "group_sweep", "--plot-dir", tmp_path / "figs")
    assert code == 2 and "cannot write the figure of" in err and "choose a writable path" in err
    assert "Traceback" not in err


def _slow_draw(folder, name):
    import os
    import time

    time.sleep(0.3)  # long enough that the figure process is still busy when the next ones come
    (Path(folder) / f"{name}.{os.getpid()}").write_text("")


@pytest.mark.slow
def test_the_judging_process_draws_a_figure_itself_when_two_already_wait(tmp_path):
    import os

    import grpofit.commands.pipeline as pipeline

    figures = pipeline.FigureProcess()
    if figures.pool is None:
        pytest.skip("no fork on this platform: every figure is drawn in place")
    try:
        for i in range(4):
            figures.submit(_slow_draw, str(tmp_path), f"fig{i}")
        figures.wait()
    finally:
        figures.stop()
    drawn = sorted(p.name for p in tmp_path.iterdir())
    assert [d.split(".")[0] for d in drawn] == ["fig0", "fig1", "fig2", "fig3"]  # each once
    pids = {int(d.split(".")[1]) for d in drawn}
    assert os.getpid() in pids and len(pids) == 2  # shared between this process and the figure process
    assert f"fig2.{os.getpid()}" in drawn  # the third came while two waited: drawn here
