"""The one table of log formats that sniffing, dispatch and discovery all read.

Each :class:`Format` row says how to recognise a container from its first bytes (``sniff``, a
predicate on a :class:`~grpofit.readers.sniff.Probe`), which function reads it (``reader``,
``"module:function"`` imported only when used), which file names may hold it (``suffixes`` are
logs by name; ``peek_suffixes`` are logs only when their content sniffs as one) and which folder
shapes hold it (``folders``). Rows are tried in table order: binary signatures first, then
console logs (their metric lines may only show up in the tail), then JSON and delimited shapes
(a JSON predicate never holds for delimited text and the other way round, so only the order
within each family matters); the first predicate that holds names the format.

Adding a format is one reader module, one row here and one test.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Callable

from grpofit.readers import sniff as sn
from grpofit.readers.discover import TFEVENTS_PREFIX, holds_tfevents, is_checkpoint, is_hf_output, is_wandb_run


@dataclass(frozen=True)
class Folder:
    """A folder shape that holds one run of a format.

    ``match(path, names)`` decides from the folder's path and entry names; ``read`` is
    ``"module:function"`` called as ``read(path, step)``; ``rank`` orders the folder checks
    (lowest first); ``leaf``: discovery does not look inside such a folder; ``run``: discovery
    lists the folder itself as one run container.
    """

    kind: str
    match: Callable[[str, list[str]], bool]
    read: str
    rank: int
    leaf: bool = True
    run: bool = True

    def reader(self) -> Callable:
        return _load(self.read)


@dataclass(frozen=True)
class Format:
    """One log container: name, content predicate, reader, file names, folder shapes."""

    name: str
    reader: str | None  #: ``"module:function"`` called as ``function(src, fmt, *, step=None)``; None: folders only
    sniff: Callable[[sn.Probe], bool] | None = None  #: None: reached only through ``folders``
    suffixes: tuple[str, ...] = ()  #: file name endings that are this format by name
    peek_suffixes: tuple[str, ...] = ()  #: endings that are this format when the content says so
    prefixes: tuple[str, ...] = ()  #: file name beginnings that are this format by name
    folders: tuple[Folder, ...] = ()
    binary: bool = False  #: a binary container (tried before the text checks)
    claims_suffix: str | None = None  #: when a file named ``*<suffixes>`` does not sniff: why
    joins_across_files: bool = False  #: one run's metrics may continue in other files of this format
    doc: str = field(default="", compare=False)

    def load(self) -> Callable:
        if self.reader is None:
            raise LookupError(f"format {self.name!r} is read from folders only")
        return _load(self.reader)


def _load(spec: str) -> Callable:
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def _mlflow_run_folder(path: str, names: list[str]) -> bool:
    from grpofit.readers.mlflow import is_run_folder

    return is_run_folder(path, names)


def _swanlab_run_folder(path: str, names: list[str]) -> bool:
    from grpofit.readers.swanlab import is_run_folder

    return is_run_folder(path, names)


FORMATS_TABLE: tuple[Format, ...] = (
    # --- binary containers -------------------------------------------------------------------
    Format(
        "wandb-binary",
        "grpofit.readers:_read_wandb_binary",
        sn.is_wandb_binary,
        suffixes=(".wandb",),
        binary=True,
        claims_suffix="is not a W&B .wandb file (it does not start with the ':W&B' header)|"
        "pass the run's run-<id>.wandb as the W&B client wrote it, or its run folder",
        doc="W&B's binary run-<id>.wandb (LevelDB log of protobuf records)",
    ),
    Format(
        "wandb-run",
        None,
        None,
        folders=(Folder("wandb-run", is_wandb_run, "grpofit.readers:_read_wandb_run_folder_path", rank=0),),
        doc="a wandb/run-*/ or offline-run-*/ folder",
    ),
    Format(
        "tensorboard",
        "grpofit.readers:_read_tensorboard",
        sn.is_tensorboard,
        suffixes=(".tfevents",),
        prefixes=(TFEVENTS_PREFIX,),
        folders=(Folder("tensorboard", holds_tfevents, "grpofit.readers:_read_tensorboard_dir", rank=2, leaf=False),),
        binary=True,
        doc="TensorBoard events.out.tfevents.* (TFRecord of Event protobufs)",
    ),
    Format(
        "mlflow-sqlite",
        "grpofit.readers.mlflow:read_sqlite",
        sn.is_mlflow_sqlite,
        peek_suffixes=(".db", ".sqlite"),
        binary=True,
        doc="MLflow SQLite tracking store (verl's sqlite:///.../mlruns.db), opened read-only",
    ),
    Format(
        "mlflow",
        None,
        None,
        folders=(Folder("mlflow-run", _mlflow_run_folder, "grpofit.readers.mlflow:read_run_folder", rank=4),),
        doc="MLflow file store run folder mlruns/<experiment>/<run>/ (metrics/<key>: timestamp value step)",
    ),
    Format(
        "swanlab",
        "grpofit.readers.swanlab:read_backup",
        sn.is_swanlab,
        suffixes=(".swanlab",),
        folders=(Folder("swanlab-run", _swanlab_run_folder, "grpofit.readers.swanlab:read_run_folder", rank=5),),
        binary=True,
        doc="SwanLab offline run: swanlog/run-*/run-<id>.swanlab (protobuf records) or backup.swanlab (0.6: JSON records), LevelDB-framed",
    ),
    Format(
        "parquet",
        "grpofit.readers:_read_parquet",
        sn.is_parquet,
        binary=True,
        doc="W&B history saved as parquet; the reader reports wandb-history when it is one",
    ),
    # --- console logs ------------------------------------------------------------------------
    Format(
        "verl-console",
        "grpofit.readers.console:read_verl_console",
        sn.is_verl_console,
        peek_suffixes=(".log", ".txt", ".out"),
        doc="verl stdout: step:N - key:value - ...",
    ),
    Format(
        "openrlhf-console",
        "grpofit.readers.console:read_trl_console",
        sn.is_openrlhf_console,
        peek_suffixes=(".log", ".txt", ".out"),
        doc="OpenRLHF stdout: ✨ Global step N: {...} dict lines",
    ),
    Format(
        "trl-console",
        "grpofit.readers.console:read_trl_console",
        sn.is_trl_console,
        peek_suffixes=(".log", ".txt", ".out"),
        doc="HF/TRL stdout: {'loss': ..., 'reward': ...} dict lines",
    ),
    Format(
        "kv-console",
        "grpofit.readers.keyvalue:read_progress",
        sn.is_progress_console,
        peek_suffixes=(".log", ".txt", ".out"),
        doc="hand-written progress lines: Epoch:[1/1](3/9751), Reward: -1.44, KL_ref: 0.04, ...",
    ),
    # --- JSON shapes -------------------------------------------------------------------------
    Format(
        "trainer_state",
        "grpofit.readers.hf:read_hf",
        sn.is_trainer_state,
        peek_suffixes=(".json",),
        folders=(
            Folder("checkpoint", is_checkpoint, "grpofit.readers:_read_checkpoint", rank=1),
            Folder("hf-output", is_hf_output, "grpofit.readers:_read_hf_output", rank=3, leaf=False, run=False),
        ),
        doc="HF trainer_state.json (log_history rows)",
    ),
    Format(
        "verl-jsonl",
        "grpofit.readers.jsonl:read_jsonl",
        sn.is_verl_jsonl,
        doc='verl file logger: {"step": N, "data": {...}} lines',
    ),
    # --- delimited text ----------------------------------------------------------------------
    Format(
        "csv-long",
        "grpofit.readers.delimited:read_delimited",
        sn.is_csv_long,
        doc="long CSV: step, key, value",
    ),
    Format(
        "wandb-export",
        "grpofit.readers.delimited:read_delimited",
        sn.is_wandb_export,
        joins_across_files=True,
        doc="W&B panel export: '<run name> - <key>' columns",
    ),
    Format(
        "wandb-history",
        "grpofit.readers:_read_wandb_history",
        sn.is_wandb_history,
        doc="W&B run.history()/scan_history() saved as CSV or JSONL (_step, _runtime, _timestamp)",
    ),
    Format(
        "jsonl",
        "grpofit.readers.jsonl:read_jsonl",
        sn.is_jsonl,
        suffixes=(".jsonl", ".ndjson"),
        doc="JSON Lines, one object of metrics per line",
    ),
    Format(
        "log_history",
        "grpofit.readers.hf:read_hf",
        sn.is_log_history,
        peek_suffixes=(".json",),
        doc="a bare log_history list of row objects",
    ),
    Format(
        "tsv",
        "grpofit.readers.delimited:read_delimited",
        sn.is_tsv,
        suffixes=(".tsv",),
        doc="tab-separated table, one column per metric",
    ),
    Format(
        "csv",
        "grpofit.readers.delimited:read_delimited",
        sn.is_csv,
        suffixes=(".csv",),
        doc="comma-separated table, one column per metric",
    ),
)

#: every format name, in table order
FORMATS: tuple[str, ...] = tuple(f.name for f in FORMATS_TABLE)

_BY_NAME = {f.name: f for f in FORMATS_TABLE}


def get(name: str) -> Format | None:
    return _BY_NAME.get(name)


def sniff_order() -> tuple[tuple[Format, ...], tuple[Format, ...]]:
    """The binary and the text rows with a content predicate, each in table order."""
    rows = [f for f in FORMATS_TABLE if f.sniff is not None]
    return tuple(f for f in rows if f.binary), tuple(f for f in rows if not f.binary)


def folder_shapes() -> tuple[tuple[Format, Folder], ...]:
    """Every folder shape with its format, in the order folders are checked."""
    pairs = [(f, s) for f in FORMATS_TABLE for s in f.folders]
    return tuple(sorted(pairs, key=lambda p: p[1].rank))


def folder_kind(path: str, names: list[str]) -> str | None:
    """The first folder shape ``path`` (holding ``names``) matches, or None."""
    for _, shape in folder_shapes():
        if shape.match(path, names):
            return shape.kind
    return None


def folder(kind: str) -> Folder | None:
    return next((s for _, s in folder_shapes() if s.kind == kind), None)


def log_suffixes() -> tuple[str, ...]:
    """Every file ending that may hold a log (by name or after a peek at the content)."""
    out: dict[str, None] = {}
    for f in FORMATS_TABLE:
        out.update(dict.fromkeys(f.suffixes + f.peek_suffixes))
    return tuple(out)


def peek_suffixes() -> tuple[str, ...]:
    """File endings whose content is peeked at before they count as logs (no format claims
    them by name)."""
    by_name = {s for f in FORMATS_TABLE for s in f.suffixes}
    out: dict[str, None] = {}
    for f in FORMATS_TABLE:
        out.update(dict.fromkeys(s for s in f.peek_suffixes if s not in by_name))
    return tuple(out)


def name_prefixes() -> tuple[str, ...]:
    return tuple(p for f in FORMATS_TABLE for p in f.prefixes)


def documentation(_source: str = "") -> str:
    """The registry as a markdown table, one row per format in the order formats are tried: its
    name, what it is (``doc=``), the file names that hold it and the folder shapes that hold it.
    ``docs/formats.md`` shows it (a generated block of ``scripts/update_readme.py``), so the page
    cannot drift from the table; ``_source`` is the registry's text, which the block is keyed on."""

    def code(items) -> str:
        return ", ".join(f"`{s}`" for s in items)

    rows = ["| format | what it is | file names | folders |", "| --- | --- | --- | --- |"]
    for f in FORMATS_TABLE:
        names = code(f.suffixes + f.prefixes)
        if f.peek_suffixes:
            names += (", " if names else "") + code(f.peek_suffixes) + " (by content)"
        if not names and f.sniff is not None:
            names = "any (by content)"
        folders = code(s.kind for s in f.folders)
        doc = f.doc.replace("|", "/").replace("<", "&lt;").replace(">", "&gt;")
        rows.append(f"| `{f.name}` | {doc} | {names} | {folders} |")
    return "\n".join(rows) + "\n"
