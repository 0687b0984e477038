"""Limits on what the code controls (CPU time, bytes), never on the wall clock.

A test that times a call with the wall clock fails on a loaded machine for a call that was only
waiting for a core. :func:`cpu_limit` bounds the CPU time this process spends in a block and
says "slow" when it is exceeded; :func:`run_limited` runs a child process under a CPU-time
limit (``RLIMIT_CPU``), keeping a wall-clock timeout only to end a child that hangs, and says
which of the two happened. Imported by the tests (the tests directory is on ``sys.path``).

>>> with cpu_limit(5.0, "a sum"):
...     _ = sum(range(1000))
"""

from __future__ import annotations

import resource
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

__all__ = ["HANG_SECONDS", "cpu_limit", "run_limited"]

# Wall clock after which a child that has not finished is taken to hang (it is not computing:
# its CPU is limited far below this). Generous: a loaded 2-core machine runs 5x slower.
HANG_SECONDS = 1800


@contextmanager
def cpu_limit(seconds: float, what: str) -> Iterator[None]:
    """Fail with ``"slow: ..."`` when the block uses more than ``seconds`` of this process's
    CPU time (user + system, all threads), whatever the wall clock did meanwhile."""
    start = time.process_time()
    yield
    used = time.process_time() - start
    assert used <= seconds, f"slow: {what} used {used:.3f} s of CPU (limit {seconds} s)"


def run_limited(cmd: Sequence[str], cpu_seconds: int, **kwargs: Any) -> subprocess.CompletedProcess:
    """:func:`subprocess.run` of ``cmd`` with at most ``cpu_seconds`` of CPU time in the child.

    A child killed by the CPU limit fails with ``"slow: ..."``; one that outlives
    :data:`HANG_SECONDS` of wall clock without reaching it fails with ``"hung: ..."``.
    """

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 5))

    try:
        done = subprocess.run(cmd, preexec_fn=limit, timeout=HANG_SECONDS, **kwargs)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(
            f"hung: {cmd[:3]} gave no result in {HANG_SECONDS} s of wall clock (its CPU is "
            f"limited to {cpu_seconds} s, so it waited rather than computed)"
        ) from exc
    if done.returncode == -signal.SIGXCPU:  # the soft limit's signal ends the child
        raise AssertionError(f"slow: {cmd[:3]} used over {cpu_seconds} s of CPU")
    return done
