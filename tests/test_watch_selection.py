"""watch follows one run of a multi-run file (FILE::RUN) or the runs --run PATTERN matches."""

from __future__ import annotations

import io
import math

import pytest

from grpofit.core.errors import UsageError
from grpofit.watch.session import Session, WatchOptions


@pytest.fixture
def export(tmp_path):
    """A W&B panel export holding three runs."""
    runs = ["alpha", "beta", "gamma"]
    path = tmp_path / "export.csv"
    rows = ["train/global_step," + ",".join(f"{r} - train/reward" for r in runs)]
    for t in range(1, 81):
        rows.append(
            f"{t},"
            + ",".join(f"{0.2 + (0.5 + 0.1 * i) * (1 - math.exp(-t / (15 + 5 * i))):.4f}" for i in range(len(runs)))
        )
    path.write_text("\n".join(rows) + "\n")
    return path


def _watch(paths, pattern=None):
    out, err = io.StringIO(), io.StringIO()
    code = Session(
        WatchOptions(paths=[str(p) for p in paths], once=True, forecast=False, run_pattern=pattern, live=False),
        out=out,
        err=err,
    ).run()
    return code, out.getvalue(), err.getvalue()


def _runs(out: str) -> list[str]:
    return sorted(
        {
            w.split("=", 1)[1].rsplit("::", 1)[-1]
            for line in out.splitlines()
            for w in line.split()
            if w.startswith("run=")
        }
    )


def test_file_run_follows_that_run_only(export):
    code, out, err = _watch([f"{export}::beta"])
    assert code == 0 and err == "" and _runs(out) == ["beta"]
    code, out, _ = _watch([export])  # the file itself: every run (and W&B exports no longer crash watch)
    assert code == 0 and _runs(out) == ["alpha", "beta", "gamma"]


def test_run_pattern_filters_what_is_followed(export):
    code, out, _ = _watch([export], "*a")
    assert code == 0 and _runs(out) == ["alpha", "beta", "gamma"]
    code, out, _ = _watch([export], "g*")
    assert code == 0 and _runs(out) == ["gamma"]


def test_a_selection_that_matches_nothing_lists_the_runs(export):
    with pytest.raises(UsageError) as e:
        _watch([f"{export}::nope"])
    assert e.value.one_line() == f"no run 'nope' in {export}; runs there: alpha, beta, gamma"
    with pytest.raises(UsageError) as e:
        _watch([export], "zzz")
    assert e.value.one_line() == f"--run 'zzz' matches no run in {export}; runs there: alpha, beta, gamma"


def test_watch_cli_takes_file_run_and_run_pattern(capsys, export):
    from tests.conftest import run_cli

    code, out, err = run_cli(capsys, "watch", f"{export}::beta", "--once", "--no-forecast")
    assert code == 0, err
    assert _runs(out) == ["beta"]
    code, out, err = run_cli(capsys, "watch", export, "--run", "g*", "--once", "--no-forecast")
    assert code == 0 and _runs(out) == ["gamma"]
    code, out, err = run_cli(capsys, "watch", export, "--run", "zzz", "--once", "--no-forecast")
    assert code == 2
    assert err.splitlines() == [f"error: --run 'zzz' matches no run in {export}; runs there: alpha, beta, gamma"]
