"""``python -m tests.benchmarks.watch``: how early ``grpofit watch`` warns, and what it costs.

**detection** replays every run of ``../shared/real_logs`` and the planted failures of
:mod:`grpofit.testing.planted` step by step, as if live (:mod:`grpofit.watch.replay`), and prints for each
the failure onset, the first warn and fail alerts and the detection delay (first alert minus
onset); healthy runs list their false alerts. Labels come from PROVENANCE.md (what the run is):
a run is *healthy* when PROVENANCE reports no failure and ``diagnose`` on the whole run gives it
no ``fail``; onsets are PROVENANCE's step, or for collapses ``diagnose``'s hindsight onset.

**load** starts one ``grpofit watch`` process on a folder of ``--runs`` live runs (default 100)
appended by a writer process, polled every ``--interval`` seconds, and reports the watch
process's CPU share once caught up and its memory while one more run grows to
``--long-steps`` (default 10,000) steps.

Targets (issue 18): collapse flagged (fail) within 50 steps of onset on HeteroRL's GRPO run;
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

REAL = Path(__file__).resolve().parents[2] / ".." / "shared" / "real_logs"
REAL = Path(os.path.normpath(REAL))


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
    Case(HETERO, "GRPO_online", "collapse", note="PROVENANCE: GRPO collapses near step 900; grad-norm precursor at 749"),
    Case(HETERO, "GSPO_online", "collapse", note="PROVENANCE: GSPO collapses near step 1200"),
    Case(HETERO, "GEPO_online", "healthy", note="PROVENANCE: GEPO stays healthy"),
    Case("rasbt_grpo_qwen3-0.6b_7_5_kl_collapse.csv", None, "collapse", "reward_avg",
         note="PROVENANCE: reward 0.44 -> 0 by ~step 100"),
    Case("rasbt_grpo_qwen3-0.6b_7_3_tracking.csv", None, "instability", "reward_avg", 250,
         note="PROVENANCE: loss blows up, entropy 0.3 -> 6.9 around step 250, reward drops then partly recovers"),
    Case("rasbt_grpo_qwen3-0.6b_7_6_format_reward_conditional.csv", None, "dip-and-recover", "reward_avg", 150,
         note="PROVENANCE: reward 1.35 -> 0.25 (steps ~150-300) then back to ~1.0"),
    Case("deepgrpo_wandb_val_gsm8k_treerl_instability.csv", None, "unclear", "val-core/openai/gsm8k/acc/mean@1",
         note="PROVENANCE: val acc 0.64 -> 0.60 late (mild); not counted either way"),
    Case("rasbt_grpo_qwen3-0.6b_7_4_clip_ratio.csv", None, "healthy", "reward_avg", note="stable, noisy flat"),
    Case("rasbt_grpo_qwen3-0.6b_7_6_format_reward.csv", None, "instability", "reward_avg", 149,
         note="PROVENANCE: entropy spike mid-run; whole-run diagnose: entropy x17 from step 149 while the reward falls"),
    Case("countdown_grpo_custom_beibeizzz.jsonl", None, "healthy", note="slow rise"),
    Case("unsloth_grpo_gsm8k_IMJONEZZ.trainer_state.json", None, "healthy", note="noisy rise"),
    Case("verl_grpo_gsm8k_qwen2-7b_trtllm.tfevents", None, "healthy", note="clean rise and saturation"),
    Case("verl_grpo_gsm8k_qwen3-30b-a3b_torchtitan_filelogger.jsonl", None, "healthy", note="fast rise, noisy plateau"),
    Case("verl_grpo_qwen25_3b_fsdp_base.tfevents", None, "healthy"),
    Case("verl_grpo_qwen2_7b_fsdp_base.tfevents", None, "healthy"),
    Case("verlpr3389_ppo_qwen25_05b_dp2_run1.parsed.csv", None, "healthy", note="PPO, sigmoid rise"),
    *(Case("deepgrpo_wandb_val_gsm8k_gamma_sweep_qwen2.5-0.5b.csv", key, "healthy", "val-core/GSM8K/reward/mean@1",
           note="validation reward every 5 steps")
      for key in ("gamma0.1-", "gamma-20.0-", "gamma1.0-", "gamma3.0-", "random-", "gamma2.0-")),
    *(Case("deepgrpo_wandb_val_gsm8k_groupsize_sweep_qwen2.5-0.5b.csv", key, "healthy", "val-core/GSM8K/reward/mean@1",
           note="validation reward every 5 steps; all saturate ~0.64")
      for key in ("GRPO-n32", "GRPO-n64", "no-branch-n16", "no-branch")),
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
    from grpofit.pipeline import plan_work
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
    from grpofit.analysis import resolve_column
    from grpofit.collapse import find_collapse

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
        d = detection(run, case.label, onset, mode=None if case.label == "healthy" else "dynamical_instability",
                      every=every, metric=case.metric)
        if case.label != "healthy":
            d = detection(run, case.label, onset, every=every, metric=case.metric) if d.first_alert is None else d
        out.append(d)
    return out


def planted_detections(seeds=(0, 1, 2), n_steps: int = 300, healthy_seeds=(0, 1, 2, 3, 4, 5), every: int = 1):
    from grpofit.testing.planted import planted_run
    from grpofit.watch.replay import detection

    out = []
    for seed in healthy_seeds:
        out.append(detection(planted_run(None, seed=seed, n_steps=n_steps), "healthy", None, every=every))
    for mode, kind, frac, _ in PLANTED:
        for seed in seeds:
            kw = {"kind": kind} if kind else {}
            run = planted_run(mode, seed=seed, n_steps=n_steps, **kw)
            run.name = f"planted/{mode}{'/' + kind if kind else ''}/{seed}"
            onset = float(run.steps[0] + round(frac * n_steps))
            out.append(detection(run, f"{mode}{'/' + kind if kind else ''}", onset,
                                 mode=None if mode == "dead" else mode, every=every))
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
folder, runs, interval, steps_per_tick, long_steps, duration = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
rng = np.random.default_rng(0)
def row(s):
    r = 0.7 - 0.5 * np.exp(-s / 300.0) + rng.normal(0, 0.03)
    return json.dumps({"step": s, "reward": round(float(r), 4), "kl": round(s / 1e4, 5),
                       "grad_norm": round(float(0.2 * np.exp(rng.normal(0, 0.2))), 4),
                       "entropy": round(float(1 - s / 2e4), 4)}) + "\n"
files = [open(os.path.join(folder, f"run{i:03d}.jsonl"), "a") for i in range(runs)]
longf = open(os.path.join(folder, "long.jsonl"), "a")
step = {i: 0 for i in range(runs)}
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


def load(runs: int = 100, interval: float = 10.0, backlog: int = 200, duration: float = 300.0,
         long_steps: int = 10_000, workdir: str | None = None) -> dict:
    """One watch process on ``runs`` live JSONL runs (module docstring)."""
    folder = Path(tempfile.mkdtemp(prefix="grpofit-watch-load-", dir=workdir))
    rng = np.random.default_rng(1)
    for i in range(runs):  # a backlog: each run has already logged ``backlog`` steps
        with open(folder / f"run{i:03d}.jsonl", "w") as f:
            for s in range(1, backlog + 1):
                r = 0.7 - 0.5 * np.exp(-s / 300.0) + rng.normal(0, 0.03)
                f.write(json.dumps({"step": s, "reward": round(float(r), 4), "kl": s / 1e4,
                                    "grad_norm": 0.2, "entropy": 1 - s / 2e4}) + "\n")
    (folder / "long.jsonl").write_text("")
    exe = Path(sys.executable).with_name("grpofit")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "grpofit"]
    watch = subprocess.Popen(cmd + ["watch", str(folder), "--interval", str(interval)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(folder), str(runs), str(interval), "1",
                               str(long_steps), str(duration)])
    samples = []
    t0 = time.time()
    try:
        while writer.poll() is None:
            time.sleep(interval)
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
    return {
        "runs": runs, "interval": interval, "duration": duration, "cpu_share_caught_up": share,
        "rss_mb_first": float(rss[k]) if len(rss) > k else float("nan"), "rss_mb_last": float(rss[-1]) if len(rss) else float("nan"),
        "rss_mb_max": float(rss.max()) if len(rss) else float("nan"), "long_run_steps": long_rows,
        "samples": [(round(a, 1), round(b, 2), round(c, 1)) for a, b, c in samples],
        "watch_exit": watch.returncode,
    }


def main(argv=None) -> int:
    from grpofit.watch.replay import fmt_table

    ap = argparse.ArgumentParser(prog="python -m tests.benchmarks.watch", description=__doc__.split("\n\n")[0])
    ap.add_argument("--section", choices=("detection", "load", "all"), default="all")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--interval", type=float, default=10.0)
    ap.add_argument("--duration", type=float, default=300.0)
    ap.add_argument("--long-steps", type=int, default=10_000)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    doc: dict = {}
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
            "HeteroRL GRPO collapse: fail within 50 steps of onset": grpo.fail_delay is not None and 0 <= grpo.fail_delay <= 50,
            "every planted failure flagged before the run ends": not s2["missed"],
            "no fail alert on a healthy shared run": not s1["healthy_with_fail"],
            "no fail alert on a healthy planted run": not s2["healthy_with_fail"],
        }
        print(f"\nHeteroRL GRPO: onset {grpo.onset:g}, first warn {grpo.first_warn}, first fail {grpo.first_fail} "
              f"(fail delay {grpo.fail_delay}); offline diagnose detects it at 914")
        print(f"healthy shared runs with a warn: {len(s1['healthy_with_warn'])}/{s1['healthy_runs']}; "
              f"healthy planted runs with a warn: {len(s2['healthy_with_warn'])}/{s2['healthy_runs']}")
        for k, v in checks.items():
            print(f"{'ok  ' if v else 'MISS'} {k}")
            ok &= v
        print(f"(detection section took {time.time() - t:.0f} s)")
        doc["detection"] = {"shared": [d.row() for d in shared], "planted": [d.row() for d in planted],
                            "summary": {"shared": s1, "planted": s2}, "checks": checks}
    if args.section in ("load", "all"):
        res = load(runs=args.runs, interval=args.interval, duration=args.duration, long_steps=args.long_steps)
        print(f"\nLoad: {res['runs']} live runs polled every {res['interval']:g} s for {res['duration']:g} s; "
              f"CPU once caught up {100 * res['cpu_share_caught_up']:.2f}% of one core (target < 5%); "
              f"RSS {res['rss_mb_first']:.0f} -> {res['rss_mb_last']:.0f} MB (max {res['rss_mb_max']:.0f}) while a run "
              f"grew to {res['long_run_steps']} steps")
        doc["load"] = res
        ok &= res["cpu_share_caught_up"] < 0.05
    if args.json:
        from grpofit.jsonout import jsonable

        args.json.write_text(json.dumps(jsonable(doc), indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
