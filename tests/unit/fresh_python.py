"""Run code in a fresh interpreter: what a test of what loads (or does not) needs."""

from __future__ import annotations

import subprocess
import sys


def stdout_of(code: str, *args: str) -> str:
    """Run ``python -c code args...`` (this interpreter, 2 minutes at most); return its stdout.

    A failure (an assertion in ``code``) raises ``subprocess.CalledProcessError``.
    """
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return done.stdout
