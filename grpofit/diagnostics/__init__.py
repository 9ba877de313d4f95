"""The four failure modes of a GRPO run, judged from its logs (docs/theory.md §4).

One module per mode (``decoupling``, ``degeneracy``, ``concentration``, ``instability``), each a
``check(ctx) -> Verdict`` whose docstring states its rules; :mod:`.thresholds` holds every
threshold; :mod:`.registry` maps each mode of :data:`grpofit.core.vocabulary.MODE_TABLE` to its
check; :mod:`.run` ties them together (:func:`diagnose_run`, :func:`gate`).

Adding a diagnostic: write ``grpofit/diagnostics/<name>.py`` with ``check(ctx) -> Verdict``, add
one ``Mode(...)`` row to :data:`grpofit.core.vocabulary.MODE_TABLE`, add one test.
"""

from grpofit.diagnostics.base import MODES, STATUSES, Verdict, worst
from grpofit.diagnostics.run import RunDiagnosis, diagnose_run, gate
from grpofit.diagnostics.thresholds import Thresholds

__all__ = ["MODES", "STATUSES", "Verdict", "worst", "RunDiagnosis", "diagnose_run", "gate", "Thresholds"]
