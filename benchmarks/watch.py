"""``python -m benchmarks.watch``: how early ``grpofit watch`` warns, and what it costs.

**detection** replays every run of ``tests/data/real_logs`` and the planted failures of
:mod:`grpofit.testing.planted` step by step, as if live (:mod:`grpofit.watch.replay`), and prints for each
the failure onset, the first warn and fail alerts and the detection delay (first alert minus
onset); healthy runs list their false alerts. Labels come from PROVENANCE.md (what the run is):
a run is *healthy* when PROVENANCE reports no failure and ``diagnose`` on the whole run gives it
no ``fail``; onsets are PROVENANCE's step, or for collapses ``diagnose``'s hindsight onset.

**load** starts one ``grpofit watch`` process on a folder of ``--runs`` live runs (default 100)
appended by a writer process, polled every ``--interval`` seconds, and reports the watch
process's CPU share once caught up and its memory while one more run grows to
``--long-steps`` (default 10,000) steps.

Targets: collapse flagged (fail) within 50 steps of onset on HeteroRL's GRPO run;
every planted failure flagged before its run ends; no fail alert on a healthy run; < 5% of one
core for 100 runs polled every 10 s once caught up; memory flat over a 10,000-step run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tests.reallogs import REAL_LOGS as REAL


@dataclass(frozen=True)
class Case:
    file: str
    run: str | None  #: a substring of the run name (files holding several runs), else None
    label: str  #: healthy | collapse | instability | dip-and-recover | unclear
    metric: str | None = None
    onset: float | None = None  #: None for a collapse: diagnose's hindsight onset on the whole run
    note: str = ""


HETERO = "heterorl_qwen3_1p7b_grpo_gepo_gspo.wandb_TrainReward.csv"
HETERO_GRAD = "heterorl_qwen3_1p7b_grpo_gepo_gspo.wandb_GradNorm.csv"

SHARED = (
    Case(
        HETERO, "GRPO_online", "collapse", note="PROVENANCE: GRPO collapses near step 900; grad-norm precursor at 749"
    ),
    Case(HETERO, "GSPO_online", "collapse", note="PROVENANCE: GSPO collapses near step 1200"),
    Case(HETERO, "GEPO_online", "healthy", note="PROVENANCE: GEPO stays healthy"),
    Case(
        "rasbt_grpo_qwen3-0.6b_7_5_kl_collapse.csv",
        None,
        "collapse",
        "reward_avg",
        note="PROVENANCE: reward 0.44 -> 0 by ~step 100",
    ),
    Case(
        "rasbt_grpo_qwen3-0.6b_7_3_tracking.csv",
        None,
        "instability",
        "reward_avg",
        250,
        note="PROVENANCE: loss blows up, entropy 0.3 -> 6.9 around step 250, reward drops then partly recovers",
    ),
    Case(
        "rasbt_grpo_qwen3-0.6b_7_6_format_reward_conditional.csv",
        None,
        "dip-and-recover",
        "reward_avg",
        150,
        note="PROVENANCE: reward 1.35 -> 0.25 (steps ~150-300) then back to ~1.0",
    ),
    Case(
        "deepgrpo_wandb_val_gsm8k_treerl_instability.csv",
        None,
        "unclear",
        "val-core/openai/gsm8k/acc/mean@1",
        note="PROVENANCE: val acc 0.64 -> 0.60 late (mild); not counted either way",
    ),
    Case("rasbt_grpo_qwen3-0.6b_7_4_clip_ratio.csv", None, "healthy", "reward_avg", note="stable, noisy flat"),
    Case(
        "rasbt_grpo_qwen3-0.6b_7_6_format_reward.csv",
        None,
        "instability",
        "reward_avg",
        149,
        note="PROVENANCE: entropy spike mid-run; whole-run diagnose: entropy x17 from step 149 while the reward falls",
    ),
    Case("countdown_grpo_custom_beibeizzz.jsonl", None, "healthy", note="slow rise"),
    Case("unsloth_grpo_gsm8k_IMJONEZZ.trainer_state.json", None, "healthy", note="noisy rise"),
    Case("verl_grpo_gsm8k_qwen2-7b_trtllm.tfevents", None, "healthy", note="clean rise and saturation"),
    Case("verl_grpo_gsm8k_qwen3-30b-a3b_torchtitan_filelogger.jsonl", None, "healthy", note="fast rise, noisy plateau"),
    Case("verl_grpo_qwen25_3b_fsdp_base.tfevents", None, "healthy"),
    Case("verl_grpo_qwen2_7b_fsdp_base.tfevents", None, "healthy"),
    Case("verl_grpo_qwen25_3b_fsdp_offpolicy.tfevents", None, "healthy", note="one-step off-policy twin of the 3B run"),
    Case("verl_grpo_qwen2_7b_fsdp_offpolicy.tfevents", None, "healthy", note="one-step off-policy twin of the 7B run"),
    Case("verlpr3389_ppo_qwen25_05b_dp2_run1.parsed.csv", None, "healthy", note="PPO, sigmoid rise"),
    *(
        Case(
            "deepgrpo_wandb_val_gsm8k_gamma_sweep_qwen2.5-0.5b.csv",
            key,
            "healthy",
            "val-core/GSM8K/reward/mean@1",
            note="validation reward every 5 steps",
        )
        for key in ("gamma0.1-", "gamma-20.0-", "gamma1.0-", "gamma3.0-", "random-", "gamma2.0-")
    ),
    *(
        Case(
            "deepgrpo_wandb_val_gsm8k_groupsize_sweep_qwen2.5-0.5b.csv",
            key,
            "healthy",
            "val-core/GSM8K/reward/mean@1",
            note="validation reward every 5 steps; all saturate ~0.64",
        )
        for key in ("GRPO-n32", "GRPO-n64", "no-branch-n16", "no-branch")
    ),
)

#: planted failures: (mode, kind, onset as a fraction of the run: where planted.py starts it)
PLANTED = (
    ("train_eval_decoupling", None, 0.35, "eval peaks at 35% and then falls"),
    ("advantage_degeneracy", None, 0.40, "prompts polarise from 40%"),
    ("policy_concentration", None, 0.0, "entropy collapses from the start"),
    ("dynamical_instability", "collapse", 0.65, "reward halves at 65% (precursor spike at 50%)"),
    ("dynamical_instability", "grad_growth", 0.50, "grad norm x20 over the second half"),
    ("dynamical_instability", "oscillation", 0.0, "underdamped from the start"),
    ("dead", None, 0.0, "no signal from the start"),
)


def shared_run(case: Case):
    from grpofit.commands.pipeline import plan_work
    from grpofit.readers import read_path

    path = str(REAL / case.file)
    if case.file == HETERO:
        items, _ = plan_work([path, str(REAL / HETERO_GRAD)])
        runs = [r for r in items if not isinstance(r, str)]
    else:
        runs = read_path(path)
    picked = [r for r in runs if case.run is None or case.run in r.name]
    if case.run == "no-branch":
        picked = [r for r in picked if r.name.endswith("no-branch")]
    if len(picked) != 1:
        raise RuntimeError(f"{case.file}: {case.run!r} matches {len(picked)} runs")
    return picked[0]


def hindsight_onset(run, metric: str | None) -> float | None:
    from grpofit.fitting.analysis import resolve_column
    from grpofit.fitting.collapse import find_collapse

    s, v = run.series(resolve_column(run, "reward", metric))
    c = find_collapse(s, v)
    return None if c is None else float(c.step)


def shared_detections(cases=SHARED, every: int = 1):
    from grpofit.watch.replay import detection

    out = []
    for case in cases:
        run = shared_run(case)
        onset = case.onset
        if case.label == "collapse" and onset is None:
            onset = hindsight_onset(run, case.metric)
        d = detection(
            run,
            case.label,
            onset,
            mode=None if case.label == "healthy" else "dynamical_instability",
            every=every,
            metric=case.metric,
        )
        if case.label != "healthy":
            d = detection(run, case.label, onset, every=every, metric=case.metric) if d.first_alert is None else d
        out.append(d)
    return out


def planted_detections(
    seeds=(0, 1, 2), n_steps: int = 300, healthy_seeds=(0, 1, 2, 3, 4, 5), every: int = 1, kinds=None
):
    from grpofit.testing.planted import planted_run
    from grpofit.watch.replay import detection

    out = []
    for seed in healthy_seeds:
        out.append(detection(planted_run(None, seed=seed, n_steps=n_steps), "healthy", None, every=every))
    for mode, kind, frac, _ in PLANTED:
        if kinds is not None and kind not in kinds:
            continue
        for seed in seeds:
            kw = {"kind": kind} if kind else {}
            run = planted_run(mode, seed=seed, n_steps=n_steps, **kw)
            run.name = f"planted/{mode}{'/' + kind if kind else ''}/{seed}"
            onset = float(run.steps[0] + round(frac * n_steps))
            out.append(
                detection(
                    run,
                    f"{mode}{'/' + kind if kind else ''}",
                    onset,
                    mode=None if mode == "dead" else mode,
                    every=every,
                )
            )
    return out


def summarise(rows) -> dict:
    healthy = [d for d in rows if d.healthy]
    failing = [d for d in rows if not d.healthy and d.label != "unclear"]
    return {
        "healthy_runs": len(healthy),
        "healthy_with_fail": [d.run for d in healthy if d.first_fail is not None],
        "healthy_with_warn": [d.run for d in healthy if d.first_warn is not None],
        "failing_runs": len(failing),
        "missed": [d.run for d in failing if d.first_alert is None],
        "delays": {d.run: d.delay for d in failing},
        "fail_delays": {d.run: d.fail_delay for d in failing},
    }


# --------------------------------------------------------------------------- load

WRITER = r"""
import json, os, sys, time
import numpy as np
folder, runs, interval, steps_per_tick, long_steps, duration, backlog = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6]), int(sys.argv[7])
rng = np.random.default_rng(0)
def row(s):
    r = 0.7 - 0.5 * np.exp(-s / 300.0) + rng.normal(0, 0.03)
    return json.dumps({"step": s, "reward": round(float(r), 4), "kl": round(s / 1e4, 5),
                       "grad_norm": round(float(0.2 * np.exp(rng.normal(0, 0.2))), 4),
                       "entropy": round(float(1 - s / 2e4), 4)}) + "\n"
