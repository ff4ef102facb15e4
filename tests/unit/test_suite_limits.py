"""Issue 36: the suite's own memory bound fails a test that takes more than it may.

tests/conftest.py fails any test whose peak resident memory (its process, or a child it
waited for) passes 2 GiB unless it is marked ``memory_gib``. Here a small suite runs under
that conftest with a bound of 200 MiB, so that proving the check costs little.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"
SUITE = """
import subprocess, sys
import numpy as np
import pytest

def _take(mib):
    block = np.ones(mib * 2**20 // 8)
    block += 1  # touched: resident, not only reserved
    return float(block.sum())

def test_over_the_bound():
    _take(400)

@pytest.mark.memory_gib(1)
def test_over_the_bound_with_a_mark():
    _take(400)

def test_a_child_over_the_bound():
    code = "import numpy as np; b = np.ones(400 * 2**20 // 8); b += 1"
    subprocess.run([sys.executable, "-c", code], check=True)

def test_within_the_bound():
    _take(20)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the bound reads /proc")
def test_a_test_over_the_memory_bound_fails(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeconftest(CONFTEST.read_text(encoding="utf-8"))
    pytester.makeini("[pytest]\nmarkers =\n    memory_gib(n): may take n GiB\n")
    pytester.makepyfile(test_memory=SUITE)
    monkeypatch.setenv("BCAST_TEST_MAX_RSS_MIB", "200")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rf")
    result.assert_outcomes(passed=2, failed=2)
    failed = [line for line in result.outlines if line.startswith("FAILED")]
    assert sorted(line.split("::")[1].split(" ")[0] for line in failed) == [
        "test_a_child_over_the_bound",
        "test_over_the_bound",
    ]
    assert str(result.stdout).count("over the 200 MiB a test may take") == 2
