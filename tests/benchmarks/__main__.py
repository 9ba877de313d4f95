"""``python -m tests.benchmarks``: measure grpofit and print one table (see the package docstring).

Every process figure is the wall time of a whole child process (what a user waits for) and
its peak RSS (``/usr/bin/time -f %M``: the largest of the process and its waited-for children). Figures are
medians over ``--repeats`` repeats; grpofit and its reference are interleaved within a repeat
so load changes on the machine hit both alike.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from tests.benchmarks import data

SECTIONS = ("fit", "startup", "sweep", "reading", "growth")
BASELINE = Path(__file__).resolve().with_name("baseline.py")

try:  # the fitting helper's definition of "recovered" (tests/recovery.py)
    from tests.recovery import PLATEAU_TOL, TIMESCALE_TOL
except Exception:  # pragma: no cover - keep the benchmark usable if that module breaks
    PLATEAU_TOL, TIMESCALE_TOL = 0.03, 0.25


@dataclass(frozen=True)
class Sizes:
    """What each section measures; ``QUICK`` is for the smoke test."""

    fit_runs: int = 120
    one_steps: int = 1000
    sweep_runs: int = 1000
    sweep_steps: int = 1000
    big_rows: int = 1_000_000
    growth_lengths: tuple[int, ...] = (100, 1_000, 10_000, 100_000, 1_000_000)
    growth_sweeps: tuple[int, ...] = (10, 30, 100, 300)
    marginal: bool = True  # also time the first fit file alone (start-up vs per-run cost)


FULL = Sizes()
#: ``--quick`` (the smoke test): every code path but the sweep-vs-runs loop, on tiny inputs
QUICK = Sizes(fit_runs=6, one_steps=1000, sweep_runs=8, sweep_steps=300, big_rows=5_000,
              growth_lengths=(100, 1_000, 10_000), growth_sweeps=(), marginal=False)


@dataclass
class Row:
    """One line of the table: what, the measured figure, the reference beside it, the target."""

    section: str
    measure: str
    result: str
    reference: str = ""
    target: str = ""
    status: str = ""  # "ok", "MISS" or "" (information only)


@dataclass
class Report:
    machine: dict
    config: dict
    rows: list[Row] = field(default_factory=list)
    raw: dict = field(default_factory=dict)

    def add(self, *args, **kw) -> None:
        self.rows.append(Row(*args, **kw))


# --------------------------------------------------------------------------- processes


@dataclass
class Proc:
    wall: float
    maxrss_mb: float
    rc: int
    stdout: bytes
    stderr: bytes


TIME = shutil.which("time", path="/usr/bin:/bin")
_RSS_WRAPPER = (
    "import os, resource, subprocess, sys\n"
    "rc = subprocess.call(sys.argv[2:], close_fds=True)\n"
    "open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
    "sys.exit(rc)\n"
)


def run_process(cmd: list[str], *, cwd: Path | None = None) -> Proc:
    """Run ``cmd`` to the end; its wall time and peak RSS, through a small parent process.

    The peak RSS comes from ``wait4`` in ``/usr/bin/time -f %M`` (a small C program): measured
    from here, the kernel would charge the child with this (large) process's peak, because
    ``subprocess`` starts children with ``vfork`` and ``exec`` keeps the old address space's
    high-water mark. Without ``/usr/bin/time`` a tiny Python wrapper does the same (its own
    ~10 MB then bound the smallest figure from below). Wall time includes the wrapper (~1 ms).
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile("r", suffix=".rss") as rss:
        if TIME:
            wrapped = [TIME, "-f", "%M", "-o", rss.name, *cmd]
        else:  # pragma: no cover - /usr/bin/time missing
            wrapped = [sys.executable, "-S", "-c", _RSS_WRAPPER, rss.name, *cmd]
        t0 = time.perf_counter()
        p = subprocess.run(wrapped, stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=cwd)
        wall = time.perf_counter() - t0
        rss.seek(0)
        lines = [x for x in rss.read().split() if x.isdigit()]
        maxrss_kb = float(lines[-1]) if lines else float("nan")
        out.seek(0)
        err.seek(0)
        return Proc(wall, maxrss_kb / 1024.0, p.returncode, out.read(), err.read())


