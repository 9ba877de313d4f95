"""The documentation as the tests read it: README.md, CONTRIBUTING.md and every page under docs/
(:func:`scripts.update_readme.doc_pages`), one text. A claim a test checks may sit on any page."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def update_readme():
    """``scripts/update_readme.py`` as a module (scripts/ is not a package)."""
    name = "_script_update_readme"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / "update_readme.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


def docs_text() -> str:
    return update_readme().docs_text(ROOT)
