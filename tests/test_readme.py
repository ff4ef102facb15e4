"""Every example in the README and in docs/ runs, so the documentation cannot drift.

- ``>>>`` examples (in any block) run as doctests, file by file.
- A ``python`` block without ``>>>`` is a script: it runs in a fresh interpreter from the
  repository's root (a folder linking its entries, so that what it writes stays out of the
  repository) and must exit 0.
- A ``console`` block is a transcript: each ``$ command`` line runs in bash from the
  repository's root (the example models built, ``bcast`` on the PATH) and prints what
  follows it (``...`` stands for any text; white space and wrapping are not compared). A
  command ending in ``# exit N`` must exit N, any other 0.
- A ``bash`` block runs as a script too.
- A block that cannot run in the suite (an install from the package index, a benchmark of
  half an hour, a measurement whose numbers are one run's) has, on the line above it,
  ``<!-- not run: why, and what checks it instead -->``.
- A block without a language is a picture (a diagram), not an example: it may hold neither
  ``$`` commands nor ``>>>``.
"""

from __future__ import annotations

import doctest
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pytest

ROOT: Final = Path(__file__).resolve().parents[1]
README: Final = ROOT / "README.md"
DOCS: Final = [README, *sorted((ROOT / "docs").glob("*.md"))]
FLAGS: Final = doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS

NOT_RUN: Final = re.compile(r"^<!-- not run: (.+?) -->$")
"""The line right above a block the suite cannot run, with why and what checks it instead."""


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence
    language: str
    text: str
    not_run: str  # why it cannot run in the suite ("": it runs)

    def __str__(self) -> str:
        return f"{self.path.name}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """Return the fenced code blocks of a Markdown file."""
    found = []
    lines = path.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        fence = re.match(r"^(```+)\s*([\w+-]*)", lines[index])
        if fence is None:
            index += 1
            continue
        end = index + 1
        while end < len(lines) and not lines[end].startswith(fence[1]):
            end += 1
        text = "\n".join(lines[index + 1 : end]) + "\n"
        marker = NOT_RUN.match(lines[index - 1].strip()) if index else None
        why = marker[1] if marker else ""
        found.append(Block(path, index + 1, fence[2].lower(), text, why))
        index = end + 1
    return found


ALL: Final = [b for path in DOCS for b in blocks(path)]
SCRIPTS: Final = [b for b in ALL if b.language == "python" and ">>>" not in b.text]
CONSOLE: Final = [b for b in ALL if b.language == "console"]
SHELL: Final = [b for b in ALL if b.language in ("bash", "sh", "shell")]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where shell examples run: the repository's entries linked, new files kept out of it."""
    here = tmp_path_factory.mktemp("docs")
    for entry in ROOT.iterdir():
        if entry.name != ".git":
            (here / entry.name).symlink_to(entry)
    return here


@pytest.fixture(scope="module")
def environment() -> dict[str, str]:
    """The environment of the shell examples: ``bcast`` on the PATH, the examples built."""
    models = ROOT / "examples" / "models"
    if not (models / "block_broken.onnx").exists():
        pytest.importorskip("onnx")
        subprocess.run(
            [sys.executable, str(ROOT / "examples" / "build_models.py")],
            check=True,
            capture_output=True,
            timeout=300,
        )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COLUMNS", "FORCE_COLOR"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["NO_COLOR"] = "1"
    return env


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_doctests_run(
    path: Path, environment: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)  # the examples name files from the repository's root
    result = doctest.testfile(str(path), module_relative=False, optionflags=FLAGS)
    assert result.failed == 0
    if path == README:
        assert result.attempted >= 8


