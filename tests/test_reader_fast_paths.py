"""The readers' fast paths give exactly what their careful paths give (the reader speed
must never change a result): trainer_state.json rows taken column-wise in batches, the JSON
scanner's run of array values, and the sniffer's byte-level pre-checks."""

from __future__ import annotations

import importlib
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grpofit.readers import hf
from grpofit.readers.source import Source

sniff = importlib.import_module("grpofit.readers.sniff")

_cells = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-3, 3),
    st.none(),
    st.booleans(),
    st.sampled_from(["0.5", " 2 ", "x", "true"]),
    st.just([1.0]),
    st.just({"a": 0.5}),
)


@st.composite
def _log_rows(draw):
    """Mostly plain rows (rising steps, number cells), now and then one that is not: a repeated
    or falling step, a missing or text step, a summary row, a nested or text cell, a non-object."""
    n = draw(st.integers(0, 40))
    rows, step = [], 0
    for _ in range(n):
        step += draw(st.sampled_from([1, 1, 1, 2, 0, -1]))
        row = {"step": step if draw(st.integers(0, 9)) else draw(st.sampled_from([None, "3", True, 2.5, step]))}
        for key in draw(st.lists(st.sampled_from(["loss", "reward", "kl", "eval/reward", "lr"]), max_size=4)):
            row[key] = draw(st.floats(-1, 1)) if draw(st.integers(0, 5)) else draw(_cells)
        if not draw(st.integers(0, 30)):
            row = {"train_runtime": 1.0, "train_loss": 0.5, "step": step}
        if not draw(st.integers(0, 60)):
            row = draw(st.sampled_from([[1, 2], "text", 3]))
        if draw(st.booleans()):  # key order varies from row to row
            row = dict(reversed(list(row.items()))) if isinstance(row, dict) else row
        rows.append(row)
    return rows


def _careful(rows):
    merger = hf.RowMerger()
    for r in rows:
        merger.add(r)
    return merger


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(rows=_log_rows(), batch=st.sampled_from([1, 2, 3, 7, 512]))
def test_batched_rows_give_the_row_by_row_merge(rows, batch):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(hf, "BATCH", batch)
        fast = hf.RowMerger()
        for r in rows:
            fast.feed(r)
        fast.flush()
    slow = _careful(rows)
    assert (fast.rows, fast.summary, fast.not_rows) == (slow.rows, slow.summary, slow.not_rows)
    if not slow.rows or slow.not_rows:
        return
    (ft, fs), (st_, ss) = fast.build(), slow.build()
    assert list(ft) == list(st_) and fs == ss
    for k in st_:
        assert ft[k].dtype == st_[k].dtype and np.array_equal(ft[k], st_[k], equal_nan=True), k
        assert np.array_equal(np.signbit(ft[k]), np.signbit(st_[k])), k


def _assert_same_table(fast, careful, data):
    """A fast path's ``(header, table, warnings, dropped)`` equals the careful path's, column by
    column to the bit (the same parse, not a nearby one); returns the fast table."""
    assert careful is not None, data
    (fh, ft, fw, fd), (ch, ct, cw, cd) = fast, careful
    assert (fh, list(ft), fw, fd) == (ch, list(ct), cw, cd), data
    for k in ct:
        assert ft[k].dtype == ct[k].dtype and ft[k].tobytes() == ct[k].tobytes(), (k, data)
    return ft


