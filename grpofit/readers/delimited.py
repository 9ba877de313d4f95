"""CSV and TSV logs: wide tables, long ``step,key,value`` tables, W&B panel exports and W&B API
history dumps. Large files are parsed by pandas' C engine (hundreds of MB/s); a small, clean wide
table (the usual single run) is split with ``str.split`` (with the ``csv`` module when cells are
quoted, rows ragged or cells not numbers) and converted by numpy, which spares the quarter second
that importing pandas costs. Anything unusual in a small file falls back to pandas, so both paths
give the same table. A caller that has already imported pandas has paid for it: then a plain
small table is parsed by pandas' C parser, where its result is certainly the numpy paths'
(:func:`_read_loaded_pandas`).
"""

from __future__ import annotations

import csv
import os
import re
import sys
from contextlib import contextmanager
from itertools import repeat

import numpy as np

from grpofit.core.errors import ReadError
from grpofit.core.runs import Run
from grpofit.readers.common import build_run
from grpofit.readers.sniff import sniff_delimiter
from grpofit.readers.source import Source, decode

_UNNAMED = re.compile(r"Unnamed: \d+\Z")


def read_delimited(src: Source, fmt: str, *, step: str | None = None) -> list[Run]:
    """Read a delimited log sniffed as ``fmt`` (csv, tsv, csv-long, wandb-export, wandb-history)."""
    delim = sniff_delimiter(decode(src.head(64 * 1024)))
    src, notes = _settled(src, delim)
    notes += _duplicate_names(src, delim)
    torn = "; ".join(notes) if notes else None
    runs = _read_settled(src, fmt, delim, step)
    if torn is not None:
        for run in runs:
            run.warnings[:0] = notes
    return runs


def _read_settled(src: Source, fmt: str, delim: str, step: str | None) -> list[Run]:
    if fmt in ("csv", "tsv", "wandb-history") and src.size() <= SMALL_FILE:
        quick = _read_small(src, delim)
        if quick is not None:
            _, table, warnings, dropped = quick
            return _runs(src, fmt, table, step, warnings, {"dropped_columns": dropped})
    if fmt == "wandb-export" and src.size() <= SMALL_FILE:  # a panel export is small: no pandas
        quick = _read_small(src, delim)
        if quick is not None:
            return _wandb_export(src, None, step, quick=quick)
    if fmt in ("csv", "tsv", "wandb-history") and src.size() > CHUNKED_FILE and src.path is not None:
        return [_read_large(src, fmt, delim, step)]
    df = _read_frame(src, delim)
    if len(df) == 0:
        raise ReadError(
            "has a header but no data rows",
            path=src.name,
            fix="wait until the run logs its first step, or check the export",
        )
    if fmt in ("csv-long", "wandb-export"):
        return [_long(src, df, step)] if fmt == "csv-long" else _wandb_export(src, df, step)
    table, warnings, dropped = numeric_table(df)
    return _runs(src, fmt, table, step, warnings, {"dropped_columns": dropped})


def _runs(src: Source, fmt: str, table: dict, step: str | None, warnings: list[str], stats: dict) -> list[Run]:
    """The runs of a wide table: one, or one per run appended after another (the step falls
    back to its start: :mod:`grpofit.readers.appended`), the file's warnings with the first."""
    from grpofit.readers.appended import split_runs

    parts, split_warnings = split_runs(dict(table), step, piece=src.piece)
    return [
        build_run(
            src,
            fmt,
            part,
            step=step,
            warnings=warnings + split_warnings if i == 0 else [],
            stats=stats,
            name=None if suffix is None else f"{src.name}::{suffix}",
        )
        for i, (suffix, part) in enumerate(parts)
    ]


