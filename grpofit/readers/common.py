"""What every text reader does last: attach hyperparameters, call ``make_run``, check it."""

from __future__ import annotations

from array import array
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

from grpofit.core.errors import ReadError
from grpofit.core.runs import Run, has_finite, make_run
from grpofit.readers.source import SUPPORTED_HINT, Source

#: rows ``wandb.Api().run(...).history()`` samples by default
HISTORY_SAMPLE = 500


def rows_to_columns(rows: Sequence[Mapping[str, Any]], convert=None) -> dict[str, list]:
    """Row dicts as equal-length columns, keys in first-seen order (a missing cell is None).

    ``convert`` is applied to every present cell (e.g. unwrapping a one-element list).
    """
    keys: dict[str, None] = {}
    for r in rows:
        keys.update(dict.fromkeys(r))
    if convert is None:
        return {k: [r.get(k) for r in rows] for k in keys}
    return {k: [convert(r.get(k)) for r in rows] for k in keys}


def text_lines(src: Source, split=str.splitlines) -> Iterator[str]:
    """The lines of ``src``'s text as ``split(decode(whole file))`` gives them, read one line at
    a time (the file is never held whole): each ``\\n``-terminated piece is decoded on its own
    (a ``\\n`` byte is never inside a UTF-8 sequence, so the text is the same) and ``split``
    (``str.splitlines`` by default) splits it further."""
    with src.open() as f:
        first = True
        for raw in f:
            if first:
                first = False
                if raw.startswith(b"\xef\xbb\xbf"):
                    raw = raw[3:]
            yield from split(raw.decode("utf-8", errors="replace")) or [""]


class RowColumns:
    """Rows added one at a time straight into float64 columns (8 bytes a cell), keys in
    first-seen order; a key a row lacks, or a ``None`` value, is NaN. What a list of row dicts
    and :func:`rows_to_columns` give, without holding every row as a dict (several times the
    size of the log it came from).

    The table is dense (a float for every row and key), so at most
    :data:`grpofit.core.limits.MAX_COLUMNS` distinct keys are taken: one more is a
    :class:`ReadError` naming ``name`` (the log) and the row that brought it."""

    def __init__(self, name: str | None = None) -> None:
        self.n = 0
        self.cols: dict[str, array] = {}
        self.name = name

    def _column(self, key: str, size: int) -> array:
        col = self.cols.get(key)
        if col is None:
            check_columns(len(self.cols) + 1, self.name, f"row {self.n + 1}")
            col = self.cols[key] = array("d", _NAN) * size
        elif len(col) < size:
            col.extend(array("d", _NAN) * (size - len(col)))
        return col

    def append(self, row: Mapping[str, float | None]) -> int:
        """Add ``row`` (values already floats or None); its position."""
        n = self.n
        for k, v in row.items():
            self._column(k, n).append(_NAN[0] if v is None else v)
        self.n += 1
        return n

    def set(self, pos: int, key: str, value: float | None) -> None:
        """Overwrite one cell of an added row."""
        col = self._column(key, pos + 1)
        col[pos] = _NAN[0] if value is None else value

    def get(self, pos: int, key: str) -> float:
        col = self.cols.get(key)
        return col[pos] if col is not None and pos < len(col) else _NAN[0]

    def build(self, order: list[str] | None = None) -> dict[str, np.ndarray]:
        """The columns as float64 arrays (no copy), in first-seen order or ``order``."""
        out = {}
        for k in order if order is not None else list(self.cols):
            col = self._column(k, self.n)
            out[k] = np.frombuffer(col, dtype=np.float64) if len(col) else np.empty(0)
        return out


_NAN = array("d", [float("nan")])


def check_columns(count: int, name: str | None, where: str) -> None:
    """A :class:`ReadError` when a log's ``count`` distinct keys (reached at ``where``, e.g.
    "line 6") exceed :data:`grpofit.core.limits.MAX_COLUMNS`: its table is dense, so a row of
    200,000 keys would cost 1.6 MB for every row of the log."""
    from grpofit.core.limits import MAX_COLUMNS

    if count > MAX_COLUMNS:
        raise ReadError(
            f"{where} brings the number of distinct keys above {MAX_COLUMNS}",
            path=name,
            fix=f"grpofit reads logs of at most {MAX_COLUMNS} metrics; log fewer keys or split the file",
        )


def build_run(
    src: Source,
    fmt: str,
    table: Mapping[str, Sequence[Any] | np.ndarray],
    *,
    step: str | None,
    warnings: list[str] | None = None,
    stats: Mapping[str, int] | None = None,
    name: str | None = None,
    config: Mapping[str, Any] | None = None,
    config_source: str | None = None,
) -> Run:
    """``make_run`` plus the run's hyperparameters (found next to the file) and reader stats.

    Raises :class:`ReadError` when no column holds a single number.
    """
    if config is None and src.path is not None:
        from grpofit.readers.config import config_near

        config, config_source = config_near(src.path)
    run = make_run(
        name or src.name,
        src.name,
        fmt,
        table,
        step=step,
        config=config,
        config_source=config_source,
        warnings=warnings,
    )
    if stats:
        run.stats.update({k: int(v) for k, v in stats.items() if v})
    if fmt == "wandb-history" and run.stats.get("rows") == HISTORY_SAMPLE:
        run.warnings.append(
            f"exactly {HISTORY_SAMPLE} rows: W&B's run.history() returns a {HISTORY_SAMPLE}-row sample by "
            "default; save run.scan_history() for every step"
        )
    if not run.steps.size and run.stats.get("rows_without_step"):
        raise ReadError(
            f"no row has a number in the step column {run.step_column!r}",
            path=src.name,
            fix="pass --step with a numeric column, or check that this is a training log",
        )
    if not any(map(has_finite, run.metrics.values())):
        raise ReadError(
            "holds no numeric metric values (every cell is empty, text, NaN or infinite)",
            path=src.name,
            fix=f"check that this is a training log ({SUPPORTED_HINT})",
        )
    return run
