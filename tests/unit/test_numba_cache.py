"""Issue 36: numba's machine code for bcast is cached per user and version, not per clone.

numba's default caches beside the source and keys each entry by the file's absolute path, so
every clone compiled everything again. These tests copy the engine's source to two folders
(two clones) and watch numba's own counters in child processes.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import bcast

pytest.importorskip("numba")

from bcast.engine.numba_cache import cache_root  # needs numba

SOURCE = Path(bcast.__file__).parent
# Compiles (or loads) one small kernel of the engine; numba counts a load as a cache hit.
PROBE = (
    "import json; from numba import types as n; from bcast.engine import numba_team as t; "
    "t.serve.compile((n.int64[::1], n.int64, n.int64, n.int64)); s = t.serve.stats; "
    "print(json.dumps([s.cache_path, sum(s.cache_hits.values())]))"
)


def _clone(where: Path) -> Path:
    shutil.copytree(SOURCE, where / "bcast", ignore=shutil.ignore_patterns("__pycache__"))
    return where


def _probe(clone: Path, **env: str) -> tuple[str, int]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_", "BCAST_"))}
    environ.update(env, PYTHONPATH=str(clone))
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=environ, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    path, hits = json.loads(done.stdout.splitlines()[-1])
    return path, hits


def test_a_second_clone_loads_what_the_first_compiled(tmp_path):
    cache = tmp_path / "cache"
    one, two = _clone(tmp_path / "one"), _clone(tmp_path / "two")
    path, hits = _probe(one, BCAST_CACHE_DIR=str(cache))
    assert hits == 0  # compiled: nothing was cached yet
    assert Path(path).is_relative_to(cache / "numba")
    assert list(Path(path).glob("numba_team.serve-*.nbc"))
    path_two, hits = _probe(two, BCAST_CACHE_DIR=str(cache))
    assert hits == 1  # loaded, though its source sits at another path
    assert path_two == path
    for clone in (one, two):  # nothing is written into the source tree
        assert not list(clone.rglob("*.nbi")) and not list(clone.rglob("*.nbc"))


def test_changed_source_is_compiled_again(tmp_path):
    cache = tmp_path / "cache"
    one, two = _clone(tmp_path / "one"), _clone(tmp_path / "two")
    _probe(one, BCAST_CACHE_DIR=str(cache))
    team = two / "bcast" / "engine" / "numba_team.py"
    team.write_text(team.read_text() + "\n# edited\n")
    assert _probe(two, BCAST_CACHE_DIR=str(cache))[1] == 0


def test_numba_cache_dir_set_by_the_user_is_obeyed(tmp_path):
    own = tmp_path / "numba-own"
    path, _ = _probe(_clone(tmp_path / "one"), NUMBA_CACHE_DIR=str(own))
    assert Path(path).is_relative_to(own)


def test_an_unwritable_cache_folder_falls_back_to_numba_s_places(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    clone = _clone(tmp_path / "one")
    path, hits = _probe(clone, BCAST_CACHE_DIR=str(blocker / "cache"))
    assert hits == 0
    assert not Path(path).is_relative_to(blocker)  # numba's own place (in the source tree)
    assert Path(path).is_relative_to(clone)


def test_the_default_folder_is_the_user_cache_folder_of_each_system():
    assert cache_root({"HOME": "/h"}, "linux") == Path("/h/.cache/bcast")
    assert cache_root({"HOME": "/h", "XDG_CACHE_HOME": "/x"}, "linux") == Path("/x/bcast")
    assert cache_root({"HOME": "/h"}, "darwin") == Path("/h/Library/Caches/bcast")
    assert cache_root({"HOME": "/h", "LOCALAPPDATA": "C:/L"}, "win32") == Path("C:/L/bcast/Cache")
    assert cache_root({"HOME": "/h", "BCAST_CACHE_DIR": "/c"}, "darwin") == Path("/c")


def _index_entries(folder: Path, function: str) -> int:
    (index,) = folder.glob(f"numba_kernels.{function}-*.nbi")
    with index.open("rb") as file:
        pickle.load(file)  # numba's version
        _, overloads = pickle.loads(file.read())
    return len(overloads)


def test_parallel_warm_keeps_every_kernel_of_every_process(tmp_path):
    # two processes compile walkers of one function into one index file, under the lock
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NUMBA_", "BCAST_"))}
    env["BCAST_CACHE_DIR"] = str(tmp_path)
    warm = [sys.executable, "-m", "bcast.engine.warm", "--ops", "xor,and_"]
    done = subprocess.run(
        [*warm, "--jobs", "2"], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].startswith("2 of 2 kernels ready")
    assert "bcast: compiling" not in done.stderr  # warm reports each kernel itself
    (folder,) = (tmp_path / "numba").glob("*/numba_kernels")
    assert _index_entries(folder, "_walker_of.locals.walk") == 2
    (index,) = folder.glob("numba_kernels._walker_of.locals.walk-*.nbi")
    written = index.read_bytes()
    again = subprocess.run([*warm, "--jobs", "1"], env=env, capture_output=True, text=True)
    assert again.returncode == 0
    assert again.stdout.splitlines()[-1].startswith("2 of 2 kernels ready")
    assert index.read_bytes() == written  # every kernel loaded, none compiled and saved again


def test_a_change_to_any_module_the_kernels_read_recompiles_them(tmp_path):
    # A walker of numba_kernels inlines numba_rows' operation table (an operation is an index
    # into it): a kernel cached before a change there would compute another operation.
    from bcast.engine import numba_cache

    engine = _clone(tmp_path) / "bcast" / "engine"
    stamp = numba_cache._source_hash
    kernels = str(engine / "numba_kernels.py")
    before = stamp(kernels)
    for module, changes in [("config.py", False), ("numba_rows.py", True), ("operations.py", True)]:
        with (engine / module).open("a") as source:
            source.write("\n# changed\n")
        stamp.cache_clear()
        assert (stamp(kernels) != before) is changes, module
        before = stamp(kernels)


def test_the_stamp_covers_every_engine_module_the_numba_modules_import():
    import ast

    from bcast.engine.numba_cache import COMPILED_FROM

    engine = SOURCE / "engine"
    read = set()
    for path in engine.glob("numba_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "bcast.engine":
                read |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bcast."):
                read.add(node.module.removeprefix("bcast.engine."))
    assert read, "no imports found: the parse is wrong"
    assert {m for m in read if not m.startswith("numba_")} <= set(COMPILED_FROM)
