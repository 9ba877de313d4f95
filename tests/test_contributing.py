"""The "Contributing" examples are real and complete: the package is copied, each code block of
CONTRIBUTING.md is written into the copy as the module it names, its registry row is added to the
copy's registry source, and the commands run on the copy in a child process. Nothing is patched
in memory, so an example that needs a change the guide does not name fails here."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.doc_pages import docs_text

pytestmark = [pytest.mark.slow, pytest.mark.subprocess]

ROOT = Path(__file__).resolve().parents[1]
HEALTHY = ROOT / "sample_logs" / "healthy_slow_start.csv"


def _example(marker: str) -> str:
    """The python block after ``<!-- contributing:MARKER -->`` in CONTRIBUTING.md."""
    found = re.search(rf"<!-- contributing:{marker} -->\s*```python\n(.*?)```", docs_text(), re.S)
    assert found, f"CONTRIBUTING.md lost its {marker} example"
    return found.group(1)


def _registry_lines(code: str) -> dict[str, list[str]]:
    """Registry file -> the lines the example adds there: each ``# grpofit/....py, ...`` comment
    after the module names a file, its indented comment lines are what goes in."""
    headers = list(re.finditer(r"^# (grpofit/\S+\.py), .*$", code, re.M))
    assert headers, "the example does not say which registry its row goes to"
    out = {}
    for h, nxt in zip(headers, headers[1:] + [None]):
        part = code[h.end() : nxt.start() if nxt else len(code)]
        out[h.group(1)] = [m.group(1) for m in re.finditer(r"^#     (.+)$", part, re.M)]
    return out


class Copy:
    """A copy of the package under ``tmp_path`` and the commands run on it."""

    def __init__(self, tmp_path: Path):
        self.root = tmp_path / "copy"
        shutil.copytree(ROOT / "grpofit", self.root / "grpofit", ignore=shutil.ignore_patterns("__pycache__"))
        self.work = tmp_path / "work"
        self.work.mkdir()

    def add(self, marker: str, edit) -> str:
        """Write the example's module; ``edit(source, lines)`` adds its rows to a registry's source
        (``edit``: one function for one registry, else registry path -> function)."""
        code = _example(marker)
        module = re.match(r"# (grpofit/\S+\.py)\n", code)
        assert module, f"the {marker} example does not name its module"
        target = self.root / module.group(1)
        assert not target.exists(), f"{target} exists already"
        target.write_text(code)
        registries = _registry_lines(code)
        edits = edit if isinstance(edit, dict) else {next(iter(registries)): edit}
        assert set(edits) == set(registries), (sorted(edits), sorted(registries))
        for registry, lines in registries.items():
            path = self.root / registry
            imports = [line for line in lines if line.startswith("from ")]
            rows = [line for line in lines if not line.startswith("from ")]
            source = path.read_text()
            if imports:
                future = "from __future__ import annotations\n"
                assert future in source
                source = source.replace(future, future + "".join(line + "\n" for line in imports), 1)
            new = edits[registry](source, rows)
            assert new != source, f"the {marker} row changed nothing in {registry}"
            path.write_text(new)
        return code

    def run(self, *args, module: str = "grpofit") -> tuple[int, str, str]:
        env = dict(os.environ, PYTHONPATH=str(self.root))
        cmd = [sys.executable, "-m", module, *(str(a) for a in args)] if module else [sys.executable, *args]
        done = subprocess.run(cmd, cwd=self.work, env=env, capture_output=True, text=True, timeout=900)
        return done.returncode, done.stdout, done.stderr

    def json(self, *args, expect: int = 0) -> dict:
        code, out, err = self.run(*args, "--format", "json")
        assert code == expect, err
        return json.loads(out)


def _replace_line(source: str, row: str) -> str:
    """``source`` with the line that starts as ``row`` does (up to its ``=`` or ``:``) replaced."""
    key = re.match(r'\s*("[^"]+":|[A-Za-z_][\w\[\], .]*(?::[^=]*)?=)', row)
    assert key, row
    pattern = re.compile(r"^[ \t]*" + re.escape(key.group(1).strip()) + r".*$", re.M)
    assert len(pattern.findall(source)) == 1, f"no single line to replace for {row!r}"
    indent = re.search(r"^([ \t]*)" + re.escape(key.group(1).strip()), source, re.M).group(1)
    return pattern.sub(lambda _: indent + row.strip(), source, count=1)


def _at_the_end_of(name: str):
    """An edit that adds the rows at the end of the literal assigned to ``name``."""

    def edit(source: str, rows: list[str]) -> str:
        start = re.search(rf"^{name}\b[^=]*= [({{]\n", source, re.M)
        assert start, name
        end = re.compile(r"^[)}]", re.M).search(source, start.end()).start()
        return source[:end] + "".join("    " + r + "\n" for r in rows) + source[end:]

    return edit


def test_the_copy_runs_from_the_copy(tmp_path):
    copy = Copy(tmp_path)
    code, out, err = copy.run("-c", "import grpofit; print(grpofit.__file__)", module="")
    assert code == 0, err
    assert Path(out.strip()).resolve().is_relative_to(copy.root.resolve())


def test_the_format_example_is_sniffed_read_and_discovered(tmp_path):
    copy = Copy(tmp_path)

    def at_the_start_of_the_table(source, rows):
        start = source.index("FORMATS_TABLE: tuple[Format, ...] = (\n") + len("FORMATS_TABLE: tuple[Format, ...] = (\n")
        return source[:start] + "".join("    " + r + "\n" for r in rows) + source[start:]

    copy.add("format", at_the_start_of_the_table)
    logs = copy.work / "logs"
    logs.mkdir()
    path = logs / "run.steplog"
    lines = [f"{s} {0.8 - 0.6 * 0.97**s:.4f}" for s in range(0, 300, 2)]
    path.write_text("#steplog\n" + "\n".join(lines) + "\n")
    info = copy.json("inspect", path)
    assert info["format"] == "steplog" and info["runs"][0]["n_steps"] == 150
    fit = copy.json("fit", logs)["runs"][0]  # found in a folder too
    assert abs(fit["models"]["exponential"]["params"]["plateau"]["value"] - 0.8) < 0.01
    code, out, err = copy.run("-c", "import grpofit.readers.registry as r; print(r.FORMATS[0])", module="")
    assert code == 0 and out.strip() == "steplog", err  # the copy's table holds it, first


def test_the_rule_example_adds_its_finding_to_the_mode(tmp_path):
    copy = Copy(tmp_path)
    copy.add("rule", lambda source, rows: _replace_line(source, rows[0]))
    mode = "dynamical_instability"
    doc = copy.json("diagnose", HEALTHY)
    rule = doc["runs"][0]["diagnostics"][mode]["rules"]["reward_floor"]
    assert rule["status"] == "pass" and "above its start" in rule["evidence"]
    falling = copy.work / "falling.csv"
    falling.write_text("step,reward\n" + "".join(f"{s},{0.6 - 0.001 * s:.4f}\n" for s in range(300)))
    rule = copy.json("diagnose", falling)["runs"][0]["diagnostics"][mode]["rules"]["reward_floor"]
    assert rule["status"] == "warn" and "below its start" in rule["evidence"]


def _law_run(path: Path, law, seed: int) -> Path:
    """A 400-step reward run of ``law`` (plateau 0.8 from 0.2, timescale 60) with seeded noise."""
    import numpy as np

    steps = np.arange(0, 800, 2.0)
    values = law(steps, 0.8, 0.2, 60.0) + np.random.default_rng(seed).normal(0.0, 0.01, steps.size)
    path.write_text("step,reward\n" + "".join(f"{s:g},{v:.6f}\n" for s, v in zip(steps, values)))
    return path


def test_the_law_example_is_fitted_forecast_compared_and_plotted(tmp_path):
    from grpofit.laws import registry
    from grpofit.laws.exponential import exponential

    copy = Copy(tmp_path)
    code = copy.add("law", lambda source, rows: _replace_line(source, rows[0]))
    scope: dict = {}
    exec(compile(code, "CONTRIBUTING:law", "exec"), scope)  # the curve, to generate its run
    hyper = _law_run(copy.work / "hyper.csv", scope["hyperbolic"], 1)
    expo = _law_run(copy.work / "expo.csv", exponential, 2)

    # fit: a column of the JSON after the registry's laws, preferred on its own run
    run = copy.json("fit", hyper)["runs"][0]
    assert list(run["models"]) == [*registry.MODELS, "hyperbolic"]
    fitted = run["models"]["hyperbolic"]
    assert run["preferred"] == "hyperbolic", run["preferred_reason"]
    assert abs(fitted["params"]["plateau"]["value"] - 0.8) < 0.02
    assert abs(fitted["params"]["timescale"]["value"] - 60.0) < 6.0
    lo, hi = fitted["params"]["timescale"]["ci95"]
    assert lo < 60.0 < hi and "regime" not in fitted
    code_, out, err = copy.run("fit", hyper)
    assert code_ == 0 and "hyperbolic (preferred)" in out, err
    other = copy.json("fit", expo)["runs"][0]
    assert other["preferred"] != "hyperbolic" and other["models"]["hyperbolic"]["params"]["plateau"]["value"]

    # forecast: mixed with the registry's state-space laws, with its weight and parameters
    laws = copy.json("forecast", hyper)["runs"][0]["laws"]
    assert list(laws) == [*registry.STATESPACE, "hyperbolic"]
    assert laws["hyperbolic"]["weight"] > 0.5, laws
    assert abs(laws["hyperbolic"]["params"]["timescale"] - 60.0) < 15.0

    # compare: its plateau and timescale compared under laws
    doc = copy.json("compare", hyper, expo)
    assert set(doc["laws"]["hyperbolic"]) == {"plateau", "timescale"}
    assert doc["laws"]["hyperbolic"]["plateau"]["a"] == pytest.approx(fitted["params"]["plateau"]["value"])

    # the plot draws it in its registry style
    probe = (
        "import json, grpofit; fig = grpofit.fit(grpofit.read(%r)[0]).plot(); "
        "print(json.dumps({l.get_label().split(' ')[0]: [l.get_color(), l.get_linestyle()] "
        "for l in fig.axes[0].get_lines()}))" % str(hyper)
    )
    code_, out, err = copy.run("-c", probe, module="")
    assert code_ == 0, err
    assert json.loads(out.strip().splitlines()[-1])["hyperbolic"] == ["tab:green", ":"]


def test_the_failure_mode_example_is_judged_gated_and_planted(tmp_path):
    copy = Copy(tmp_path)
    copy.add(
        "mode",
        {
            "grpofit/core/vocabulary.py": _at_the_end_of("MODE_TABLE"),
            "grpofit/testing/planted.py": _at_the_end_of("PLANTS"),
        },
    )
    write = (
        "import sys; from grpofit.testing.planted import make_planted_run\n"
        "cols = make_planted_run(sys.argv[1] if sys.argv[1] != 'healthy' else None, seed=int(sys.argv[2]))\n"
        "names = list(cols)\n"
        "print(','.join(names))\n"
        "for i in range(len(cols['step'])): print(','.join(repr(float(cols[k][i])) for k in names))\n"
    )
    for label, seed in (("reward_stall", 0), ("healthy", 1)):
        code, out, err = copy.run("-c", write, label, str(seed), module="")
        assert code == 0, err
        (copy.work / f"{label}.csv").write_text(out)
    stalled = copy.json("diagnose", copy.work / "reward_stall.csv", expect=1)["runs"][0]  # the gate fails
    verdict = stalled["diagnostics"]["reward_stall"]
    assert verdict["status"] == "fail" and "has not moved since step" in verdict["evidence"], verdict
    assert stalled["verdict"] == "fail"
    healthy = copy.json("diagnose", copy.work / "healthy.csv")["runs"][0]
    assert healthy["diagnostics"]["reward_stall"]["status"] == "pass", healthy["diagnostics"]["reward_stall"]
    # --fail-on takes it, and the table shows its column
    code, out, err = copy.run("diagnose", copy.work / "reward_stall.csv", "--fail-on", "reward_stall")
    assert code == 1 and "stall" in out, (code, err)
    code, _, err = copy.run("diagnose", copy.work / "healthy.csv", "--fail-on", "reward_stall")
    assert code == 0, err
