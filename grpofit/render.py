"""Turn results (their JSON-safe ``summary()`` dicts) into tables, markdown and JUnit XML.

Every command hands this module plain dicts; nothing here computes a number. Rich renders the
tables (colour only on a terminal); markdown and JUnit are plain strings.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

from grpofit.vocabulary import MODE_TITLES, MODES, SHORT_TITLES  # the contract's names, spelled once

STATUS_STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red", "unknown": "dim"}
PARAM_TITLES = {
    "plateau": "plateau p*",
    "initial": "initial p0",
    "timescale": "timescale 1/K_eff",
    "inertia": "inertia M/C",
    "damping_ratio": "damping ratio",
}


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


def estimate_text(p: dict | None) -> str:
    """``value ± stderr [lo, hi]`` from a contract parameter dict."""
    if not p or p.get("value") is None:
        return "-"
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
    """Run names without the directory prefix they all share (for tables; JSON keeps full names)."""
    import os

    paths = [n.split("::", 1)[0] for n in names]
    dirs = [os.path.dirname(p) for p in paths]
    common = os.path.commonpath(dirs) if dirs and all(d.startswith("/") == dirs[0].startswith("/") for d in dirs) else ""
    if not common or common == "/":
        return list(names)
    return [n[len(common):].lstrip("/") or n for n in names]


def print_tables(tables: Iterable[Any]) -> None:
    console = _console()
    for t in tables:
        console.print(t)


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
        for key, title in PARAM_TITLES.items():
            table.add_row(title, *[estimate_text((m.get("params") or {}).get(key)) if key in (m.get("params") or {}) else "" for m in models.values()])
        table.add_row("regime", *[m.get("regime") or "" for m in models.values()])
        out.append(table)
    return out


def _fit_caption(r: dict) -> str:
    steps = r.get("steps") or [None, None]
    noise = r.get("noise") or {}
    parts = [f"{r.get('n_points')} points, steps {num(steps[0])}-{num(steps[1])} ({r.get('step_column')})"]
    if noise.get("noise_sd") is not None:
        ceiling = noise.get("r2_ceiling")
        parts.append(
            f"noise floor sd {num(noise['noise_sd'])}" + (f", best reachable R² {num(ceiling)}" if ceiling is not None else "")
        )
    if r.get("collapse"):
        parts.append(f"reward collapses at step {num(r['collapse'].get('step'))}: fitted the part before it")
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
    return lines


# --------------------------------------------------------------------------- diagnose


def _fit_cells(fit: dict | None) -> list[str]:
    if not fit:
        return ["-"] * 5
    models = fit.get("models") or {}
    pref = models.get(fit.get("preferred") or "") or models.get("oscillator") or {}
    osc = models.get("oscillator") or {}
    params = pref.get("params") or {}
    oparams = osc.get("params") or {}

    def val(p):
        return num((p or {}).get("value"))

    return [
        num(pref.get("r2")),
        val(params.get("plateau")),
        val(params.get("timescale")),
        val(oparams.get("inertia")),
        osc.get("regime") or "-",
    ]


#: narrower consoles get the compact verdict table (no timescale/inertia, short headers)
FULL_TABLE_WIDTH = 130
SHORT_REGIME = {"overdamped": "over", "underdamped": "under", "critical": "crit", "indeterminate": "indet"}
SHORT_STATUS = {"pass": "pass", "warn": "warn", "fail": "FAIL", "unknown": "?"}


def diagnose_table(doc: dict, *, width: int = 200) -> Any:
    """One row per run: fit numbers, the four modes and the verdict (compact below
    :data:`FULL_TABLE_WIDTH` columns; the JSON output has everything)."""
    from rich.table import Table

    full = width >= FULL_TABLE_WIDTH
    table = Table(title="grpofit diagnose", title_justify="left")
    table.add_column("run", overflow="fold")
    fit_columns = ("R²", "p*", "1/K_eff", "inertia", "regime") if full else ("R²", "p*", "regime")
    for col in fit_columns:
        table.add_column(col, justify="left" if col == "regime" else "right", no_wrap=True)
    for m in MODES:
        table.add_column(MODE_TITLES[m] if full else SHORT_TITLES[m], no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    runs, errors = doc.get("runs", []), doc.get("errors", [])
    names = short_names([r.get("run", "") for r in runs] + [e.get("run", "") for e in errors])
    for name, r in zip(names, runs):
        diags = r.get("diagnostics") or {}
        fit = _fit_cells(r.get("fit"))
        if not full:
            fit = [fit[0], fit[1], SHORT_REGIME.get(fit[4], fit[4])]
        cells = [_status_cell(diags.get(m, {}).get("status", "unknown"), full) for m in MODES]
        table.add_row(esc(name), *fit, *cells, _status_cell(r.get("verdict", "unknown"), full))
    for name in names[len(runs):]:
        table.add_row(esc(name), *["-"] * len(fit_columns), *["-"] * len(MODES), "[bold red]error[/]")
    return table


def print_diagnose(doc: dict) -> None:
    """The verdict table, laid out for the console's width."""
    console = _console()
    console.print(diagnose_table(doc, width=console.width))


def _status_cell(status: str, full: bool = True) -> str:
    style = STATUS_STYLE.get(status, "")
    text = status if full else SHORT_STATUS.get(status, status)
    return f"[{style}]{text}[/]" if style else text


