"""Turn results (their JSON-safe ``summary()`` dicts) into tables, markdown and JUnit XML.

Every command hands this module plain dicts; nothing here computes a number. Rich renders the
tables (colour only on a terminal); markdown and JUnit are plain strings.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

from grpofit.core.vocabulary import MODE_TITLES, MODES, SHORT_TITLES  # the contract's names, spelled once

STATUS_STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red", "unknown": "dim"}


def param_rows(models: dict) -> list[tuple[str, str]]:
    """``(key, title)`` of the fit table's parameter rows: every parameter of the fitted laws in
    the order they first appear, titled by the laws' registry rows (:mod:`grpofit.laws.registry`)."""
    from grpofit.laws.registry import MODELS

    titles: dict[str, str] = {}
    for spec in MODELS.values():
        for key, title in spec.titles.items():
            titles.setdefault(key, title)
    keys: dict[str, None] = {}
    for m in models.values():
        keys.update(dict.fromkeys(m.get("params") or {}))
    return [(key, titles.get(key, key)) for key in keys]


def num(x: Any, digits: int = 3) -> str:
    """A compact number with ``digits`` significant digits; ``-`` for None or non-finite."""
    if x is None:
        return "-"
    if isinstance(x, bool):
        return str(x).lower()
    if isinstance(x, int):
        return str(x)
    x = float(x)
    if x != x or x in (float("inf"), float("-inf")):
        return "-"
    ax = abs(x)
    if ax == 0:
        return "0"
    if ax >= 1e6 or ax < 1e-3:
        return f"{x:.{digits - 1}e}"
    decimals = max(0, digits - 1 - int(math.floor(math.log10(ax))))
    return f"{x:.{decimals}f}"


def step_text(x: Any) -> str:
    """A step: ``395``, not ``395.00`` (fractional steps keep their digits)."""
    if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and float(x).is_integer():
        return str(int(x))
    return num(x)


#: a plateau the run is still moving past is shown as the bound it is (:func:`grpofit.fitting.fitcheck.mark_bounds`)
BOUND_SIGNS = {"lower_bound": "≥", "upper_bound": "≤"}


def bound_text(p: dict | None) -> str | None:
    """``≥ 0.958`` (``≤`` for a falling metric) for a plateau marked as a bound, else None."""
    p = p or {}
    if p.get("kind") not in BOUND_SIGNS or p.get("bound") is None:
        return None
    return f"{BOUND_SIGNS[p['kind']]} {num(p['bound'])}"


def estimate_text(p: dict | None) -> str:
    """``value ± stderr [lo, hi]`` from a contract parameter dict."""
    if not p or p.get("value") is None:
        return "-"
    if str(p.get("note") or "").startswith("not identifiable"):  # no number the data cannot support
        return f"{DASH} ({p['note']})"
    bound = bound_text(p)
    if bound is not None and p.get("bound_reason") == "unidentified":  # the data do not pin p* down
        return f"{bound} (not identified: the law's {num(p['value'])} has an interval running to the fit bound)"
    if bound is not None:  # still moving past the law's p*
        return f"{bound} (still {'rising' if p['kind'] == 'lower_bound' else 'falling'})"
    text = num(p["value"])
    if p.get("stderr") is not None:
        text += f" ± {num(p['stderr'], 2)}"
    if p.get("ci95"):
        lo, hi = p["ci95"]
        text += f" [{num(lo)}, {num(hi)}]"
    elif p.get("note"):
        text += f" ({p['note']})"
    return text


def esc(text: Any) -> str:
    """Text from a log, safe for rich (run names like ``[paper]GRPO`` are not markup)."""
    from rich.markup import escape

    return escape(str(text))


def _console(stderr: bool = False):
    import os
    import sys

    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    # a log file or CI console is wider than rich's 80-column default for non-terminals
    width = None if stream.isatty() or os.environ.get("COLUMNS") else 140
    return Console(stderr=stderr, highlight=False, soft_wrap=False, width=width)


def short_names(names: list[str]) -> list[str]:
    """Run names without the directories they all share, cut at a path separator (for tables;
    JSON keeps full names). ``./a/x.csv`` and ``a/y.csv`` share ``a``: ``x.csv``, ``y.csv``."""
    import os

    paths, runs = [], []
    for n in names:
        path, sep, run = n.partition("::")
        paths.append(os.path.normpath(path) if path and path != "-" else path)
        runs.append(sep + run)
    dirs = [os.path.dirname(p).split(os.sep) if os.path.dirname(p) else [] for p in paths]
    common: list[str] = []
    for parts in zip(*dirs):
        if any(p != parts[0] for p in parts):
            break
        common.append(parts[0])
    cut = len(common)
    if cut == 0 or common == [""]:
        return [p + r for p, r in zip(paths, runs)]
    return [os.sep.join(p.split(os.sep)[cut:]) + r for p, r in zip(paths, runs)]


#: the least length of a shared head or tail :func:`distinct_parts` cuts (``lr1e-5`` vs ``lr4e-5``
#: keep their ``-5``)
SHARED_MIN = 6