#: files up to this size may take the pandas-free path
SMALL_FILE = 2 * 1024 * 1024
#: wide tables larger than this are parsed in chunks of CHUNK_ROWS rows (bounded peak memory)
CHUNKED_FILE = 32 * 1024 * 1024
CHUNK_ROWS = 100_000
#: cells pandas reads as missing by default
_NA = {
    "",
    "#N/A",
    "#N/A N/A",
    "#NA",
    "-1.#IND",
    "-1.#QNAN",
    "-NaN",
    "-nan",
    "1.#IND",
    "1.#QNAN",
    "<NA>",
    "N/A",
    "NA",
    "NULL",
    "NaN",
    "None",
    "n/a",
    "nan",
    "null",
}


def _read_small(src: Source, delim: str):
    """``(header, table, warnings, dropped)`` of a small clean wide table, or None to use pandas.

    Clean: a header of unique non-empty names, every row no longer than the header, a final line
    break (a torn last line goes to the careful path), at least one data row.
    """
    data = src.data if src.data is not None else src.head(SMALL_FILE + 1)
    if not data.endswith((b"\n", b"\r")):
        return None
    if "pandas" in sys.modules:  # already paid for (a notebook, a batch): its C parser is quicker
        quick = _read_loaded_pandas(data, delim)
        if quick is not None:
            return quick
    text = decode(data)
    if text.startswith("\ufeff"):
        text = text[1:]
    quick = _read_unquoted(text, delim)
    if quick is not None:
        return quick
    try:
        rows = [r for r in csv.reader(text.splitlines(), delimiter=delim) if r]
    except csv.Error:
        return None
    if len(rows) < 2:
        return None
    header = rows[0]
    width = len(header)
    if not _clean_names(header):
        return None
    body = rows[1:]
    lengths = set(map(len, body))
    if max(lengths) > width:
        return None
    if min(lengths) < width:
        body = [r + [""] * (width - len(r)) for r in body]
    columns = {name: _to_numbers(cells) for name, cells in zip(header, zip(*body))}
    return (header, *_assemble(columns, len(body)))


def _read_unquoted(text: str, delim: str):
    """:func:`_read_small` for the usual log: no quotes (but around header cells), every row as
    wide as the header and every cell a number. All cells are split and converted by one ``np.array`` call (the conversion
    :func:`_to_numbers` makes per column). None for anything else: the ``csv`` path decides.
    """
    lines = list(filter(None, text.splitlines()))  # csv.reader skips only empty lines
    limit = csv.field_size_limit()
    if len(lines) < 2 or (len(text) > limit and max(map(len, lines)) > limit):
        return None  # too few rows, or a line that may hold a cell too long for the csv module
    header, body = _plain_header(lines[0], delim), lines[1:]
    if header is None or text.count('"') != lines[0].count('"'):  # quotes only in the header
        return None
    width = len(header)
    if not _clean_names(header):
        return None
    if set(map(str.count, body, repeat(delim))) != {width - 1}:  # a ragged row
        return None
    cells = delim.join(body).split(delim)
    blanks = False
    try:
        values = np.array(cells, dtype=np.float64)
    except ValueError:  # blank cells (a metric logged every few steps: see _with_blanks), or text
        blanks = True
    if blanks:
        try:
            values = np.array([c or "nan" for c in cells], dtype=np.float64)
        except ValueError:
            return None
    n = len(body)
    grid = values.reshape(n, width)
    columns = {name: (grid[:, j].copy(), 0, n) for j, name in enumerate(header)}
    if blanks:
        _with_blanks(columns, header, cells, grid)
    return (header, *_assemble(columns, n))


