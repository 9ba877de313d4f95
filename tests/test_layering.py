"""Layering: the bandit theory lives in grpofit.dynamics; the simulator depends on it, never back."""

from __future__ import annotations

import ast
from pathlib import Path

import grpofit

PKG = Path(grpofit.__file__).parent


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def test_dynamics_never_imports_the_simulator():
    for path in sorted((PKG / "dynamics").glob("*.py")):
        bad = {n for n in _imports(path) if n == "grpofit.simulation" or n.startswith("grpofit.simulation.")
               or n == "grpofit.simulation"}
        assert not bad, f"{path.name} imports {bad}"
        assert "from grpofit import simulation" not in path.read_text(encoding="utf-8"), path.name


def test_simulator_uses_the_dynamics_theory():
    from grpofit import simulation as sim
    from grpofit.dynamics import bandit

    assert "grpofit.dynamics.bandit" in _imports(PKG / "simulation.py")
    # one implementation, re-exported (not a copy)
    assert sim.fixed_point is bandit.fixed_point
    assert sim.group_signal is bandit.group_signal
    assert sim.plateau_at_group_size is bandit.plateau_at_group_size


def test_readers_only_decode_and_never_import_the_writers():
    """The protobuf encoders live with the writers (grpofit.testing.writers); readers decode."""
    from grpofit.readers import protobuf
    from grpofit.testing import writers

    for name in ("encode_varint", "field_varint", "field_bytes", "field_double", "field_float"):
        assert not hasattr(protobuf, name), name
        assert callable(getattr(writers, name)), name
    for path in sorted((PKG / "readers").glob("*.py")):
        bad = {n for n in _imports(path) if n.startswith("grpofit.testing")}
        assert not bad, f"{path.name} imports {bad}"