def distinct_parts(names: list[str]) -> list[str]:
    """What tells runs apart: the names without the leading and trailing words they all share
    (cut at ``-``, ``_``, ``/``, ``.`` or ``::``), marked ``…`` where cut. A sweep's
    ``Qwen-GSM8K-gamma0.1-lam1.0-0116`` and ``Qwen-GSM8K-gamma3.0-lam1.0-0116`` become
    ``…gamma0.1…`` and ``…gamma3.0…``. Names unchanged when fewer than two, or when the cut
    parts would not be distinct. Words are compared regardless of case (W&B sweeps mix
    ``Qwen2.5-0.5B-…`` and ``qwen2.5-0.5b-…``)."""
    import re

    if len(names) < 2 or len(set(names)) < len(names):
        return list(names)
    words = [re.split(r"(?<=[-_/.:])", n) for n in names]  # each word keeps its separator
    head = 0  # words compared regardless of case: ``Qwen2.5-0.5B-`` and ``qwen2.5-0.5b-`` are shared
    while all(len(w) > head + 1 for w in words) and len({w[head].lower() for w in words}) == 1:
        head += 1
    tail = 0
    while all(len(w) > head + tail + 1 for w in words) and len({w[-1 - tail].lower() for w in words}) == 1:
        tail += 1
    if len("".join(words[0][:head])) < SHARED_MIN:  # a short shared word is part of the name
        head = 0
    if len("".join(words[0][len(words[0]) - tail :])) < SHARED_MIN:
        tail = 0
    mids = ["".join(w[head : len(w) - tail]) for w in words]
    if (head == 0 and tail == 0) or len(set(mids)) < len(mids):
        return list(names)
    return [("…" if head else "") + m.rstrip("-_/.:") + ("…" if tail else "") for m in mids]


def print_tables(tables: Iterable[Any]) -> None:
    console = _console()
    for t in tables:
        _emit(console, t)


def _emit(console, renderable) -> None:
    """Print ``renderable``; off a terminal, without the spaces rich pads lines with."""
    if console.is_terminal:
        console.print(renderable)
        return
    import sys

    with console.capture() as cap:
        console.print(renderable)
    text = "\n".join(line.rstrip() for line in cap.get().splitlines())
    sys.stdout.write(text + "\n")


# --------------------------------------------------------------------------- fit


def fit_tables(runs: list[dict]) -> list[Any]:
    """One rich table per fitted run: a row per reported quantity, a column per model."""
    from rich.table import Table

    out = []
    for r in runs:
        models = r.get("models") or {}
        metric = r.get("metric") if r.get("role") != "eval_reward" else f"{r.get('metric')}, validation reward"
        table = Table(title=esc(f"{r.get('run')}  [{metric}]"), caption=esc(_fit_caption(r)), title_justify="left")
        table.add_column("quantity")
        for name in models:
            table.add_column(name + (" (preferred)" if name == r.get("preferred") else ""))
        for key, title in (("r2", "R²"), ("aic", "AIC"), ("bic", "BIC")):
            table.add_row(title, *[num(m.get(key), 5 if key != "r2" else 3) for m in models.values()])
        misses = bool((r.get("fit_check") or {}).get("disagrees"))
        for key, title in param_rows(models):
            table.add_row(
                title,
                *[
                    _param_text(m, key, misses and key == "plateau" and name == r.get("preferred"))
                    for name, m in models.items()
                ],
            )
        table.add_row("regime", *[m.get("regime") or "" for m in models.values()])
        ratio = (r.get("noise") or {}).get("fit_vs_noise")
        if ratio is not None:  # the preferred law's residual sd over the point-to-point noise
            cell = f"{ratio:.2g}x" + (" (misfit)" if ratio >= MISFIT_RATIO else "")
            table.add_row("fit error / noise", *[cell if name == r.get("preferred") else "" for name in models])
        if any(m.get("observed_overshoot") for m in models.values()):
            table.add_row(
                "observed overshoot", *[_overshoot_text(m.get("observed_overshoot")) for m in models.values()]
            )
        out.append(table)
    return out


def _param_text(model: dict, key: str, misses: bool = False) -> str:
    """One law's cell for a parameter (blank when the law has no such parameter); ``misses``:
    the preferred law's plateau disagrees with the late data, marked ``!`` as in diagnose's table
    (the note under the tables says by how much)."""
    params = model.get("params") or {}
    if key not in params:
        return ""
    text = estimate_text(params[key])
    return text + " !" if misses and bound_text(params[key]) is None and text != "-" else text


def _overshoot_text(ob: dict | None) -> str:
    """The overshoot seen in the data, as a share of the gain, and whether it beats the noise."""
    if not ob:
        return ""
    if ob.get("value") is None:
        return "- (no significant rise)"
    if not ob["value"]:
        return "none"
    if not ob.get("significant"):
        return f"none significant (at most {100 * ob['value']:.0f}% of the gain, within the noise)"
    return f"{100 * ob['value']:.0f}% of the gain at step {step_text(ob.get('peak_step'))}"