def grpofit_cmd() -> list[str]:
    """The ``grpofit`` entry point installed beside this interpreter (the one the plain script
    runs with). Not the first ``grpofit`` on PATH: that may be a version manager's shell shim
    (pyenv's costs ~50 ms per call), which the plain script, started as ``sys.executable``,
    does not pay."""
    exe = Path(sys.executable).with_name("grpofit")
    if exe.is_file() and os.access(exe, os.X_OK):
        return [str(exe)]
    return [sys.executable, "-m", "grpofit"]


def checked(proc: Proc, what: str, ok_codes=(0,)) -> Proc:
    if proc.rc not in ok_codes:
        tail = proc.stderr.decode(errors="replace").strip().splitlines()[-3:]
        raise RuntimeError(f"{what} exited with {proc.rc}: " + " | ".join(tail))
    return proc


def median(xs) -> float:
    return float(statistics.median(xs))


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def loglog_slope(xs, ys) -> float:
    """Least-squares slope of ``log y`` against ``log x`` (1 = linear growth)."""
    lx, ly = np.log(np.asarray(xs, float)), np.log(np.asarray(ys, float))
    return float(np.polyfit(lx, ly, 1)[0])


def _s(x: float) -> str:
    if x < 1:
        return f"{x * 1e3:.0f} ms"
    return f"{x:.2f} s" if x < 100 else f"{x:.0f} s"


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _status(ok: bool) -> str:
    return "ok" if ok else "MISS"


# --------------------------------------------------------------------------- machine


