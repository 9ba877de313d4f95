"""Find every run under the paths given to ``grpofit diagnose``.

One run container is one :class:`RunSource`: a log file, a W&B run folder
(``wandb/run-*/`` or ``offline-run-*/`` holding ``run-<id>.wandb`` or
``files/wandb-history.jsonl``), a ``checkpoint-N/`` folder (only the newest of an HF output
dir), or a TensorBoard log dir (a folder holding ``events.out.tfevents.*``). Files that are
clearly not logs (model weights, tokenizer files, READMEs, configs, images) are ignored.
Directories are tracked by real path, so symlink loops and ``latest-run`` links cannot hang or
duplicate the walk. What the walk leaves out for a reason the user should know is reported
through ``skipped``: links to folders outside the tree or back up the tree (never followed), named
pipes, sockets and devices with a log's name (never opened: a FIFO would block), and folders that
cannot be read (an error: such a run is listed and ``diagnose`` exits 2).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from grpofit.core.errors import ReadError

#: file names that are never logs even with a log's suffix
IGNORE_NAMES = frozenset(
    {
        "config.json",
        "generation_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "added_tokens.json",
        "vocab.json",
        "vocab.txt",
        "merges.txt",
        "adapter_config.json",
        "preprocessor_config.json",
        "chat_template.json",
        "model.safetensors.index.json",
        "pytorch_model.bin.index.json",
        "training_args.json",
        "args.json",
        "wandb-metadata.json",
        "wandb-summary.json",
        "requirements.txt",
        "package.json",
        "package-lock.json",
        "debug.log",
        "debug-internal.log",
        "debug-core.log",
        "latest_checkpointed_iteration.txt",
    }
)
_IGNORE_PREFIX = re.compile(r"^(readme|license|licence|notice|changelog|copying)", re.IGNORECASE)
_SKIP_DIRS = frozenset({"__pycache__", "node_modules", "site-packages"})
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
_WANDB_RUN = re.compile(r"^(?:(?:offline-)?run-|latest-run\Z)")
_WANDB_FILE = re.compile(r"^run-.*\.wandb$")
TFEVENTS_PREFIX = "events.out.tfevents."


@dataclass(frozen=True)
class Skipped:
    """A path the walk did not read: ``error`` True when it may hold a run that was not judged."""

    path: str
    reason: str
    error: bool = False

    def line(self) -> str:
        return f"{self.path}: {self.reason}"


@dataclass(frozen=True, order=True)
class RunSource:
    """One run container: ``kind`` is ``file``, ``wandb-run``, ``checkpoint``, ``tensorboard``
    or ``stdin``."""

    path: str
    kind: str


def dir_kind(path: str) -> str | None:
    """What a folder is as a run container: the kind of the first folder shape of the format
    table it matches (``wandb-run``, ``checkpoint``, ``hf-output`` (holds checkpoint-N folders),
    ``tensorboard``, ...), or None for a plain folder."""
    try:
        names = os.listdir(path)
    except OSError:
        return None
    return _kind(path, names)


def _kind(path: str, names: list[str]) -> str | None:
    from grpofit.readers.registry import folder_kind

    return folder_kind(path, names)


# --- folder shapes (the ``folders`` of the format table's rows) ---------------------------------


def is_wandb_run(path: str, names: list[str]) -> bool:
    """``wandb/run-*/`` or ``offline-run-*/`` holding ``run-<id>.wandb`` or ``files/wandb-history.jsonl``."""
    base = os.path.basename(os.path.normpath(path))
    return bool(_WANDB_RUN.match(base)) and (
        any(_WANDB_FILE.match(n) for n in names) or os.path.isfile(os.path.join(path, "files", "wandb-history.jsonl"))
    )


def is_checkpoint(path: str, names: list[str]) -> bool:
    """An HF ``checkpoint-N/`` folder holding ``trainer_state.json``."""
    return bool(_CHECKPOINT.match(os.path.basename(os.path.normpath(path)))) and "trainer_state.json" in names


def holds_tfevents(path: str, names: list[str]) -> bool:
    """A TensorBoard log dir: it holds ``events.out.tfevents.*``."""
    return any(n.startswith(TFEVENTS_PREFIX) for n in names)


def is_hf_output(path: str, names: list[str]) -> bool:
    """An HF output dir: it holds ``checkpoint-N/`` folders with a ``trainer_state.json``."""
    return newest_checkpoint(path, names) is not None


def newest_checkpoint(folder: str, names: list[str] | None = None) -> str | None:
    """The ``checkpoint-N`` folder with the largest N that holds a trainer_state.json."""
    if names is None:
        try:
            names = os.listdir(folder)
        except OSError:
            return None
    best: tuple[int, str] | None = None
    for n in names:
        m = _CHECKPOINT.match(n)
        if m and os.path.isfile(os.path.join(folder, n, "trainer_state.json")):
            if best is None or int(m.group(1)) > best[0]:
                best = (int(m.group(1)), n)
    return os.path.join(folder, best[1]) if best else None


def _suffixes() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(log suffixes, suffixes peeked at before they count, name prefixes), from the format table."""
    global _SUFFIXES
    if _SUFFIXES is None:
        from grpofit.readers import registry

        _SUFFIXES = (registry.log_suffixes(), registry.peek_suffixes(), registry.name_prefixes())
    return _SUFFIXES


