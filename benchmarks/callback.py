"""``python -m benchmarks --only callback``: what ``GrpofitCallback`` costs the training thread.

A TRL ``GRPOTrainer`` run of the kind a user reported (:mod:`tests.trl_scenario`: 300 steps, TRL's
keys, one log event per step) is replayed through the real ``transformers`` classes
(``CallbackHandler``, ``TrainerState``, ``TrainerControl``, ``TrainingArguments``; they import
without torch). torch is not installed here (PyPI's CPU wheel is too heavy for this machine), so a
training step is emulated by ``--step-seconds`` of sleep (a torch step releases the GIL for most
of its time). Measured: the wall time of ``handler.on_log`` at each update (the log events that
hand a snapshot to the judgement thread), against the same callback judging on the training
thread (``background=False``: what each update cost on the training thread).
"""

from __future__ import annotations

import statistics
import time

STEP_SECONDS = 0.05


def replay(*, background: bool, step_seconds: float = STEP_SECONDS, n_steps: int = 300, every: int = 10) -> dict:
    """``{"update": [s, ...], "other": [s, ...], "judged": n}``: the training thread's time in
    ``on_log`` at the update events and at the other log events."""
    import transformers as tr
    from transformers.trainer_callback import CallbackHandler, DefaultFlowCallback

    from grpofit.integrations import GrpofitCallback
    from tests.trl_scenario import trl_logs

    cb = GrpofitCallback(every=every, background=background)
    handler = CallbackHandler([DefaultFlowCallback(), cb], None, None, None, None)
    args = tr.TrainingArguments(output_dir="unused", report_to=[])
    state, control = tr.TrainerState(max_steps=n_steps), tr.TrainerControl()
    update, other = [], []
    last = None
    for i, logs in enumerate(trl_logs(seed=1, n_steps=n_steps)):
        if step_seconds:
            time.sleep(step_seconds)  # the training step
        state.global_step = i + 1
        state.log_history.append({**logs, "step": i + 1})
        due = last is None or (i + 1) - last >= every
        t0 = time.perf_counter()
        control = handler.on_log(args, state, control, dict(logs))
        (update if due else other).append(time.perf_counter() - t0)
        if due:
            last = i + 1
    cb.wait(timeout=120)
    judged = len([e for e in cb.events if e["event"] == "forecast"])
    return {"update": update, "other": other, "judged": judged}


def bench(rep, sizes, work, repeats) -> None:
    sec = "11 callback"
    n_steps = 300 if sizes.watch_full else 60
    bg, fg = [], []
    raw = {"n_steps": n_steps, "step_seconds": STEP_SECONDS, "repeats": []}
    for r in range(repeats):
        b = replay(background=True, n_steps=n_steps)
        f = replay(background=False, n_steps=n_steps, step_seconds=0.0)
        bg += b["update"]
        fg += f["update"]
        raw["repeats"].append({"background": b, "foreground": f})
    med = statistics.median(bg) * 1e3
    rep.add(
        sec,
        f"GrpofitCallback on the training thread per update (replay of a {n_steps}-step TRL run through "
        "transformers' CallbackHandler, training step emulated by 50 ms sleep): median / max",
        f"{med:.2f} / {max(bg) * 1e3:.1f} ms",
        f"judging on the training thread: {statistics.median(fg) * 1e3:.0f} / {max(fg) * 1e3:.0f} ms",
        "<= 50 ms median",
        "ok" if med <= 50 else "MISS",
    )
    rep.raw["callback"] = raw


if __name__ == "__main__":  # pragma: no cover
    for background in (True, False):
        out = replay(background=background, step_seconds=STEP_SECONDS if background else 0.0)
        u = out["update"]
        print(
            f"background={background}: per update median {statistics.median(u) * 1e3:.2f} ms, max {max(u) * 1e3:.1f} ms; "
            f"other log events median {statistics.median(out['other']) * 1e3:.3f} ms; judgements {out['judged']}"
        )