def test_readme_examples_run(
    environment: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:  # the README's doctests
    monkeypatch.chdir(ROOT)
    result = doctest.testfile(str(README), module_relative=False, optionflags=FLAGS)
    assert result.attempted >= 8 and result.failed == 0


@pytest.mark.parametrize("block", [b for b in SCRIPTS if not b.not_run], ids=str)
def test_python_block_runs(block: Block, environment: dict[str, str], workdir: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", block.text],
        cwd=workdir,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"{block}: {done.stderr[-2000:]}"


def _commands(block: Block) -> list[tuple[str, int, str]]:
    """Split a console block into (command, exit status, expected output)."""
    out: list[tuple[str, int, list[str]]] = []
    for line in block.text.splitlines():
        if line.startswith("$ "):
            command = line[2:]
            status = re.search(r"\s+#\s*exit (\d+)\s*$", command)
            if status:
                command = command[: status.start()]
            out.append((command, int(status[1]) if status else 0, []))
        elif out:
            out[-1][2].append(line)
    return [(c, s, "\n".join(lines).strip() + "\n") for c, s, lines in out]


@pytest.mark.parametrize("block", [b for b in CONSOLE if not b.not_run], ids=str)
def test_console_block_prints_what_it_shows(
    block: Block, environment: dict[str, str], workdir: Path
) -> None:
    commands = _commands(block)
    assert commands, f"{block}: a console block holds '$ command' lines"
    checker = doctest.OutputChecker()
    for command, status, expected in commands:
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=workdir,
            env=environment,
            capture_output=True,
            text=True,
            timeout=300,
        )
        got = done.stdout + done.stderr
        assert done.returncode == status, f"{block}: {command}: exit {done.returncode}\n{got}"
        if expected.strip():
            assert checker.check_output(expected, got, FLAGS), (
                f"{block}: {command}\n--- shown:\n{expected}--- printed:\n{got}"
            )


THE_TWO_COMMANDS: Final = {
    1: "it makes a virtual environment and installs from the package index; its check and "
    "explain commands run in the README's console blocks",
    2: ".ci/run runs exactly this command (test_readme_opens_with_the_two_commands)",
}
"""The README's first two blocks, byte for byte what a newcomer pastes: no marker above them."""


def _why_not_run(block: Block) -> str:
    if block.path == README and ALL.index(block) + 1 in THE_TWO_COMMANDS:
        return THE_TWO_COMMANDS[ALL.index(block) + 1]
    return block.not_run


def test_every_block_not_run_says_why_and_is_few() -> None:
    # a block runs in the suite, or says above it <!-- not run: why --> (listed here, so
    # that nothing is skipped quietly: each one's reason is part of this test's output)
    not_run = [(str(b), _why_not_run(b)) for b in SCRIPTS + CONSOLE + SHELL if _why_not_run(b)]
    assert all(why.strip() for _, why in not_run)


def test_shell_blocks_run_or_say_why_not(environment: dict[str, str], workdir: Path) -> None:
    for block in (b for b in SHELL if not _why_not_run(b)):
        done = subprocess.run(
            ["bash", "-e", "-c", block.text],
            cwd=workdir,
            env=environment,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, (
            f"{block}: make it run in the suite, or say above it <!-- not run: why -->\n"
            f"{done.stdout[-1000:]}{done.stderr[-1000:]}"
        )


def test_untagged_blocks_are_pictures_not_examples() -> None:
    for block in ALL:
        if not block.language:
            assert ">>>" not in block.text, f"{block}: tag it python"
            assert not re.search(r"^\$ ", block.text, re.M), f"{block}: tag it console"


def test_readme_opens_with_the_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    blocks = text.split("```bash")
    assert len(blocks) >= 3
    main_job, tests = blocks[1].split("```")[0], blocks[2].split("```")[0]
    assert "bcast check" in main_job and "pip install" in main_job
    assert "pytest" in tests and '".[test]"' in tests
    ci = (README.parent / ".ci" / "run").read_text(encoding="utf-8")
    assert tests.strip() in ci
    first_two = [b for b in blocks_of_readme()][:2]
    assert [b.language for b in first_two] == ["bash", "bash"]


def blocks_of_readme() -> list[Block]:
    return blocks(README)


def test_docs_link_to_files_that_exist() -> None:
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        assert "DESIGN.md" not in text and "STYLE.md" not in text, path.name
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            assert (path.parent / target).exists(), f"{path.name}: link to {target}"
