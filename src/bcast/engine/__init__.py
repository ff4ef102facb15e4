"""Execution: where operator kernels run, on NumPy, any array-API library and Dask.

>>> import bcast.engine
>>> bcast.engine.get_settings().compiled
True
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
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

_HOMES: Final = {
    **dict.fromkeys(
        ("CacheInfo", "Call", "CallCache", "call_cache_info", "clear_call_caches"), "calls"
    ),
    **dict.fromkeys(
        ("TINY", "Kernel", "Settings", "execute", "get_settings", "quiet_run", "settings"),
        "executor",
    ),
    "WALKED": "runner",
}


def __getattr__(name: str) -> Any:
    """Import the executor when one of its names is first used, not with the package.

    A submodule such as `bcast.engine.guard` (the memory `bcast check` reads) is then
    imported alone: ``bcast check`` runs no operator.
    """
    if name == "prepare_call":
        value = importlib.import_module("bcast.engine.calls").prepare
    elif name in _HOMES:
        value = getattr(importlib.import_module(f"bcast.engine.{_HOMES[name]}"), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value
