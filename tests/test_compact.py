"""``diagnose`` keeps each judged run without its series (memory flat in the number of runs)."""

from pathlib import Path

SAMPLES = Path(__file__).resolve().parents[1] / "sample_logs"


def test_a_compact_diagnosis_keeps_the_entry_and_the_fit_parameters_but_not_the_series():
    from grpofit.commands.pipeline import compact_diagnosis
    from grpofit.diagnostics import diagnose_run
    from grpofit.diagnostics.groupsize import group_size_by_experiment
    from grpofit.readers import read_path

    runs = [r for p in sorted((SAMPLES / "group_sweep").iterdir()) if p.suffix == ".csv" for r in read_path(str(p))]
    full = [diagnose_run(r) for r in runs]
    light = [compact_diagnosis(d) for d in full]
    assert [d.summary() for d in light] == [d.summary() for d in full]
    assert group_size_by_experiment(light) == group_size_by_experiment(full)
    for d in light:
        assert d.fit.steps.size <= 2 and d.fit.column_steps is None
        assert all(f.panel is None for v in d.diagnostics.values() for f in v.findings)
    assert any(f.panel is not None for d in full for v in d.diagnostics.values() for f in v.findings)
