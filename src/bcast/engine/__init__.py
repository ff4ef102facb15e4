"""Execution: where operator kernels run, on NumPy, any array-API library and Dask.

>>> import bcast.engine
>>> bcast.engine.get_settings().compiled
True
"""

from __future__ import annotations

from bcast.engine.calls import (
    CacheInfo,
    Call,
    CallCache,
    call_cache_info,
    clear_call_caches,
)
from bcast.engine.calls import prepare as prepare_call
from bcast.engine.executor import (
    TINY,
    Kernel,
    Settings,
    execute,
    get_settings,
    quiet_run,
    settings,
)
from bcast.engine.runner import WALKED

__all__ = [
    "TINY",
    "WALKED",
    "CacheInfo",
    "Call",
    "CallCache",
    "Kernel",
    "Settings",
    "call_cache_info",
    "clear_call_caches",
    "execute",
    "get_settings",
    "prepare_call",
    "quiet_run",
    "settings",
]