_SUFFIXES: tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]] | None = None


def is_candidate_file(name: str) -> bool:
    """By name alone: could this file be a training log?"""
    low = name.lower()
    if low in IGNORE_NAMES or _IGNORE_PREFIX.match(low):
        return False
    suffixes, _, prefixes = _suffixes()
    return low.endswith(suffixes) or low.startswith(prefixes)


def looks_like_log(path: str) -> bool:
    """Peek at a .json/.log/.txt file: does its content look like a supported log?"""
    from grpofit.readers.sniff import sniff
    from grpofit.readers.source import Source

    src = Source(path, path=path)
    try:
        head = src.head(64 * 1024)
        if path.lower().endswith(".json"):
            text = head.lstrip()
            if text.startswith(b"["):
                return True
            if not text.startswith(b"{"):
                return False
            return b'"log_history"' in head or _first_line_is_object(text)
        sniff(head, path, src.tail(64 * 1024))
    except (OSError, ReadError):
        return False
    return True


def _first_line_is_object(text: bytes) -> bool:
    """A ``.json`` file that is JSON Lines: a first line holding a row object with a step (or
    verl's ``data``), or two lines of objects. A one-line object without a step is a config
    or a results file (``all_results.json``, ``{"hidden_size": 8}``), not a run."""
    import json

    from grpofit.core.runs import STEP_NAMES

    lines = [ln for ln in text.split(b"\n", 2)[:2] if ln.strip()]
    try:
        first = json.loads(lines[0]) if lines else None
        if not isinstance(first, dict):
            return False
        if "data" in first or any(k in first for k in STEP_NAMES):
            return True
        return len(lines) > 1 and isinstance(json.loads(lines[1]), dict)
    except (ValueError, RecursionError):
        return False


def discover(paths: list[str], skipped: list[Skipped] | None = None) -> list[RunSource]:
    """Every run under ``paths``: files given explicitly always count; folders are walked.

    Results are sorted by path within each argument (arguments keep their order) and each
    real file or folder appears once. Raises :class:`ReadError` for a missing path or a
    folder without any log. ``skipped`` (a list) receives what the walk left out and why.
    """
    out: list[RunSource] = []
    seen: set[str] = set()
    skipped = [] if skipped is None else skipped
    for p in paths:
        if p == "-":
            out.append(RunSource("-", "stdin"))
            continue
        check_exists(p)
        if os.path.isdir(p):
            mark = len(skipped)
            found = _walk(p, skipped)
            if not found and not any(s.error for s in skipped[mark:]):
                try:
                    os.listdir(p)
                except OSError as exc:
                    raise ReadError(
                        f"cannot be read ({exc.strerror or exc})", path=p, fix="check the folder's permissions"
                    ) from None
                raise ReadError(
                    "holds no training logs",
                    path=p,
                    fix="point at a log file (.csv, .jsonl, trainer_state.json, events.out.tfevents.*) "
                    "or a folder that contains one",
                )
        else:
            found = [RunSource(p, "file")]
        for src in sorted(found):
            real = os.path.realpath(src.path)
            if real not in seen:
                seen.add(real)
                out.append(src)
    return out


def check_exists(path: str) -> os.stat_result:
    """``os.stat(path)``; a :class:`ReadError` with the real cause when ``path`` cannot be looked
    at (missing, a name too long, a folder on the way without permission)."""
    try:
        return os.stat(path)
    except FileNotFoundError:
        raise ReadError("no such file or directory", path=path, fix="check the path") from None
    except OSError as exc:
        import errno

        if exc.errno == errno.ENAMETOOLONG:
            raise ReadError("the path is too long for this system", path=path, fix="use a shorter path") from None
        if exc.errno in (errno.EACCES, errno.EPERM):
            raise ReadError(
                "cannot be reached (permission denied)", path=path, fix="check the permissions of its folders"
            ) from None
        if exc.errno == errno.ELOOP:
            raise ReadError("is a symlink loop", path=path, fix="point at the real file") from None
        raise ReadError(f"cannot be read ({exc.strerror or exc})", path=path, fix="check the path") from None