def test_plain_trainer_state_is_read_column_wise(tmp_path, monkeypatch):
    """The usual file takes the batched path (it would be silently slow otherwise), and the
    run is the row-by-row path's run."""
    rows = [{"step": s, "loss": 1.0 / s, "reward": 0.01 * s} for s in range(1, 2000)]
    rows.append({"train_runtime": 9.0, "train_loss": 0.1, "step": 1999})
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps({"global_step": 1999, "log_history": rows}, indent=2))
    calls = []
    real = hf.RowMerger._add_plain
    monkeypatch.setattr(hf.RowMerger, "_add_plain", lambda self, b: calls.append(len(b)) or real(self, b))
    [fast] = hf.read_hf(Source(str(path), str(path)), "trainer_state")
    assert sum(calls) == len(rows) and fast.stats["summary_rows"] == 1
    monkeypatch.setattr(hf.RowMerger, "_add_plain", lambda self, b: False)
    [slow] = hf.read_hf(Source(str(path), str(path)), "trainer_state")
    assert np.array_equal(fast.steps, slow.steps) and list(fast.metrics) == list(slow.metrics)
    for k in slow.metrics:
        assert np.array_equal(fast.metrics[k], slow.metrics[k]), k
    assert fast.stats == slow.stats


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(
        st.one_of(st.floats(), st.text(max_size=5), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)),
        max_size=20,
    ),
    chunk=st.sampled_from([1, 5, 64, 1 << 18]),
    indent=st.sampled_from([None, 0, 2]),
)
def test_scanner_run_of_values_is_the_one_by_one_scan(tmp_path_factory, values, chunk, indent):
    import io

    import grpofit.readers.jsonscan as js

    text = json.dumps(values, indent=indent).encode()
    got: list = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(js, "CHUNK", chunk)
        scan = js.JsonScanner(io.BytesIO(text))
        scan.array(got.append)
        assert scan.peek() == ""
    assert json.dumps(got) == json.dumps(values)


@pytest.mark.slow
@settings(max_examples=500, deadline=None)
@given(
    head=st.binary(max_size=60) | st.text(alphabet="step:Globa {}'\x1b[0m\n\xe9", max_size=40).map(str.encode),
    tail=st.binary(max_size=20) | st.just(b""),
    literal=st.sampled_from(["step:", "Global step ", "{'", "': "]),
)
def test_byte_precheck_never_misses_what_the_text_holds(head, tail, literal):
    p = sniff.Probe(head, "x.log", tail)
    if literal in p.both:
        assert p.may_contain(literal)
    if not p.may_contain(literal):
        assert literal not in p.both


def test_a_number_cut_after_its_point_is_not_taken_whole(tmp_path, monkeypatch):
    """The scanner took "3." at a chunk's edge for the number 3 (then failed on "."): a number is
    complete only when what follows cannot continue it."""
    import grpofit.readers.jsonscan as js

    text = '{"log_history": [{"step": 1, "reward": 0.5}, {"step": 2, "reward": 0.75}], "num_train_epochs": 3.25, "max_steps": 1e3}'
    path = tmp_path / "trainer_state.json"
    path.write_text(text)
    for chunk in range(1, len(text) + 1):
        monkeypatch.setattr(js, "CHUNK", chunk)
        [run] = hf.read_hf(Source(str(path), str(path)), "trainer_state")
        assert run.config["trainer_state.num_train_epochs"] == 3.25, chunk
        assert run.config["trainer_state.max_steps"] == 1000.0, chunk


# --- a small CSV read by pandas when the caller has imported it -------------------------------

_CSV_CELLS = [
    "1",
    "-0",
    "0.5",
    ".5",
    "5.",
    "+1",
    "1e5",
    "1E-5",
    "1.e5",
    "1e",
    "e5",
    "--1",
    "1-2",
    "1.2.3",
    "1_000",
    "0x1A",
    "inf",
    "-inf",
    "+inf",
    "Inf",
    "INF",
    "infinity",
    "-Infinity",
    "iNfInItY",
    "1.#INF",
    "1.#IND",
    "-1.#IND",
    "nan",
    "NaN",
    "-nan",
    "+nan",
    "NAN",
    "nan(1)",
    "-NaN",
    "NA",
    "N/A",
    "n/a",
    "null",
    "None",
    "NULL",
    "#N/A",
    "<NA>",
    "",
    "True",
    "False",
    "true",
    "TRUE",
    "x",
    "1.5e308",
    "1e309",
    "-1e309",
    "1e-400",
    "4.9e-324",
    "2.4703282292062328e-324",
    "123456789012345678901234567890",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775809",
    "18446744073709551616",
    "0.1000000000000000055511151231257827",
    "9007199254740993",
    "00012",
    "1e0001",
    "\u0661\u0662",
    " 1",
    "1 ",
    "\t1",
    '"1"',
    "1\x0c2",
    "1\x00",
    "\u00e9",
    "0.30000000000000004",
]


