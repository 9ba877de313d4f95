"""Typed-record JSONL: one file, several kinds of record, keyed by a field.

Custom training loops often write ``{"type": "rollout", "grpo_step": 1, "reward": ...}``,
``{"type": "train", "grpo_step": 1, "grad_norm": ...}`` and ``{"type": "eval", "grpo_step": 0,
"reward": ...}`` into one file. Merging them by field name would interleave the eval reward with
the rollout reward in one wrong series, so records of different kinds become different columns.

The prefixing rule:

- The *kind field* of a row is the first of :data:`KIND_KEYS` (``type``, ``split``, ``phase``,
  ``event``, ``mode``) whose value is a string.
- When the rows carry at least two kinds, every field ``f`` of a row of kind ``k`` becomes the
  column ``k/f`` (``eval/reward``, ``rollout/reward``); the step fields (:data:`STEP_KEYS`) are
  shared and never prefixed, and the kind field itself is dropped. Rows without a kind keep
  their field names. With a single kind the names are left as they are.
- Rows are then aligned on the step field: a rollout and a train record of the same step form
  one row. A kind that logs the same step twice keeps its last record (counted and warned).
- A boolean *eval flag* (:data:`FLAG_KEYS`, e.g. ``"eval": true``) marks a row of the kind
  ``eval``; a row whose flag is false or absent has no kind. When rows without a kind sit beside
  rows of one kind (training rows beside flagged eval rows), the kind's fields are prefixed too,
  so the eval reward never lands in the training reward's column.

``grpofit inspect`` shows it as a warning line and in ``stats`` (``record_kinds``).
"""

from __future__ import annotations

import numpy as np

#: fields that name a record's kind, in order of precedence
KIND_KEYS = ("type", "split", "phase", "event", "mode")
#: boolean fields that mark an evaluation row (the kind ``eval``) when true
FLAG_KEYS = ("eval", "is_eval", "evaluation", "is_evaluation", "validation", "is_validation")
#: fields that are the step of a record and shared by every kind
STEP_KEYS = frozenset(
    {
        "step",
        "global_step",
        "train/global_step",
        "training/global_step",
        "trainer/global_step",
        "grpo_step",
        "optimizer_step",
        "iteration",
        "iter",
        "Step",
        "_step",
        "epoch",
    }
)
#: kind names training loops give their train records (``"event": "metrics"``): with no kind
#: named ``train`` and one of these, its columns are named ``train/<field>`` so the train reward,
#: entropy or KL of the run is found as such (not the eval series of the other kind)
TRAIN_KINDS = (
    "metrics",
    "metric",
    "log",
    "logs",
    "step",
    "steps",
    "batch",
    "update",
    "updates",
    "grpo",
    "rl",
    "actor",
    "policy",
    "optim",
    "optimizer",
    "training",
    "learner",
)
#: a column name's kind marker while reading (replaced by ``/`` or dropped at the end)
SEP = "\x1f"
#: the per-row kind code column while reading
KIND_COLUMN = SEP + "kind"


class Kinds:
    """Kinds seen so far (their codes are the order of first appearance) and the kind field."""

    def __init__(self) -> None:
        self.codes: dict[str, int] = {}
        self.fields: dict[str, None] = {}
        self._names: dict[tuple, tuple] = {}  # (kind field, kind, row's keys) -> the keys' new names

    def split(self, row: dict) -> dict:
        """``row`` with its kind field removed and its other fields marked with the kind."""
        for key in KIND_KEYS:
            kind = row.get(key)
            if isinstance(kind, str) and kind:
                break
        else:
            key = next((k for k in FLAG_KEYS if isinstance(row.get(k), bool)), None)
            if key is None:
                return row
            if not row[key]:  # a training row: the flag is not a metric
                return {k: v for k, v in row.items() if k != key}
            kind = "eval"
        self.fields[key] = None
        code = self.codes.setdefault(kind, len(self.codes))
        shape = (key, kind, tuple(row))
        names = self._names.get(shape)
        if names is None:  # records of one kind mostly share their keys: named once per shape
            names = tuple(_DROP if k == key else k if k in STEP_KEYS else f"{kind}{SEP}{k}" for k in row)
            if len(self._names) < MAX_SHAPES:
                self._names[shape] = names
        out = {KIND_COLUMN: float(code)}
        out.update(zip(names, row.values()))
        del out[_DROP]
        return out


