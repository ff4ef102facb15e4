"""The README's Python examples run as doctests, so the documentation cannot drift."""

from __future__ import annotations

import doctest
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_examples_run() -> None:
    result = doctest.testfile(
        str(README),
        module_relative=False,
        optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS,
    )
    assert result.attempted >= 8
    assert result.failed == 0


def test_readme_opens_with_the_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    blocks = text.split("```bash")
    assert len(blocks) >= 3
    main_job, tests = blocks[1].split("```")[0], blocks[2].split("```")[0]
    assert "bcast check" in main_job and "pip install" in main_job
    assert "pytest" in tests and '".[test]"' in tests
    ci = (README.parent / ".ci" / "run").read_text(encoding="utf-8")
    assert tests.strip() in ci
