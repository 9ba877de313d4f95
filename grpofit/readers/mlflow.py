"""MLflow tracking stores, read without the ``mlflow`` package.

File store: ``mlruns/<experiment_id>/<run_id>/`` holds ``meta.yaml`` (``run_name``,
``lifecycle_stage``), ``metrics/<key>`` files of ``timestamp value step`` lines (``timestamp
value`` in MLflow < 1.0; a key with ``/`` is a sub-folder), ``params/<key>`` files holding one
value and ``tags/<key>``. One run folder is one run; ``mlruns/`` and experiment folders are
walked like any folder.

SQLite store (verl's default ``sqlite:///.../mlruns.db``): tables ``experiments``, ``runs``
(``run_uuid``, ``name``, ``lifecycle_stage``, ``experiment_id``), ``metrics(key, value,
timestamp, run_uuid, step, is_nan)``, ``params(key, value, run_uuid)`` and ``tags``. It is
opened read-only with the standard library's ``sqlite3``; every run that is not deleted is one
run, named ``<file>::<run name>``. A value logged twice at one step keeps the latest timestamp.

verl sanitises metric names for MLflow (``mean@16`` -> ``mean_at_16``); the role patterns
accept both spellings.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from grpofit.core.errors import ReadError
from grpofit.core.runs import Run
from grpofit.readers.source import Source

SQLITE_MAGIC = b"SQLite format 3\x00"
FIX = "pass an MLflow run folder (mlruns/<experiment>/<run>/), the mlruns/ folder or the mlruns.db SQLite store"
#: largest meta.yaml or param file read (bytes); metric files are read whole, in blocks
MAX_META = 1024 * 1024


def looks_like_sqlite_store(head: bytes) -> bool:
    """An SQLite database whose schema (on its first pages) declares MLflow's metrics table."""
    return head.startswith(SQLITE_MAGIC) and b"metrics" in head and b"run_uuid" in head


def young_wal_store(head: bytes, path: str) -> bool:
    """An SQLite database in WAL mode whose schema is still in its ``-wal`` file (a store just
    created, not checkpointed yet): MLflow's tables are declared there."""
    if not head.startswith(SQLITE_MAGIC) or not path or path == "-":
        return False
    try:
        with open(path + "-wal", "rb") as f:
            wal = f.read(MAX_META)
    except OSError:
        return False
    return b"metrics" in wal and b"run_uuid" in wal


def is_run_folder(path: str, names: list[str]) -> bool:
    """An MLflow file-store run folder: ``meta.yaml`` and a ``metrics/`` folder."""
    return "meta.yaml" in names and "metrics" in names and os.path.isdir(os.path.join(path, "metrics"))


# --------------------------------------------------------------------------- file store


def read_run_folder(path: str, step: str | None = None) -> list[Run]:
    """One run from ``mlruns/<experiment>/<run>/``."""
    from grpofit.core.runs import make_run

    meta = _meta(os.path.join(path, "meta.yaml"))
    warnings: list[str] = []
    series: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    bad = 0
    metrics_dir = os.path.join(path, "metrics")
    for key, file in _files_under(metrics_dir):
        points, b = _metric_file(file)
        bad += b
        if points is not None:
            series[key] = points
    if bad:
        warnings.append(f"{bad} metric line(s) that are not 'timestamp value step' skipped")
    if not series:
        raise ReadError("the MLflow run has no metric values", path=path, fix="the run may not have logged yet; " + FIX)
    config = {key: _text(file) for key, file in _files_under(os.path.join(path, "params"))}
    if meta.get("lifecycle_stage") == "deleted":
        warnings.append("the run is marked deleted in MLflow")
    table = _table(series)
    return [
        make_run(
            name=path,
            source=path,
            fmt="mlflow",
            table=table,
            step=step if step is not None else "step",
            config={k: _number(v) for k, v in config.items()},
            config_source=os.path.join(path, "params") if config else None,
            warnings=warnings,
        )
    ]


def _meta(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_META)
        import yaml

        obj = yaml.safe_load(raw)
    except Exception:  # noqa: BLE001 - an unreadable meta.yaml only loses the run's name
        return {}
    return obj if isinstance(obj, dict) else {}


