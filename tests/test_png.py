"""The diagnosis figures' PNG writer (grpofit.render.png): what any PNG reader reads back is the
drawn buffer exactly, opaque figures as RGB, transparent ones as RGBA; and a diagnosis figure
written by it is pixel for pixel matplotlib's own ``savefig`` of the same figure."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

SAMPLES = Path(__file__).resolve().parents[1] / "sample_logs"


def _read(data: bytes):
    from PIL import Image

    img = Image.open(io.BytesIO(data))
    return img.mode, np.asarray(img.convert("RGBA")), img.info


def test_png_bytes_round_trip_opaque_and_transparent():
    from grpofit.render.png import png_bytes

    rng = np.random.default_rng(3)
    rgba = rng.integers(0, 256, size=(37, 53, 4), dtype=np.uint8)
    opaque = rgba.copy()
    opaque[..., 3] = 255
    mode, back, info = _read(png_bytes(opaque, dpi=100))
    assert mode == "RGB" and np.array_equal(back, opaque)
    assert info["dpi"][0] == pytest.approx(100, abs=0.01)
    mode, back, _ = _read(png_bytes(rgba))
    assert mode == "RGBA" and np.array_equal(back, rgba)
    with pytest.raises(ValueError):
        png_bytes(rgba[..., :3])


def test_diagnosis_figure_png_is_savefigs_pixels(tmp_path):
    import matplotlib

    from grpofit.diagnostics import Thresholds, diagnose_run
    from grpofit.readers import read_path
    from grpofit.render.plotting import DPI, FAST_TEXT, diagnosis_figure, save_diagnosis_figure

    run = read_path(str(SAMPLES / "collapse_run"))[0]
    d = diagnose_run(run)
    path = save_diagnosis_figure(d, run, tmp_path, Thresholds())
    with matplotlib.rc_context(FAST_TEXT):
        buf = io.BytesIO()
        diagnosis_figure(d, run, Thresholds()).savefig(buf, format="png", dpi=DPI)
    ours, theirs = _read(path.read_bytes())[1], _read(buf.getvalue())[1]
    assert ours.shape == theirs.shape and np.array_equal(ours, theirs)


def test_ticks_in_view_keeps_the_drawn_ticks_and_labels():
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from grpofit.render.plotting import new_figure, ticks_in_view

    def drawn(fix: bool):
        fig = new_figure(figsize=(4, 3), dpi=100)
        ax = fig.add_subplot()
        ax.plot([3.0, 97.0], [0.013, 0.871])
        if fix:
            ticks_in_view(ax)
        FigureCanvasAgg(fig).draw()
        lo, hi = ax.get_xlim()
        shown = [(t.get_loc(), t.label1.get_text()) for t in ax.xaxis.get_major_ticks() if lo <= t.get_loc() <= hi]
        return shown, len(ax.xaxis.get_major_ticks())

    (before, built_before), (after, built_after) = drawn(False), drawn(True)
    assert before == after and len(after) >= 3
    assert built_after < built_before  # the ticks past each end are no longer built


def test_a_diagnosis_figure_is_freed_once_written_and_the_collector_left_as_found(tmp_path):
    import gc

    from matplotlib.figure import Figure

    from grpofit.diagnostics import Thresholds, diagnose_run
    from grpofit.readers import read_path
    from grpofit.render.plotting import save_diagnosis_figure

    run = read_path(str(SAMPLES / "collapse_run"))[0]
    d = diagnose_run(run)

    def figures() -> int:
        return sum(isinstance(o, Figure) for o in gc.get_objects())

    save_diagnosis_figure(d, run, tmp_path, Thresholds())  # first calls: caches filled
    gc.collect()
    before = figures()
    for _ in range(2):
        save_diagnosis_figure(d, run, tmp_path, Thresholds())
        assert gc.isenabled()
    assert figures() == before  # no collection beyond the one pass was needed to free them
    gc.disable()
    try:
        save_diagnosis_figure(d, run, tmp_path, Thresholds())
        assert not gc.isenabled()
    finally:
        gc.enable()
