"""The contract's vocabulary is spelled once and everything reads it from there."""

import pytest

from grpofit.core import vocabulary
from grpofit.core.errors import UsageError
from grpofit.core.vocabulary import MODES, Mode, parse_modes


def test_modes_are_the_contracts_and_every_reader_uses_the_same_tuple():
    import grpofit.diagnostics as diagnostics
    import grpofit.render.tables as render
    import grpofit.testing.planted as planted

    assert MODES == ("train_eval_decoupling", "advantage_degeneracy", "policy_concentration", "dynamical_instability")
    assert diagnostics.MODES is MODES and render.MODES is MODES and planted.MODES is MODES
    assert render.MODE_TITLES["policy_concentration"] == "entropy"
    assert vocabulary.SCHEMAS["diagnose"] == "grpofit.diagnose/1"


def test_every_mode_has_a_registered_check_in_contract_order():
    from grpofit.diagnostics import concentration
    from grpofit.diagnostics.registry import CHECKS

    assert tuple(CHECKS) == MODES
    assert CHECKS["policy_concentration"] is concentration.check


def test_a_new_row_registers_its_check(monkeypatch):
    from grpofit.diagnostics import registry

    row = Mode("made_up", "made up", "mu", "concentration")
    monkeypatch.setattr(registry, "MODE_TABLE", vocabulary.MODE_TABLE + (row,))
    checks = registry._load()
    assert list(checks)[-1] == "made_up" and callable(checks["made_up"])


def test_fail_on_is_validated_once_with_one_message():
    assert parse_modes(None) is None and parse_modes(" , ") is None
    assert parse_modes("policy-concentration, dynamical_instability") == (
        "policy_concentration",
        "dynamical_instability",
    )
    with pytest.raises(UsageError, match="unknown mode.*bogus") as e:
        parse_modes("dynamical_instability,bogus")
    assert "train_eval_decoupling" in e.value.fix
    from grpofit.diagnostics import gate

    with pytest.raises(UsageError, match="bogus"):
        gate([], fail_on=("bogus",))


def test_schema_ids_and_mode_titles_are_spelled_only_in_the_vocabulary():
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "grpofit"
    schema = re.compile(r'"grpofit\.[a-z]+/\d+"')
    title_table = re.compile(r'"policy_concentration":\s*"entropy"')
    for path in root.rglob("*.py"):
        if path.name == "vocabulary.py":
            continue
        text = path.read_text()
        assert not schema.search(text), f"{path}: a schema id outside grpofit/core/vocabulary.py"
        assert not title_table.search(text), f"{path}: a mode-title table outside grpofit/core/vocabulary.py"
