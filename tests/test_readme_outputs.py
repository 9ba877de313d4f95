"""The outputs pasted into README.md are what the commands print now (scripts/update_readme.py)."""

from __future__ import annotations

import difflib
import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

from tests.doc_pages import docs_text
from tests.reallogs import REAL_LOGS as REAL

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("_script_update_readme", ROOT / "scripts" / "update_readme.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
@pytest.mark.subprocess
@pytest.mark.real_logs
def test_every_pasted_output_is_what_the_command_prints_now():
    upd = _script()
    text = docs_text()
    assert len(upd.blocks(text)) >= 8
    bad = upd.stale(text)
    report = []
    for cmd, pasted, now in bad:
        diff = difflib.unified_diff(pasted.splitlines(), now.splitlines(), "README.md", "now", lineterm="", n=1)
        report.append(f"`{cmd}`:\n" + "\n".join(list(diff)[:30]))
    assert not bad, "run `python scripts/update_readme.py`; stale outputs:\n" + "\n\n".join(report)


@pytest.mark.slow
def test_a_stale_output_is_caught_and_named(capsys):
    upd = _script()
    good = upd.run("grpofit --version")
    text = f"<!-- run: grpofit --version -->\n```text\n{good}```\n"
    assert upd.stale(text) == []
    wrong = text.replace("(exit code 0)", "(exit code 1)")
    ((cmd, pasted, now),) = upd.stale(wrong)
    assert cmd == "grpofit --version" and now == good and pasted != good


def test_json_examples_show_rounded_floats():
    upd = _script()
    assert upd.round_floats({"a": 0.027800000000000005, "b": [17.985611510791365, 3], "c": None, "d": True}) == {
        "a": 0.0278,
        "b": [17.99, 3],
        "c": None,
        "d": True,
    }
    text = docs_text()
    json_blocks = [body for cmd, body in upd.blocks(text) if "--format json" in cmd]
    assert json_blocks
    for body in json_blocks:
        for number in re.findall(r"(?<![\w.])-?\d+\.\d+(?:e[-+]?\d+)?", body.split("\n... (")[0]):
            digits = number.lstrip("-").split("e")[0].replace(".", "").lstrip("0")
            assert len(digits.rstrip("0") or "0") <= 4, number
    # a JSON command's output is still the JSON document, only rounded
    raw = '{"schema": "grpofit.predict/1", "stiffness": 0.027800000000000005, "critical_refresh_interval": 27}'
    shown = upd._shown_stdout(["grpofit", "predict", "--format", "json"], raw)
    assert json.loads(shown) == {"schema": "grpofit.predict/1", "stiffness": 0.0278, "critical_refresh_interval": 27}
    assert upd._shown_stdout(["grpofit", "predict"], raw) == raw  # a table command's output is untouched


def test_quick_start_count_is_the_pasted_diagnose_output():
    # the pasted output is checked against the code above; the prose must agree with it
    upd = _script()
    text = docs_text()
    body = dict(upd.blocks(text))["grpofit diagnose sample_logs"]
    n = int(re.search(r"Gate: failed \((\d+) runs failed\)", body).group(1))
    words = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}
    flat = " ".join(text.split())
    assert f"the command exits 1: {words[n]} of the samples carry a planted failure" in flat
    assert body.rstrip().endswith("(exit code 1)")


def test_layout_widths_in_the_readme_are_the_code_constants():
    from grpofit.render.tables import FULL_TABLE_WIDTH, MIN_NAME_ROOM

    flat = " ".join(docs_text().split())
    assert f"From {FULL_TABLE_WIDTH} columns up it shows every fit column" in flat
    assert f"would leave less than {MIN_NAME_ROOM} characters for run names" in flat


def test_limits_the_readme_states_are_the_code_constants():
    from grpofit.fitting import MIN_POINTS as FIT_MIN
    from grpofit.forecasting.engine import MIN_POINTS as FORECAST_MIN
    from grpofit.forecasting.likelihood import MAX_POINTS

    flat = " ".join(docs_text().split())
    assert f"a fit needs at least {FIT_MIN} points" in flat
    assert f"(fewer than {FORECAST_MIN} points," in flat
    assert f"at most {MAX_POINTS} binned points" in flat


def test_generated_blocks_are_what_their_records_render():
    """The measured figures (watch detection, load, refits, memory) are rendered from the
    recorded files, never typed: each block is exactly its record's rendering."""
    upd = _script()
    text = docs_text()
    names = [m.group("name") for m in upd.GEN_BLOCK.finditer(text)]
    assert sorted(names) == sorted(upd.GENERATED)
    assert upd.stale_generated(text) == []
    for name in names:
        assert "(no record" not in upd.render_generated(name)


def test_check_fails_when_a_generated_block_or_its_record_drifts(tmp_path, capsys):
    import shutil

    upd = _script()
    (tmp_path / "docs").mkdir()
    for rec in {r for r, _ in upd.GENERATED.values()}:
        (tmp_path / rec).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rec, tmp_path / rec)
    text = docs_text()
    # the pasted command outputs are checked above; here only the generated blocks
    plain = upd.BLOCK.sub(lambda m: m.group(0), text)
    assert upd.stale_generated(plain, tmp_path) == []
    # a hand edit of a number in a block
    edited = plain.replace("fails 36 steps after its onset", "fails 30 steps after its onset")
    assert edited != plain
    assert [name for name, _, _ in upd.stale_generated(edited, tmp_path)] == ["watch-detection"]
    # a record that changed (re-measured) while the README was not rewritten
    rec = tmp_path / "docs" / "watch_benchmark.json"
    doc = json.loads(rec.read_text())
    doc["detection"]["shared"][0]["first_fail"] = 950.0
    rec.write_text(json.dumps(doc))
    assert [name for name, _, _ in upd.stale_generated(plain, tmp_path)] == ["watch-detection"]
    # a block removed, and a record missing
    assert ("watch-load", "", "(block missing from the docs)\n") in upd.stale_generated(
        upd.GEN_BLOCK.sub(lambda m: "" if m.group("name") == "watch-load" else m.group(0), plain), tmp_path
    )
    rec.unlink()
    assert {name for name, _, _ in upd.stale_generated(plain, tmp_path)} == {"watch-detection", "watch-load"}
    # --check itself exits 1 and names the block (run on a copy whose pasted outputs are current)
    (tmp_path / "README.md").write_text(edited, encoding="utf-8")
    monkey_stale = upd.stale
    upd.stale = lambda text, **kw: []  # the pasted outputs: checked by the test above, slow to rerun
    try:
        assert upd.main(["--check"], root=tmp_path) == 1
    finally:
        upd.stale = monkey_stale
    assert "generated block 'watch-detection'" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.real_logs
def test_math_lighteval_figures_are_the_runs():
    """The README's 'MATH-lighteval: 0.51 to 0.55 over its 27 evaluations, mean 0.53' is the run's."""
    path = REAL / "verl_grpo_gsm8k_qwen2-7b_trtllm.tfevents"
    import numpy as np

    from grpofit.readers import read_path

    (run,) = read_path(str(path))
    _, v = run.series("val-core/DigitalLearningGmbH/MATH-lighteval/acc/mean@1")
    text = (
        f"MATH-lighteval: {np.min(v):.2f} to {np.max(v):.2f} over its {v.size} evaluations, "
        f"mean {np.mean(v):.2f}) is no decoupling"
    )
    flat = " ".join(docs_text().split())
    assert text in flat, text