def _kind_of_special(mode: int) -> str:
    import stat

    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _inside(real: str, root: str) -> bool:
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def _walk(root: str, skipped: list[Skipped]) -> list[RunSource]:
    from grpofit.readers.registry import folder as folder_shape

    found: list[RunSource] = []
    visited: set[str] = set()
    real_root = os.path.realpath(root)
    stack = [root]
    links: list[str] = []  # linked folders inside the tree: walked after every real folder
    while stack or links:
        if not stack:
            stack.append(links.pop(0))
        folder = stack.pop()
        real = os.path.realpath(folder)
        if real in visited:
            continue
        visited.add(real)
        entries = _scan(folder, root, skipped)
        if entries is None:
            continue
        names = [e.name for e in entries]
        kind = _kind(folder, names)
        shape = folder_shape(kind) if kind else None
        if shape is not None and shape.run:
            found.append(RunSource(folder, kind))
        if shape is not None and shape.leaf:
            continue
        has_state = "trainer_state.json" in names
        newest = None if has_state else newest_checkpoint(folder, names)
        subdirs = []
        for e in entries:
            try:
                is_dir = e.is_dir()
            except OSError:
                continue
            if is_dir:
                if e.name.startswith(".") or e.name in _SKIP_DIRS:
                    continue
                if e.is_symlink():
                    _follow_link(e, real, real_root, root, links, skipped)
                    continue
                if _CHECKPOINT.match(e.name) and os.path.isfile(os.path.join(e.path, "trainer_state.json")):
                    # only the newest checkpoint stands for the run (none if the output dir has
                    # its own final trainer_state.json)
                    if newest is not None and e.path == newest:
                        found.append(RunSource(e.path, "checkpoint"))
                    continue
                subdirs.append(e.path)
            elif shape is not None and shape.run and e.name.startswith(TFEVENTS_PREFIX):
                continue  # read as part of the TensorBoard folder
            elif not e.name.startswith(".") and is_candidate_file(e.name):  # hidden files are never runs
                run = _log_file(e, skipped)
                if run is not None:
                    found.append(run)
        stack.extend(reversed(subdirs))
    return found


def _scan(folder: str, root: str, skipped: list[Skipped]) -> list | None:
    """The entries of ``folder``, links last, each group by name; ``None`` if it cannot be read
    (noted in ``skipped`` unless it is the root itself)."""
    try:
        with os.scandir(folder) as it:
            return sorted(it, key=lambda e: (e.is_symlink(), e.name))
    except OSError as exc:
        if folder != root:
            skipped.append(
                Skipped(
                    folder,
                    f"this folder cannot be read ({exc.strerror or exc}); its runs were not judged",
                    error=True,
                )
            )
        return None


def _follow_link(e, real: str, real_root: str, root: str, links: list[str], skipped: list[Skipped]) -> None:
    """Queue the linked folder ``e`` in ``links`` if it stays inside the tree and does not loop
    back up it (seen from the folder whose real path is ``real``); else note why in ``skipped``."""
    target = os.path.realpath(e.path)
    if not _inside(target, real_root):
        skipped.append(Skipped(e.path, f"a link to {target}, outside {root}; not followed"))
        return
    if _inside(real, target):
        skipped.append(Skipped(e.path, "a link back up the tree (a loop); not followed"))
        return
    links.append(e.path)


def _log_file(e, skipped: list[Skipped]) -> RunSource | None:
    """The run the candidate file ``e`` holds, or ``None``: unreadable or not a regular file
    (noted in ``skipped``), or a file with the ambiguous suffix that does not look like a log."""
    try:
        regular = e.is_file()
        mode = None if regular else os.stat(e.path).st_mode
    except OSError as exc:  # a dangling link, or no permission
        skipped.append(Skipped(e.path, f"cannot be read ({exc.strerror or exc}); skipped"))
        return None
    if not regular:
        skipped.append(Skipped(e.path, f"is {_kind_of_special(mode)}, not a log file; skipped"))
        return None
    if e.name.lower().endswith(_suffixes()[1]) and not looks_like_log(e.path):
        return None
    return RunSource(e.path, "file")
