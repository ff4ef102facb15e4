"""The architecture of DESIGN §2, held by tests: layers, no circles, private stays private.

The layers contract lives in ``pyproject.toml`` (``[tool.importlinter]``) and is run here
with import-linter; grimp (import-linter's graph) gives every import statement, those at
call time and under ``TYPE_CHECKING`` included, for the checks import-linter has no contract
for.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "bcast"
MAX_LINES = 500


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("bcast", cache_dir=None)


def test_the_layers_contract_is_kept() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run(
        [str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 kept, 0 broken" in done.stdout


def _cycle(graph: grimp.ImportGraph, modules: set[str]) -> list[str] | None:
    """Return one import cycle among ``modules`` (a list that ends where it starts), or None."""
    edges = {m: sorted(graph.find_modules_directly_imported_by(m) & modules) for m in modules}
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        stack.append(module)
        for target in edges[module]:
            if state.get(target) == 1:
                return [*stack[stack.index(target) :], target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        stack.pop()
        state[module] = 2
        return None

    for module in sorted(modules):
        if module not in state:
            found = visit(module)
            if found:
                return found
    return None


def test_no_module_imports_in_a_circle(graph: grimp.ImportGraph) -> None:
    # A package's __init__ re-exporting its modules is the face, not a circle: leave the
    # package modules out, and the top-level face `bcast` too.
    modules = {
        m
        for m in graph.modules
        if m != "bcast" and not (SRC / Path(*m.split(".")[1:]) / "__init__.py").exists()
    }
    assert _cycle(graph, modules) is None


def test_no_layer_package_imports_its_own_package_face(graph: grimp.ImportGraph) -> None:
    # Inside a layer, modules import their siblings, never their package's __init__ (which
    # imports them back: a circle through the face).
    offenders = []
    for module in graph.modules:
        parts = module.split(".")
        if len(parts) < 3:
            continue
        package = ".".join(parts[:2])
        if package in graph.find_modules_directly_imported_by(module):
            offenders.append(module)
    assert offenders == []


def _python_files() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


@pytest.mark.parametrize("path", _python_files(), ids=lambda p: str(p.relative_to(SRC)))
def test_private_names_do_not_cross_modules(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    crossing = [
        f"{node.module}.{alias.name} (line {node.lineno})"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("bcast")
        for alias in node.names
        if alias.name.startswith("_")
        and alias.name != "__version__"
        # a private *module* of the same package (bcast.ops._kernels) is the package's own
        and not (SRC / Path(*node.module.split(".")[1:]) / f"{alias.name}.py").exists()
    ]
    assert crossing == []


@pytest.mark.parametrize("path", _python_files(), ids=lambda p: str(p.relative_to(SRC)))
def test_modules_stay_under_the_size_limit(path: Path) -> None:
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{path.name} has {lines} lines: split it by concern"


def test_the_top_level_holds_only_the_face_and_the_layers() -> None:
    top = sorted(p.name for p in SRC.iterdir() if p.suffix == ".py")
    # _spawn.py: the standard library only, so `python -m bcast` starts its worker before
    # anything else of bcast loads (bcast.__main__)
    assert top == ["__init__.py", "__main__.py", "_spawn.py", "loading.py"]
    packages = sorted(p.name for p in SRC.iterdir() if (p / "__init__.py").exists())
    assert packages == ["arrays", "cli", "core", "engine", "models", "onnx", "openvino", "ops"]


@pytest.mark.parametrize(
    ("obj", "path"),
    [
        ("Dim", "bcast.Dim"),
        ("Shape", "bcast.Shape"),
        ("Mode", "bcast.Mode"),
        ("Plan", "bcast.Plan"),
        ("BroadcastError", "bcast.BroadcastError"),
    ],
)
def test_exported_classes_show_their_public_path(obj: str, path: str) -> None:
    import bcast

    cls = getattr(bcast, obj)
    assert f"{cls.__module__}.{cls.__qualname__}" == path
