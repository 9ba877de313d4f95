"""``watch --on-fail``: the alert's command, run detached from watch's own lifetime.

The command runs in its own session (its own process group: a Ctrl-C meant for watch does not
reach it, and watch never waits for what it leaves running in the background); watch waits for
the shell itself only, at most :data:`TIMEOUT` seconds, and gives up waiting as soon as it is
asked to stop (``stop()`` true: a signal), so a signal is honoured within a poll of
:data:`TICK` seconds. The command's output (stdout and stderr together) is read by a thread
that keeps the first :data:`KEEP` bytes and counts the rest: a command that prints 300 MB costs
watch 64 KB. Environment values are the alert's fields with NUL bytes escaped (a run name may
hold one; an environment string cannot).
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from typing import IO, Callable

__all__ = ["run_hook", "TIMEOUT", "KEEP"]

#: seconds watch waits for the command's shell before it stops it (and its process group)
TIMEOUT = 60.0
#: bytes of the command's output shown on watch's stderr
KEEP = 64 * 1024
#: seconds between checks of ``stop`` while waiting
TICK = 0.05
#: seconds the output reader is given once the shell has exited (a background job may keep
#: the pipe open for ever: its later output is read and discarded, never waited for)
DRAIN = 0.5


def env_value(value) -> str:
    """An environment value for ``value``: NUL bytes escaped as ``\\0``."""
    return str(value).replace("\x00", "\\0")


class _Output:
    """Reads a pipe to its end in a daemon thread, keeping the first ``KEEP`` bytes."""

    def __init__(self, pipe: IO[bytes]) -> None:
        self.kept = bytearray()
        self.dropped = 0
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self.thread.start()

    def _read(self, pipe: IO[bytes]) -> None:
        try:
            while True:
                block = pipe.read1(65536) if hasattr(pipe, "read1") else pipe.read(65536)
                if not block:
                    break
                with self.lock:
                    room = KEEP - len(self.kept)
                    if room > 0:
                        self.kept += block[:room]
                    self.dropped += max(0, len(block) - max(room, 0))
        except (OSError, ValueError):
            pass
        finally:
            try:
                pipe.close()
            except OSError:
                pass

    def text(self) -> str:
        with self.lock:
            text = bytes(self.kept).decode("utf-8", errors="replace")
            dropped = self.dropped
        if dropped:
            text = (text if text.endswith("\n") else text + "\n") + f"[{dropped} more byte(s) of output not shown]\n"
        return text


def run_hook(command: str, fields: dict, err: IO[str], stop: Callable[[], bool] = lambda: False) -> None:
    """Run ``command`` with ``fields`` added to its environment; its output and any problem go
    to ``err``. Returns when its shell has exited, after :data:`TIMEOUT`, or once ``stop()``."""
    env = dict(os.environ)
    env.update({k: env_value(v) for k, v in fields.items()})
    try:
        proc = subprocess.Popen(
            command,
            shell=True,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except (OSError, ValueError) as e:
        _say(err, f"warning: --on-fail command could not run: {e}")
        return
    out = _Output(proc.stdout)
    end = time.monotonic() + TIMEOUT
    code = None
    while True:
        code = proc.poll()
        if code is not None or stop():
            break
        if time.monotonic() >= end:
            _kill_group(proc)
            _say(err, f"warning: --on-fail command timed out after {TIMEOUT:g}s; stopped it")
            break
        time.sleep(TICK)
    if code is None:
        if not stop():
            proc.wait()
        return  # asked to stop: the command goes on in its own session
    out.thread.join(DRAIN)
    text = out.text()
    if text:
        _say(err, text.rstrip("\n"))
    if code:
        _say(err, f"warning: --on-fail command exited {code}")


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except OSError:
        pass
    try:
        proc.wait(2.0)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.wait()


def _say(err: IO[str], text: str) -> None:
    try:
        err.write(text + "\n")
        err.flush()
    except (OSError, ValueError):
        pass
