"""The diagnostic registry: each failure mode of :data:`grpofit.vocabulary.MODE_TABLE` -> its check.

The checks register from the vocabulary: the row names the module under
:mod:`grpofit.diagnostics` whose ``check(ctx: Context) -> Verdict`` judges the mode. A new
diagnostic is that module, one ``Mode`` row and one test; nothing here changes.
"""

from __future__ import annotations

from importlib import import_module
from typing import Callable

from grpofit.vocabulary import MODE_TABLE


def _load() -> dict[str, Callable]:
    return {m.name: import_module(f"grpofit.diagnostics.{m.module}").check for m in MODE_TABLE}


#: mode name -> ``check(ctx) -> Verdict``, in contract order
CHECKS: dict[str, Callable] = _load()
