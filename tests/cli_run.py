"""The ``sketchsyn`` command run as a user runs it, for the command-line tests (a fresh process
on this checkout, ``SKETCHSYN_DEBUG`` unset so errors are the user's one-line messages).

Imported by name: ``tests/`` is on ``sys.path`` (no ``__init__``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HANG_SECONDS = 300  # ends a child that hangs; never a speed limit


def cli_env() -> dict[str, str]:
    """This environment with this checkout first on the path and ``SKETCHSYN_DEBUG`` unset."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("SKETCHSYN_DEBUG", None)
    return env


def run(*args: object, input: bytes | None = None, cwd: Path | None = None):
    """``python -m sketchsyn ARGS``; the result has ``out`` and ``err`` decoded."""
    cmd = [sys.executable, "-m", "sketchsyn", *map(str, args)]
    proc = subprocess.run(
        cmd, input=input, capture_output=True, env=cli_env(), cwd=cwd, timeout=HANG_SECONDS
    )
    proc.out = proc.stdout.decode()  # type: ignore[attr-defined]
    proc.err = proc.stderr.decode()  # type: ignore[attr-defined]
    return proc


def user_error(proc, *needles: str) -> None:
    """Exit status 2, every needle in the one-line message on stderr, no traceback."""
    assert proc.returncode == 2, (proc.returncode, proc.err)
    assert "Traceback" not in proc.err, proc.err
    for needle in needles:
        assert needle in proc.err, (needle, proc.err)


def kill_after_writes(cmd: list, state: Path, writes: int, delay: float, stdin=None) -> None:
    """Start ``cmd``; SIGKILL it ``delay`` s after it has replaced ``state`` ``writes`` times
    (``os.replace`` gives the file a new inode), or once it ends or hangs for 120 s."""
    import signal
    import time

    proc = subprocess.Popen(cmd, env=cli_env(), stdin=stdin, stderr=subprocess.DEVNULL)
    seen, last = 0, None
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            stamp = os.stat(state).st_ino
        except FileNotFoundError:
            stamp = None
        if stamp is not None and stamp != last:
            seen, last = seen + 1, stamp
            if seen >= writes:
                time.sleep(delay)
                break
        time.sleep(0.0005)
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait()