#: the name the kind field is given in :meth:`Kinds.split` before it is removed (no JSON key)
_DROP = object()
#: record shapes whose new names :class:`Kinds` keeps (a log of ever-changing keys stays bounded)
MAX_SHAPES = 1024


def finish(
    table: dict[str, np.ndarray], kinds: Kinds, step: str | None
) -> tuple[dict[str, np.ndarray], list[str], dict[str, int], str | None]:
    """The typed columns named by the prefixing rule and aligned on the step.

    Returns ``(table, warnings, stats, step column)``; a table without kinds is returned
    unchanged (and ``step``).
    """
    codes = table.pop(KIND_COLUMN, None)
    if codes is None or not kinds.codes:
        return table, [], {}, step
    # one kind beside rows without a kind (eval rows flagged among training rows) is prefixed too
    several = len(kinds.codes) > 1 or bool(np.isnan(codes).any())
    alias = _train_alias(kinds) if len(kinds.codes) > 1 else None
    named: dict[str, np.ndarray] = {}
    for key, values in table.items():
        kind, sep, field = key.partition(SEP)
        name = (f"{'train' if kind == alias else kind}/{field}" if several else field) if sep else key
        if name in named:  # an unprefixed field of the same name: keep both, the kind's second
            name = f"{name} ({kind})"
        named[name] = values
    counts = {k: int(np.sum(codes == c)) for k, c in kinds.codes.items()}
    field = "/".join(repr(f) for f in kinds.fields)
    shown = ", ".join(f"{k} {n}" for k, n in counts.items())
    stats = {"record_kinds": len(kinds.codes)}
    if not several:
        return named, [f"records carry one kind ({field}: {shown}); field names kept"], stats, step
    step_col = _step_column(named, step)
    if step_col is None:
        warning = f"typed records ({field}: {shown}) became columns '<kind>/<field>'; no step field to align them on"
        return named, [warning], stats, step
    aligned, repeated, without = _align(named, step_col, codes)
    warnings = [
        f"typed records ({field}: {shown}) became columns '<kind>/<field>', aligned on {step_col!r}"
        + (f"; {alias!r} records are the train records (columns 'train/<field>')" if alias else "")
    ]
    if repeated:
        warnings.append(
            f"{repeated} record(s) repeat a step of their kind (e.g. after a resume); kept the last of each"
        )
        stats["duplicates"] = repeated
    if without:
        stats["rows_without_step"] = without
    return aligned, warnings, stats, step_col


def _train_alias(kinds: Kinds) -> str | None:
    """The kind that holds the train records under another name (:data:`TRAIN_KINDS`): only when
    no kind is ``train`` and exactly one kind (case-insensitive) is such a name."""
    names = {k.lower() for k in kinds.codes}
    if "train" in names:
        return None
    found = [k for k in kinds.codes if k.lower() in TRAIN_KINDS]
    return found[0] if len(found) == 1 else None


def _step_column(table: dict[str, np.ndarray], step: str | None) -> str | None:
    """``step`` when given; else the step field most records carry (a field only one kind logs,
    such as ``optimizer_step`` on train records, would drop the others), ties broken by the
    order of :data:`grpofit.core.runs.STEP_NAMES`."""
    from grpofit.core.runs import STEP_NAMES, pick_step_column

    if step is not None:
        return pick_step_column(list(table), step)
    present = [n for n in STEP_NAMES if n in table]
    if not present:
        return None
    return max(present, key=lambda n: (int(np.isfinite(table[n]).sum()), -present.index(n)))


def _align(table: dict[str, np.ndarray], step_col: str, codes: np.ndarray) -> tuple[dict[str, np.ndarray], int, int]:
    """One row per distinct step; every column takes the last finite value logged at that step."""
    steps = table[step_col]
    keep = np.isfinite(steps)
    without = int((~keep).sum())
    uniq = np.unique(steps[keep])
    group = np.searchsorted(uniq, steps[keep])
    kept_codes = codes[keep]
    repeated = 0
    for c in np.unique(kept_codes[np.isfinite(kept_codes)]):
        g = group[kept_codes == c]
        repeated += int(g.size - np.unique(g).size)
    out: dict[str, np.ndarray] = {step_col: uniq.astype(np.float64)}
    for name, values in table.items():
        if name == step_col:
            continue
        v = values[keep]
        col = np.full(uniq.size, np.nan)
        idx = np.nonzero(~np.isnan(v))[0]
        col[group[idx]] = v[idx]  # ascending order: the last record of a step wins
        out[name] = col
    return out, repeated, without
