"""compare takes FILE::RUN and --run PATTERN like the other commands."""

from __future__ import annotations

import math

import pytest

from grpofit.commands.compare import compare_paths
from grpofit.core.errors import UsageError


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    runs = ["alpha", "beta", "gamma"]
    path = tmp_path_factory.mktemp("cmp") / "export.csv"
    rows = ["train/global_step," + ",".join(f"{r} - train/reward" for r in runs)]
    for t in range(1, 121):
        rows.append(
            f"{t},"
            + ",".join(
                f"{0.2 + (0.5 + 0.1 * i) * (1 - math.exp(-t / (15 + 5 * i))) + 0.01 * math.sin(7 * t + i):.4f}"
                for i in range(len(runs))
            )
        )
    path.write_text("\n".join(rows) + "\n")
    return path


def test_run_pattern_filters_both_sides(export):
    doc, _, _ = compare_paths([str(export)], [f"{export}::gamma"], run_pattern="*a")
    assert [r.rsplit("::", 1)[1] for r in doc["a"]["runs"]] == ["alpha", "beta", "gamma"]
    doc, _, _ = compare_paths([str(export)], [str(export)], run_pattern="alpha")
    assert doc["a"]["runs"] == doc["b"]["runs"] == [f"{export}::alpha"]


def test_a_side_the_pattern_empties_is_an_error_naming_the_side(export):
    with pytest.raises(UsageError) as e:
        compare_paths([str(export)], [f"{export}::gamma"], run_pattern="b*")
    assert e.value.one_line().startswith(f"B: --run 'b*' matches no run in {export}::gamma; ")


@pytest.mark.slow
def test_compare_cli_run_pattern_and_file_run(capsys, export):
    import json

    from tests.conftest import run_cli

    code, out, err = run_cli(capsys, "compare", export, f"{export}::gamma", "--run", "*a", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["a"]["n_runs"] == 3 and doc["b"]["runs"] == [f"{export}::gamma"]
    code, out, err = run_cli(capsys, "compare", export, f"{export}::gamma", "--run", "b*")
    assert code == 2 and out == ""
    assert err.splitlines() == [
        f"error: B: --run 'b*' matches no run in {export}::gamma; check the run names "
        "with grpofit inspect, or use a glob such as '*GRPO*'"
    ]
    code, out, err = run_cli(capsys, "compare", f"{export}::nope", export)
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and "nope" in err and "alpha, beta, gamma" in err
