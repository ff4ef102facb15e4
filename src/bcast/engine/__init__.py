"""Execution: where operator kernels run, on NumPy, any array-API library and Dask.

>>> import bcast.engine
>>> bcast.engine.get_settings().compiled
True
"""

from __future__ import annotations

from bcast.engine.executor import (
    TINY,
    Kernel,
    Settings,
    execute,
    get_settings,
    quiet_run,
    settings,
)

__all__ = ["TINY", "Kernel", "Settings", "execute", "get_settings", "quiet_run", "settings"]
