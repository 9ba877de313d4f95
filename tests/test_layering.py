"""Layering: every folder of the package imports only its own folder and the layers below it.

The order, lowest first (docs/architecture.md describes it): ``core`` (runs, roles, errors, numbers,
JSON output, limits) < ``runtime`` < ``laws`` < ``dynamics`` < ``readers`` < ``fitting`` <
``forecasting`` < ``diagnostics`` < ``render`` < ``commands`` < ``watch`` < ``integrations`` <
``testing`` < ``api`` < ``cli``. Lazy imports inside functions count like any other: an import that
runs back up the layers is a circle waiting to happen.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import grpofit

PKG = Path(grpofit.__file__).parent

LAYERS = [
    "core",
    "runtime",
    "laws",
    "dynamics",
    "readers",
    "fitting",
    "forecasting",
    "diagnostics",
    "render",
    "commands",
    "watch",
    "integrations",
    "testing",
    "api",
    "cli",
]

#: imports allowed to run back up, each with its reason (keep this empty or nearly so)
ALLOWED_UP: set[tuple[str, str]] = set()


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def _module(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "grpofit" and parts[1] in LAYERS else None


def _sources() -> list[Path]:
    return sorted(p for p in PKG.rglob("*.py") if p.name != "__main__.py")


def _graph() -> dict[str, set[str]]:
    """Module -> the grpofit modules it imports (a ``from pkg import name`` counts as ``pkg.name``
    when that is a module, else as ``pkg``)."""
    modules = {_module(p): p for p in _sources()}
    graph = {}
    for mod, path in modules.items():
        targets = set()
        for name in _imports(path):
            if name in modules:
                targets.add(name)
            elif name.rpartition(".")[0] in modules and name.startswith("grpofit."):
                targets.add(name.rpartition(".")[0])
        targets.discard(mod)
        graph[mod] = targets
    return graph


def test_no_import_runs_back_up_the_layers():
    rank = {name: i for i, name in enumerate(LAYERS)}
    up = set()
    for mod, targets in _graph().items():
        me = _layer(mod)
        for target in targets:
            them = _layer(target)
            if me and them and rank[them] > rank[me]:
                up.add((mod, target))
    assert up <= ALLOWED_UP, sorted(up - ALLOWED_UP)


def test_every_module_lives_in_a_layer():
    loose = [
        _module(p)
        for p in _sources()
        if _layer(_module(p)) is None and _module(p) not in {"grpofit", "grpofit.api", "grpofit._filter"}
    ]
    assert not loose, f"modules outside the layer folders: {loose}"


def test_circles_stay_inside_one_folder():
    graph = _graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    circles: list[set[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    packages = {_module(p) for p in _sources() if p.name == "__init__.py"}
    spanning = [sorted(c) for c in circles if len({m if m in packages else m.rsplit(".", 1)[0] for m in c}) > 1]
    assert not spanning, spanning


def test_dynamics_theory_never_imports_the_simulator():
    for path in sorted((PKG / "dynamics").glob("*.py")):
        if path.name == "simulation.py":
            continue
        bad = {n for n in _imports(path) if n.startswith("grpofit.dynamics.simulation")}
        assert not bad, f"{path.name} imports {bad}"


def test_simulator_uses_the_dynamics_theory():
    from grpofit.dynamics import bandit
    from grpofit.dynamics import simulation as sim

    assert "grpofit.dynamics.bandit" in _imports(PKG / "dynamics" / "simulation.py")
    # one implementation, re-exported (not a copy)
    assert sim.fixed_point is bandit.fixed_point
    assert sim.group_signal is bandit.group_signal
    assert sim.plateau_at_group_size is bandit.plateau_at_group_size


@pytest.mark.slow
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