def machine_info() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gb = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_gb = round(int(line.split()[1]) / 1024**2, 1)
    except OSError:
        pass
    import scipy

    import grpofit

    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "memory_gb": mem_gb,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "grpofit": getattr(grpofit, "__version__", "?"),
        "platform": platform.platform(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def byte_compile() -> bool:
    """Byte-compile the grpofit package being measured, as ``pip install`` leaves it.

    An editable install under ``PYTHONDONTWRITEBYTECODE=1`` (as on CI machines) would otherwise
    recompile every module in every process, a cost no installed copy pays; the plain script's
    scipy and numpy are byte-compiled in site-packages. Returns whether it worked."""
    import compileall

    import grpofit

    return bool(compileall.compile_dir(Path(grpofit.__file__).parent, quiet=1))


def machine_line(m: dict) -> str:
    load = f"load average {m['load_average_at_start'][0]:.1f} at start"
    if "load_average_at_end" in m:
        load += f", {m['load_average_at_end'][0]:.1f} at end"
    return (f"{m['cpu']}, {m['cores']} cores ({m['usable_cores']} usable), {m['memory_gb']} GB RAM, "
            f"Python {m['python']}, numpy {m['numpy']}, scipy {m['scipy']}, grpofit {m['grpofit']}; {load}")


# --------------------------------------------------------------------------- 1. fit


def _recovered(truth: dict, plateau, timescale) -> bool:
    """tests/recovery.py's rule: plateau within 0.03 and timescale within 25% of the truth."""
    if plateau is None or timescale is None or not (math.isfinite(plateau) and math.isfinite(timescale)):
        return False
    return abs(plateau - truth["plateau"]) <= PLATEAU_TOL and abs(timescale / truth["timescale"] - 1) <= TIMESCALE_TOL


def _param(model: dict | None, name: str):
    if not model:
        return None
    p = (model.get("params") or {}).get(name) or {}
    return p.get("value")


def score_grpofit(doc: dict, files: list[tuple[Path, dict]]) -> dict:
    by_run = {}
    for entry in doc.get("runs", []):
        by_run[Path(entry["run"]).name] = entry
    osc, pref, missing = [], [], 0
    for path, truth in files:
        entry = by_run.get(path.name)
        if entry is None:
            missing += 1
            osc.append(False)
            pref.append(False)
            continue
        models = entry.get("models") or {}
        o = models.get("oscillator")
        osc.append(_recovered(truth, _param(o, "plateau"), _param(o, "timescale")))
        p = models.get(entry.get("preferred") or "")
        pref.append(_recovered(truth, _param(p, "plateau"), _param(p, "timescale")))
    return {"oscillator": float(np.mean(osc)), "preferred": float(np.mean(pref)), "missing": missing,
            "errors": len(doc.get("errors", []))}


def score_baseline(doc: dict, files: list[tuple[Path, dict]]) -> dict:
    by_file = {Path(f["file"]).name: f for f in doc["fits"]}
    ok, failed = [], 0
    for path, truth in files:
        popt = by_file.get(path.name, {}).get("popt")
        if popt is None:
            failed += 1
            ok.append(False)
            continue
        ok.append(_recovered(truth, popt[0], popt[2]))
    return {"oscillator": float(np.mean(ok)), "failed": failed}


def bench_fit(rep: Report, sizes: Sizes, work: Path, repeats: int) -> None:
    log(f"fit: writing {sizes.fit_runs} synthetic runs")
    files = data.fit_inputs(work / "fit", sizes.fit_runs, seed=0)
    names = [str(p.relative_to(work)) for p, _ in files]
    n = len(names)
    g_cmd = grpofit_cmd() + ["fit", *names, "--format", "json"]
    b_cmd = [sys.executable, str(BASELINE), *names]
    g1_cmd = grpofit_cmd() + ["fit", names[0], "--format", "json"]
    b1_cmd = [sys.executable, str(BASELINE), names[0]]
    g_times, b_times, g_rss, b_rss, g1_times, b1_times = [], [], [], [], [], []
    g_doc = b_doc = None
    for r in range(repeats):
        log(f"fit: repeat {r + 1}/{repeats}")
        g = checked(run_process(g_cmd, cwd=work), "grpofit fit", ok_codes=(0, 2))
        b = checked(run_process(b_cmd, cwd=work), "baseline.py")
        if sizes.marginal and n > 1:
            g1_times.append(checked(run_process(g1_cmd, cwd=work), "grpofit fit (one)", ok_codes=(0, 2)).wall)
            b1_times.append(checked(run_process(b1_cmd, cwd=work), "baseline.py (one)").wall)
        g_times.append(g.wall)
        b_times.append(b.wall)
        g_rss.append(g.maxrss_mb)
        b_rss.append(b.maxrss_mb)
        g_doc = g_doc or json.loads(g.stdout)
        b_doc = b_doc or json.loads(b.stdout)
    gs, bs = score_grpofit(g_doc, files), score_baseline(b_doc, files)
    gt, bt = median(g_times), median(b_times)
    ratio = gt / bt
    # marginal cost of one more run: (all runs - first run alone) / (n - 1), start-up cancels
    g1, b1 = (median(g1_times), median(b1_times)) if g1_times else (math.nan, math.nan)
    gm, bm = (gt - g1) / max(n - 1, 1), (bt - b1) / max(n - 1, 1)
    rep.raw["fit"] = {"runs": n, "grpofit_s": g_times, "plain_s": b_times, "grpofit_rss_mb": g_rss,
                      "plain_rss_mb": b_rss, "grpofit_recovery": gs, "plain_recovery": bs, "ratio": ratio,
                      "grpofit_one_run_s": g1_times, "plain_one_run_s": b1_times,
                      "grpofit_marginal_s": gm if g1_times else None,
                      "plain_marginal_s": bm if g1_times else None}
    sec = "1 fit"
    rep.add(sec, f"wall time, {n} runs in one process", f"{_s(gt)} ({1e3 * gt / n:.0f} ms/run)",
            f"plain curve_fit: {_s(bt)} ({1e3 * bt / n:.0f} ms/run)")
    rep.add(sec, "time ratio grpofit / plain", f"{ratio:.2f}", "", "<= 1.0", _status(ratio <= 1.0))
    if g1_times:
        rep.add(sec, "start-up + first run (same process, 1 file)", _s(g1), f"plain: {_s(b1)}")
        rep.add(sec, "marginal time per extra run", f"{1e3 * gm:.0f} ms",
                f"plain: {1e3 * bm:.0f} ms (ratio {gm / bm:.2f})" if bm > 0 else "plain: ~0 ms")
    note = f"; {gs['errors']} run(s) errored" if gs["errors"] or gs["missing"] else ""
    rep.add(sec, "recovered, oscillator (p* +-0.03, Ts +-25%)", _pct(gs["oscillator"]) + note,
            f"plain: {_pct(bs['oscillator'])} ({bs['failed']} did not converge)")
    rep.add(sec, "recovered, preferred model", _pct(gs["preferred"]))


# --------------------------------------------------------------------------- 2. start-up


def bench_startup(rep: Report, sizes: Sizes, work: Path, repeats: int) -> None:
    from grpofit.planted import make_planted_run

    one = work / "one" / "run.csv"
    one.parent.mkdir(parents=True, exist_ok=True)
    data.write_csv(one, make_planted_run(None, seed=0, n_steps=sizes.one_steps))
    cmds = {
        "python": [sys.executable, "-c", "pass"],
        "help": grpofit_cmd() + ["--help"],
        "fit_one": grpofit_cmd() + ["fit", str(one)],
    }
    times = {k: [] for k in cmds}
    rss = {k: [] for k in cmds}
    for r in range(repeats):
        for k, cmd in cmds.items():
            p = checked(run_process(cmd), k)
            times[k].append(p.wall)
            rss[k].append(p.maxrss_mb)
    med = {k: median(v) for k, v in times.items()}
    rep.raw["startup"] = {"seconds": times, "rss_mb": rss}
    sec = "2 start-up"
    rep.add(sec, "grpofit --help", _s(med["help"]), f"bare python: {_s(med['python'])}", "<= 0.3 s",
            _status(med["help"] <= 0.3))
    rep.add(sec, f"grpofit fit, one {sizes.one_steps}-step CSV (table)", _s(med["fit_one"]),
            f"peak RSS {median(rss['fit_one']):.0f} MB", "<= 1.0 s", _status(med["fit_one"] <= 1.0))


# --------------------------------------------------------------------------- 3. sweep


def _diagnose(folder: Path, jobs: int) -> Proc:
    cmd = grpofit_cmd() + ["diagnose", str(folder), "--format", "json", "--jobs", str(jobs)]
    return checked(run_process(cmd), f"grpofit diagnose --jobs {jobs}", ok_codes=(0, 1))


def bench_sweep(rep: Report, sizes: Sizes, work: Path, repeats: int) -> None:
    n = sizes.sweep_runs
    log(f"sweep: writing {n} planted runs of {sizes.sweep_steps} steps")
    folder = data.planted_inputs(work / f"sweep_{n}", n, n_steps=sizes.sweep_steps)
    t1, t2, rss1, rss2 = [], [], [], []
    judged = None
    for r in range(repeats):
        log(f"sweep: repeat {r + 1}/{repeats}")
        p1 = _diagnose(folder, 1)
        p2 = _diagnose(folder, 2)
        t1.append(p1.wall)
        t2.append(p2.wall)
        rss1.append(p1.maxrss_mb)
        rss2.append(p2.maxrss_mb)
        if judged is None:
            d1, d2 = json.loads(p1.stdout), json.loads(p2.stdout)
            judged = {"jobs1": len(d1["runs"]), "jobs2": len(d2["runs"]),
                      "errors": len(d1.get("errors", [])),
                      "same_verdicts": [x["verdict"] for x in d1["runs"]] == [x["verdict"] for x in d2["runs"]]}
    m1, m2 = median(t1), median(t2)
    speedup = m1 / m2
    rep.raw["sweep"] = {"runs": n, "steps": sizes.sweep_steps, "jobs1_s": t1, "jobs2_s": t2,
                        "jobs1_rss_mb": rss1, "jobs2_rss_mb": rss2, "speedup": speedup, "judged": judged}
    sec = "3 sweep"
    what = f"diagnose {n} runs x {sizes.sweep_steps} steps"
    extra = "" if judged["jobs1"] == n and judged["same_verdicts"] else (
        f"; judged {judged['jobs1']}/{judged['jobs2']} of {n}, same verdicts: {judged['same_verdicts']}")
    rep.add(sec, f"{what}, --jobs 1", _s(m1), f"{n / m1:.1f} runs/s{extra}")
    target = 60.0 * n / 1000  # 60 s for 1,000 runs, scaled in --quick
    rep.add(sec, f"{what}, --jobs 2", _s(m2), f"{n / m2:.1f} runs/s", f"<= {target:.3g} s",
            _status(m2 <= target))
    rep.add(sec, "speed-up --jobs 2 over --jobs 1", f"{speedup:.2f}x", "", ">= 1.7x", _status(speedup >= 1.7))


# --------------------------------------------------------------------------- 4. reading


def bench_reading(rep: Report, sizes: Sizes, work: Path, repeats: int) -> None:
    rows = sizes.big_rows
    tiny = work / "big" / "tiny.csv"
    tiny.parent.mkdir(parents=True, exist_ok=True)
    data.write_csv(tiny, {"step": np.arange(1.0, 51.0), "reward": np.linspace(0, 1, 50)})
    paths = {}
    for fmt in ("csv", "jsonl"):
        log(f"reading: writing a {rows:,}-row, 20-column {fmt.upper()} (once per workdir)")
        paths[fmt] = data.big_log(work / "big", rows, fmt)
    inspect = grpofit_cmd() + ["inspect"]
    base = {"python": [], "inspect_tiny": []}
    runs = {fmt: {"s": [], "rss": []} for fmt in paths}
    for r in range(repeats):
        log(f"reading: repeat {r + 1}/{repeats}")
        base["python"].append(checked(run_process([sys.executable, "-c", "pass"]), "python").maxrss_mb)
        base["inspect_tiny"].append(
            checked(run_process(inspect + [str(tiny), "--format", "json"]), "inspect tiny").maxrss_mb)
        for fmt, path in paths.items():
            p = checked(run_process(inspect + [str(path), "--format", "json"]), f"inspect {fmt}")
            runs[fmt]["s"].append(p.wall)
            runs[fmt]["rss"].append(p.maxrss_mb)
    py_rss, tiny_rss = median(base["python"]), median(base["inspect_tiny"])
    rep.raw["reading"] = {"rows": rows, "baseline_rss_mb": base, "runs": runs,
                          "sizes_mb": {f: p.stat().st_size / 1e6 for f, p in paths.items()}}
    sec = "4 reading"
    rep.add(sec, "baseline peak RSS", f"{tiny_rss:.0f} MB (inspect, 50-row CSV)", f"bare python {py_rss:.0f} MB")
    for fmt, path in paths.items():
        mb = path.stat().st_size / 1e6
        t, peak = median(runs[fmt]["s"]), median(runs[fmt]["rss"])
        speed = mb / t
        ratio = peak / mb
        rep.raw["reading"][f"{fmt}_mb_per_s"] = speed
        rep.raw["reading"][f"{fmt}_rss_ratio"] = ratio
        label = f"inspect {fmt.upper()} {rows:,} x 20 ({mb:.0f} MB)"
        rep.add(sec, f"{label}: throughput", f"{speed:.0f} MB/s", f"wall {_s(t)}", ">= 50 MB/s",
                _status(speed >= 50))
        rep.add(sec, f"{label}: peak RSS", f"{peak:.0f} MB = {ratio:.2f}x file",
                f"{(peak - tiny_rss) / mb:.2f}x over baseline", "<= 3x file", _status(ratio <= 3.0))


# --------------------------------------------------------------------------- 5. growth


def _growth_row(rep: Report, sec: str, what: str, xs, ys) -> dict:
    slope = loglog_slope(xs, ys)
    tail = loglog_slope(xs[-3:], ys[-3:]) if len(xs) > 3 else slope
    points = ", ".join(f"{x:.0e}".replace("e+0", "e") + ": " + _s(y) for x, y in zip(xs, ys))
    rep.add(sec, what, points)
    rep.add(sec, f"{what}: log-log slope", f"{slope:.2f} (last 3 sizes: {tail:.2f})", "",
            "~1 (linear)", "ok" if tail <= 1.15 else "MISS")
    return {"sizes": list(xs), "seconds": list(ys), "slope": slope, "slope_last3": tail}


def bench_growth(rep: Report, sizes: Sizes, work: Path, repeats: int) -> None:
    from grpofit.fitting import fit_series

    sec = "5 growth"
    warm = data.growth_series(500, seed=1)
    fit_series(*warm)  # imports and first-call costs out of the timings
    per_len = []
    for n in sizes.growth_lengths:
        log(f"growth: fit_series on {n:,} points")
        steps, values = data.growth_series(n, seed=0)
        ts = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fit_series(steps, values)
            ts.append(time.perf_counter() - t0)
        per_len.append(median(ts))
    raw = {"fit": _growth_row(rep, sec, "fit_series time vs points (in-process)", sizes.growth_lengths, per_len)}
    if not sizes.growth_sweeps:
        rep.add(sec, "diagnose --jobs 1 time vs runs", "skipped (--quick)")
        rep.raw["growth"] = raw
        return
    per_runs = []
    for n in sizes.growth_sweeps:
        folder = data.planted_inputs(work / f"growth_{n}", n, n_steps=sizes.sweep_steps)
        log(f"growth: diagnose {n} runs --jobs 1")
        per_runs.append(median([_diagnose(folder, 1).wall for _ in range(repeats)]))
    raw["sweep"] = _growth_row(rep, sec, f"diagnose --jobs 1 time vs runs ({sizes.sweep_steps} steps)",
                               sizes.growth_sweeps, per_runs)
    rep.raw["growth"] = raw


# --------------------------------------------------------------------------- output

BENCHES = {"fit": bench_fit, "startup": bench_startup, "sweep": bench_sweep,
           "reading": bench_reading, "growth": bench_growth}
HEADERS = ("Section", "Measure", "Result", "Reference", "Target", "Status")


def _cells(row: Row) -> tuple[str, ...]:
    return (row.section, row.measure, row.result, row.reference, row.target, row.status)


def markdown(rep: Report) -> str:
    esc = lambda s: s.replace("|", "\\|")
    lines = [f"Machine: {machine_line(rep.machine)}. Repeats: {rep.config['repeats']} (medians)"
             + (" - QUICK sizes" if rep.config["quick"] else "") + _compiled_note(rep) + ".", "",
             "| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    lines += ["| " + " | ".join(esc(c) for c in _cells(r)) + " |" for r in rep.rows]
    return "\n".join(lines) + "\n"


def _compiled_note(rep: Report) -> str:
    return "; grpofit byte-compiled as pip installs it" if rep.config.get("byte_compiled") else ""


def print_table(rep: Report) -> None:
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:  # pragma: no cover - rich is a dependency; plain text just in case
        print(machine_line(rep.machine))
        for r in rep.rows:
            print(" | ".join(_cells(r)))
        return
    console = Console(width=None if sys.stdout.isatty() else 170)
    console.print(f"[bold]Machine:[/bold] {machine_line(rep.machine)}", highlight=False)
    console.print(f"Repeats: {rep.config['repeats']} (medians)" + ("; QUICK sizes" if rep.config["quick"] else "")
                  + _compiled_note(rep))
    table = Table(show_lines=False)
    for h in HEADERS:
        table.add_column(h, overflow="fold")
    for r in rep.rows:
        style = "red" if r.status == "MISS" else None
        table.add_row(*_cells(r), style=style)
    console.print(table)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m tests.benchmarks", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes (the smoke test)")
    ap.add_argument("--repeats", type=int, default=None, help="repeats per figure (default 3; 1 with --quick)")
    ap.add_argument("--only", default=None, help="comma-separated sections: " + ",".join(SECTIONS))
    ap.add_argument("--markdown", type=Path, default=None, help="also write the table as markdown")
    ap.add_argument("--json", type=Path, default=None, help="also write every figure as JSON")
    ap.add_argument("--workdir", type=Path, default=None,
                    help="where inputs go (kept and reused; default a temp dir removed at the end)")
    args = ap.parse_args(argv)
    if args.repeats is None:
        args.repeats = 1 if args.quick else 3
    if args.repeats < 1:
        ap.error("--repeats must be >= 1")
    if args.only:
        args.only = [s.strip() for s in args.only.split(",") if s.strip()]
        bad = [s for s in args.only if s not in SECTIONS]
        if bad:
            ap.error(f"unknown section(s) {bad}; choose from {', '.join(SECTIONS)}")
    else:
        args.only = list(SECTIONS)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = QUICK if args.quick else FULL
    rep = Report(machine=machine_info(),
                 config={"quick": args.quick, "repeats": args.repeats, "sections": args.only,
                         "sizes": asdict(sizes)})
    rep.config["byte_compiled"] = byte_compile()
    temp = args.workdir is None
    work = Path(tempfile.mkdtemp(prefix="grpofit-bench-")) if temp else args.workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    try:
        for name in args.only:
            try:
                BENCHES[name](rep, sizes, work, args.repeats)
            except Exception as e:  # one broken section does not hide the others
                log(f"{name}: FAILED: {type(e).__name__}: {e}")
                rep.add(name, "section failed", f"{type(e).__name__}: {e}", status="MISS")
                rep.raw.setdefault("failures", {})[name] = f"{type(e).__name__}: {e}"
    finally:
        if temp:
            shutil.rmtree(work, ignore_errors=True)
    rep.raw["total_s"] = time.perf_counter() - t0
    rep.machine["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    print_table(rep)
    if args.markdown:
        args.markdown.write_text(markdown(rep))
    if args.json:
        doc = {"machine": rep.machine, "config": rep.config, "rows": [asdict(r) for r in rep.rows], "raw": rep.raw}
        args.json.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    return 1 if "failures" in rep.raw else 0


if __name__ == "__main__":
    sys.exit(main())
