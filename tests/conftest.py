"""Helpers shared by the test modules.

``run_cli`` calls the CLI in-process, as the console script does, and returns what a user
would see: ``(exit code, stdout, stderr)``. Import it with ``from tests.conftest import run_cli``.
"""

from __future__ import annotations

import os

import hypothesis
import pytest

# property tests draw the same examples on every run (CI must not pass or fail by luck);
# HYPOTHESIS_PROFILE=explore draws new ones, to look for bugs on purpose
hypothesis.settings.register_profile("ci", derandomize=True, database=None)
hypothesis.settings.register_profile("explore", derandomize=False)
hypothesis.settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def run_cli(capsys, *args) -> tuple[int, str, str]:
    """``grpofit ARGS...`` in this process: ``(exit code, stdout, stderr)``; arguments may be paths."""
    from grpofit.cli import main

    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    out, err = capsys.readouterr()
    return exc.value.code, out, err


def assert_reads_or_fails_cleanly(blobs) -> None:
    """Each blob, given as stdin, reads into runs whose steps rise, or fails with one clean line
    (the property every reader's arbitrary-and-truncated-bytes test checks)."""
    import numpy as np

    from grpofit.core.errors import GrpofitError
    from grpofit.readers import read_bytes

    for blob in blobs:
        try:
            runs = read_bytes(blob, "-")
        except GrpofitError as e:
            assert "\n" not in e.one_line()
            continue
        for r in runs:
            assert np.all(np.diff(r.steps) > 0)
