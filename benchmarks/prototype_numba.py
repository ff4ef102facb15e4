"""A measurement, not part of bcast: would a compiled kernel (numba) win Where and Pow?

Not run by ``run_all.py`` and numba is not a dependency; run it by hand after
``pip install numba``::

    python benchmarks/prototype_numba.py

It times one fused numba loop per case on the inputs of the ``where`` and ``pow`` cases of
``bench_ops.py`` (2 threads) and checks the results against NumPy. On the 2-core AVX2
reference machine (2026-11-23): Where 12.9 ms, bit-identical to ``np.where`` (OpenVINO
14.4 ms, bcast 28.2 ms in the benchmark of the same day); Pow 200-300 ms over runs, the
scalar ``powf`` that PyTorch also runs (204 ms), so no gain there.

The 12.9 ms depend on a loop nest written for this broadcast pattern (the column operand
read once per row, the row operand contiguous). A generic kernel over the engine's blocks
(4-D stride-0 views of any layout, ``nogil``, bcast's 2 threads) ran the same Where in
25 ms, little better than bcast's NumPy passes: a compiled Where pays only if it is
specialised on which axes stretch.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

try:
    import numba
    from numba import njit, prange
except ImportError as exc:  # pragma: no cover - a hand-run script
    raise SystemExit(f"this prototype needs numba: pip install numba ({exc})") from None

THREADS = 2


@njit(parallel=True)  # type: ignore[misc]
def where_kernel(mask: Any, x: Any, y: Any, out: Any) -> None:
    """out[p, r, c] = x[p, 0, c] if mask[0, r, c] else y[p, r, 0]: one pass, no temporaries."""
    planes, rows, cols = out.shape
    for p in prange(planes):
        for r in range(rows):
            other = y[p, r, 0]
            for c in range(cols):
                out[p, r, c] = x[p, 0, c] if mask[0, r, c] else other


@njit(parallel=True)  # type: ignore[misc]
def pow_kernel(a: Any, b: Any, out: Any) -> None:
    """out[p, r, c] = a[p, r, c] ** b[c]."""
    planes, rows, cols = out.shape
    for p in prange(planes):
        for r in range(rows):
            for c in range(cols):
                out[p, r, c] = a[p, r, c] ** b[c]


def median_ms(run: Callable[[], None], repeat: int = 7) -> float:
    run()  # compiles on the first call
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main() -> None:
    numba.set_num_threads(THREADS)
    rng = np.random.default_rng(0)
    out = np.empty((64, 1024, 1024), np.float32)
    mask = rng.random((1, 1024, 1024)) < 0.5
    x = rng.random((64, 1, 1024), dtype=np.float32)
    y = rng.random((64, 1024, 1), dtype=np.float32)
    ms = median_ms(lambda: where_kernel(mask, x, y, out))
    assert np.array_equal(out, np.where(mask, x, y))
    print(f"where (1,1024,1024) mask, (64,1,1024), (64,1024,1): {ms:.1f} ms, bit-identical")
    a = rng.random((64, 1024, 1024), dtype=np.float32) * np.float32(1.5) + np.float32(0.5)
    b = rng.random(1024, dtype=np.float32) * np.float32(4) - np.float32(2)
    ms = median_ms(lambda: pow_kernel(a, b, out), repeat=5)
    np.testing.assert_allclose(out, np.power(a, b), rtol=1e-6)
    print(f"pow (64,1024,1024) ** (1024,): {ms:.1f} ms")


if __name__ == "__main__":
    main()
