"""Dask arrays on a ``distributed.LocalCluster``: worker processes, loopback only.

The cluster (2 worker processes, 1 thread each, 384 MiB of memory each) is started and
closed by a module fixture. Expected values are NumPy expressions or closed forms written
here, never bcast's output. Every operator and every mode of ``test_dask``'s tables (run there
on the threaded scheduler) runs here too, each table as one batch computed on the workers.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import dask.array as da
import numpy as np
import pytest
from distributed import Client, LocalCluster

# The same tables the threaded-scheduler tests use (expected values: NumPy expressions).
from test_dask import (
    BINARY_MODES,
    BROADCAST_OP_CASES,
    EXPAND_CASES,
    OPERATOR_CASES,
    VIEW_CASES,
    placements,
    rng_floats,
)

import bcast
from bcast import ops

MEMORY_LIMIT = 384 * 2**20


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            memory_limit=MEMORY_LIMIT,
        ) as cluster,
        Client(cluster, set_as_default=False) as running,
    ):
        yield running


def _pid() -> int:
    return os.getpid()


def run(client: Client, x: Any) -> Any:
    return client.compute(x).result()


def _peak_rss() -> int:
    """Return the process's peak resident memory in bytes: VmHWM (Linux).

    Not ``getrusage``'s ``ru_maxrss``: Linux carries it across ``exec``, so a worker
    spawned by a big parent would report the parent's peak.
    """
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def test_operators_on_workers_match_numpy(client: Client) -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((6, 4, 5))
    b = rng.standard_normal((4, 1))
    lazy_a = da.from_array(a, chunks=(2, 2, 5))
    np.testing.assert_array_equal(
        run(client, ops.add(lazy_a, b, broadcast="pdpd", axis=1)), a + b.reshape(1, 4, 1)
    )
    i = np.array([[-7], [7], [-9]], np.int32)
    j = np.array([2, -2, 4, 5], np.int32)
    np.testing.assert_array_equal(
        run(client, ops.div(da.from_array(i, chunks=1), j)),
        np.trunc(i.astype(np.float64) / j).astype(np.int32),
    )
    mask = rng.random((6, 1, 5)) > 0.5
    np.testing.assert_array_equal(
        run(client, ops.where(mask, lazy_a, da.from_array(b, chunks=2))), np.where(mask, a, b)
    )
    view = bcast.broadcast_to(da.from_array(b[:, 0], chunks=2), (3, 4), mode="numpy")
    np.testing.assert_array_equal(run(client, view), np.broadcast_to(b[:, 0], (3, 4)))
    np.testing.assert_array_equal(
        run(client, ops.expand(da.from_array(b, chunks=2), (2, 1, 3))),
        np.broadcast_to(b, (2, 4, 3)),
    )


def _batch(client: Client, cases: list[tuple[str, Any, np.ndarray]]) -> None:
    """Compute every lazy result in one go on the workers and compare each with NumPy."""
    for _, got, want in cases:
        assert isinstance(got, da.Array)
        assert (tuple(got.shape), got.dtype) == (want.shape, want.dtype)
    values = client.compute([got for _, got, _ in cases], sync=True)
    for (name, _, want), value in zip(cases, values, strict=True):
        np.testing.assert_allclose(value, want, rtol=1e-12, atol=0, err_msg=name)


def test_every_operator_on_workers_matches_numpy(client: Client) -> None:
    cases = []
    for param in OPERATOR_CASES:
        op, arrays, expected = param.values
        want = np.asarray(expected(*arrays))
        for which, inputs in zip(["all", "first", "last"], placements(*arrays), strict=True):
            cases.append((f"{param.id}-{which}", op(*inputs), want))
    _batch(client, cases)


def test_every_binary_broadcast_mode_on_workers_matches_numpy(client: Client) -> None:
    cases = []
    numpy_ops = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "greater": np.greater}
    for param in BINARY_MODES:
        sa, sb, kwargs, b_aligned = param.values
        a, b = rng_floats(sa, seed=4), rng_floats(sb, seed=5)
        for name, numpy_op in numpy_ops.items():
            want = numpy_op(a, b.reshape(b_aligned))
            for left, right in placements(a, b):
                got = getattr(ops, name)(left, right, **kwargs)
                cases.append((f"{param.id}-{name}", got, want))
    _batch(client, cases)


def test_every_view_and_materialising_mode_on_workers_matches_numpy(client: Client) -> None:
    cases = []
    for param in VIEW_CASES:
        shape, target, kwargs, aligned, out = param.values
        x = np.arange(np.prod(shape), dtype=np.int32).reshape(shape)
        view = bcast.broadcast_to(da.from_array(x, chunks=2), target, **kwargs)
        cases.append((f"view-{param.id}", view, np.broadcast_to(x.reshape(aligned), out)))
    for param in EXPAND_CASES:
        shape, target, aligned, out = param.values
        x = np.arange(np.prod(shape), dtype=np.int16).reshape(shape)
        got = ops.expand(da.from_array(x, chunks=2), target)
        cases.append((f"expand-{param.id}", got, np.broadcast_to(x.reshape(aligned), out)))
    for param in BROADCAST_OP_CASES:
        shape, target, args, kwargs, aligned, out = param.values
        x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
        got = ops.broadcast(da.from_array(x, chunks=2), target, *args, **kwargs)
        cases.append((f"broadcast-{param.id}", got, np.broadcast_to(x.reshape(aligned), out)))
    _batch(client, cases)


def test_an_unknown_dim_is_checked_on_the_workers(client: Client) -> None:
    x = da.from_array(np.arange(6.0), chunks=6)
    y = x[x > 2]  # [?]: 3 elements
    np.testing.assert_array_equal(
        run(client, ops.mul(y[:, None], np.arange(2.0))), [[0, 3], [0, 4], [0, 5]]
    )
    with pytest.raises(bcast.BroadcastError, match="unknown length"):
        run(client, ops.add(y, np.ones(5)))


def test_workers_limited_in_memory_stream_a_result_four_times_larger(client: Client) -> None:
    rows, cols = 196_608, 1024  # float64: 1.5 GiB of input and 1.5 GiB of output
    assert rows * cols * 8 >= 4 * MEMORY_LIMIT
    before = client.run(_pid)
    n = rows * cols
    x = da.arange(n, dtype=np.float64, chunks=4096 * cols).reshape(rows, cols)
    assert x.chunks[0][0] == 4096  # 32 MiB blocks
    row = np.arange(cols) * 0.5
    result = ops.add(x, row)
    assert result.chunks == x.chunks
    total, last = client.compute([result.sum(), result[-1, -1]], sync=True)
    # sum(0..n-1) + rows * sum(row); every partial sum is exact in float64.
    expected = n * (n - 1) / 2 + rows * row.sum()
    assert total == pytest.approx(expected, rel=1e-12)
    assert last == (n - 1) + row[-1]
    # No worker was restarted for exceeding its limit, and none came near it.
    assert client.run(_pid) == before
    peaks = client.run(_peak_rss)
    assert all(peak < MEMORY_LIMIT for peak in peaks.values()), peaks