def _fit_caption(r: dict) -> str:
    steps = r.get("steps") or [None, None]
    noise = r.get("noise") or {}
    parts = [f"{r.get('n_points')} points, steps {step_text(steps[0])}-{step_text(steps[1])} ({r.get('step_column')})"]
    if noise.get("noise_sd") is not None:
        ceiling = noise.get("r2_ceiling")
        parts.append(
            f"noise floor sd {num(noise['noise_sd'])}"
            + (
                f", R² noise ceiling {num(ceiling)}"
                + (f" ± {num(noise['r2_ceiling_se'], 2)}" if noise.get("r2_ceiling_se") else "")
                + " (an estimate, not a bound)"
                if ceiling is not None
                else ""
            )
        )
    if r.get("collapse"):
        c = r["collapse"]
        what = f"reward collapses at step {step_text(c.get('step'))}"
        if c.get("recovered"):
            what = f"reward collapsed at step {step_text(c.get('step'))}, recovered by step {step_text(c.get('recovered_step'))}"
        parts.append(f"{what}: fitted the part before it")
    if r.get("metric_note"):
        parts.append(r["metric_note"])
    parts.append("value ± stderr [95% interval]")
    return "; ".join(parts)


def fit_notes(runs: list[dict]) -> list[str]:
    """Why an uncertainty or regime is missing, one line each (shown under the tables)."""
    lines = []
    for r in runs:
        for name, m in (r.get("models") or {}).items():
            if m.get("message") and not m.get("ok", True):
                lines.append(f"{r['run']}: {name} fit failed: {m['message']}")
            for pname, p in (m.get("params") or {}).items():
                if p.get("ci95") is None and p.get("note"):
                    lines.append(f"{r['run']}: {name} {pname}: no interval ({p['note']})")
            if m.get("regime_reason") and m.get("regime") == "indeterminate":
                lines.append(f"{r['run']}: regime indeterminate: {m['regime_reason']}")
        note = bound_note(r) or late_level_note(r)
        if note:
            lines.append(f"{r['run']}: {note}")
        if (r.get("trend") or {}).get("note"):
            lines.append(f"{r['run']}: {r['trend']['note']}")
        misfit = misfit_note(r)
        if misfit:
            lines.append(f"{r['run']}: {misfit}")
    return lines


#: the fit's residual sd this many times the point-to-point noise: the law misses structure
MISFIT_RATIO = 2.0


def misfit_note(r: dict) -> str | None:
    """One sentence when the preferred fit's error is well above the noise (``fit_vs_noise``)."""
    ratio = (r.get("noise") or {}).get("fit_vs_noise")
    if ratio is None or ratio < MISFIT_RATIO:
        return None
    return (
        f"misfit: the fit's residual sd is {ratio:.1f}x the point-to-point noise; the law misses "
        "structure in the data (a drift, a second timescale, a break): see grpofit forecast"
    )


# --------------------------------------------------------------------------- diagnose


DASH = "–"  #: a value the data did not identify


def _param_cell(p: dict | None, zero_mark: bool = False) -> str:
    """A fitted value for a table cell: ``–`` when not identified; with ``zero_mark``, the 95%
    range ``0–29.4`` instead of the value when that interval holds zero (the data cannot tell it
    from no effect: "17.7 (≈0)" printed a value and zero together), and ``–`` when that interval
    also runs to the fit bound (nothing identified)."""
    if not p or p.get("value") is None:
        return DASH
    if str(p.get("note") or "").startswith("not identifiable"):
        return DASH
    text = num(p.get("value"))
    ci = p.get("ci95")
    if zero_mark and ci and ci[0] is not None and ci[1] is not None and ci[0] <= 0 <= ci[1] and p.get("value") != 0:
        if "not pinned down" in str(p.get("note") or ""):
            return DASH  # from 0 to the fit bound: the data set neither end
        # not a value beside "≈0" (a number and zero at once): the range the data allow, from 0
        text = f"0–{num(ci[1])}" if ci[0] >= 0 else f"{num(ci[0])}–{num(ci[1])}"
    return text


def _fit_cells(fit: dict | None, check: dict | None = None, trend: dict | None = None) -> list[str]:
    """R², p*, 1/K_eff, inertia and regime of a run (``–`` for what the data did not identify;
    ``!`` after p* when it disagrees with the data's late level, see :func:`late_level_note`)."""
    if not fit:
        return [DASH] * 5
    models = fit.get("models") or {}
    pref = models.get(fit.get("preferred") or "") or models.get("oscillator") or {}
    osc = models.get("oscillator") or {}
    params = pref.get("params") or {}
    oparams = osc.get("params") or {}
    plateau = _param_cell(params.get("plateau"))
    bound = bound_text(params.get("plateau"))
    if bound is not None and plateau != DASH:
        plateau = bound
    elif check and check.get("disagrees") and plateau != DASH:
        plateau += " !"
    if (trend or {}).get("unexpected") and (trend or {}).get("direction") == "falling" and plateau != DASH:
        plateau += " ↓"  # a falling reward: p* is where it falls to
    return [
        num(pref.get("r2")) if pref.get("r2") is not None else DASH,
        plateau,
        _param_cell(params.get("timescale")),
        _param_cell(oparams.get("inertia"), zero_mark=True),
        osc.get("regime") or DASH,
    ]


def bound_note(run: dict) -> str | None:
    """Why the preferred law's plateau is shown as a bound (still moving past it), or None."""
    models = run.get("models") or {}
    plateau = ((models.get(run.get("preferred") or "") or {}).get("params") or {}).get("plateau") or {}
    return plateau.get("bound_note") if plateau.get("kind") in BOUND_SIGNS else None


