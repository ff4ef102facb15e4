"""Each optional part of bcast declares, in its extra, every library it imports.

The README's first command installs ``bcast[onnx,onnxruntime,openvino]`` and nothing else;
a library that only the ``test`` extra happens to bring would work in CI and fail there.
The imports are read from the source (``ast``), the declarations from the installed
package's metadata.
"""

from __future__ import annotations

import ast
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path
from typing import Any

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    tomllib = pytest.importorskip("tomli")

SRC = Path(__file__).resolve().parents[1] / "src" / "bcast"
# Imported names whose distribution has another name, or that come with a declared one.
PROVIDED_BY = {"google": "onnx", "llvmlite": "numba"}  # dependencies of onnx, numba


def third_party_imports(paths: list[Path], *, module_level: bool = False) -> set[str]:
    """The top-level names of the non-stdlib, non-bcast modules that ``paths`` import."""
    found = set()
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body if module_level else ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in ("bcast", "__future__") and top not in sys.stdlib_module_names:
                    found.add(PROVIDED_BY.get(top, top))
    return found


def declared(*extras: str) -> set[str]:
    """The distributions bcast's metadata requires with these extras (``bcast[a,b]`` in one
    extra, as setuptools writes it, brings extras a and b)."""
    names: set[str] = set()
    wanted: list[str | None] = [None, *extras]  # None: the hard dependencies
    seen: set[str | None] = set()
    while wanted:
        chosen = wanted.pop()
        seen.add(chosen)
        for requirement in importlib.metadata.requires("bcast") or []:
            name = re.match(r"[A-Za-z0-9_.\-]+", requirement)
            assert name is not None
            marker = requirement.partition(";")[2]
            extra = re.search(r"extra\s*==\s*[\"']([^\"']+)[\"']", marker)
            if (None if extra is None else extra.group(1)) != chosen:
                continue
            if name.group(0) == "bcast":
                inner = re.search(r"\[([^\]]*)\]", requirement)
                assert inner is not None, requirement
                wanted += [e.strip() for e in inner.group(1).split(",") if e.strip() not in seen]
            else:
                names.add(name.group(0).lower().replace("_", "-"))
    return names


@pytest.mark.parametrize(
    ("subpackage", "extras"),
    [
        pytest.param("openvino", ("openvino", "narrow"), id="openvino"),  # narrow tensor bits
        pytest.param("onnx", ("onnx", "onnxruntime"), id="onnx"),
        pytest.param("onnx/conformance", ("conformance",), id="conformance"),
        pytest.param("arrays/dask.py", ("dask",), id="dask-views"),
        pytest.param("engine/dask.py", ("dask",), id="dask-engine"),
        pytest.param("engine/numba_kernels.py", ("fast",), id="fast"),
        pytest.param("engine/numba_halves.py", ("fast",), id="fast-halves"),
        pytest.param("engine/numba_pow.py", ("fast",), id="fast-pow"),
        pytest.param("engine/numba_rows.py", ("fast",), id="fast-rows"),
        pytest.param("engine/numba_team.py", ("fast",), id="fast-team"),
    ],
)
def test_an_optional_part_imports_only_what_its_extras_declare(
    subpackage: str, extras: tuple[str, ...]
) -> None:
    part = SRC / subpackage
    files = sorted(part.rglob("*.py")) if part.is_dir() else [part]
    if subpackage == "onnx":  # bcast conformance has its own extra, tested on its own
        files = [f for f in files if "conformance" not in f.relative_to(part).parts]
    imports = third_party_imports(files)
    assert imports, "nothing found: the scan is broken"
    missing = {name for name in imports if name.replace("_", "-") not in declared(*extras)}
    assert not missing, f"bcast.{subpackage} imports {sorted(missing)}, not in {extras}"