files = [open(os.path.join(folder, f"run{i:03d}.jsonl"), "a") for i in range(runs)]
longf = open(os.path.join(folder, "long.jsonl"), "a")
step = {i: backlog for i in range(runs)}  # each run goes on after its backlog
long_step = 0
t_end = time.time() + duration
while time.time() < t_end:
    for i, f in enumerate(files):
        for _ in range(steps_per_tick):
            step[i] += 1
            f.write(row(step[i]))
        f.flush()
    # the long run: 10,000 steps over the measurement
    k = max(1, long_steps // max(1, int(duration / interval)))
    for _ in range(k):
        if long_step < long_steps:
            long_step += 1
            longf.write(row(long_step))
    longf.flush()
    time.sleep(interval)
"""


def _proc_stat(pid: int) -> tuple[float, float]:
    """(cpu seconds, rss MB) of a process from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / tick
    with open(f"/proc/{pid}/status") as f:
        rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024.0
    return cpu, rss


def load(
    runs: int = 100,
    interval: float = 10.0,
    backlog: int = 200,
    duration: float = 300.0,
    long_steps: int = 10_000,
    workdir: str | None = None,
) -> dict:
    """One watch process on ``runs`` live JSONL runs (module docstring)."""
    folder = Path(tempfile.mkdtemp(prefix="grpofit-watch-load-", dir=workdir))
    rng = np.random.default_rng(1)
    for i in range(runs):  # a backlog: each run has already logged ``backlog`` steps
        with open(folder / f"run{i:03d}.jsonl", "w") as f:
            for s in range(1, backlog + 1):
                r = 0.7 - 0.5 * np.exp(-s / 300.0) + rng.normal(0, 0.03)
                f.write(
                    json.dumps(
                        {
                            "step": s,
                            "reward": round(float(r), 4),
                            "kl": s / 1e4,
                            "grad_norm": 0.2,
                            "entropy": 1 - s / 2e4,
                        }
                    )
                    + "\n"
                )
    (folder / "long.jsonl").write_text("")
    exe = Path(sys.executable).with_name("grpofit")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "grpofit"]
    events = folder.parent / (folder.name + ".watch.jsonl")
    watch = subprocess.Popen(
        cmd + ["watch", str(folder), "--interval", str(interval), "--jsonl", str(events)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            WRITER,
            str(folder),
            str(runs),
            str(interval),
            "1",
            str(long_steps),
            str(duration),
            str(backlog),
        ]
    )
    samples = []
    t0 = time.time()
    try:
        while writer.poll() is None:
            time.sleep(interval)
            if watch.poll() is not None:
                raise RuntimeError(f"the watch process exited early (exit code {watch.returncode}): {' '.join(cmd)}")
            cpu, rss = _proc_stat(watch.pid)
            samples.append((time.time() - t0, cpu, rss))
    finally:
        watch.send_signal(2)
        try:
            watch.wait(timeout=60)
        except subprocess.TimeoutExpired:
            watch.kill()
        writer.kill()
    # caught up: after the first third of the measurement
    t = np.array([s[0] for s in samples])
    cpu = np.array([s[1] for s in samples])
    rss = np.array([s[2] for s in samples])
    k = max(1, len(samples) // 3)
    share = float((cpu[-1] - cpu[k]) / (t[-1] - t[k])) if len(samples) > k + 1 else float("nan")
    long_rows = sum(1 for _ in open(folder / "long.jsonl"))
    lag = refresh_lag(events, t0 + float(t[k]) if len(t) > k else float("inf"))
    events.unlink(missing_ok=True)
    return {
        **lag,
        "runs": runs,
        "interval": interval,
        "duration": duration,
        "cpu_share_caught_up": share,
        "rss_mb_first": float(rss[k]) if len(rss) > k else float("nan"),
        "rss_mb_last": float(rss[-1]) if len(rss) else float("nan"),
        "rss_mb_max": float(rss.max()) if len(rss) else float("nan"),
        "long_run_steps": long_rows,
        "samples": [(round(a, 1), round(b, 2), round(c, 1)) for a, b, c in samples],
        "watch_exit": watch.returncode,
    }


def refresh_lag(events: Path, since: float) -> dict:
    """How fresh the forecasts stay under the budget: from watch's ``--jsonl`` events after
    ``since`` (epoch seconds), the re-judgements per minute and, per re-judged run, the steps it
    had grown since its previous judgement (median and largest over the re-judgements)."""
    last: dict[str, int] = {}
    grown: list[int] = []
    times: list[float] = []
    if events.exists():
        for line in events.read_text().splitlines():
            e = json.loads(line)
            if e.get("event") != "forecast":
                continue
            prev = last.get(e["run"])
            last[e["run"]] = e["n_points"]
            if e["time"] >= since and prev is not None:
                grown.append(e["n_points"] - prev)
                times.append(e["time"])
    span = (max(times) - since) if times else 0.0
    return {
        "rejudgements_caught_up": len(grown),
        "rejudgements_per_min": 60.0 * len(grown) / span if span > 0 else 0.0,
        "steps_between_rejudgements_median": float(np.median(grown)) if grown else None,
        "steps_between_rejudgements_max": int(max(grown)) if grown else None,
    }


# --------------------------------------------------------------------------- warm refits


def refit_cases(quick: bool = False):
    """(run, metric, horizon) refitted by :func:`refit_costs`: a planted healthy run and, when
    the shared logs are there, two real runs with a rise (a forecast needs one)."""
    from grpofit.testing.planted import planted_run

    out = [(planted_run(None, seed=0, n_steps=300), None, 300.0)]
    if quick or not REAL.is_dir():
        return out
    for case in SHARED:
        if case.file.startswith(("verl_grpo_qwen2_7b_fsdp_base", "countdown_grpo")):
            run = shared_run(case)
            out.append((run, case.metric, float(run.steps[-1])))
    return out


def refit_costs(cases, *, growth: float = 0.05, first: float = 0.25, last: int | None = None) -> dict:
    """Refit each run as ``watch`` does (each time it has grown by ``growth``, from ``first`` of
    it) with two monitors side by side, warm-started and cold; CPU seconds per refresh and how
    far apart their forecasts are (in units of the cold 95% interval's width)."""
    from grpofit.fitting.analysis import resolve_column
    from grpofit.watch.monitor import Monitor, RunState
    from grpofit.watch.replay import prefix

    per_run, warm_s, cold_s, worst_mean, worst_pi = [], [], [], 0.0, 0.0
    for run, metric, horizon in cases:
        col = resolve_column(run, "reward", metric)
        mons = {"warm": Monitor(horizon=horizon), "cold": Monitor(horizon=horizon, warm_start=False)}
        states = {k: RunState(run.name) for k in mons}
        n = int(run.steps.size)
        k = max(30, int(first * n))
        ks = []
        while k < n:
            ks.append(k)
            k = int(k * (1 + growth)) + 1
        ks.append(n)
        if last:
            ks = ks[:last]
        times = {"warm": [], "cold": []}
        for k in ks:
            p = prefix(run, k)
            for key in ("warm", "cold"):  # alternating, so that load changes hit both alike
                states[key].n = k
                t0 = time.process_time()
                mons[key]._forecast(p, states[key], col)
                times[key].append(time.process_time() - t0)
            w, c = states["warm"].forecast_final(), states["cold"].forecast_final()
            if w[0] is not None and c[0] is not None and c[1] and None not in c[1]:
                width = max(c[1][1] - c[1][0], 1e-12)
                worst_mean = max(worst_mean, abs(w[0] - c[0]) / width)
                worst_pi = max(worst_pi, max(abs(a - b) for a, b in zip(w[1], c[1])) / width)
        warm_s += times["warm"]
        cold_s += times["cold"]
        per_run.append(
            {
                "run": run.name,
                "refreshes": len(ks),
                "warm_fits": states["warm"].warm_fits,
                "warm_cpu_s": float(np.sum(times["warm"])),
                "cold_cpu_s": float(np.sum(times["cold"])),
            }
        )
    return {
        "runs": per_run,
        "refreshes": len(warm_s),
        "warm_cpu_s_per_refresh": float(np.mean(warm_s)),
        "cold_cpu_s_per_refresh": float(np.mean(cold_s)),
        "worst_mean_gap": worst_mean,
        "worst_pi95_gap": worst_pi,
    }


def verdict_costs(cases, *, growth: float = 0.05, first: float = 0.25, last: int | None = None) -> dict:
    """The verdicts' refresh (``diagnose_run``, whose curve fit is warm-started in ``watch``)
    run on each growing run as ``watch`` does, warm-started and cold side by side (alternating,
    so that load changes hit both alike): CPU seconds and least-squares evaluations per refresh,
    and the largest gap between the two fits (SSR and parameters, relative)."""
    from grpofit.diagnostics import diagnose_run
    from grpofit.fitting import solve as solve_mod
    from grpofit.fitting.analysis import resolve_column
    from grpofit.watch.replay import prefix

    calls = {"n": 0}
    real = solve_mod._Problem.evaluate

    def counted(self, q):
        calls["n"] += 1
        return real(self, q)

    per_run, cpu, evals, worst_ssr, worst_param, verdicts_differ = (
        [],
        {"warm": [], "cold": []},
        {"warm": 0, "cold": 0},
        0.0,
        0.0,
        0,
    )
    solve_mod._Problem.evaluate = counted
    try:
        for run, metric, _ in cases:
            col = resolve_column(run, "reward", metric)
            warm: dict = {}
            n = int(run.steps.size)
            k, ks = max(30, int(first * n)), []
            while k < n:
                ks.append(k)
                k = int(k * (1 + growth)) + 1
            ks = (ks + [n])[:last] if last else ks + [n]
            for i, k in enumerate(ks):
                p = prefix(run, k)
                out = {}
                for key in ("warm", "cold") if i % 2 == 0 else ("cold", "warm"):
                    calls["n"] = 0
                    t0 = time.process_time()
                    out[key] = diagnose_run(p, metric=col, warm=warm if key == "warm" else None)
                    cpu[key].append(time.process_time() - t0)
                    evals[key] += calls["n"]
                w, c = out["warm"], out["cold"]
                verdicts_differ += {m: v.status for m, v in w.diagnostics.items()} != {
                    m: v.status for m, v in c.diagnostics.items()
                }
                for law, mc in c.fit.models.items():
                    mw = w.fit.models[law]
                    if mc.ssr is not None and mw.ssr is not None:
                        worst_ssr = max(worst_ssr, abs(mw.ssr - mc.ssr) / max(abs(mc.ssr), 1e-300))
                    for name, pc in mc.params.items():
                        a, b = mw.params[name].value, pc.value
                        if a is not None and b is not None:
                            worst_param = max(worst_param, abs(a - b) / max(abs(b), 1e-12))
            per_run.append({"run": run.name, "refreshes": len(ks)})
    finally:
        solve_mod._Problem.evaluate = real
    m = len(cpu["warm"])
    return {
        "runs": per_run,
        "refreshes": m,
        "warm_cpu_s_per_refresh": float(np.mean(cpu["warm"])),
        "cold_cpu_s_per_refresh": float(np.mean(cpu["cold"])),
        "warm_cpu_s_median_pair_ratio": float(np.median(np.array(cpu["warm"]) / np.maximum(cpu["cold"], 1e-9))),
        "warm_evaluations_per_refresh": evals["warm"] / max(m, 1),
        "cold_evaluations_per_refresh": evals["cold"] / max(m, 1),
        "worst_ssr_gap": worst_ssr,
        "worst_param_gap": worst_param,
        "refreshes_with_other_verdicts": verdicts_differ,
    }


# --------------------------------------------------------------------------- memory


def memory_replay(steps: int = 10_000, per_poll: int = 100, forecast: bool = True, workdir: str | None = None) -> dict:
    """One ``watch`` session, in this process, following a JSONL run that a writer grows to
    ``steps`` steps, ``per_poll`` steps per poll, every poll counted as ``--interval`` 10 s
    (so the CPU budget rations the re-judgements as it would live): RSS every 1,000 steps."""
    import io

    from grpofit.watch.session import Session, WatchOptions

    folder = Path(tempfile.mkdtemp(prefix="grpofit-watch-memory-", dir=workdir))
    path = folder / "long.jsonl"
    rng = np.random.default_rng(2)

    def rows(a: int, b: int) -> str:
        out = []
        for s in range(a, b):
            r = 0.7 - 0.5 * np.exp(-s / 3000.0) + rng.normal(0, 0.03)
            out.append(
                json.dumps(
                    {
                        "step": s,
                        "reward": round(float(r), 4),
                        "kl": round(s / 1e5, 6),
                        "grad_norm": round(float(0.2 * np.exp(rng.normal(0, 0.2))), 4),
                        "entropy": round(float(1 - s / 2e5), 5),
                    }
                )
            )
        return "\n".join(out) + "\n"

    path.write_text(rows(1, per_poll + 1))
    sess = Session(
        WatchOptions(paths=[str(folder)], interval=10.0, forecast=forecast), out=io.StringIO(), err=io.StringIO()
    )
    sess.open()
    samples, judged = [], 0
    s = per_poll + 1
    t0 = time.perf_counter()
    try:
        while True:
            sess.last_poll = time.monotonic() - sess.opts.interval  # as if --interval had passed
            judged += sum(e["event"] == "forecast" for e in sess.poll())
            if (s - 1) % 1000 == 0:
                samples.append((s - 1, _proc_stat(os.getpid())[1]))
            if s > steps:
                break
            with open(path, "a") as f:
                f.write(rows(s, s + per_poll))
            s += per_poll
    finally:
        sess.close()
    st = next(iter(sess.monitor.runs.values()))
    xs = np.array([a for a, _ in samples], float)
    ys = np.array([b for _, b in samples], float)
    half = xs >= xs[-1] / 2  # the second half: after the first judgements' imports and caches
    slope = float(np.polyfit(xs[half], ys[half], 1)[0] * 10_000) if half.sum() >= 2 else float("nan")
    return {
        "steps": int(st.n),
        "per_poll": per_poll,
        "forecast": forecast,
        "rejudgements": judged,
        "rss_mb": [(int(a), round(b, 1)) for a, b in samples],
        "rss_first_mb": float(ys[0]),
        "rss_mid_mb": float(ys[half][0]),
        "rss_last_mb": float(ys[-1]),
        "mb_per_10k_steps_second_half": slope,
        "seconds": time.perf_counter() - t0,
    }


def main(argv=None) -> int:
    from grpofit.watch.replay import fmt_table

    ap = argparse.ArgumentParser(prog="python -m benchmarks.watch", description=__doc__.split("\n\n")[0])
    ap.add_argument("--section", choices=("detection", "refits", "memory", "load", "all"), default="all")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--interval", type=float, default=10.0)
    ap.add_argument("--duration", type=float, default=300.0)
    ap.add_argument("--long-steps", type=int, default=10_000)
    ap.add_argument("--json", type=Path)
    ap.add_argument(
        "--record",
        action="store_true",
        help=f"merge the sections run into {RECORD.relative_to(ROOT)} and rewrite the README's blocks from it",
    )
    args = ap.parse_args(argv)
    doc: dict = {"measured": _conditions()}
    ok = True
    if args.section in ("detection", "all"):
        t = time.time()
        shared = shared_detections()
        planted = planted_detections()
        print("Detection on the shared real runs, replayed step by step:")
        print(fmt_table(shared))
        print("\nDetection on planted failures (300 steps each) and healthy controls:")
        print(fmt_table(planted))
        s1, s2 = summarise(shared), summarise(planted)
        grpo = next(d for d in shared if "GRPO_online" in d.run)
        checks = {
            "HeteroRL GRPO collapse: fail within 50 steps of onset": grpo.fail_delay is not None
            and 0 <= grpo.fail_delay <= 50,
            "every planted failure flagged before the run ends": not s2["missed"],
            "no fail alert on a healthy shared run": not s1["healthy_with_fail"],
            "no fail alert on a healthy planted run": not s2["healthy_with_fail"],
        }
        print(
            f"\nHeteroRL GRPO: onset {grpo.onset:g}, first warn {grpo.first_warn}, first fail {grpo.first_fail} "
            f"(fail delay {grpo.fail_delay}); offline diagnose detects it at 914"
        )
        print(
            f"healthy shared runs with a warn: {len(s1['healthy_with_warn'])}/{s1['healthy_runs']}; "
            f"healthy planted runs with a warn: {len(s2['healthy_with_warn'])}/{s2['healthy_runs']}"
        )
        for k, v in checks.items():
            print(f"{'ok  ' if v else 'MISS'} {k}")
            ok &= v
        print(f"(detection section took {time.time() - t:.0f} s)")
        doc["detection"] = {
            "shared": [d.row() for d in shared],
            "planted": [d.row() for d in planted],
            "summary": {"shared": s1, "planted": s2},
            "checks": checks,
        }
    if args.section in ("refits", "all"):
        cases = refit_cases()
        doc["refits"] = refit_costs(cases)
        doc["verdict_refits"] = verdict_costs(cases)
        print(json.dumps({k: doc[k] for k in ("refits", "verdict_refits")}, indent=1, default=str))
    if args.section in ("memory", "all"):
        doc["memory"] = memory_replay(steps=args.long_steps, per_poll=100, forecast=True)
        print(json.dumps(doc["memory"], indent=1, default=str))
    if args.section in ("load", "all"):
        res = load(runs=args.runs, interval=args.interval, duration=args.duration, long_steps=args.long_steps)
        print(
            f"\nLoad: {res['runs']} live runs polled every {res['interval']:g} s for {res['duration']:g} s; "
            f"CPU once caught up {100 * res['cpu_share_caught_up']:.2f}% of one core (target < 5%); "
            f"RSS {res['rss_mb_first']:.0f} -> {res['rss_mb_last']:.0f} MB (max {res['rss_mb_max']:.0f}) while a run "
            f"grew to {res['long_run_steps']} steps"
        )
        doc["load"] = res
        ok &= res["cpu_share_caught_up"] < 0.05
    doc["measured"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    if args.json:
        from grpofit.core.jsonout import jsonable

        args.json.write_text(json.dumps(jsonable(doc), indent=1))
    if args.record:
        record(doc)
    return 0 if ok else 1


# --------------------------------------------------------------------------- the README's figures

ROOT = Path(__file__).resolve().parents[1]
#: the recorded full-size run; the README's watch figures are rendered from it (scripts/update_readme.py)
RECORD = ROOT / "docs" / "watch_benchmark.json"


def _conditions() -> dict:
    import datetime
    import platform

    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def record(doc: dict, path: Path = RECORD, readme: Path | None = None) -> None:
    """Merge ``doc``'s sections into the record (sections not run keep their last figures, each
    with the conditions it was measured in) and rewrite the docs' watch blocks from it."""
    import importlib.util

    from grpofit.core.jsonout import jsonable

    doc = json.loads(json.dumps(jsonable(doc)).replace(str(REAL) + "/", "tests/data/real_logs/"))  # portable names
    old = json.loads(path.read_text()) if path.exists() else {}
    for key, value in doc.items():
        if key != "measured":
            old[key] = value
            old.setdefault("measured", {})[key] = doc["measured"]
    path.write_text(json.dumps(jsonable(old), indent=1) + "\n")
    spec = importlib.util.spec_from_file_location("_update_readme", ROOT / "scripts" / "update_readme.py")
    upd = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(upd)
    names = [n for n, (rec, _) in upd.GENERATED.items() if (ROOT / rec) == path]
    if readme is None:
        upd.rewrite_pages(names, root=path.parents[1])
    else:
        readme.write_text(upd.rewrite_generated(readme.read_text(), names, root=path.parents[1]))


def _when(doc: dict, section: str) -> str:
    m = (doc.get("measured") or {}).get(section) or {}
    la = m.get("load_average_at_start") or ["?"]
    end = m.get("load_average_at_end") or ["?"]
    return f"recorded {m.get('date', '?')} on {m.get('cores', '?')} cores, load average {la[0]} at start and {end[0]} at end"


def _short(run: str) -> str:
    path, _, key = run.partition("::")
    name = Path(path).name
    return f"{name} {key}" if key else name


def _src(source) -> str:
    return "" if not source else f" ({source.removeprefix('rule:').replace('_', ' ')})"


def readme_detection(doc: dict) -> str:
    """The README's detection table and false-alert line, from the record."""
    det = doc["detection"]
    lines = [
        "| run | failure | onset | first warn | first fail | fail delay |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in det["shared"]:
        if r["label"] in ("healthy", "unclear"):
            continue
        lines.append(
            f"| {_short(r['run'])} | {r['label']} | {_n(r['onset'])} | {_n(r['first_warn'])}{_src(r['warn_source'])} "
            f"| {_n(r['first_fail'])}{_src(r['fail_source'])} | {_n(r['fail_delay'])} |"
        )
    groups: dict = {}
    for r in det["planted"]:
        if r["label"] != "healthy":
            groups.setdefault(r["label"], []).append(r)

    def span(rs, key):
        got = [r[key] for r in rs]
        text = _span(got)
        k = sum(x is not None for x in got)
        return text if k in (0, len(rs)) else f"{text} ({k} of {len(rs)} seeds)"

    for label, rs in groups.items():
        lines.append(
            f"| planted, {len(rs)} seeds | {label} | {span(rs, 'onset')} | {span(rs, 'first_warn')} "
            f"| {span(rs, 'first_fail')} | {span(rs, 'fail_delay')} |"
        )
    hs = [r for r in det["shared"] if r["label"] == "healthy"]
    hp = [r for r in det["planted"] if r["label"] == "healthy"]
    planted_failing = [r for rs in groups.values() for r in rs]
    missed = [r for r in planted_failing if r["first_warn"] is None and r["first_fail"] is None]
    grpo = next(r for r in det["shared"] if "GRPO_online" in r["run"])
    n_fail = lambda rs: sum(r["first_fail"] is not None for r in rs)
    n_warn = lambda rs: sum(r["first_warn"] is not None for r in rs)
    lines += [
        "",
        f"False alerts: {n_fail(hs)} of the {len(hs)} healthy shared runs and {n_fail(hp)} of the {len(hp)} "
        f"healthy planted controls get a `fail`; {n_warn(hs)} of the {len(hs)} healthy shared runs and "
        f"{n_warn(hp)} of the planted controls get a `warn`. Targets: the HeteroRL GRPO collapse fails "
        f"{_n(grpo['fail_delay'])} steps after its onset (target <= 50); "
        f"{len(planted_failing) - len(missed)} of the {len(planted_failing)} planted failures are flagged before "
        f"their run ends. ({_when(doc, 'detection')}; the delays do not depend on the load.)",
    ]
    return "\n".join(lines) + "\n"


def readme_load(doc: dict) -> str:
    """The README's load, memory and refit-cost figures, from the record."""
    out = []
    if "load" in doc:
        r = doc["load"]
        share = r["cpu_share_caught_up"]
        t, cpu = [x[0] for x in r["samples"]], [x[1] for x in r["samples"]]
        k, j = len(t) // 3, 2 * len(t) // 3
        parts = ""
        if len(t) >= 6:
            mid, late = (cpu[j] - cpu[k]) / (t[j] - t[k]), (cpu[-1] - cpu[j]) / (t[-1] - t[j])
            parts = f": {100 * mid:.1f}% over the middle third of the samples, {100 * late:.1f}% over the last"
        out.append(
            f"- **Load**: with {r['runs']} live runs polled every {r['interval']:g} s, once caught up (after the "
            f"first third of {r['duration']:g} s) the watch process used **{100 * share:.1f}% of one core**{parts} "
            f"(target < 5%: {'met' if share < 0.05 else 'NOT met'}); its RSS went {r['rss_mb_first']:.0f} -> "
            f"{r['rss_mb_last']:.0f} MB (max {r['rss_mb_max']:.0f} MB) while one more run grew to "
            f"{r['long_run_steps']:,} steps ({_when(doc, 'load')})."
            + (
                f" Within that budget it re-judged {r['rejudgements_per_min']:.1f} runs a minute: a run had grown "
                f"by a median of {r['steps_between_rejudgements_median']:g} steps (at most "
                f"{r['steps_between_rejudgements_max']:,}) since its previous verdicts and forecast."
                if r.get("steps_between_rejudgements_median") is not None
                else ""
            )
        )
    if "memory" in doc:
        m = doc["memory"]
        out.append(
            f"- **Memory over a long run** (in process, forecasts {'on' if m['forecast'] else 'off'}, "
            f"{m['per_poll']} steps a poll): RSS {m['rss_first_mb']:.1f} -> {m['rss_mid_mb']:.1f} -> "
            f"{m['rss_last_mb']:.1f} MB at steps 1,000, {m['steps'] // 2:,} and {m['steps']:,} "
            f"({m['mb_per_10k_steps_second_half']:.1f} MB per 10,000 steps over the second half; "
            f"{m['rejudgements']} re-judgements; {_when(doc, 'memory')})."
        )
    if "refits" in doc:
        r = doc["refits"]
        out.append(
            f"- **Forecast refresh, warm-started**: {r['warm_cpu_s_per_refresh']:.2f} s against "
            f"{r['cold_cpu_s_per_refresh']:.2f} s of CPU cold ({r['refreshes']} refreshes every 5% of growth on "
            f"{len(r['runs'])} runs); forecast means within {100 * r['worst_mean_gap']:.0f}% of the cold 95% "
            f"interval's width, bounds within {100 * r['worst_pi95_gap']:.0f}%."
        )
    if "verdict_refits" in doc:
        v = doc["verdict_refits"]
        out.append(
            f"- **Verdict refresh, curve fit warm-started**: {v['warm_cpu_s_per_refresh']:.2f} s against "
            f"{v['cold_cpu_s_per_refresh']:.2f} s of CPU cold (median paired ratio "
            f"{v['warm_cpu_s_median_pair_ratio']:.2f}), {v['warm_evaluations_per_refresh']:.0f} against "
            f"{v['cold_evaluations_per_refresh']:.0f} least-squares evaluations per refresh "
            f"({v['refreshes']} refreshes); largest gap to the cold fit: SSR {v['worst_ssr_gap']:.1e}, "
            f"parameters {v['worst_param_gap']:.1e} (relative); verdicts differ in "
            f"{v['refreshes_with_other_verdicts']} refreshes ({_when(doc, 'refits')})."
        )
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.exit(main())


# --------------------------------------------------------------------------- the main harness


def _n(x) -> str:
    return "-" if x is None else f"{x:g}"


def _span(xs) -> str:
    xs = [x for x in xs if x is not None]
    if not xs:
        return "-"
    lo, hi = min(xs), max(xs)
    return f"{lo:g}" if lo == hi else f"{lo:g}-{hi:g}"


def bench(rep, sizes, work, repeats: int) -> None:
    """The ``watch`` section of ``python -m benchmarks``: detection delays and false
    alerts (replays), warm-started refits, memory over a long run, and the load of one watch
    process on live runs. ``sizes.watch_full`` False (``--quick``): a few replays, no load."""
    full = getattr(sizes, "watch_full", True)
    sec = "6 watch"
    raw: dict = {}
    # detection
    if full:
        shared = shared_detections()
        planted = planted_detections()
    else:
        shared = []
        planted = planted_detections(seeds=(0,), healthy_seeds=(0,), kinds=("collapse",))
    raw["detection"] = {"shared": [d.row() for d in shared], "planted": [d.row() for d in planted]}
    _detection_rows(rep, sec, shared, planted)
    # warm-started refits
    r = refit_costs(refit_cases(quick=not full), last=None if full else 2)
    raw["refits"] = r
    _refit_row(rep, sec, r)
    # memory over a long run, in process
    m = memory_replay(steps=10_000 if full else 1_000, per_poll=100, forecast=full, workdir=str(work))
    raw["memory"] = m
    _memory_row(rep, sec, m)
    # load
    if full:
        res = load(runs=100, interval=10.0, duration=240.0, long_steps=10_000, workdir=str(work))
        raw["load"] = res
        _load_rows(rep, sec, res)
    else:
        rep.add(sec, "100 live runs polled every 10 s", "skipped (--quick)")
    rep.raw["watch"] = raw


def _detection_rows(rep, sec: str, shared: list, planted: list) -> None:
    """Add the detection rows: each shared failing replay, each planted failure kind, and the
    healthy runs with a fail alert."""
    for d in (x for x in shared if not x.healthy and x.label != "unclear"):
        hetero = "GRPO_online" in d.run
        ok = (d.fail_delay is not None and 0 <= d.fail_delay <= 50) if hetero else d.first_alert is not None
        rep.add(
            sec,
            f"replay {Path(d.run.split('::')[0]).name[:40]}{' ' + d.run.split('::')[1] if '::' in d.run else ''} ({d.label})",
            f"fail @{_n(d.first_fail)}, delay {_n(d.fail_delay)}",
            f"onset {_n(d.onset)}; first warn @{_n(d.first_warn)}",
            "fail <= 50 steps after onset" if hetero else "flagged before the end",
            "ok" if ok else "MISS",
        )
    kinds: dict[str, list] = {}
    for d in planted:
        if not d.healthy:
            kinds.setdefault(d.label, []).append(d)
    for label, ds in kinds.items():
        ok = all(d.first_alert is not None and d.first_alert < d.end for d in ds)
        rep.add(
            sec,
            f"replay planted {label} ({len(ds)} seeds)",
            f"first alert @{_span([d.first_alert for d in ds])}, fail @{_span([d.first_fail for d in ds])}",
            f"onset {_span([d.onset for d in ds])}; fail delay {_span([d.fail_delay for d in ds])}",
            "flagged before the end",
            "ok" if ok else "MISS",
        )
    for name, rows in (("shared", shared), ("planted", planted)):
        healthy = [d for d in rows if d.healthy]
        if healthy:
            bad = [d.run for d in healthy if d.first_fail is not None]
            warned = sum(d.first_warn is not None for d in healthy)
            rep.add(
                sec,
                f"healthy {name} runs with a fail alert",
                f"{len(bad)} of {len(healthy)}",
                f"with a warn: {warned}",
                "0",
                "ok" if not bad else "MISS",
            )


def _refit_row(rep, sec: str, r: dict) -> None:
    """Add the row comparing warm-started and cold forecast refreshes (``r``: :func:`refit_costs`)."""
    cut = 1 - r["warm_cpu_s_per_refresh"] / r["cold_cpu_s_per_refresh"]
    rep.add(
        sec,
        f"forecast refresh CPU, warm-started vs cold ({r['refreshes']} refreshes, {len(r['runs'])} runs)",
        f"{r['warm_cpu_s_per_refresh']:.2f} s vs {r['cold_cpu_s_per_refresh']:.2f} s ({100 * cut:.0f}% less)",
        f"largest gap: mean {100 * r['worst_mean_gap']:.1f}%, 95% bounds {100 * r['worst_pi95_gap']:.1f}% of the interval's width",
        "warm < cold",
        "ok" if cut > 0 else "MISS",
    )


def _memory_row(rep, sec: str, m: dict) -> None:
    """Add the row of the resident memory while one followed run grows (``m``: :func:`memory_replay`)."""
    growth = m["rss_last_mb"] - m["rss_mid_mb"]
    rep.add(
        sec,
        f"RSS while one followed run grows to {m['steps']:,} steps (in process)",
        f"{m['rss_first_mb']:.1f} -> {m['rss_mid_mb']:.1f} -> {m['rss_last_mb']:.1f} MB",
        f"second half: +{growth:.1f} MB ({m['mb_per_10k_steps_second_half']:.1f} MB per 10k steps); {m['rejudgements']} re-judgements",
        "flat: < 5 MB per 10k steps",
        ""
        if not np.isfinite(m["mb_per_10k_steps_second_half"])
        else "ok"
        if m["mb_per_10k_steps_second_half"] < 5
        else "MISS",
    )


def _load_rows(rep, sec: str, res: dict) -> None:
    """Add the rows of one watch process's CPU share and memory on live runs (``res``: :func:`load`)."""
    rep.add(
        sec,
        f"{res['runs']} live runs polled every {res['interval']:g} s: CPU once caught up",
        f"{100 * res['cpu_share_caught_up']:.1f}% of one core",
        f"{res['duration']:g} s measured",
        "< 5%",
        "ok" if res["cpu_share_caught_up"] < 0.05 else "MISS",
    )
    rep.add(
        sec,
        f"  its RSS while one more run grew to {res['long_run_steps']:,} steps",
        f"{res['rss_mb_first']:.0f} -> {res['rss_mb_last']:.0f} MB",
        f"max {res['rss_mb_max']:.0f} MB",
        "flat",
        "",
    )
