"""Refresh the command outputs shown in the documentation (README.md, CONTRIBUTING.md and every
page under docs/) by running the commands.

Every block of the form

    <!-- run: grpofit fit sample_logs/healthy_slow_start.csv -->
    ```text
    ...
    ```

has its fenced body replaced by what the command prints now (stdout, then stderr), run from the
project root with a fixed terminal width. The JSON a ``--format json`` command prints is shown with
its floats rounded to 4 significant digits (the document itself keeps every digit).

Measured results (benchmarks, replays) are too slow to run here: each sits in a block

    <!-- generated: NAME (from docs/RECORD.json, written by `COMMAND`; do not edit by hand) -->
    ...
    <!-- end generated -->

rendered from the file its measuring script records (:data:`GENERATED`: the record and the
function that renders it). The measuring script's ``--record`` writes the record and rewrites
its blocks; tests recompute rows of the records where that is quick.

Usage: ``python scripts/update_readme.py`` rewrites every page (pasted outputs and generated
blocks) and redraws the figures; ``python scripts/update_readme.py --check`` changes nothing and
exits 1, naming the page, the commands and blocks, when a pasted output differs from what the code
prints now or a generated block from what its record renders (tests/test_readme_outputs.py runs it).
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"(<!-- run: (?P<cmd>.+?) -->\n```text\n)(?P<body>.*?)(```)", re.S)
MAX_LINES = 60
SIGNIFICANT = 4


def round_floats(value):
    """``value`` with every float rounded to ``SIGNIFICANT`` significant digits (ints untouched)."""
    if isinstance(value, float):
        return float(f"{value:.{SIGNIFICANT}g}")
    if isinstance(value, dict):
        return {k: round_floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [round_floats(v) for v in value]
    return value


def _shown_stdout(args: list[str], stdout: str) -> str:
    if "json" not in args or args[args.index("json") - 1] != "--format":
        return stdout
    try:
        doc = json.loads(stdout)
    except ValueError:
        return stdout  # not one JSON document: show it as printed
    return json.dumps(round_floats(doc), indent=2, ensure_ascii=False) + "\n"


@functools.cache
def run(cmd: str) -> str:
    """What README.md shows for ``cmd``: its output (JSON floats rounded) and its exit code."""
    env = dict(os.environ, COLUMNS="140", NO_COLOR="1", TERM="dumb")
    args = shlex.split(cmd)
    if args[0] == "grpofit":
        args = [sys.executable, "-m", "grpofit", *args[1:]]
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, env=env)
    text = _shown_stdout(args, proc.stdout) + proc.stderr
    lines = [line.rstrip() for line in text.splitlines()]
    if len(lines) > MAX_LINES:
        lines = lines[:MAX_LINES] + [f"... ({len(lines) - MAX_LINES} more lines)"]
    return "\n".join(lines) + f"\n(exit code {proc.returncode})\n"


def doc_pages(root: Path = ROOT) -> list[Path]:
    """The pages that may hold pasted outputs and generated blocks: README.md, CONTRIBUTING.md and
    every markdown page under docs/."""
    pages = [root / "README.md", root / "CONTRIBUTING.md", *sorted((root / "docs").rglob("*.md"))]
    return [p for p in pages if p.is_file()]


def docs_text(root: Path = ROOT) -> str:
    """Every page's text, one after the other (claims the tests check may sit on any page)."""
    return "\n".join(p.read_text(encoding="utf-8") for p in doc_pages(root))


def blocks(text: str) -> list[tuple[str, str]]:
    """The README's ``(command, pasted output)`` pairs, in order."""
    return [(m.group("cmd"), m.group("body")) for m in BLOCK.finditer(text)]


def stale(text: str, *, skip=lambda cmd: False) -> list[tuple[str, str, str]]:
    """``(command, pasted, now)`` for every block whose pasted output differs from the output now."""
    from concurrent.futures import ThreadPoolExecutor

    todo = [(cmd, body) for cmd, body in blocks(text) if not skip(cmd)]
    with ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1))) as pool:
        now = list(pool.map(run, [cmd for cmd, _ in todo]))
    return [(cmd, body, out) for (cmd, body), out in zip(todo, now) if out != body]


