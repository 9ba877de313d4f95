"""The diagnostic registry: each failure mode of :data:`grpofit.core.vocabulary.MODE_TABLE` -> its check,
and the rules that add findings to it.

The checks register from the vocabulary: the row names the module under
:mod:`grpofit.diagnostics` whose ``check(ctx: Context) -> Verdict`` judges the mode. A new
diagnostic is that module, one ``Mode`` row and one test; nothing here changes.

:data:`RULE_MODULES` lists, per mode, the modules whose ``rules(ctx) -> list[Finding]`` add
findings (:mod:`grpofit.diagnostics.findings`) to the mode's verdict. A new rule is one module,
one entry here and one test.
"""

from __future__ import annotations

from importlib import import_module
from typing import Callable

from grpofit.core.vocabulary import MODE_TABLE

#: mode -> modules under grpofit.diagnostics with ``rules(ctx) -> list[Finding]``
RULE_MODULES: dict[str, tuple[str, ...]] = {
    "train_eval_decoupling": ("hacking",),
    "advantage_degeneracy": ("groups",),
    "policy_concentration": ("entropy_floor", "entropy_law"),
    "dynamical_instability": ("entropy_blowup", "truncation", "offpolicy", "spikes"),
}


def _load() -> dict[str, Callable]:
    return {m.name: import_module(f"grpofit.diagnostics.{m.module}").check for m in MODE_TABLE}


def _load_rules() -> dict[str, tuple[Callable, ...]]:
    return {
        mode: tuple(import_module(f"grpofit.diagnostics.{name}").rules for name in RULE_MODULES.get(mode, ()))
        for mode in (m.name for m in MODE_TABLE)
    }


#: mode name -> ``check(ctx) -> Verdict``, in contract order
CHECKS: dict[str, Callable] = _load()
#: mode name -> its rules, each ``rules(ctx) -> list[Finding]``
RULES: dict[str, tuple[Callable, ...]] = _load_rules()