def late_level_note(run: dict) -> str | None:
    """One sentence when the plateau disagrees with the data's late level (``fit_check``)."""
    check = run.get("fit_check") or {}
    if not check.get("disagrees"):
        return None
    return check.get("note")


#: narrower consoles get the compact verdict table (no timescale/inertia, short headers)
FULL_TABLE_WIDTH = 130
#: ... and the full layout only while it leaves this many characters for the run names
MIN_NAME_ROOM = 24
SHORT_REGIME = {"overdamped": "over", "underdamped": "under", "critical": "crit", "indeterminate": "indet"}
SHORT_STATUS = {"pass": "pass", "warn": "warn", "fail": "FAIL", "unknown": "?"}
NOT_GATING_MARK = "*"
ELLIPSIS = "…"


def elide(name: str, width: int) -> str:
    """``name`` shortened to ``width`` characters by cutting its middle, never wrapped: the run
    part of ``FILE::RUN`` kept whole when it fits, then whole path components
    (``collapse_run/…/checkpoint-400``), else characters (``bandit_o…ting.jsonl``, the end kept
    longer: it tells runs apart)."""
    if len(name) <= width or width < 5:
        return name
    path, sep, run = name.partition("::")
    if sep and width - len(sep + run) >= 8:
        return elide(path, width - len(sep + run)) + sep + run
    if sep and width - len(sep + run) >= 1:
        return ELLIPSIS + sep + run
    parts = name.split("/")
    if len(parts) > 2:
        head = parts[0] or "/" + parts[1]
        for short in (f"{head}/{ELLIPSIS}/{parts[-1]}", f"{ELLIPSIS}/{parts[-1]}"):
            if len(short) <= width:
                return short
    keep = width - 1
    head = keep * 2 // 5
    return name[:head] + ELLIPSIS + name[len(name) - (keep - head) :]


def _modes_of(runs: list[dict]) -> list[str]:
    """The modes in the runs' diagnostics, in the order of :data:`MODES` then as first seen."""
    seen = list(MODES)
    for r in runs:
        for m in r.get("diagnostics") or {}:
            if m not in seen:
                seen.append(m)
    return seen


def _mode_title(mode: str, full: bool) -> str:
    titles = MODE_TITLES if full else SHORT_TITLES
    return titles.get(mode, mode.replace("_", "-") if full else mode[:4])


def _gate_of(r: dict) -> dict:
    from grpofit.diagnostics.gating import run_gate

    return run_gate(r)


def _mode_status_text(r: dict, mode: str, full: bool = True) -> tuple[str, str]:
    """``(status, text)`` of a mode's cell; a fail outside ``--fail-on`` is marked ``*``."""
    status = ((r.get("diagnostics") or {}).get(mode) or {}).get("status", "unknown")
    text = status if full else SHORT_STATUS.get(status, status)
    if mode in (_gate_of(r).get("not_gating") or []):
        return "not_gating", text + NOT_GATING_MARK
    return status, text


def shown_entry(entry: dict) -> dict:
    """What the verdict table, the markdown, the JUnit report, the evidence lines, the eval table
    and the gate read of one ``diagnose`` entry (a tenth of it): ``diagnose`` keeps this of each
    run of a fleet, not the whole entry (the JSON output writes each entry as it is judged)."""
    out = {k: entry[k] for k in ("run", "verdict", "gate", "fit_check", "trend", "forecast") if k in entry}
    fit = entry.get("fit")
    if fit:
        models = fit.get("models") or {}
        keep = (fit.get("preferred") or "", "oscillator")
        fit = {
            "preferred": fit.get("preferred"),
            "models": {name: _shown_model(m) for name, m in models.items() if name in keep},
        }
    if "fit" in entry:
        out["fit"] = fit
    if "diagnostics" in entry:
        diags = entry["diagnostics"]
        out["diagnostics"] = (
            {m: {k: d[k] for k in ("status", "evidence") if k in d} if d else d for m, d in diags.items()}
            if diags
            else diags
        )
    if len(entry.get("evals") or []) >= 2:  # the eval table's runs
        out["evals"] = entry["evals"]
    return out


def _shown_model(model: dict | None) -> dict | None:
    if not model:
        return model
    out = {k: model[k] for k in ("r2", "regime") if k in model}
    if "params" in model:
        out["params"] = {k: v for k, v in (model["params"] or {}).items() if k in ("plateau", "timescale", "inertia")}
    return out


def diagnose_table(doc: dict, *, width: int = 200) -> Any:
    """One row per run: fit numbers, the failure modes and the (gated) verdict.

    Compact below :data:`FULL_TABLE_WIDTH` columns: no timescale/inertia, short headers and
    statuses (``FAIL``, ``?``), run names elided in the middle so that the table fits the width.
    The JSON output has everything.
    """
    runs, errors = doc.get("runs", []), doc.get("errors", [])
    names = short_names([r.get("run", "") for r in runs] + [e.get("run", "") for e in errors])
    modes = _modes_of(runs)
    longest = max((len(n) for n in names), default=1)
    full = width >= FULL_TABLE_WIDTH
    # the other columns take a fixed width and the run column gets the rest: the full layout
    # only while that leaves room for a readable name (MIN_NAME_ROOM characters, or the longest name)
    if full and width - _table_width(doc, modes, True, names=["x"]) < min(longest, MIN_NAME_ROOM):
        full = False
    room = max(12, width - _table_width(doc, modes, full, names=["x"]))
    return _build_table(doc, modes, full, [elide(n, min(room, longest)) for n in names])


