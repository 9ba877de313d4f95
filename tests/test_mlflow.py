"""MLflow stores. The `mlflow` package is not a dependency (not even for tests): the stores here
are WRITTEN FROM MLFLOW'S DOCUMENTED SCHEMA, not produced by the mlflow package:

- file store: ``mlruns/<experiment_id>/meta.yaml`` and ``<run_id>/{meta.yaml, metrics/<key>,
  params/<key>, tags/<key>}``, each metric line ``"<timestamp ms> <value> <step>"`` as MLflow's
  FileStore writes it (a key with ``/`` is a sub-folder);
- SQLite store: the tables MLflow's SQLAlchemy store creates (``experiments``, ``runs``,
  ``metrics`` with its composite primary key, ``params``, ``tags``), with verl's metric names
  sanitised as its MLflow logger does (``mean@1`` -> ``mean_at_1``).
"""

from __future__ import annotations

import os
import sqlite3

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grpofit.core.errors import GrpofitError
from grpofit.core.roles import choose_reward, detect_roles
from grpofit.readers import discover, read_bytes, read_path
from tests.conftest import assert_reads_or_fails_cleanly

T0 = 1_753_434_469_000


def _reward(step: int) -> float:
    return round(0.9 - 0.6 * np.exp(-step / 20), 6)


def write_file_store(root, run_id="a1b2c3", experiment_id="1", n=40, run_name="grpo-qwen"):
    exp = root / "mlruns" / experiment_id
    run = exp / run_id
    (run / "metrics" / "critic" / "score").mkdir(parents=True)
    (run / "metrics" / "val-core" / "openai" / "gsm8k" / "reward").mkdir(parents=True)
    (run / "params").mkdir()
    (run / "tags").mkdir()
    (exp / "meta.yaml").write_text(
        f"artifact_location: file://{exp}\nexperiment_id: '{experiment_id}'\nlifecycle_stage: active\nname: gsm8k\n"
    )
    (run / "meta.yaml").write_text(
        f"artifact_uri: file://{run}/artifacts\nend_time: null\nentry_point_name: ''\nexperiment_id: '{experiment_id}'\n"
        f"lifecycle_stage: active\nrun_id: {run_id}\nrun_name: {run_name}\nrun_uuid: {run_id}\nsource_name: ''\n"
        "source_type: 4\nsource_version: ''\nstart_time: 1753434469000\nstatus: 1\ntags: []\nuser_id: root\n"
    )
    with open(run / "metrics" / "critic" / "score" / "mean", "w") as f:
        for s in range(1, n + 1):
            f.write(f"{T0 + s * 1000} {_reward(s)} {s}\n")
    with open(run / "metrics" / "val-core" / "openai" / "gsm8k" / "reward" / "mean@1", "w") as f:
        for s in range(0, n + 1, 5):
            f.write(f"{T0 + s * 1000} {_reward(s) - 0.1} {s}\n")
    with open(run / "metrics" / "actor_entropy", "w") as f:
        for s in range(1, n + 1):
            f.write(f"{T0 + s * 1000} 0.5 {s}\n")
    (run / "params" / "actor_rollout_ref.rollout.n").write_text("8")
    (run / "params" / "actor_rollout_ref.actor.optim.lr").write_text("1e-06")
    (run / "tags" / "mlflow.runName").write_text(run_name)
    return run


SCHEMA = """
CREATE TABLE experiments (
    experiment_id INTEGER NOT NULL, name VARCHAR(256) NOT NULL, artifact_location VARCHAR(256),
    lifecycle_stage VARCHAR(32), creation_time BIGINT, last_update_time BIGINT,
    CONSTRAINT experiment_pk PRIMARY KEY (experiment_id), UNIQUE (name)
);
CREATE TABLE runs (
    run_uuid VARCHAR(32) NOT NULL, name VARCHAR(250), source_type VARCHAR(20), source_name VARCHAR(500),
    entry_point_name VARCHAR(50), user_id VARCHAR(256), status VARCHAR(9), start_time BIGINT, end_time BIGINT,
    deleted_time BIGINT, source_version VARCHAR(50), lifecycle_stage VARCHAR(20), artifact_uri VARCHAR(200),
    experiment_id INTEGER, CONSTRAINT run_pk PRIMARY KEY (run_uuid),
    FOREIGN KEY(experiment_id) REFERENCES experiments (experiment_id)
);
CREATE TABLE metrics (
    key VARCHAR(250) NOT NULL, value FLOAT NOT NULL, timestamp BIGINT NOT NULL, run_uuid VARCHAR(32) NOT NULL,
    step BIGINT DEFAULT '0' NOT NULL, is_nan BOOLEAN DEFAULT '0' NOT NULL,
    CONSTRAINT metric_pk PRIMARY KEY (key, timestamp, step, run_uuid, value, is_nan),
    FOREIGN KEY(run_uuid) REFERENCES runs (run_uuid)
);
CREATE TABLE latest_metrics (
    key VARCHAR(250) NOT NULL, value FLOAT NOT NULL, timestamp BIGINT, step BIGINT NOT NULL, is_nan BOOLEAN NOT NULL,
    run_uuid VARCHAR(32) NOT NULL, CONSTRAINT latest_metric_pk PRIMARY KEY (key, run_uuid)
);
CREATE TABLE params (
    key VARCHAR(250) NOT NULL, value VARCHAR(8000) NOT NULL, run_uuid VARCHAR(32) NOT NULL,
    CONSTRAINT param_pk PRIMARY KEY (key, run_uuid)
);
CREATE TABLE tags (
    key VARCHAR(250) NOT NULL, value VARCHAR(8000), run_uuid VARCHAR(32) NOT NULL,
    CONSTRAINT tag_pk PRIMARY KEY (key, run_uuid)
);
"""


