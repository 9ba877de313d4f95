"""The real third-party training logs the tests read, in one place.

They are vendored byte for byte under ``tests/data/real_logs/`` (sources and licenses in its
``NOTICE.md``), so a fresh clone runs every test that reads them; a checkout without that folder
falls back to ``../shared/real_logs`` beside the project. Tests take paths from here, never from
``../shared`` directly, and never skip because a log is absent: :func:`real_log` raises.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENDORED = ROOT / "tests" / "data" / "real_logs"
SHARED = ROOT.parent / "shared" / "real_logs"
#: the folder the tests read the real logs from
REAL_LOGS = VENDORED if VENDORED.is_dir() else SHARED
#: files beside the logs that are not logs
NOT_LOGS = {"NOTICE.md", "PROVENANCE.md"}


def real_log(name: str) -> Path:
    """The path of the real log ``name``; raises FileNotFoundError naming the folder if absent."""
    path = REAL_LOGS / name
    if not path.is_file():
        raise FileNotFoundError(
            f"real log {name} not found in {REAL_LOGS} (vendored logs live in tests/data/real_logs)"
        )
    return path


def real_log_names() -> list[str]:
    """Every real log, sorted by name."""
    return sorted(p.name for p in REAL_LOGS.iterdir() if p.is_file() and p.name not in NOT_LOGS)
