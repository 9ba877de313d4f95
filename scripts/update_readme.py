"""Refresh the command outputs shown in README.md by running the commands.

Every block of the form

    <!-- run: grpofit fit sample_logs/healthy_slow_start.csv -->
    ```text
    ...
    ```

has its fenced body replaced by what the command prints now (stdout, then stderr), run from the
project root with a fixed terminal width. Usage: ``python scripts/update_readme.py``.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"(<!-- run: (?P<cmd>.+?) -->\n```text\n)(?P<body>.*?)(```)", re.S)


def run(cmd: str) -> str:
    env = dict(os.environ, COLUMNS="140", NO_COLOR="1", TERM="dumb")
    args = shlex.split(cmd)
    if args[0] == "grpofit":
        args = [sys.executable, "-m", "grpofit", *args[1:]]
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, env=env)
    text = proc.stdout + proc.stderr
    lines = [line.rstrip() for line in text.splitlines()]
    if len(lines) > 60:
        lines = lines[:60] + [f"... ({len(lines) - 60} more lines)"]
    return "\n".join(lines) + f"\n(exit code {proc.returncode})\n"


FIGURES = (
    "grpofit fit sample_logs/healthy_slow_start.csv --plot docs/fit_healthy.png",
    "grpofit diagnose ../shared/real_logs/heterorl_qwen3_1p7b_grpo_gepo_gspo.wandb_TrainReward.csv "
    "../shared/real_logs/heterorl_qwen3_1p7b_grpo_gepo_gspo.wandb_GradNorm.csv --plot-dir /tmp/grpofit_readme_figs",
)


def figures() -> None:
    """Redraw the README's figures (the real-log one only when ../shared/real_logs is there)."""
    import shutil

    for cmd in FIGURES:
        run(cmd)
    grpo = Path("/tmp/grpofit_readme_figs")
    for fig in grpo.glob("*GRPO_online.png"):
        shutil.copy(fig, ROOT / "docs" / "diagnose_grpo_collapse.png")


def main() -> None:
    figures()
    path = ROOT / "README.md"
    text = path.read_text()
    new = BLOCK.sub(lambda m: m.group(1) + run(m.group("cmd")) + m.group(4), text)
    path.write_text(new)


if __name__ == "__main__":
    main()
