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
from grpofit.readers.source import Source
from grpofit.core.runs import Run

SQLITE_MAGIC = b"SQLite format 3\x00"
FIX = "pass an MLflow run folder (mlruns/<experiment>/<run>/), the mlruns/ folder or the mlruns.db SQLite store"
#: largest metric file, meta.yaml or param file read (bytes)
MAX_FILE = 256 * 1024 * 1024
MAX_META = 1024 * 1024


def looks_like_sqlite_store(head: bytes) -> bool:
    """An SQLite database whose schema (on its first pages) declares MLflow's metrics table."""
    return head.startswith(SQLITE_MAGIC) and b"metrics" in head and b"run_uuid" in head


def is_run_folder(path: str, names: list[str]) -> bool:
    """An MLflow file-store run folder: ``meta.yaml`` and a ``metrics/`` folder."""
    return "meta.yaml" in names and "metrics" in names and os.path.isdir(os.path.join(path, "metrics"))


# --------------------------------------------------------------------------- file store


def read_run_folder(path: str, step: str | None = None) -> list[Run]:
    """One run from ``mlruns/<experiment>/<run>/``."""
    from grpofit.core.runs import make_run

    meta = _meta(os.path.join(path, "meta.yaml"))
    warnings: list[str] = []
    series: dict[str, dict[float, float]] = {}
    bad = 0
    metrics_dir = os.path.join(path, "metrics")
    for key, file in _files_under(metrics_dir):
        points, b = _metric_file(file)
        bad += b
        if points:
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


def _metric_file(path: str) -> tuple[dict[float, float], int]:
    """``{step: value}`` of one metric file (the latest timestamp wins at a step), bad lines."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_FILE)
    except OSError:
        return {}, 0
    best: dict[float, tuple[float, float]] = {}
    bad = 0
    for i, line in enumerate(data.split(b"\n")):
        parts = line.split()
        if not parts:
            continue
        try:
            if len(parts) == 3:
                ts, value, step = float(parts[0]), float(parts[1]), float(parts[2])
            elif len(parts) == 2:  # MLflow < 1.0: no step
                ts, value, step = float(parts[0]), float(parts[1]), float(i)
            else:
                raise ValueError
        except ValueError:
            bad += 1
            continue
        if not np.isfinite(step):
            bad += 1
            continue
        if step not in best or ts >= best[step][0]:
            best[step] = (ts, value)
    return {s: v for s, (_, v) in best.items()}, bad


def _table(series: dict[str, dict[float, float]]) -> dict[str, np.ndarray]:
    steps = np.array(sorted({s for points in series.values() for s in points}), dtype=np.float64)
    index = {s: i for i, s in enumerate(steps.tolist())}
    table: dict[str, np.ndarray] = {"step": steps}
    for key, points in series.items():
        col = np.full(steps.size, np.nan)
        for s, v in points.items():
            col[index[s]] = v
        table[key if key != "step" else "metric/step"] = col
    return table


# --------------------------------------------------------------------------- SQLite store


def read_sqlite(src: Source, fmt: str = "mlflow-sqlite", *, step: str | None = None) -> list[Run]:
    """Every run of an MLflow SQLite store (see the module docstring)."""
    from grpofit.core.runs import make_run

    path, cleanup = _on_disk(src)
    try:
        runs_rows, metric_rows, params = _query(path, src.name)
    finally:
        cleanup()
    names = {r[0]: (r[1] or r[0]) for r in runs_rows}
    deleted = {r[0] for r in runs_rows if r[2] == "deleted"}
    by_run: dict[str, dict[str, dict[float, tuple[float, float]]]] = {}
    for key, value, ts, run_uuid, st, is_nan in metric_rows:
        if run_uuid in deleted:
            continue
        if st is None:
            st = 0
        v = float("nan") if is_nan else value
        points = by_run.setdefault(run_uuid, {}).setdefault(str(key), {})
        ts = ts or 0
        if st not in points or ts >= points[st][0]:
            points[st] = (ts, v if v is not None else float("nan"))
    out: list[Run] = []
    for run_uuid in [r[0] for r in runs_rows if r[0] in by_run] + sorted(set(by_run) - set(names)):
        series = {k: {float(s): float(v) for s, (_, v) in pts.items()} for k, pts in by_run[run_uuid].items()}
        config = {k: _number(v) for k, v in params.get(run_uuid, {}).items()}
        label = names.get(run_uuid, run_uuid)
        out.append(
            make_run(
                name=f"{src.name}::{label}",
                source=src.name,
                fmt="mlflow-sqlite",
                table=_table(series),
                step=step if step is not None else "step",
                config=config,
                config_source=f"{src.name} (params of run {run_uuid})" if config else None,
            )
        )
        out[-1].stats["runs_in_store"] = len(runs_rows)
    if not out:
        raise ReadError("the MLflow store holds no metric values for any live run", path=src.name, fix=FIX)
    return out


def _on_disk(src: Source):
    if src.path is not None:
        return src.path, lambda: None
    import tempfile

    fd, tmp = tempfile.mkstemp(prefix="grpofit-", suffix=".db")
    with os.fdopen(fd, "wb") as f:
        f.write(src.data or b"")
    return tmp, lambda: os.unlink(tmp)


def _query(path: str, name: str):
    import sqlite3
    from urllib.parse import quote

    uri = "file:" + quote(os.path.abspath(path)) + "?mode=ro"
    try:
        con = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        raise ReadError(f"cannot be opened as an SQLite database ({exc})", path=name, fix=FIX) from None
    try:
        try:
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        except sqlite3.DatabaseError:
            # a database in WAL mode without its -shm file cannot be opened read-only; the
            # immutable flag reads the main file as it is (never writes)
            con.close()
            con = sqlite3.connect(uri + "&immutable=1", uri=True)
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not {"metrics", "runs"} <= tables:
            raise ReadError(
                "is an SQLite database without MLflow's metrics and runs tables",
                path=name,
                fix="point at the MLflow tracking database (e.g. mlruns.db)",
            )
        run_cols = {r[1] for r in con.execute("PRAGMA table_info(runs)")}
        name_col = "name" if "name" in run_cols else "NULL"
        stage_col = "lifecycle_stage" if "lifecycle_stage" in run_cols else "NULL"
        runs_rows = con.execute(
            f"SELECT run_uuid, {name_col}, {stage_col} FROM runs ORDER BY start_time, run_uuid"
            if "start_time" in run_cols
            else f"SELECT run_uuid, {name_col}, {stage_col} FROM runs ORDER BY run_uuid"
        ).fetchall()
        metric_cols = {r[1] for r in con.execute("PRAGMA table_info(metrics)")}
        step_col = "step" if "step" in metric_cols else "0"
        nan_col = "is_nan" if "is_nan" in metric_cols else "0"
        metric_rows = con.execute(
            f"SELECT key, value, timestamp, run_uuid, {step_col}, {nan_col} FROM metrics ORDER BY run_uuid, key, timestamp"
        ).fetchall()
        params: dict[str, dict[str, str]] = {}
        if "params" in tables:
            for key, value, run_uuid in con.execute("SELECT key, value, run_uuid FROM params"):
                params.setdefault(run_uuid, {})[str(key)] = value
    except sqlite3.Error as exc:
        detail = " ".join(str(exc).split())
        raise ReadError(f"is not a readable MLflow SQLite store ({detail})", path=name, fix=FIX) from None
    finally:
        con.close()
    return runs_rows, metric_rows, params
