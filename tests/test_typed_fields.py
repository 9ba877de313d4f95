"""The objects that carry a run through ``diagnose`` are typed: no ``Any`` fields, and every
annotation names a real class (the names are imported for type checkers only, so they are
resolved here against the modules that define them)."""

from __future__ import annotations

import dataclasses
import sys
import typing

import pytest


def _hints(cls) -> dict:
    import grpofit.core.runs
    import grpofit.diagnostics.findings
    import grpofit.diagnostics.gating
    import grpofit.diagnostics.groupsize
    import grpofit.diagnostics.thresholds
    import grpofit.fitting.collapse
    import grpofit.fitting.results

    namespace: dict = {}
    for module in (
        grpofit.fitting.collapse,
        grpofit.diagnostics.findings,
        grpofit.diagnostics.thresholds,
        grpofit.fitting.results,
        grpofit.diagnostics.gating,
        grpofit.diagnostics.groupsize,
        grpofit.core.runs,
        sys.modules[cls.__module__],
    ):
        namespace.update(vars(module))
    return typing.get_type_hints(cls, globalns=namespace)


def _classes():
    from grpofit.commands.pipeline import DiagnoseOptions, JudgeOptions
    from grpofit.diagnostics.base import Context, Verdict
    from grpofit.diagnostics.findings import Finding
    from grpofit.diagnostics.run import RunDiagnosis

    return [Context, RunDiagnosis, JudgeOptions, DiagnoseOptions, Verdict, Finding]


def _has_any(hint, seen=None) -> bool:
    """Whether ``Any`` is anywhere inside a resolved hint (recursive aliases followed once)."""
    seen = set() if seen is None else seen
    if id(hint) in seen:
        return False
    seen.add(id(hint))
    if hint is typing.Any:
        return True
    if isinstance(hint, typing.ForwardRef):
        return hint.__forward_evaluated__ and _has_any(hint.__forward_value__, seen)
    return any(_has_any(arg, seen) for arg in typing.get_args(hint))


@pytest.mark.parametrize("cls", _classes(), ids=lambda c: c.__name__)
def test_no_field_is_any_and_every_type_resolves(cls):
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        assert "Any" not in str(f.type), f"{cls.__name__}.{f.name}: {f.type}"
        assert not _has_any(hints[f.name]), f"{cls.__name__}.{f.name}: {hints[f.name]}"


def test_the_typed_fields_name_the_result_classes():
    from grpofit.commands.pipeline import DiagnoseOptions, JudgeOptions
    from grpofit.core.runs import Run
    from grpofit.diagnostics.base import Context
    from grpofit.diagnostics.groupsize import GroupSize
    from grpofit.diagnostics.run import RunDiagnosis
    from grpofit.diagnostics.thresholds import Thresholds
    from grpofit.fitting.collapse import Collapse
    from grpofit.fitting.results import FitResult

    ctx, diag = _hints(Context), _hints(RunDiagnosis)
    assert ctx["run"] is Run and ctx["th"] is Thresholds and ctx["fit"] == FitResult | None
    assert diag["fit"] == FitResult | None and diag["collapse"] == Collapse | None
    assert diag["group_size"] == GroupSize | None
    assert _hints(JudgeOptions)["diagnose"] is DiagnoseOptions


def test_diagnose_options_are_the_keyword_arguments_of_diagnose_run():
    import inspect

    from grpofit.commands.pipeline import DiagnoseOptions
    from grpofit.diagnostics import Thresholds
    from grpofit.diagnostics.run import diagnose_run

    th = Thresholds()
    args = DiagnoseOptions(th, metric="reward", eval_metric="eval/*", group_size=8).arguments()
    assert args == {"metric": "reward", "eval_metric": "eval/*", "thresholds": th, "group_size": 8}
    assert set(args) <= set(inspect.signature(diagnose_run).parameters)
