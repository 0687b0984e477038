"""``python -m sketchsyn …`` and the installed ``sketchsyn`` command: :func:`run`."""

import atexit
import os
import sys


def command() -> int:
    """Run the ``sketchsyn`` command line in this process (its own process: the console
    script and ``python -m sketchsyn``) and return its exit status.

    Before numpy is imported it sets ``OPENBLAS_NUM_THREADS=1`` unless the environment already
    sets it: no subcommand does large linear algebra, and OpenBLAS' thread pool, started at
    numpy's import, cost about 0.07 CPU-s of a 0.3 CPU-s small ``fit`` for nothing.
    (:func:`sketchsyn.cli.main` called from Python leaves the environment alone.)
    """
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from .cli import main

    return main()


def run() -> None:
    """The installed ``sketchsyn`` command and ``python -m sketchsyn``: :func:`command`, then
    the process ends with its status (:func:`_exit`)."""
    _exit(command())


def _exit(status: int) -> None:
    """End the process with ``status`` once Python's own exit work is done (the ``atexit``
    handlers, the standard streams flushed), without the C++ libraries' static destructors.

    pyarrow's CSV reader reads ahead on Arrow's I/O threads; when a command stops a few
    milliseconds after its last read (a damaged input, refused at its last line), such a
    task can still be running when the process tears Arrow's thread pool down, and the
    process aborted ("terminate called without an active exception", exit -6, about one run
    in 30 on a busy machine; apache/arrow#34314 and #43604). Every file a command writes is
    closed before it returns.
    """
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be said
            pass
    os._exit(status)


if __name__ == "__main__":
    run()