@st.composite
def _small_csvs(draw):
    """Mostly clean number tables, now and then with a hostile cell, row, header or line break."""
    delim = draw(st.sampled_from([",", ",", ",", "\t", ";"]))
    width = draw(st.integers(1, 4))
    names = draw(
        st.lists(
            st.sampled_from(["step", "reward", "kl", "Unnamed: 0", "", " a", '"q"', "r - train/x", "step"]),
            min_size=width,
            max_size=width,
        )
    )
    numbers = st.one_of(
        st.floats(allow_nan=False, allow_infinity=False).map(repr),
        st.integers(-(10**20), 10**20).map(str),
        st.floats(-1e3, 1e3).map(lambda v: f"{v:.6g}"),
    )
    cell = st.one_of(numbers, numbers, numbers, st.sampled_from(_CSV_CELLS))
    clean = draw(st.booleans())
    rows = []
    for i in range(draw(st.integers(0, 8))):
        n = width if clean or draw(st.integers(0, 4)) else draw(st.integers(0, width + 1))
        rows.append(delim.join(str(i) if j == 0 and clean else draw(cell if not clean else numbers) for j in range(n)))
    if not clean and draw(st.booleans()):
        rows.insert(draw(st.integers(0, len(rows))), draw(st.sampled_from(["", " ", "\t", "\r", delim * width])))
    brk = draw(st.sampled_from(["\n", "\n", "\r\n", "\r"]))
    text = ("\ufeff" if draw(st.integers(0, 9)) == 0 else "") + delim.join(names) + brk + brk.join(rows) + brk
    return text.encode("utf-8"), delim


def _numpy_table(data: bytes, delim: str, mp):
    from grpofit.readers import delimited

    mp.setattr(delimited, "_read_loaded_pandas", lambda data, delim: None)
    return delimited._read_small(Source("x.csv", data=data), delim)


@pytest.mark.slow
@settings(max_examples=int(__import__("os").environ.get("CSV_EXAMPLES", 400)), deadline=None)
@given(case=_small_csvs())
def test_loaded_pandas_reads_a_small_table_as_the_numpy_paths_do(case):
    """Whenever pandas' C parser is taken for a small table (the caller has imported pandas),
    the columns, their bytes, the warnings and the dropped count are the numpy paths'."""
    from grpofit.readers import delimited

    data, delim = case
    fast = delimited._read_loaded_pandas(data, delim)
    if fast is None:
        return
    with pytest.MonkeyPatch.context() as mp:
        careful = _numpy_table(data, delim, mp)
    ft = _assert_same_table(fast, careful, data)
    for k in ft:
        assert ft[k].flags.c_contiguous and ft[k].flags.owndata, k