def _files_under(folder: str) -> list[tuple[str, str]]:
    """``(key, path)`` of every regular file under ``folder``; sub-folders join the key with ``/``.
    Symlinked folders are not followed (no loops)."""
    out: list[tuple[str, str]] = []
    stack = [("", folder)]
    while stack:
        prefix, here = stack.pop()
        try:
            entries = sorted(os.scandir(here), key=lambda e: e.name)
        except OSError:
            continue
        for e in entries:
            key = prefix + e.name
            try:
                if e.is_dir(follow_symlinks=False):
                    stack.append((key + "/", e.path))
                elif e.is_file():
                    out.append((key, e.path))
            except OSError:
                continue
    return sorted(out)


def _text(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read(MAX_META).decode("utf-8", errors="replace").strip()
    except OSError:
        return None


def _number(value: str | None) -> Any:
    if value is None:
        return None
    try:
        f = float(value)
    except ValueError:
        return value
    return int(f) if f.is_integer() and "." not in value and "e" not in value.lower() else f


def _metric_file(path: str) -> tuple[tuple[np.ndarray, np.ndarray] | None, int]:
    """``(steps, values)`` of one metric file (unique steps; the latest timestamp wins at a
    step) and its bad lines. Read whole, in blocks (no size cap cuts it), into arrays: a file of
    a few hundred MB costs a few floats per line, not Python objects. Numbers are parsed as such
    (fast); a file with a line that is not numbers is parsed again as text, line by line checked."""
    try:
        try:
            return _parse_metric_file(path, text=False)
        except ValueError:
            return _parse_metric_file(path, text=True)
    except (OSError, ValueError) as exc:
        from grpofit.core.errors import ReadError

        raise ReadError(
            f"metric file {os.path.basename(path)!r} cannot be read ({exc})",
            path=path,
            fix="check the file, or remove it from the run's metrics folder",
        ) from None


def _parse_metric_file(path: str, *, text: bool) -> tuple[tuple[np.ndarray, np.ndarray] | None, int]:
    import pandas as pd

    cols: list[list[np.ndarray]] = [[], [], []]
    bad = 0
    first_line = 0
    try:
        chunks = pd.read_csv(
            path,
            sep=" ",
            header=None,
            names=[0, 1, 2, 3],
            dtype=str if text else np.float64,
            chunksize=1 << 17,
            skip_blank_lines=False,
            on_bad_lines="skip",
            engine="c",
            na_filter=not text,
        )
        for chunk in chunks:
            if text:
                fields = [chunk[i].to_numpy(object) == "" for i in range(4)]
                ts, value, step = (
                    pd.to_numeric(chunk[i], errors="coerce").to_numpy(float, copy=True) for i in range(3)
                )
            else:
                ts, value, step, extra = (chunk[i].to_numpy(float, copy=True) for i in range(4))
                fields = [np.isnan(ts), np.isnan(value), np.isnan(step), np.isnan(extra)]
            blank = fields[0] & fields[1]
            two = fields[2] & ~blank  # MLflow < 1.0: 'timestamp value', the step is the line
            step[two] = first_line + np.flatnonzero(two)
            ok = ~blank & fields[3] & ~np.isnan(ts) & np.isfinite(step)
            bad += int((~ok & ~blank).sum())
            for c, a in zip(cols, (ts, value, step)):
                c.append(a[ok])
            first_line += len(chunk)
    except pd.errors.EmptyDataError:
        return None, 0
    except pd.errors.ParserError as exc:
        raise ValueError(str(exc).splitlines()[0] if str(exc) else "unreadable") from None
    if not cols[0]:
        return None, bad
    ts, value, step = (np.concatenate(c) for c in cols)
    if step.size == 0:
        return None, bad
    return _latest(step, ts, value), bad


def _latest(step: np.ndarray, ts: np.ndarray, value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unique steps, each with the value of its latest timestamp (the later row on a tie)."""
    order = np.lexsort((np.arange(step.size), ts, step))
    s = step[order]
    last = np.ones(s.size, bool)
    last[:-1] = s[1:] != s[:-1]
    return s[last], value[order][last]


def _table(series: dict[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, np.ndarray]:
    steps = np.unique(np.concatenate([s for s, _ in series.values()])) if series else np.empty(0)
    table: dict[str, np.ndarray] = {"step": steps.astype(np.float64)}
    for key, (s, v) in series.items():
        col = np.full(steps.size, np.nan)
        col[np.searchsorted(steps, s)] = v
        table[key if key != "step" else "metric/step"] = col
    return table


# --------------------------------------------------------------------------- SQLite store


def read_sqlite(src: Source, fmt: str = "mlflow-sqlite", *, step: str | None = None) -> list[Run]:
    """Every run of an MLflow SQLite store (see the module docstring)."""
    from grpofit.core.runs import make_run

    path, cleanup = _on_disk(src)
    try:
        runs_rows, by_run, params, warnings = _query(path, src.name)
    finally:
        cleanup()
    names = {r[0]: (r[1] or r[0]) for r in runs_rows}
    out: list[Run] = []
    for run_uuid in [r[0] for r in runs_rows if r[0] in by_run] + sorted(set(by_run) - set(names)):
        config = {k: _number(v) for k, v in params.get(run_uuid, {}).items()}
        label = names.get(run_uuid, run_uuid)
        out.append(
            make_run(
                name=f"{src.name}::{label}",
                source=src.name,
                fmt="mlflow-sqlite",
                table=_table(by_run[run_uuid]),
                step=step if step is not None else "step",
                config=config,
                config_source=f"{src.name} (params of run {run_uuid})" if config else None,
                warnings=list(warnings),
            )
        )
        out[-1].stats["runs_in_store"] = len(runs_rows)
    if not out:
        raise ReadError("the MLflow store holds no metric values for any live run", path=src.name, fix=FIX)
    return out


def _on_disk(src: Source):
    """A path SQLite may open without writing beside the input: the store itself when it is not
    in WAL mode; else a private copy of it and its ``-wal`` in a temporary folder (SQLite needs
    a ``-shm`` file beside a WAL store, and read-only without one it ignores what the WAL holds:
    the newest rows, a collapse included)."""
    import shutil
    import tempfile

    if src.path is not None and not _wal_mode(src.path):
        return src.path, lambda: None
    folder = tempfile.mkdtemp(prefix="grpofit-store-")
    tmp = os.path.join(folder, "store.db")
    try:
        if src.path is None:
            with open(tmp, "wb") as f:
                f.write(src.data or b"")
        else:
            shutil.copyfile(src.path, tmp)
            if os.path.exists(src.path + "-wal"):
                shutil.copyfile(src.path + "-wal", tmp + "-wal")
    except OSError as exc:
        shutil.rmtree(folder, ignore_errors=True)
        raise ReadError(
            f"cannot copy the WAL-mode store to read it whole ({exc.strerror or exc})",
            path=src.name,
            fix="free space in the temporary folder (TMPDIR), or checkpoint the store",
        ) from None
    return tmp, lambda: shutil.rmtree(folder, ignore_errors=True)


def _wal_mode(path: str) -> bool:
    """Whether the store is in WAL mode (header bytes 18-19 are 2) or has a ``-wal`` file."""
    try:
        with open(path, "rb") as f:
            head = f.read(20)
    except OSError:
        return False
    return head[18:20] == b"\x02\x02" or os.path.exists(path + "-wal")


def _float(x: Any) -> float:
    """A stored number as a float; text, blobs and out-of-range integers are NaN (never an error)."""
    if isinstance(x, float):
        return x
    if isinstance(x, int):
        try:
            return float(x)
        except OverflowError:
            return float("nan")
    if isinstance(x, str):
        try:
            return float(x)
        except ValueError:
            return float("nan")
    return float("nan")


#: rows fetched from SQLite at a time (the store is never held whole as Python rows)
BATCH = 4096


def _parts():
    """Steps, timestamps and values of one series as it is read: packed doubles (8 bytes each)."""
    from array import array

    return array("d"), array("d"), array("d")


def _query(path: str, name: str):
    """``(runs rows, {run: {key: (steps, values)}}, params, warnings)``; metric rows are read in
    batches into arrays (memory a few floats per row, not a Python tuple per row)."""
    import sqlite3
    from urllib.parse import quote

    private = os.path.basename(os.path.dirname(path)).startswith("grpofit-store-")
    uri = "file:" + quote(os.path.abspath(path)) + ("" if private else "?mode=ro")
    try:
        con = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        raise ReadError(f"cannot be opened as an SQLite database ({exc})", path=name, fix=FIX) from None
    warnings: list[str] = []
    try:
        try:
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        except sqlite3.DatabaseError:
            con.close()
            con = sqlite3.connect(uri + ("?" if private else "&") + "immutable=1", uri=True)
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not {"metrics", "runs"} <= tables:
            raise ReadError(
                "is an SQLite database without MLflow's metrics and runs tables",
                path=name,
                fix="point at the MLflow tracking database (e.g. mlruns.db)",
            )
        runs_rows = _run_rows(con)
        deleted = {r[0] for r in runs_rows if r[2] == "deleted"}
        by_run, bad = _read_metrics(_metric_rows(con), deleted)
        if bad:
            warnings.append(f"{bad} metric row(s) whose step is not a finite number skipped")
        params = _params(con) if "params" in tables else {}
    except sqlite3.Error as exc:
        detail = " ".join(str(exc).split())
        raise ReadError(f"is not a readable MLflow SQLite store ({detail})", path=name, fix=FIX) from None
    finally:
        con.close()
    return runs_rows, by_run, params, warnings


def _run_rows(con) -> list[tuple]:
    """The runs table's ``(run_uuid, name, lifecycle_stage)`` rows (``None`` for a missing column),
    by start time when the store has one, then by id."""
    run_cols = {r[1] for r in con.execute("PRAGMA table_info(runs)")}
    name_col = "name" if "name" in run_cols else "NULL"
    stage_col = "lifecycle_stage" if "lifecycle_stage" in run_cols else "NULL"
    return [
        tuple(str(x) if x is not None and i < 2 else x for i, x in enumerate(r))
        for r in con.execute(
            f"SELECT run_uuid, {name_col}, {stage_col} FROM runs ORDER BY start_time, run_uuid"
            if "start_time" in run_cols
            else f"SELECT run_uuid, {name_col}, {stage_col} FROM runs ORDER BY run_uuid"
        )
    ]


def _metric_rows(con):
    """A cursor over the metrics table's ``(run_uuid, key, value, timestamp, step, is_nan)`` rows
    (0 for a missing step or is_nan column), by run and key."""
    metric_cols = {r[1] for r in con.execute("PRAGMA table_info(metrics)")}
    step_col = "step" if "step" in metric_cols else "0"
    nan_col = "is_nan" if "is_nan" in metric_cols else "0"
    return con.execute(
        f"SELECT run_uuid, key, value, timestamp, {step_col}, {nan_col} FROM metrics ORDER BY run_uuid, key"
    )


def _read_metrics(cur, deleted: set) -> tuple[dict[str, dict[str, tuple[np.ndarray, np.ndarray]]], int]:
    """``({run: {key: (steps, values)}}, rows skipped for a non-finite step)`` from the metric rows
    of ``cur`` (read in batches; deleted runs left out)."""
    by_run: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] = {}
    current: tuple | None = None
    parts = _parts()
    bad = 0

    def flush():
        nonlocal bad
        if current is None or current[0] in deleted or not parts[0]:
            return
        s, ts, v = (np.frombuffer(p, dtype=np.float64) for p in parts)
        ok = np.isfinite(s)
        bad += int((~ok).sum())
        if ok.any():
            ts = np.where(np.isnan(ts[ok]), 0.0, ts[ok])
            by_run.setdefault(current[0], {})[current[1]] = _latest(s[ok], ts, v[ok])

    while True:
        rows = cur.fetchmany(BATCH)
        if not rows:
            break
        for run_uuid, key, value, ts, st, is_nan in rows:
            ident = (str(run_uuid), str(key))
            if ident != current:
                flush()
                current, parts = ident, _parts()
            parts[0].append(0.0 if st is None else _float(st))
            parts[1].append(0.0 if ts is None else _float(ts))
            parts[2].append(float("nan") if is_nan or value is None else _float(value))
    flush()
    return by_run, bad


def _params(con) -> dict[str, dict[str, str]]:
    """``{run: {key: value}}`` from the params table, every value as text."""
    params: dict[str, dict[str, str]] = {}
    for key, value, run_uuid in con.execute("SELECT key, value, run_uuid FROM params"):
        params.setdefault(str(run_uuid), {})[str(key)] = value if isinstance(value, str) else str(value)
    return params
