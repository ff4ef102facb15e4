"""``python -m bcast`` and the ``bcast`` script: the command line (`bcast.cli`).

The worker process that reads models starts first (`bcast._spawn`), before anything else of
bcast loads, so that its interpreter and the peer library it needs load while the command
loads here. The command's end skips the interpreter's teardown of its modules (about 30
ms, a tenth of a ``bcast check``): exit handlers run and the streams are flushed, then the
process leaves.
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    """Run the ``bcast`` command line on ``sys.argv``; exit with its status."""
    import gc

    gc.disable()  # no collection passes over the modules as they load (7 ms of a check)
    from bcast._spawn import kinds_for, preload_of, spawn  # the standard library only

    kinds = kinds_for(sys.argv[1:])
    if kinds is not None:  # the worker starts before the rest of bcast and click load
        preload = preload_of(kinds)
        try:
            spawned = spawn(preload)
        except OSError:  # no process to spare now: the command starts one later
            pass
        else:
            from bcast.models.isolation import adopt

            adopt(spawned, preload)
    from bcast.cli import main as cli

    gc.freeze()  # what is loaded stays: later collections pass over the command's objects only
    gc.enable()
    try:
        cli(prog_name="bcast")
    except SystemExit as done:
        leave(done.code)
    leave(0)


def leave(code: str | int | None) -> None:
    """Exit with ``code`` as `SystemExit` would, without tearing the interpreter down.

    Exit handlers (`atexit`: the worker stopped, temporary files removed) run first and
    the standard streams are flushed; where a thread that is not a daemon still runs, the
    interpreter exits the usual way, which waits for it.
    """
    import atexit  # after the worker's start (`main`): nothing before it that it can wait for
    import threading
    from contextlib import suppress

    others = [t for t in threading.enumerate() if t is not threading.main_thread()]
    if any(not t.daemon for t in others):
        sys.exit(code)
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:  # SystemExit("message"): the message on stderr, status 1
        print(code, file=sys.stderr)
        status = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with suppress(Exception):  # a closed pipe: nothing more can be said on it
            stream.flush()
    os._exit(status & 0xFF)


if __name__ == "__main__":
    main()
