"""Issue 36: the suite's own memory bound fails a test that takes more than it may.

tests/conftest.py fails any test that adds more than 2 GiB to the pytest process's resident
memory at its peak, unless it is marked ``memory_gib``; `tree_peak` measures a child's whole
process tree. Here a small suite runs under that conftest with a bound of 200 MiB, so that
proving the checks costs little.
"""

from __future__ import annotations

import re
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

def test_a_child_tree_is_measured(tree_peak):
    code = "import numpy as np; b = np.ones(400 * 2**20 // 8); b += 1; import time; time.sleep(0.2)"
    status, _, peak = tree_peak([sys.executable, "-c", code])
    assert status == 0 and 400 * 2**20 < peak < 600 * 2**20

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
    result.assert_outcomes(passed=3, failed=1)
    failed = [line for line in result.outlines if line.startswith("FAILED")]
    assert [line.split("::")[1].split(" ")[0] for line in failed] == ["test_over_the_bound"]
    said = re.findall(
        r"^this test took (\d+) MiB .* over the 200 MiB a test may take", str(result.stdout), re.M
    )
    assert len(said) == 1 and 400 <= int(said[0]) < 500, said