#: generated blocks: name -> (record file, "module:function" rendering the record to markdown; a
#: ``.json`` record is passed parsed, any other as its text)
GENERATED = {
    "watch-detection": ("docs/watch_benchmark.json", "benchmarks.watch:readme_detection"),
    "watch-load": ("docs/watch_benchmark.json", "benchmarks.watch:readme_load"),
    "forecast-real": ("docs/forecast_real_runs.md", "benchmarks.forecast_measure:readme_real"),
    "forecast-bandit": ("docs/forecast_generated.json", "benchmarks.forecast_measure:readme_bandit"),
    "forecast-forced": ("docs/forecast_generated.json", "benchmarks.forecast_measure:readme_forced"),
    "forecast-plateau": ("docs/forecast_generated.json", "benchmarks.forecast_measure:readme_plateau"),
    "formats": ("grpofit/readers/registry.py", "grpofit.readers.registry:documentation"),
}
GEN_BLOCK = re.compile(r"(<!-- generated: (?P<name>[\w-]+) [^\n]*-->\n)(?P<body>.*?)(<!-- end generated -->)", re.S)


def render_generated(name: str, root: Path = ROOT) -> str:
    """What the block ``name`` shows now: its renderer applied to its record (``root``-relative)."""
    record, where = GENERATED[name]
    path = root / record
    if not path.exists():
        return f"(no record: {record} is missing)\n"
    module, func = where.split(":")
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    raw = path.read_text(encoding="utf-8")
    text = getattr(importlib.import_module(module), func)(json.loads(raw) if path.suffix == ".json" else raw)
    return text if text.endswith("\n") else text + "\n"


def stale_generated(text: str, root: Path = ROOT) -> list[tuple[str, str, str]]:
    """``(name, shown, now)`` for every generated block that differs from its record's rendering,
    a block named twice or not known, and every known block missing from ``text``."""
    out, seen = [], []
    for m in GEN_BLOCK.finditer(text):
        name = m.group("name")
        if name not in GENERATED or name in seen:
            out.append((name, m.group("body"), "(unknown or repeated block)\n"))
            continue
        seen.append(name)
        now = render_generated(name, root)
        if now != m.group("body"):
            out.append((name, m.group("body"), now))
    out += [(name, "", "(block missing from the docs)\n") for name in GENERATED if name not in seen]
    return out


def rewrite_generated(text: str, names=None, root: Path = ROOT) -> str:
    """``text`` with the generated blocks ``names`` (default: all) rendered from their records."""

    def sub(m):
        name = m.group("name")
        if name not in GENERATED or (names is not None and name not in names):
            return m.group(0)
        return m.group(1) + render_generated(name, root) + m.group(4)

    return GEN_BLOCK.sub(sub, text)


FIGURES = (
    "grpofit fit sample_logs/healthy_slow_start.csv --plot docs/fit_healthy.png",
    "grpofit diagnose tests/data/real_logs/heterorl_qwen3_1p7b_grpo_gepo_gspo.wandb_TrainReward.csv "
    "tests/data/real_logs/heterorl_qwen3_1p7b_grpo_gepo_gspo.wandb_GradNorm.csv --plot-dir /tmp/grpofit_readme_figs",
)


def figures() -> None:
    """Redraw the README's figures (the real-log one from tests/data/real_logs)."""
    import shutil

    for cmd in FIGURES:
        run(cmd)
    grpo = Path("/tmp/grpofit_readme_figs")
    for fig in grpo.glob("*GRPO_online*.png"):  # figure_name adds a hash to such names
        shutil.copy(fig, ROOT / "docs" / "diagnose_grpo_collapse.png")


def rewrite_pages(names=None, root: Path = ROOT) -> None:
    """Rewrite the generated blocks ``names`` (default: all) on every page that holds them (what a
    measuring script's ``--record`` calls after writing its record)."""
    for page in doc_pages(root):
        text = page.read_text(encoding="utf-8")
        new = rewrite_generated(text, names, root)
        if new != text:
            page.write_text(new, encoding="utf-8")


def main(argv: list[str] | None = None, root: Path = ROOT) -> int:
    argv = sys.argv[1:] if argv is None else argv
    pages = doc_pages(root)
    if "--check" in argv:
        bad = []
        for page in pages:
            for cmd, _, _ in stale(page.read_text(encoding="utf-8")):
                bad.append(cmd)
                print(
                    f"{page.relative_to(root)}: the output pasted under `{cmd}` is stale: run "
                    "python scripts/update_readme.py",
                    file=sys.stderr,
                )
        gen = stale_generated(docs_text(root), root)
        for name, _, now in gen:
            record = GENERATED.get(name, ("its record",))[0]
            print(
                f"docs: the generated block {name!r} is not what {record} renders "
                f"{now.strip() if now.startswith('(') else ''}: run python scripts/update_readme.py "
                "(or the block's measuring script with --record)",
                file=sys.stderr,
            )
        return 1 if bad or gen else 0
    figures()
    for page in pages:
        text = page.read_text(encoding="utf-8")
        new = BLOCK.sub(lambda m: m.group(1) + run(m.group("cmd")) + m.group(4), text)
        new = rewrite_generated(new, root=root)
        if new != text:
            page.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