def diagnose_evidence(doc: dict) -> list[str]:
    """One line per non-pass verdict, and one per unreadable run."""
    lines = []
    for r in doc.get("runs", []):
        for m in MODES:
            d = (r.get("diagnostics") or {}).get(m) or {}
            if d.get("status") in ("warn", "fail"):
                lines.append(f"{r['run']}: {m} {d['status']}: {d.get('evidence', '')}")
    for e in doc.get("errors", []):
        lines.append(f"{e['run']}: error: {e['error']}")
    gs = doc.get("group_size")
    if gs and gs.get("summary"):
        lines.append(f"group size: {gs['summary']}")
    return lines


def diagnose_markdown(doc: dict) -> str:
    """A GitHub-flavoured table for a CI step summary, followed by the evidence."""
    icons = {"pass": "✅ pass", "warn": "⚠️ warn", "fail": "❌ fail", "unknown": "❔ unknown"}
    head = ["run", "R²", "p*", "1/K_eff", "inertia", "regime", *[MODE_TITLES[m] for m in MODES], "verdict"]
    lines = ["## grpofit diagnose", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in doc.get("runs", []):
        diags = r.get("diagnostics") or {}
        cells = [icons.get(diags.get(m, {}).get("status", "unknown"), "") for m in MODES]
        row = [_md(r.get("run", "")), *_fit_cells(r.get("fit")), *cells, icons.get(r.get("verdict"), "")]
        lines.append("| " + " | ".join(row) + " |")
    for e in doc.get("errors", []):
        lines.append("| " + " | ".join([_md(e["run"]), *["-"] * (len(head) - 2), "❌ error"]) + " |")
    gate = doc.get("gate") or {}
    lines += ["", f"**Gate: {'passed' if gate.get('passed') else 'failed'}**"]
    evidence = diagnose_evidence(doc)
    if evidence:
        lines += ["", *[f"- {_md(x)}" for x in evidence]]
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    return str(text).replace("|", "\\|")


def diagnose_junit(doc: dict) -> str:
    """JUnit XML: a test suite per run, a test case per failure mode (fail -> failure, unknown -> skipped)."""
    from xml.etree import ElementTree as ET

    suites = ET.Element("testsuites", name="grpofit diagnose")
    for r in doc.get("runs", []):
        suite = ET.SubElement(suites, "testsuite", name=str(r.get("run")))
        counts = {"tests": 0, "failures": 0, "skipped": 0}
        for m in MODES:
            d = (r.get("diagnostics") or {}).get(m) or {"status": "unknown", "evidence": "not judged"}
            case = ET.SubElement(suite, "testcase", classname=str(r.get("run")), name=m)
            counts["tests"] += 1
            if d["status"] == "fail":
                counts["failures"] += 1
                ET.SubElement(case, "failure", message=d.get("evidence", ""), type="fail").text = d.get("evidence", "")
            elif d["status"] == "unknown":
                counts["skipped"] += 1
                ET.SubElement(case, "skipped", message=d.get("evidence", ""))
            else:
                ET.SubElement(case, "system-out").text = f"{d['status']}: {d.get('evidence', '')}"
        for k, v in counts.items():
            suite.set(k, str(v))
    for e in doc.get("errors", []):
        suite = ET.SubElement(suites, "testsuite", name=str(e["run"]), tests="1", errors="1")
        case = ET.SubElement(suite, "testcase", classname=str(e["run"]), name="read")
        ET.SubElement(case, "error", message=e["error"], type="input").text = e["error"]
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
    out = [key_value_table("closed form (step units)",
                           [(k.replace("_", " "), doc.get(k)) for k in keys])]
    table = Table(title="stability by lag model", title_justify="left")
    for col in ("lag model", "growth per step", "stable", "regime", "critical refresh interval"):
        table.add_column(col, justify="left" if col in ("lag model", "regime") else "right")
    table.add_row("closed form (paper)", "-", num(doc.get("stable")), doc.get("regime") or "-",
                  num(doc.get("critical_refresh_interval")))
    for key, label in (("exact_fixed_delay", "exact, fixed delay"), ("exact_sawtooth", "exact, sawtooth (frozen gradient)")):
        ex = doc.get(key)
        if ex:
            table.add_row(label, num(ex.get("spectral_radius"), 4), num(ex.get("stable")), ex.get("regime") or "-",
                          num(ex.get("critical_refresh_interval")))
    out.append(table)
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


def simulate_tables(doc: dict, out: str) -> list[Any]:
    """What a simulated bandit run wrote and what it measured (everything is in ``FILE.meta.json``)."""
    pred = doc.get("predicted") or {}
    saw = pred.get("exact_sawtooth") or {}
    traj = doc.get("trajectory") or {}
    rows = [
        ("log", out),
        ("sidecar", out + ".meta.json"),
        ("rows", doc.get("n_rows")),
        ("fixed point p* (this G)", doc.get("fixed_point")),
        ("plateau, exact mean field", doc.get("plateau_exact")),
        ("curvature K (Jacobian at p*)", doc.get("curvature")),
        ("noise strength D (measured)", doc.get("noise_D")),
        ("trajectory", _trajectory_text(traj)),
        ("late mean / variance of p", f"{num(doc.get('late_mean'))} / {num(doc.get('late_variance'))}"),
        ("predicted regime (closed form)", pred.get("regime")),
        ("predicted damping ratio", pred.get("damping_ratio")),
        ("critical refresh interval: closed form / sawtooth", f"{num(pred.get('critical_refresh_interval'))} / {num(saw.get('critical_refresh_interval'))}"),
        ("diverged at step", doc.get("diverged_at_step")),
    ]
    return [key_value_table("simulated GRPO on a softmax bandit", rows)]