@pytest.mark.slow
@pytest.mark.subprocess
def test_loaded_pandas_takes_a_plain_table_and_gives_the_same_run(tmp_path):
    """A clean table (the benchmark's shape, W&B's quoted header, CRLF, a BOM, empty and NA
    cells, integers) takes pandas' parser once pandas is loaded, and the Run is the one a
    process without pandas reads (compared across processes, where pandas is not imported)."""
    import subprocess
    import sys

    import pandas  # noqa: F401 - the caller has imported it

    from grpofit.readers import delimited, read_path

    rng = np.random.default_rng(3)
    kl = ["" if i % 5 == 0 else "NA" if i % 7 == 0 else repr(float(rng.normal())) for i in range(1, 300)]
    body = "\r\n".join(f"{i},{rng.random():.6g},{kl[i - 1]},{i * 512}" for i in range(1, 300))
    cases = {
        "plain.csv": "step,reward,kl,num_tokens\r\n" + body + "\r\n",
        "wandb.csv": '\ufeff"Step","run - train/reward","run - train/kl","run - train/num_tokens"\r\n' + body + "\r\n",
    }
    for name, text in cases.items():
        path = tmp_path / name
        path.write_bytes(text.encode("utf-8"))
        data = path.read_bytes()
        assert delimited._read_loaded_pandas(data, ",") is not None, name
        code = (
            "import sys, pickle; from grpofit.readers import read_path; runs = read_path(sys.argv[1]); "
            "assert 'pandas' not in sys.modules; sys.stdout.buffer.write(pickle.dumps("
            "[(r.name, r.step_column, r.steps.tobytes(), {k: v.tobytes() for k, v in r.metrics.items()}, r.warnings, r.stats) for r in runs]))"
        )
        import pickle

        alone = pickle.loads(
            subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, check=True).stdout
        )
        here = [
            (
                r.name,
                r.step_column,
                r.steps.tobytes(),
                {k: v.tobytes() for k, v in r.metrics.items()},
                r.warnings,
                r.stats,
            )
            for r in read_path(str(path))
        ]
        assert here == alone, name


# --- blank cells in an unquoted table (a metric logged every few steps) -----------------------

_SPARSE_CELLS = ["", "", "", "nan", "NaN", "-nan", "-NaN", "NAN", "+nan", "-NAN", " 1", "1_000", "-0", "inf", "x", "  "]


@st.composite
def _sparse_csvs(draw):
    width = draw(st.integers(1, 4))
    numbers = st.floats(allow_nan=False, allow_infinity=False).map(repr)
    cell = st.one_of(numbers, numbers, st.sampled_from(_SPARSE_CELLS))
    rows = [",".join(draw(cell) for _ in range(width)) for _ in range(draw(st.integers(1, 8)))]
    return ("step,reward,eval_reward,kl"[: [4, 11, 23, 26][width - 1]] + "\n" + "\n".join(rows) + "\n").encode(), ","


def _csv_module_table(data: bytes, delim: str, mp):
    from grpofit.readers import delimited

    mp.setattr(delimited, "_read_unquoted", lambda text, delim: None)
    return _numpy_table(data, delim, mp)


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(case=_sparse_csvs())
def test_blank_cells_are_read_as_the_csv_path_reads_them(case):
    """The unquoted path takes a table with blank cells (it sent them all to the csv module, cell by
    cell: a tenth of a sparse log's judgement); the columns' bytes, the warnings and the dropped
    count are the csv path's, NaN signs included."""
    from grpofit.readers import delimited

    data, delim = case
    quick = delimited._read_unquoted(data.decode(), delim)
    if quick is None:
        return
    with pytest.MonkeyPatch.context() as mp:
        careful = _csv_module_table(data, delim, mp)
    _assert_same_table(quick, careful, data)


def test_a_sparse_eval_column_takes_the_unquoted_path():
    from grpofit.readers import delimited

    rows = [f"{s},{0.01 * s},{'' if s % 10 else 0.5 - 0.01 * s},{'nan' if s == 7 else 0.1}" for s in range(1, 60)]
    text = "step,reward,eval_reward,kl\n" + "\n".join(rows) + "\n"
    header, table, warnings, dropped = delimited._read_unquoted(text, ",")
    assert header == ["step", "reward", "eval_reward", "kl"] and not warnings and not dropped
    assert np.isnan(table["eval_reward"]).sum() == 54 and np.isnan(table["kl"]).sum() == 1
    assert not np.signbit(table["eval_reward"]).any()