def write_sqlite_store(path, n=40):
    con = sqlite3.connect(path)
    con.executescript(SCHEMA)
    con.execute("INSERT INTO experiments VALUES (0, 'Default', 'mlruns/0', 'active', 0, 0)")
    runs = [("r1", "grpo_n8", 8, "active"), ("r2", "grpo_n16", 16, "active"), ("r3", "crashed", 4, "deleted")]
    for i, (uuid, name, g, stage) in enumerate(runs):
        con.execute(
            "INSERT INTO runs VALUES (?, ?, 'LOCAL', '', '', 'root', 'FINISHED', ?, NULL, NULL, '', ?, '', 0)",
            (uuid, name, T0 + i, stage),
        )
        con.execute("INSERT INTO params VALUES ('actor_rollout_ref.rollout.n', ?, ?)", (str(g), uuid))
        for s in range(1, n + 1):
            r = _reward(s) + (0.01 if uuid == "r2" else 0)
            con.execute("INSERT INTO metrics VALUES ('critic/score/mean', ?, ?, ?, ?, 0)", (r, T0 + s, uuid, s))
            con.execute("INSERT INTO metrics VALUES ('actor/entropy', 0.5, ?, ?, ?, 0)", (T0 + s, uuid, s))
            if s % 5 == 0:  # verl's MLflow logger: mean@1 -> mean_at_1
                con.execute(
                    "INSERT INTO metrics VALUES ('val-core/openai/gsm8k/reward/mean_at_1', ?, ?, ?, ?, 0)",
                    (r - 0.1, T0 + s, uuid, s),
                )
        # a value logged again at step 3 later (a retry): the latest timestamp wins
        con.execute("INSERT INTO metrics VALUES ('critic/score/mean', 0.777, ?, ?, 3, 0)", (T0 + 10_000, uuid))
        con.execute("INSERT INTO metrics VALUES ('critic/score/mean', 0, ?, ?, 4, 1)", (T0 + 10_000, uuid))
    con.commit()
    con.close()


def test_file_store_run_folder(tmp_path):
    run_dir = write_file_store(tmp_path)
    (run,) = read_path(str(run_dir))
    assert run.format == "mlflow" and run.step_column == "step"
    assert choose_reward(run.numeric_columns())["column"] == "critic/score/mean"
    steps, values = run.series("critic/score/mean")
    assert list(steps) == list(range(1, 41)) and values[-1] == pytest.approx(_reward(40))
    assert detect_roles(run.numeric_columns())["eval_reward"] == "val-core/openai/gsm8k/reward/mean@1"
    assert run.config["actor_rollout_ref.rollout.n"] == 8
    assert run.config["actor_rollout_ref.actor.optim.lr"] == 1e-6


def test_mlruns_folder_is_walked(tmp_path):
    write_file_store(tmp_path, run_id="aaa")
    write_file_store(tmp_path, run_id="bbb", experiment_id="2")
    found = discover([str(tmp_path / "mlruns")])
    assert [(os.path.basename(s.path), s.kind) for s in found] == [("aaa", "mlflow-run"), ("bbb", "mlflow-run")]
    assert len(read_path(str(tmp_path / "mlruns"))) == 2


def test_sqlite_store(tmp_path):
    db = tmp_path / "mlruns.db"
    write_sqlite_store(db)
    before = db.read_bytes()
    runs = read_path(str(db))
    assert db.read_bytes() == before  # opened read-only
    assert [r.name.split("::")[1] for r in runs] == ["grpo_n8", "grpo_n16"]  # the deleted run is left out
    run = runs[0]
    assert run.format == "mlflow-sqlite"
    assert choose_reward(run.numeric_columns())["column"] == "critic/score/mean"
    v = run.metrics["critic/score/mean"]
    assert run.steps.size == 40 and v[2] == 0.777 and np.isnan(v[3])
    assert detect_roles(run.numeric_columns())["eval_reward"] == "val-core/openai/gsm8k/reward/mean_at_1"
    assert run.config["actor_rollout_ref.rollout.n"] == 8 and runs[1].config["actor_rollout_ref.rollout.n"] == 16
    # the same bytes from stdin
    assert [r.steps.size for r in read_bytes(before, "-")] == [40, 40]
    # discovered in a folder by its content
    assert [s.path for s in discover([str(tmp_path)])] == [str(db)]


def test_sqlite_that_is_not_mlflow(tmp_path, capsys):
    from grpofit.cli import main

    db = tmp_path / "other.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE t (a INTEGER)")
    con.commit()
    con.close()
    with pytest.raises(SystemExit) as exc:
        main(["fit", str(db)])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(db) in err[0] and "MLflow" in err[0]


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(cut=st.floats(0, 1), junk=st.binary(max_size=64))
def test_truncated_and_arbitrary_sqlite_bytes(tmp_path_factory, cut, junk):
    db = tmp_path_factory.mktemp("m") / "mlruns.db"
    write_sqlite_store(db, n=10)
    good = db.read_bytes()
    assert_reads_or_fails_cleanly((good[: int(len(good) * cut)], good[: int(len(good) * cut)] + junk, junk))


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(lines=st.lists(st.text(max_size=30), max_size=20))
def test_arbitrary_metric_files(tmp_path_factory, lines):
    run_dir = write_file_store(tmp_path_factory.mktemp("f"), n=10)
    (run_dir / "metrics" / "junk").write_text("\n".join(lines), encoding="utf-8", errors="replace")
    try:
        (run,) = read_path(str(run_dir))
    except GrpofitError as e:
        assert "\n" not in e.one_line()
        return
    assert run.series("critic/score/mean")[0].size == 10
