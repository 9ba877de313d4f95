"""The format table drives sniffing, dispatch and discovery."""

from __future__ import annotations

import dataclasses
import sys

import pytest

from grpofit.readers import discover, read_bytes, read_path, registry, sniff
from grpofit.readers.discover import is_candidate_file

discover_module = sys.modules["grpofit.readers.discover"]  # the package re-exports the function


def test_every_row_has_a_loadable_reader_or_folder():
    for row in registry.FORMATS_TABLE:
        assert row.reader is not None or row.folders, row.name
        if row.reader is not None:
            assert callable(row.load()), row.name
        for shape in row.folders:
            assert callable(shape.reader()), shape.kind
    assert len(set(registry.FORMATS)) == len(registry.FORMATS)


def test_suffixes_come_from_the_table():
    assert set(registry.log_suffixes()) >= {".csv", ".tsv", ".jsonl", ".json", ".log", ".txt", ".tfevents", ".wandb"}
    assert set(registry.peek_suffixes()) >= {".json", ".log", ".txt", ".db"}
    assert not set(registry.peek_suffixes()) & {".csv", ".jsonl", ".tfevents", ".wandb"}
    assert is_candidate_file("events.out.tfevents.123.host")
    assert not is_candidate_file("model.safetensors")


def test_folder_shapes_in_rank_order():
    kinds = [s.kind for _, s in registry.folder_shapes()]
    assert kinds.index("wandb-run") < kinds.index("checkpoint") < kinds.index("tensorboard") < kinds.index("hf-output")


def test_a_new_format_is_one_row(tmp_path, monkeypatch):
    """A made-up format added as one row is sniffed, dispatched and discovered."""
    import grpofit.readers.jsonl as jsonl_module

    def is_demo(p):
        return p.stripped.startswith("#demo")

    def read_demo(src, fmt, *, step=None):
        from grpofit.readers.common import build_run

        rows = [line.split() for line in src.read_text().splitlines()[1:] if line.strip()]
        table = {"step": [float(r[0]) for r in rows], "reward": [float(r[1]) for r in rows]}
        return [build_run(src, fmt, table, step=step)]

    monkeypatch.setattr(jsonl_module, "read_demo", read_demo, raising=False)
    row = registry.Format("demo", "grpofit.readers.jsonl:read_demo", is_demo, suffixes=(".demo",))
    table = (row,) + registry.FORMATS_TABLE
    monkeypatch.setattr(registry, "FORMATS_TABLE", table)
    monkeypatch.setattr(registry, "_BY_NAME", {f.name: f for f in table})
    monkeypatch.setattr(discover_module, "_SUFFIXES", None)
    path = tmp_path / "run.demo"
    path.write_text("#demo\n1 0.1\n2 0.3\n3 0.4\n")
    assert sniff(path.read_bytes(), str(path)) == "demo"
    run = read_path(str(path))[0]
    assert run.format == "demo" and list(run.steps) == [1, 2, 3]
    assert read_bytes(path.read_bytes(), "-")[0].metrics["reward"][-1] == 0.4
    assert [s.path for s in discover([str(tmp_path)])] == [str(path)]
    monkeypatch.setattr(discover_module, "_SUFFIXES", None)


def test_rows_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        registry.FORMATS_TABLE[0].name = "x"  # type: ignore[misc]


@pytest.mark.slow
@pytest.mark.subprocess
def test_small_files_of_the_new_formats_do_not_import_pandas(tmp_path):
    """Typed-record JSONL, progress lines, OpenRLHF stdout and MLflow stores are parsed once,
    without pandas (a quarter second of import)."""
    import json
    import subprocess

    typed = tmp_path / "typed.jsonl"
    typed.write_text(
        "".join(
            json.dumps({"type": k, "grpo_step": s, "reward": s / 10}) + "\n"
            for s in range(20)
            for k in ("train", "eval")
        )
    )
    kv = tmp_path / "train.log"
    kv.write_text("".join(f"Epoch:[1/1]({s}/20), Reward: {s / 20}, KL_ref: 0.01, Adv Std: 0.9\n" for s in range(1, 21)))
    orl = tmp_path / "openrlhf.log"
    orl.write_text("".join(f"✨ Global step {s}: {{'reward': {s / 20}, 'kl': 0.01}}\n" for s in range(1, 21)))
    db = tmp_path / "mlruns.db"
    from tests.test_mlflow import write_sqlite_store

    write_sqlite_store(db, n=10)
    paths = [str(p) for p in (typed, kv, orl, db)]
    code = f"import sys; from grpofit.readers import read_path; [read_path(p) for p in {paths!r}]; print('pandas' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