def _with_blanks(columns: dict, header: list[str], cells: list[str], grid: np.ndarray) -> None:
    """The columns of :func:`_read_unquoted` with blank cells as the ``csv`` path reads them
    (:func:`_to_numbers`, which converts such a column cell by cell): each missing cell
    (:data:`_NA`: the blank ones and a NaN spelled ``nan``, ``NaN``, ``-nan`` or ``-NaN``) a NaN
    without a sign, not counted as present. Only the NaN cells are looked at."""
    width = len(header)
    rows, cols = np.nonzero(np.isnan(grid))
    for j in np.unique(cols).tolist():
        at = (rows[cols == j] * width + j).tolist()
        if all(cells[i] for i in at):
            continue  # no blank cell: the column converts whole, as it is
        values, _, n = columns[header[j]]
        missing = [i // width for i in at if cells[i] in _NA]
        values[missing] = np.nan
        columns[header[j]] = (values, 0, n - len(missing))


def _clean_names(header: list[str]) -> bool:
    """Unique, non-blank column names (else pandas renames them: the careful path decides)."""
    return len(set(header)) == len(header) and all(h.strip() for h in header)


#: bytes that ``str.splitlines`` takes for line breaks and pandas does not (ASCII ones)
_ODD_BREAKS = (b"\x0b", b"\x0c", b"\x1c", b"\x1d", b"\x1e")


def _read_loaded_pandas(data: bytes, delim: str):
    """:func:`_read_unquoted`'s table read by pandas' C parser, for a caller that has already
    imported pandas; None unless the result is certainly what the numpy paths give.

    Taken only for a plain body (ASCII, no quote, space, NUL or line break but ``\\n`` and
    ``\\r``, no tab unless it is the delimiter, so rows and cells are split alike), a header
    :func:`_plain_header` reads into unique names that pandas keeps as they are, and columns
    that pandas reads as numbers (its default NA cells are :data:`_NA`, which the numpy paths
    read as missing too; it parses floats exactly as ``float`` does: tests/test_reader_fast_paths.py
    compares the two on hostile cells).
    """
    import io

    import pandas as pd

    start = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    end = data.find(b"\n", start)
    if end <= start:
        return None
    line = data[start:end].removesuffix(b"\r")
    in_body = lambda b: data.find(b, end) >= 0  # noqa: E731 - the body is not copied out
    if (
        b"\r" in line
        or not (data.isascii() or data[end:].isascii())
        or any(map(in_body, (b'"', b" ", b"\x00", *_ODD_BREAKS)))
        or (delim != "\t" and in_body(b"\t"))
        or any(b in line for b in _ODD_BREAKS)
        or any(in_body(c) and in_body(b"-" + c) for c in (b"n", b"N"))  # "-nan": pandas drops its sign
    ):
        return None
    text = decode(line)
    header = _plain_header(text, delim)
    if header is None or not _clean_names(header) or len(text.splitlines()) != 1:
        return None
    try:
        # low_memory=False: one pass over a file of at most SMALL_FILE bytes (no chunks to
        # concatenate; 0.1 ms of 1.4 on a 1,000-row log); the types are then inferred from
        # the whole column, and anything but numbers is sent to the careful path below
        # without a BOM, "utf-8" reads the same text as "utf-8-sig" and spares pandas a
        # decoding wrapper (30 us of a 1 ms read)
        options = _csv_options(delim) if start else {**_csv_options(delim), "encoding": "utf-8"}
        df = pd.read_csv(io.BytesIO(data), low_memory=False, **options)
    except ValueError:  # pandas' ParserError and EmptyDataError: the careful path words it
        return None
    if type(df.index) is not pd.RangeIndex or list(df.columns) != header or not len(df):
        return None
    n = len(df)
    grid = df.to_numpy()  # float64 or int64 when every column is numeric, object (or bool) else
    if grid.dtype.kind not in "fiu":
        return None
    if not grid.all() and _negative_zero(memoryview(data)[end:], delim):
        return None  # pandas reads the cell "-0" as 0, numpy as -0.0
    grid = grid.T
    return (header, *_assemble({name: (grid[j].astype(np.float64), 0, n) for j, name in enumerate(header)}, n))


def _negative_zero(body: bytes | memoryview, delim: str) -> bool:
    """Whether a cell of ``body`` is ``-0`` (or ``-00``...).

    numpy finds the ``-0`` at a cell's start followed by a zero, a boundary or the end; only
    those few are matched by the pattern. A log's ``1e-06`` cells hold ``-0`` by the thousand:
    a regex stopping at each took 80 us of a 1.6 ms read, substring tests of three bytes more."""
    a = np.frombuffer(body, np.uint8)
    at = np.flatnonzero(a[:-1] == ord("-"))
    at = at[a[at + 1] == ord("0")]
    if not at.size:
        return False
    d = ord(delim)
    before, after = a[at - 1], a[np.minimum(at + 2, a.size - 1)]  # a[-1] for at == 0: ruled in below
    start = (at == 0) | (before == 10) | (before == 13) | (before == d)
    ends = (at + 2 == a.size) | (after == ord("0")) | (after == 10) | (after == 13) | (after == d)
    zero = re.compile(rb"-0+(?=[\n\r" + re.escape(delim.encode()) + rb"]|\Z)")
    return any(zero.match(body, i) for i in at[start & ends].tolist())


def _plain_header(line: str, delim: str) -> list[str] | None:
    """The header's cells when each is bare or wholly quoted with no quote inside (W&B quotes
    every header cell): what the ``csv`` module reads from that line; None for anything else."""
    cells = line.split(delim)
    if '"' not in line:
        return cells
    out = []
    for c in cells:
        if '"' in c:
            if len(c) < 2 or c[0] != '"' or c[-1] != '"' or '"' in c[1:-1]:
                return None
            c = c[1:-1]
        out.append(c)
    return out


def _to_numbers(cells: tuple[str, ...]) -> tuple[np.ndarray, int, int]:
    """Float64 values of one column of strings, its count of non-numeric and of present cells."""
    try:
        return np.array(cells, dtype=np.float64), 0, len(cells)
    except ValueError:
        pass
    from grpofit.core.runs import parse_number

    values = np.full(len(cells), np.nan)
    bad = present = 0
    for i, cell in enumerate(cells):
        if cell in _NA:
            continue
        present += 1
        number = parse_number(cell.strip())
        if number is None:
            bad += 1
        else:
            values[i] = number
    return values, bad, present


def _read_large(src: Source, fmt: str, delim: str, step: str | None) -> Run:
    table, warnings, dropped, rows = _chunked_table(src, delim)
    if rows <= 0:
        raise ReadError("has a header but no data rows", path=src.name, fix="wait until the run logs its first step")
    return build_run(src, fmt, table, step=step, warnings=warnings, stats={"dropped_columns": dropped})


def _settled(src: Source, delim: str) -> tuple[Source, list[str]]:
    """The source as it is now, read once, with its torn last line and an unterminated quote cut.

    A file is measured once: up to ``CHUNKED_FILE`` bytes it is read into memory in one read; a
    larger one is read by every later step only up to the end of its last complete line
    (``Source.limit``), so a writer appending meanwhile cannot change what is parsed. A last
    line without a line break is kept when it parses (a finished log written without a final
    newline, however fresh its copy) and dropped with a warning when it is visibly cut (fewer
    cells than the header, a trailing delimiter, an open quote). Nothing depends on the file's
    modification time: only ``watch`` waits for a line to complete (grpofit/watch/tail.py). A
    quote that is never closed would swallow every later row: its line is dropped with a warning.
    """
    notes: list[str] = []
    if src.data is None and src.path is not None:
        with open(src.path, "rb") as f:
            st = os.fstat(f.fileno())
            if st.st_size <= CHUNKED_FILE:
                src = Source(src.name, src.path, f.read(st.st_size))
            else:
                f.seek(max(0, st.st_size - 64 * 1024))
                tail = f.read(st.st_size - f.tell())
                last = _last_break(tail)
                limit = st.st_size
                if last < len(tail):
                    line = tail[last:]
                    if _visibly_cut(line, delim, _header_width(src, delim)):
                        notes.append(_torn_note(line))
                        limit = st.st_size - (len(tail) - last)
                f.seek(0)
                opened = _unclosed_quote_span(f, limit)
                if opened is None:
                    return Source(src.name, src.path, limit=limit), notes
                start, end, note = opened
                notes.append(note)
                return Source(src.name, src.path, limit=limit, skip=(start, end)), notes
    data = src.data
    last = _last_break(data)
    if last < len(data) and data[last:].strip():
        line = data[last:]
        if _visibly_cut(line, delim, _header_width(src, delim)):
            notes.append(_torn_note(line))
            data = data[:last]
    data, note = _drop_unclosed_quote(data)
    if note:
        notes.append(note)
    if data is not src.data:
        src = Source(src.name, src.path, data, piece=src.piece)
    return src, notes


def _duplicate_names(src: Source, delim: str) -> list[str]:
    """A warning per column name the header repeats (pandas reads the copies as ``name.1``...)."""
    names = _header_cells(src, delim) or []
    seen: dict[str, int] = {}
    for n in names:
        seen[n] = seen.get(n, 0) + 1
    return [
        f"column {n!r} appears {k} times in the header; {n!r} is the first, the others are read as "
        + ", ".join(repr(f"{n}.{i}") for i in range(1, k))
        for n, k in seen.items()
        if k > 1 and n.strip()
    ]


def _last_break(data: bytes) -> int:
    """The offset just after the last line break (0 when there is none)."""
    return max(data.rfind(b"\n"), data.rfind(b"\r")) + 1


def _torn_note(line: bytes) -> str:
    return (
        f"last line is incomplete (no line break after {decode(line[:40]).strip()!r}), probably a run "
        "still being written; skipped it"
    )


#: bytes read to find the header line
PEEK_HEADER = 4 * 1024 * 1024


def _header_width(src: Source, delim: str) -> int:
    return len(_header_cells(src, delim) or [])


def _header_cells(src: Source, delim: str) -> list[str] | None:
    """The cells of the first line (within the first ``PEEK_HEADER`` bytes) as the ``csv``
    module splits them; None when it cannot. Only the first line is copied out of a source held
    in memory (the header of a 30 MB table must not cost a 4 MB copy)."""
    data = src.data
    if data is None:
        data = src.head(PEEK_HEADER)
    end = data.find(b"\n", 0, PEEK_HEADER)
    first = decode(data[: PEEK_HEADER if end < 0 else end]).strip("\r\ufeff")
    try:
        return next(csv.reader([first], delimiter=delim), [])
    except csv.Error:
        return None


def _visibly_cut(line: bytes, delim: str, width: int) -> bool:
    text = decode(line).rstrip("\r")
    if text.count('"') % 2 or text.endswith(delim):
        return True
    try:
        cells = next(csv.reader([text], delimiter=delim), [])
    except csv.Error:
        return True
    return len(cells) < width


def _drop_unclosed_quote(data: bytes) -> tuple[bytes, str | None]:
    """``data`` without the line that opens a quote never closed (it would swallow the rest)."""
    if b'"' not in data or _count_quotes(data) % 2 == 0:
        return data, None
    lines = data.split(b"\n")
    odd = False
    opened = None
    for i, line in enumerate(lines):
        if line.count(b'"') % 2:
            odd = not odd
            if odd:
                opened = i
    if opened is None:
        return data, None
    shown = decode(lines[opened][:40]).strip()
    del lines[opened]
    return b"\n".join(lines), f"line {opened + 1} opens a quote that is never closed ({shown!r}); skipped that line"


def _count_quotes(data: bytes, block: int = 1 << 20) -> int:
    """``data.count(b'"')`` a few times quicker (numpy compares a block of bytes at once; the
    blocks bound the temporary array). A W&B export quotes its header cells only: when no
    quote follows the first line, that line's count is the answer (one ``find`` over the rest)."""
    line = data.find(b"\n") + 1
    if line and data.find(b'"', line) < 0:
        return data.count(b'"', 0, line)
    arr = np.frombuffer(data, dtype=np.uint8)
    return sum(int(np.count_nonzero(arr[i : i + block] == 34)) for i in range(0, arr.size, block))


def _unclosed_quote_span(f, limit: int, block: int = 1 << 20) -> tuple[int, int, str] | None:
    """:func:`_drop_unclosed_quote` for a file too large to hold: the first ``limit`` bytes of
    ``f`` are read block by block (once to count the quotes; a second time, only when the count
    is odd, to find the line), never whole. ``(start, end, note)``: the byte range of the line
    that opens the quote never closed (with its line break) and the warning; None when every
    quote is closed."""
    quotes = 0
    left = limit
    while left > 0 and (b := f.read(min(block, left))):
        quotes += b.count(b'"')
        left -= len(b)
    if quotes % 2 == 0:
        return None
    f.seek(0)
    odd = False
    opened = None
    start = carry = line = offset = 0  # the current line's start, its quotes so far, its number
    left = limit
    while left > 0 and (b := f.read(min(block, left))):
        left -= len(b)
        arr = np.frombuffer(b, dtype=np.uint8)
        breaks = np.flatnonzero(arr == 10)
        quotes_at = np.flatnonzero(arr == 34)
        starts = np.concatenate(([0], breaks[:-1] + 1))
        counts = np.searchsorted(quotes_at, breaks) - np.searchsorted(quotes_at, starts)
        if counts.size:
            counts[0] += carry
        for i in np.flatnonzero(counts % 2).tolist():  # the lines with an odd number of quotes
            odd = not odd
            if odd:
                opened = (start if i == 0 else offset + int(starts[i]), offset + int(breaks[i]) + 1, line + i)
        rest = int(quotes_at.size - np.searchsorted(quotes_at, breaks[-1] + 1)) if breaks.size else quotes_at.size
        if breaks.size:
            start, carry, line = offset + int(breaks[-1]) + 1, rest, line + breaks.size
        else:
            carry += rest
        offset += len(b)
    if carry % 2 and not odd:  # the last line, without a line break
        opened = (start, offset, line)
    if opened is None:
        return None
    begin, end, number = opened
    f.seek(begin)
    shown = f.read(min(40, end - begin)).split(b"\n")[0]
    return (
        begin,
        end,
        f"line {number + 1} opens a quote that is never closed ({decode(shown).strip()!r}); skipped that line",
    )


def _read_frame(src: Source, delim: str, chunksize: int | None = None):
    """A DataFrame, or with ``chunksize`` a generator of DataFrames; parse errors -> ReadError."""
    if chunksize is None:
        with _parse_errors(src, delim):
            return _pandas_read(src, delim, None)
    return _chunks(src, delim, chunksize)


def _chunks(src: Source, delim: str, chunksize: int):
    with _parse_errors(src, delim):
        yield from _pandas_read(src, delim, chunksize)


def _pandas_read(src: Source, delim: str, chunksize: int | None):
    import warnings

    import pandas as pd

    warnings.simplefilter("ignore", pd.errors.DtypeWarning)  # mixed columns are handled below
    return pd.read_csv(
        src.path if src.path is not None and src.data is None and src.limit is None else src.open(),
        chunksize=chunksize,
        **_csv_options(delim),
    )


def _csv_options(delim: str) -> dict:
    """What every ``pandas.read_csv`` call of this module is given besides its input."""
    return {
        "sep": delim,
        "engine": "c",
        "encoding": "utf-8-sig",
        "encoding_errors": "replace",
        "skip_blank_lines": True,
    }


@contextmanager
def _parse_errors(src: Source, delim: str):
    """Turn pandas' parse errors into one-line :class:`ReadError` naming the file and the fix."""
    import pandas as pd

    try:
        yield
    except pd.errors.EmptyDataError as exc:
        raise ReadError("the file is empty", path=src.name, fix="point at a log that has rows") from exc
    except pd.errors.ParserError as exc:
        detail = " ".join(str(exc).split())
        raise ReadError(
            f"is not a well-formed {'TSV' if delim == chr(9) else 'CSV'} table ({detail})",
            path=src.name,
            fix="every row needs as many cells as the header; repair or remove the bad row",
        ) from exc


def _column_values(s) -> tuple[np.ndarray, int, int]:
    """Float64 values of one pandas column, its count of non-numeric and of present cells."""
    import pandas as pd

    if s.dtype.kind in "fiub":
        return s.to_numpy(dtype=np.float64, na_value=np.nan), 0, int(s.notna().sum())
    values = pd.to_numeric(s, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    present = int(s.notna().sum())
    bad = present - int(np.isfinite(values).sum() + np.isinf(values).sum())
    return values, bad, present


def _assemble(columns: dict[str, tuple[np.ndarray, int, int]], n: int) -> tuple[dict[str, np.ndarray], list[str], int]:
    """Drop text columns and a written-out pandas index; warn about stray text cells."""
    table: dict[str, np.ndarray] = {}
    warnings: list[str] = []
    dropped: list[str] = []
    for name, (values, bad, present) in columns.items():
        if present and bad == present:
            dropped.append(name)
            continue
        if bad:
            warnings.append(f"column {name!r}: {bad} non-numeric value(s) treated as missing")
        if _UNNAMED.match(name) and n and np.array_equal(values, np.arange(n)):
            continue  # a pandas index written by to_csv()
        table[name] = values
    if dropped:
        shown = ", ".join(dropped[:5]) + (" ..." if len(dropped) > 5 else "")
        warnings.append(f"{len(dropped)} text column(s) ignored: {shown}")
    return table, warnings, len(dropped)


def numeric_table(df) -> tuple[dict[str, np.ndarray], list[str], int]:
    """Columns as float64 arrays; text columns dropped, stray text cells made NaN (warned)."""
    return _assemble({str(col): _column_values(df[col]) for col in df.columns}, len(df))


def _chunked_table(src: Source, delim: str) -> tuple[dict[str, np.ndarray], list[str], int, int]:
    """A large wide table read in row chunks, so pandas never holds the whole file as objects.

    Returns ``(table, warnings, dropped, rows)``; peak memory stays near the float64 result.
    """
    parts: dict[str, list] = {}
    bad: dict[str, int] = {}
    present: dict[str, int] = {}
    rows = 0
    for chunk in _read_frame(src, delim, chunksize=CHUNK_ROWS):
        rows += len(chunk)
        for col in chunk.columns:
            name = str(col)
            values, b, p = _column_values(chunk[col])
            parts.setdefault(name, []).append(values)
            bad[name] = bad.get(name, 0) + b
            present[name] = present.get(name, 0) + p
    columns = {}
    for name in list(parts):
        values = np.concatenate(parts.pop(name)) if parts[name] else np.empty(0)
        columns[name] = (values, bad[name], present[name])
    table, warnings, dropped = _assemble(columns, rows)
    return table, warnings, dropped, rows


def _long(src: Source, df, step: str | None) -> Run:
    """``step,key,value`` rows pivoted wide; a repeated (step, key) keeps its last value."""
    import pandas as pd

    low = {str(c).lower(): c for c in df.columns}
    step_col = next(
        low[h] for h in ("step", "global_step", "train/global_step", "_step", "steps", "iteration", "iter") if h in low
    )
    key_col = next(low[h] for h in ("key", "metric", "tag", "name", "metric_name", "series") if h in low)
    val_col = next(low[h] for h in ("value", "val", "metric_value", "y") if h in low)
    steps = pd.to_numeric(df[step_col], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    values = pd.to_numeric(df[val_col], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    keys = df[key_col].astype(str).to_numpy()
    keep = np.isfinite(steps) & ~np.isnan(values)
    stats = {"rows": len(df), "rows_without_step": int((~np.isfinite(steps)).sum())}
    frame = pd.DataFrame({"s": steps[keep], "k": keys[keep], "v": values[keep]})
    before = len(frame)
    frame = frame.drop_duplicates(subset=["s", "k"], keep="last")
    warnings = []
    if before != len(frame):
        warnings.append(f"{before - len(frame)} repeated (step, key) pair(s); kept the last value of each")
        stats["duplicates"] = before - len(frame)
    key_codes, key_names = pd.factorize(frame["k"], sort=False)
    step_codes, uniq = pd.factorize(frame["s"], sort=False)
    grid = np.full((len(uniq), len(key_names)), np.nan)
    grid[step_codes, key_codes] = frame["v"].to_numpy()
    step_name = str(step_col) if step is None else step
    table = {str(step_col): np.asarray(uniq, dtype=np.float64)}
    for j, k in enumerate(key_names):
        if str(k) != str(step_col):
            table[str(k)] = grid[:, j]
    run = build_run(src, "csv-long", table, step=step_name, warnings=warnings)
    run.stats.update({k: v for k, v in stats.items() if v})
    return run


def split_export_header(header: str) -> tuple[str, str] | None:
    """``"<run name> - <key>"``; None for ``__MIN``/``__MAX`` bounds.

    Run names may contain ``" - "`` too: the split is at the LAST ``" - "`` followed by a
    namespaced metric key (``train/reward``, ``val-core/...``), else at the first one (a key
    such as ``eval/acc - gsm8k`` keeps its own ``" - "``).
    """
    if " - " not in header or header.endswith(("__MIN", "__MAX")):  # no regex search per column
        return None
    parts = header.split(" - ")
    for i in range(len(parts) - 1, 0, -1):
        if _NAMESPACED.match(parts[i]):
            return " - ".join(parts[:i]), " - ".join(parts[i:])
    run, key = header.split(" - ", 1)
    return run, key


_NAMESPACED = re.compile(r"[\w.@\-]+/\S")


def _wandb_export(src: Source, df, step: str | None, quick=None) -> list[Run]:
    """One Run per W&B run in a panel export; the first column is the panel's x axis.

    ``quick``: ``(header, table, warnings, dropped)`` from :func:`_read_small` instead of ``df``."""
    if quick is None:
        table, warnings, _ = numeric_table(df)
        names = [str(c) for c in df.columns]
    else:
        names, table, warnings, _ = quick
    xname = names[0]
    if xname not in table:
        raise ReadError(
            f"the x axis column {xname!r} of this W&B export is not numeric",
            path=src.name,
            fix="export the panel with a step axis (train/global_step or Step)",
        )
    x = table[xname]
    groups: dict[str, dict[str, np.ndarray]] = {}
    for col in names[1:]:
        split = split_export_header(str(col))
        if split is None or str(col) not in table:
            continue
        run_name, key = split
        if key != xname:
            groups.setdefault(run_name, {})[key] = table[str(col)]
    if not groups:
        raise ReadError("holds no run columns", path=src.name, fix='expect headers like "<run name> - <key>"')
    runs: list[Run] = []
    for run_name, cols in groups.items():
        has = ~np.isnan(np.fmax.reduce(list(cols.values())))  # fmax is NaN only where every value is
        if not has.any():
            warnings.append(f"run {run_name!r} has no values in this export; skipped it")
            continue
        if has.all():  # a run of its own export: every row is its
            run_table = {xname: x, **cols}
        else:
            run_table = {xname: x[has], **{k: v[has] for k, v in cols.items()}}
        run = build_run(
            src,
            "wandb-export",
            run_table,
            step=step or xname,
            warnings=list(warnings),
            name=f"{src.name}::{run_name}",
            stats={"rows_without_data": int((~has).sum())},
        )
        runs.append(run)
    if not runs:
        raise ReadError("holds no values for any run", path=src.name, fix="re-export the panel with data")
    return runs
