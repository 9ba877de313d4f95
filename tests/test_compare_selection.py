"""compare takes FILE::RUN and --run PATTERN like the other commands (issue 13, item 8)."""

from __future__ import annotations

import math

import pytest

from grpofit.compare import compare_paths
from grpofit.errors import UsageError


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    runs = ["alpha", "beta", "gamma"]
    path = tmp_path_factory.mktemp("cmp") / "export.csv"
    rows = ["train/global_step," + ",".join(f"{r} - train/reward" for r in runs)]
    for t in range(1, 121):
        rows.append(f"{t}," + ",".join(
            f"{0.2 + (0.5 + 0.1 * i) * (1 - math.exp(-t / (15 + 5 * i))) + 0.01 * math.sin(7 * t + i):.4f}"
            for i in range(len(runs))))
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