def _table_width(doc, modes, full, names) -> int:
    from rich.console import Console

    table = _build_table(doc, modes, full, names * (len(doc.get("runs", [])) + len(doc.get("errors", []))))
    console = Console(width=10_000)
    return console.measure(table).maximum - 1


def _build_table(doc: dict, modes: list[str], full: bool, names: list[str]) -> Any:
    from rich.table import Table

    runs = doc.get("runs", [])
    table = (
        Table(title="grpofit diagnose", title_justify="left")
        if full
        else Table(title="grpofit diagnose", title_justify="left", show_edge=False, pad_edge=False)
    )
    table.add_column("run", no_wrap=True)
    fit_columns = ("R²", "p*", "1/K_eff", "inertia", "regime") if full else ("R²", "p*", "regime")
    for col in fit_columns:
        table.add_column(col, justify="left" if col == "regime" else "right", no_wrap=True)
    for m in modes:
        table.add_column(_mode_title(m, full), no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    fc = _forecast_shown(runs)
    for col in FORECAST_COLUMNS if fc else ():
        table.add_column(col, no_wrap=True, justify="right")
    for name, r in zip(names, runs):
        fit = _fit_cells(r.get("fit"), r.get("fit_check"), r.get("trend"))
        if not full:
            r2 = _gate_r2(r)
            fit = [DASH if r2 is None else f"{r2:.2f}", fit[1], SHORT_REGIME.get(fit[4], fit[4])]
        cells = [_styled(*_mode_status_text(r, m, full)) for m in modes]
        verdict = r.get("verdict", "unknown")
        table.add_row(
            esc(name),
            *[esc(c) for c in fit],
            *cells,
            _styled(verdict, verdict if full else SHORT_STATUS.get(verdict, verdict)),
            *([esc(c) for c in _forecast_cells(r)] if fc else []),
        )
    for name in names[len(runs) :]:
        table.add_row(
            esc(name),
            *[DASH] * len(fit_columns),
            *[DASH] * len(modes),
            "[bold red]error[/]",
            *([DASH] * len(FORECAST_COLUMNS) if fc else []),
        )
    return table


FORECAST_COLUMNS = ("final [95%]", "95% at", "rising")


def _forecast_shown(runs: list[dict]) -> bool:
    """Forecast columns only when ``diagnose --forecast`` computed them."""
    return any((r.get("forecast") or {}).get("computed") for r in runs)


def _forecast_cells(r: dict) -> list[str]:
    """Expected final reward [95% interval], the step reaching 95% of the gain, still rising."""
    f = r.get("forecast") or {}
    final = f.get("expected_final") or {}
    text = DASH
    if final.get("mean") is not None:
        lo, hi = final.get("pi95") or (None, None)
        # upper end unknown (the rise's end is not in the seen steps): a lower bound only
        text = (
            f"{num(final['mean'])} [{num(lo)}, {num(hi)}]" if hi is not None else f"{num(final['mean'])} [≥ {num(lo)}]"
        )
    s95d = f.get("steps_to_95") or {}
    s95 = s95d.get("value")
    s95_text = DASH if s95 is None else (f"≥ {num(s95)}" if s95d.get("kind") == "lower_bound" else num(s95))
    rising = f.get("still_rising")
    return [text, s95_text, DASH if rising is None else ("yes" if rising else "no")]


def _gate_r2(r: dict) -> float | None:
    from grpofit.diagnostics.gating import preferred_r2

    return preferred_r2(r.get("fit"))


def _styled(status: str, text: str) -> str:
    style = STATUS_STYLE.get(status, "")
    return f"[{style}]{esc(text)}[/]" if style else esc(text)


def print_diagnose(doc: dict) -> None:
    """The verdict table laid out for the console's width, then the gate line with its reasons."""
    console = _console()
    _emit(console, diagnose_table(doc, width=console.width))
    if any(_gate_of(r).get("not_gating") for r in doc.get("runs", [])):
        _emit(
            console, f"{NOT_GATING_MARK} a fail in a mode outside --fail-on: shown, counted as a warning, does not gate"
        )
    _emit(console, esc(gate_text(doc)))


def gate_text(doc: dict) -> str:
    """``Gate: passed`` / ``Gate: failed (...)`` followed by one reason per failed run."""
    from grpofit.diagnostics.gating import gate_line, reason_lines

    lines = [gate_line(doc)] + [f"  {x}" for x in reason_lines(doc)]
    return "\n".join(lines)


def _status_cell(status: str, full: bool = True) -> str:
    style = STATUS_STYLE.get(status, "")
    text = status if full else SHORT_STATUS.get(status, status)
    return f"[{style}]{text}[/]" if style else text


def diagnose_evidence(doc: dict, *, errors: bool = True) -> list[str]:
    """One line per non-pass status and per plateau that disagrees with the late data; one per
    unreadable run when ``errors`` (the table leaves those to stderr)."""
    lines = []
    for r in doc.get("runs", []):
        not_gating = set(_gate_of(r).get("not_gating") or [])
        for m, d in (r.get("diagnostics") or {}).items():
            d = d or {}
            if d.get("status") in ("warn", "fail"):
                tag = d["status"] + (" (not gating)" if m in not_gating else "")
                lines.append(f"{r['run']}: {m} {tag}: {d.get('evidence', '')}")
        note = bound_note(r.get("fit") or {}) or late_level_note(r)
        if note:
            lines.append(f"{r['run']}: fit: {note}")
        trend = r.get("trend") or {}
        if trend.get("unexpected") and trend.get("note"):
            lines.append(f"{r['run']}: {trend['note']}")  # the note says "reward is falling: ..."
    if errors:
        for e in doc.get("errors", []):
            lines.append(f"{e['run']}: error: {e['error']}")
    gs = doc.get("group_size")
    if gs and gs.get("summary"):
        lines.append(f"group size: {gs['summary']}")
    return lines


def diagnose_markdown(doc: dict) -> str:
    """A GitHub-flavoured table for a CI step summary, the gate line with its reasons, the evidence."""
    icons = {"pass": "✅ pass", "warn": "⚠️ warn", "fail": "❌ fail", "unknown": "❔ unknown"}
    runs = doc.get("runs", [])
    modes = _modes_of(runs)
    fc = _forecast_shown(runs)
    head = [
        "run",
        "R²",
        "p*",
        "1/K_eff",
        "inertia",
        "regime",
        *[_mode_title(m, True) for m in modes],
        "verdict",
        *(FORECAST_COLUMNS if fc else ()),
    ]
    lines = ["## grpofit diagnose", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in runs:
        cells = []
        for m in modes:
            status, _ = _mode_status_text(r, m)
            cells.append("⚪ fail (not gating)" if status == "not_gating" else icons.get(status, status))
        row = [
            _md(r.get("run", "")),
            *_fit_cells(r.get("fit"), r.get("fit_check"), r.get("trend")),
            *cells,
            icons.get(r.get("verdict"), ""),
            *(_forecast_cells(r) if fc else []),
        ]
        lines.append("| " + " | ".join(row) + " |")
    for e in doc.get("errors", []):
        lines.append("| " + " | ".join([_md(e["run"]), *[DASH] * (len(head) - 2), "❌ error"]) + " |")
    from grpofit.diagnostics.gating import gate_line, reason_lines

    gate = gate_line(doc)
    word, _, rest = gate.partition(" (")
    lines += ["", f"**{word}**" + (f" ({rest}" if rest else "")]
    lines += [f"- {_md(x)}" for x in reason_lines(doc)]
    evidence = diagnose_evidence(doc)
    if evidence:
        lines += ["", *[f"- {_md(x)}" for x in evidence]]
    return "\n".join(lines) + "\n"


def _xml(text: Any) -> str:
    """Text safe inside XML 1.0 (control characters other than tab/newline dropped)."""
    import re

    return re.sub(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]", "", str(text))


def _md(text: str) -> str:
    return str(text).replace("|", "\\|")


def diagnose_junit(doc: dict) -> str:
    """JUnit XML: a test suite per run, a test case per failure mode.

    The gate decides: a status that gates (``fail``; ``warn`` with ``--strict``) is a
    ``<failure>``; a ``fail`` outside ``--fail-on`` is ``<skipped>`` ("not gating") with a
    property; ``unknown`` is ``<skipped>``; a ``--min-r2`` gate adds a ``min_r2`` test case, and a
    reward that falls when it should rise a ``reward_trend`` one (a ``<failure>`` with ``--strict``).
    """
    from xml.etree import ElementTree as ET

    xml_text = _xml

    suites = ET.Element("testsuites", name="grpofit diagnose")
    policy = (doc.get("gate") or {}).get("policy") or {}
    for r in doc.get("runs", []):
        g = _gate_of(r)
        not_gating = set(g.get("not_gating") or [])
        run = xml_text(r.get("run"))
        suite = ET.SubElement(suites, "testsuite", name=run)
        props = ET.SubElement(suite, "properties")
        ET.SubElement(props, "property", name="verdict", value=str(r.get("verdict")))
        counts = {"tests": 0, "failures": 0, "skipped": 0}
        for m, d in (r.get("diagnostics") or {}).items():
            d = d or {"status": "unknown", "evidence": "not judged"}
            evidence = xml_text(d.get("evidence", ""))
            case = ET.SubElement(suite, "testcase", classname=run, name=m)
            counts["tests"] += 1
            status = d.get("status", "unknown")
            gating_fail = status == "fail" and m not in not_gating
            gating_warn = (
                status == "warn"
                and policy.get("strict")
                and m not in not_gating
                and any(x.startswith(f"{m} warn") for x in g.get("reasons", []))
            )
            if gating_fail or gating_warn:
                counts["failures"] += 1
                ET.SubElement(case, "failure", message=evidence, type=status).text = evidence
            elif m in not_gating:
                counts["skipped"] += 1
                ET.SubElement(case, "skipped", message=f"fail, not gating (not in --fail-on): {evidence}")
                ET.SubElement(props, "property", name=f"{m}.status", value="fail (not gating)")
            elif status == "unknown":
                counts["skipped"] += 1
                ET.SubElement(case, "skipped", message=evidence)
            else:
                ET.SubElement(case, "system-out").text = f"{status}: {evidence}"
        trend = r.get("trend") or {}
        if trend.get("unexpected") and trend.get("direction") == "falling":
            note = xml_text(trend.get("note") or "reward is falling")
            case = ET.SubElement(suite, "testcase", classname=run, name="reward_trend")
            counts["tests"] += 1
            ET.SubElement(props, "property", name="reward_trend", value="falling")
            if any(x.startswith("reward falling") for x in g.get("reasons", [])):  # --strict
                counts["failures"] += 1
                ET.SubElement(case, "failure", message=note, type="falling").text = note
            else:
                ET.SubElement(case, "system-out").text = f"warn: {note}"
        if policy.get("min_r2") is not None:
            case = ET.SubElement(suite, "testcase", classname=run, name="min_r2")
            counts["tests"] += 1
            bad = [x for x in g.get("reasons", []) if "--min-r2" in x]
            if bad:
                counts["failures"] += 1
                ET.SubElement(case, "failure", message=xml_text(bad[0]), type="min_r2").text = xml_text(bad[0])
        if len(props) == 0:
            suite.remove(props)
        for k, v in counts.items():
            suite.set(k, str(v))
    for e in doc.get("errors", []):
        suite = ET.SubElement(suites, "testsuite", name=xml_text(e["run"]), tests="1", errors="1")
        case = ET.SubElement(suite, "testcase", classname=xml_text(e["run"]), name="read")
        ET.SubElement(case, "error", message=xml_text(e["error"]), type="input").text = xml_text(e["error"])
    ET.indent(suites)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


# --------------------------------------------------------------------------- inspect / predict


def key_value_table(title: str, rows: Iterable[tuple[str, Any]]) -> Any:
    from rich.table import Table

    table = Table(title=esc(title), title_justify="left", show_header=False)
    table.add_column("key", style="bold")
    table.add_column("value")
    for k, v in rows:
        text = num(v) if isinstance(v, (int, float)) or v is None else str(v)
        table.add_row(esc(k), esc(text))
    return table


def flat_items(doc: dict, prefix: str = "") -> list[tuple[str, Any]]:
    """``(dotted key, value)`` rows of a nested dict, lists of numbers joined."""
    rows: list[tuple[str, Any]] = []
    for k, v in doc.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            rows.extend(flat_items(v, key + "."))
        elif isinstance(v, (list, tuple)) and all(isinstance(x, (int, float)) or x is None for x in v):
            rows.append((key, ", ".join(num(x) for x in v)))
        else:
            rows.append((key, v))
    return rows


def inspect_tables(infos: list[dict]) -> list[Any]:
    """One key/value table per run found, then its role -> column mapping."""
    from rich.table import Table

    out = []
    for info in infos:
        roles = info.get("roles") or {}
        skip = ("roles", "numeric_columns", "warnings", "gaps", "stats")
        rows = [(k, v) for k, v in info.items() if k not in skip and v not in ({}, [], None)]
        gaps = info.get("gaps") or []
        rows.append(("gaps", "none" if not gaps else "; ".join(f"{num(a)}->{num(b)}" for a, b in gaps)))
        cols = info.get("numeric_columns") or []
        rows.append(("numeric columns", f"{len(cols)}: " + ", ".join(cols[:12]) + (" ..." if len(cols) > 12 else "")))
        out.append(key_value_table(str(info.get("run")), rows))
        table = Table(title="roles", title_justify="left")
        table.add_column("role")
        table.add_column("column")
        table.add_column("points", justify="right")
        for role, entry in roles.items():
            entry = entry or {}
            table.add_row(role, esc(entry.get("column") or "-"), num(entry.get("points")))
        out.append(table)
    return out


def predict_tables(doc: dict) -> list[Any]:
    """The closed-form coefficients, stability under each lag model, then the optional sections."""
    from rich.table import Table

    keys = ("mass", "damping", "stiffness", "damping_ratio", "regime", "stable", "timescale", "inertia", "critical_lr")
    out = [key_value_table("closed form (step units)", [(k.replace("_", " "), doc.get(k)) for k in keys])]
    table = Table(title="stability by lag model", title_justify="left")
    for col in ("lag model", "growth per step", "stable", "regime", "critical refresh interval"):
        table.add_column(col, justify="left" if col in ("lag model", "regime") else "right")
    table.add_row(
        "closed form (paper)",
        "-",
        num(doc.get("stable")),
        doc.get("regime") or "-",
        num(doc.get("critical_refresh_interval")),
    )
    for key, label in (
        ("exact_fixed_delay", "exact, fixed delay"),
        ("exact_sawtooth", "exact, sawtooth (frozen gradient)"),
    ):
        ex = doc.get(key)
        if ex:
            table.add_row(
                label,
                num(ex.get("spectral_radius"), 4),
                num(ex.get("stable")),
                ex.get("regime") or "-",
                num(ex.get("critical_refresh_interval")),
            )
    out.append(table)
    inputs = doc.get("input_sources")  # predict --from-run: {name: {value, source}}
    if inputs:
        out.append(
            key_value_table(
                "inputs (flags override the run's config)",
                [
                    (
                        k.replace("_", " "),
                        f"{_plain(v.get('value'))}  ({v.get('source')})" if isinstance(v, dict) else _plain(v),
                    )
                    for k, v in inputs.items()
                ],
            )
        )
    for key in ("group", "from_run", "what_if"):
        if doc.get(key):
            out.append(key_value_table(key.replace("_", " "), flat_items(doc[key])))
    for note in doc.get("notes") or []:
        out.append(esc(f"note: {note}"))
    return out


def _trajectory_text(traj: dict) -> str | None:
    """The label, plus the exact growth factor and the noise when the run is noise-driven."""
    label = traj.get("label")
    if label is None or "growth_factor" not in traj:
        return label
    extra = []
    if traj.get("growth_factor") is not None:
        extra.append(f"exact growth {num(traj['growth_factor'], 4)}/step")
    if traj.get("fluctuation") == "stationary":
        extra.append("stationary fluctuation around p*, not instability")
    return label + (f" ({'; '.join(extra)})" if extra else "")


def _plain(v: Any) -> str:
    """A value as the user would type it: ``1e-06``, ``0.9``, ``2``, ``true``, ``-`` for None."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, (int, float)):
        return f"{v:g}"
    return str(v)


def simulate_tables(doc: dict, out: str) -> list[Any]:
    """What a simulated bandit run wrote and what it measured (everything is in ``FILE.meta.json``)."""
    pred = doc.get("predicted") or {}
    saw = pred.get("exact_sawtooth") or {}
    traj = doc.get("trajectory") or {}
    rows = [
        ("log", out),
        ("sidecar", out + ".meta.json"),
        ("rows", doc.get("n_rows")),
        (
            "fixed point p* (this G)",
            doc.get("fixed_point") if doc.get("fixed_point") is not None else doc.get("fixed_point_note"),
        ),
        ("plateau, exact mean field", doc.get("plateau_exact")),
        ("curvature K (Jacobian at p*)", doc.get("curvature")),
        ("noise strength D (measured)", doc.get("noise_D")),
        ("trajectory", _trajectory_text(traj)),
        ("late mean / variance of p", f"{num(doc.get('late_mean'))} / {num(doc.get('late_variance'))}"),
        ("predicted regime (closed form)", pred.get("regime")),
        ("predicted damping ratio", pred.get("damping_ratio")),
        (
            "critical refresh interval: closed form / sawtooth",
            f"{num(pred.get('critical_refresh_interval'))} / {num(saw.get('critical_refresh_interval'))}",
        ),
        ("diverged at step", doc.get("diverged_at_step")),
    ]
    return [key_value_table("simulated GRPO on a softmax bandit", rows)]


# --------------------------------------------------------------------------- several eval series


#: widths tried for the run and benchmark names of the eval-series table, widest first
EVAL_NAME_WIDTHS = (28, 24, 20, 16, 12, 8)


def eval_table(doc: dict, width: int | None = None) -> Any:
    """One row per benchmark of every run that logs two or more eval series (None when none does):
    points, fitted gain, plateau with its 95% interval, eval/train timescale, decoupling status.

    Run and benchmark names are elided in the middle (never wrapped) to the widest of
    :data:`EVAL_NAME_WIDTHS` that lets the table fit ``width`` columns; numbers are never cut."""
    rows = [(r.get("run", ""), e) for r in doc.get("runs", []) if len(r.get("evals") or []) >= 2 for e in r["evals"]]
    if not rows:
        return None
    table = None
    for name_width in EVAL_NAME_WIDTHS:
        table = _eval_rows(rows, name_width)
        if width is None or _measure(table) <= width:
            break
    return table


def _measure(table: Any) -> int:
    from rich.console import Console

    return Console(width=10_000).measure(table).maximum


def _eval_rows(rows: list, name_width: int) -> Any:
    from rich.table import Table

    table = Table(title="eval series (train-eval decoupling per benchmark)", title_justify="left")
    for col, justify in (
        ("run", "left"),
        ("benchmark", "left"),
        ("points", "right"),
        ("gain", "right"),
        ("plateau [95%]", "right"),
        ("T_eval/T_train [95%]", "right"),
        ("decouples", "left"),
    ):
        table.add_column(col, justify=justify, no_wrap=col in ("run", "benchmark"), overflow="fold")
    names = short_names([run for run, _ in rows])
    for name, (_, e) in zip(names, rows):
        plat = e.get("plateau") or {}
        text = num(plat.get("value"))
        ci = plat.get("ci95")
        if ci:
            text += f" [{num(ci[0])}, {num(ci[1])}]"
        status = e.get("status", "unknown")
        ratio = num(e.get("timescale_ratio"))
        div = e.get("divergence") or {}
        rci = div.get("timescale_ratio_ci95")
        if rci:  # the interval the divergence test decides on (eval and train fitted over the eval's steps)
            ratio += f" [{num(rci[0])}, {'inf' if rci[1] is None else num(rci[1])}]"
        table.add_row(
            esc(elide(name, name_width)),
            esc(elide(str(e.get("benchmark", "")), name_width)),
            str(e.get("points", 0)),
            num(e.get("gain")),
            text,
            ratio,
            _styled(status, "yes" if e.get("decouples") else status),
        )
    return table


def print_eval_table(doc: dict) -> None:
    """The eval-series table (if any run has one) laid out for the console's width."""
    console = _console()
    table = eval_table(doc, width=console.width)
    if table is not None:
        _emit(console, table)
