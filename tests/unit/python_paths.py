"""`bcast.ops` with the binary operators' compiled tiny path (`bcast.ops._tinyc`) left out.

Tests of what lies behind that path (NumPy's tiny path, planned and replayed calls, the
compiled entry) call the operators through `python_ops`, so that small arrays still reach
the code they test; tests/unit/test_tiny_compiled.py tests the compiled path itself.
"""

from __future__ import annotations

import types
from typing import Any

from bcast import ops
from bcast.ops import _tiny


def _python_path(name: str) -> Any:
    operator = getattr(ops, name)
    return _tiny.tiny_path(name, compiled=False)(operator.__wrapped__)


python_ops: Any = types.SimpleNamespace(
    **{
        name: _python_path(name) if name in _tiny.CALLS else getattr(ops, name)
        for name in ops.__all__
    }
)
"""Every public name of `bcast.ops`; the binary operators without the compiled tiny path."""