def test_the_core_imports_only_its_hard_dependencies() -> None:
    # At module level: array-api-compat, Dask, JAX... are imported where an array of theirs
    # arrives, inside functions.
    optional = {  # the dask and fast extras
        "arrays/dask.py",
        "engine/dask.py",
        "engine/numba_cache.py",
        "engine/numba_entry.py",
        "engine/numba_halves.py",
        "engine/numba_kernels.py",
        "engine/numba_pow.py",
        "engine/numba_rows.py",
        "engine/numba_team.py",
    }
    readers = ("onnx/", "openvino/")  # their own extras (above)
    core = sorted(
        p
        for p in SRC.rglob("*.py")
        if (rel := p.relative_to(SRC).as_posix()) not in optional and not rel.startswith(readers)
    )
    imports = third_party_imports(core, module_level=True)
    assert "numpy" in imports, "nothing found: the scan is broken"
    missing = {n for n in imports if n.replace("_", "-") not in declared()}
    assert not missing, f"the core imports {sorted(missing)}, not hard dependencies"


# -- the project's metadata: license, classifiers, version, dependencies -------------------

PROJECT = Path(__file__).resolve().parents[1]


def _pyproject() -> dict[str, Any]:
    return tomllib.loads((PROJECT / "pyproject.toml").read_text(encoding="utf-8"))


def test_license_file_is_the_declared_license() -> None:
    project = _pyproject()["project"]
    assert project["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE"]
    text = (PROJECT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text


def test_classifiers_say_typed_and_every_supported_python() -> None:
    project = _pyproject()["project"]
    classifiers = set(project["classifiers"])
    assert "Typing :: Typed" in classifiers
    assert (SRC / "py.typed").exists()
    minimum = int(project["requires-python"].removeprefix(">=3."))
    listed = {int(c.rsplit(".", 1)[1]) for c in classifiers if re.fullmatch(r".*:: 3\.\d+", c)}
    assert min(listed) == minimum, "the oldest Python listed is the one required"
    assert f"3.{sys.version_info.minor}" in {f"3.{v}" for v in listed}


def test_version_is_written_once() -> None:
    config = _pyproject()
    assert "version" not in config["project"] and "version" in config["project"]["dynamic"]
    assert config["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "bcast.__version__"}
    source = (SRC / "__init__.py").read_text(encoding="utf-8")
    assert re.search(r'^__version__ = "\d+\.\d+\.\d+"$', source, re.MULTILINE)


def test_every_declared_dependency_is_imported() -> None:
    # A dependency nothing imports (onnx-ir was one) only slows installs down.
    extras = _pyproject()["project"]["optional-dependencies"]
    imported = third_party_imports(sorted(SRC.rglob("*.py")))
    for extra in ("onnx", "onnxruntime", "openvino", "arrays", "fast"):
        for requirement in extras[extra]:
            name = re.match(r"[A-Za-z0-9_.\-]+", requirement)
            assert name is not None
            dist = name.group(0).lower().replace("_", "-")
            assert dist.replace("-", "_") in imported or dist in imported, (extra, dist)


def test_the_wheel_carries_license_schemas_and_metadata(tmp_path: Path) -> None:
    pytest.importorskip("setuptools", reason="building the wheel needs setuptools (test extra)")
    # What the wheel holds is checked here, not how fast its loops run: the extension is
    # compiled without optimisation (3 s where -O3 takes 16 on the 2-core CI machine).
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(PROJECT), "--no-deps", "--no-build-isolation",
         "-q", "-w", str(tmp_path)],
        check=True,
        timeout=300,
        env={**os.environ, "CFLAGS": "-O0"},
    )  # fmt: skip
    (wheel,) = tmp_path.glob("bcast-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        text = archive.read(metadata).decode()
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert {f"bcast/cli/schemas/{c}.json" for c in ("shape", "explain", "check", "verify")} <= set(
        names
    )
    assert "bcast/py.typed" in names
    assert not any(n.endswith(".c") for n in names)  # the extension's source stays in the sdist
    if shutil.which((sysconfig.get_config_var("CC") or "cc").split()[0]):
        assert any(re.fullmatch(r"bcast/ops/_tinyc\..*(so|pyd)", n) for n in names), names
    assert "License-Expression: Apache-2.0" in text and "Classifier: Typing :: Typed" in text
    version = re.search(r'__version__ = "([^"]+)"', (SRC / "__init__.py").read_text())
    assert version is not None and f"Version: {version.group(1)}\n" in text
    assert "onnx-ir" not in text
