""".ci/run keeps pytest's exit code: a run in which no test was collected (exit 5) fails CI.

``python`` is replaced on PATH by a stub that records its arguments and exits as told, so the
script's own logic is checked without installing anything.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.subprocess


def _ci(tmp_path: Path, pytest_rc: int, lint_rc: int = 0) -> tuple[int, list[str], str]:
    log = tmp_path / "calls"
    stub = tmp_path / "bin" / "python"
    stub.parent.mkdir(exist_ok=True)
    stub.write_text(
        f'#!/bin/sh\necho "$*" >> {log}\ncase "$*" in *pytest*) exit {pytest_rc};; '
        f'*"ruff check"*) exit {lint_rc};; esac\nexit 0\n'
    )
    stub.chmod(0o755)
    env = {**os.environ, "PATH": f"{stub.parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", str(ROOT / ".ci" / "run")], env=env, capture_output=True, text=True, timeout=60)
    calls = log.read_text().splitlines()
    log.unlink()
    return done.returncode, calls, done.stderr


@pytest.mark.parametrize("rc", [0, 1, 5])
def test_ci_exits_with_pytests_code(tmp_path, rc):
    code, calls, err = _ci(tmp_path, rc)
    assert code == rc
    assert calls[-1] == "-m pytest -q"  # the README's test command
    assert ("collected no tests" in err) == (rc == 5)


def test_ci_fails_on_lint_before_running_the_tests(tmp_path):
    code, calls, err = _ci(tmp_path, 0, lint_rc=1)
    assert code == 1 and "ruff check failed" in err
    assert not any("pytest" in c for c in calls)
    code, calls, _ = _ci(tmp_path, 0)
    assert code == 0 and any("ruff format --check" in c for c in calls)
