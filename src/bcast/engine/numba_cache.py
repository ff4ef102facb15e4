r"""Where numba keeps bcast's compiled kernels: one folder per user, machine and bcast version.

numba's own default caches machine code beside the source (``__pycache__``) and names each
entry by the file's absolute path: every clone, virtual environment or wheel install of the
same bcast compiles everything again. bcast's kernels are cached instead under

- ``$BCAST_CACHE_DIR/numba/<version>/`` when ``BCAST_CACHE_DIR`` is set;
- else the user's cache folder: ``$XDG_CACHE_HOME/bcast`` (``~/.cache/bcast`` without it) on
  Linux, ``~/Library/Caches/bcast`` on macOS, ``%LOCALAPPDATA%\bcast\Cache`` on Windows;

with one sub-folder per engine module. An entry is valid for the exact source text of the
engine's compiled modules (`_source_hash`: their SHA-256, not a file's path or time stamp: a
fresh clone of the same commit loads what another clone compiled) and, as numba checks
itself, for this CPU, this Python and this numba.
Where the user set ``NUMBA_CACHE_DIR``, numba's own choice is left alone; where the folder
cannot be written, numba's usual places are tried.

Several processes may compile into the folder at once (``python -m bcast.engine.warm`` runs
one per core): numba reads an index, picks a free data file and writes both, so two
processes between those steps could lose an entry or, worse, point an entry at the other's
machine code. In bcast's folder these steps run under a file lock (``fcntl.flock`` on
``.lock``, where it exists).

`install` must run before the first ``@njit(cache=True)`` of the engine is decorated: every
``numba_*`` module of the engine imports this module first.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

from numba.core import caching, config

try:
    import fcntl
except ImportError:  # Windows: numba's own writes, unlocked
    fcntl = None  # type: ignore[assignment]

__all__ = ["COMPILED_FROM", "cache_root", "install"]

_ENGINE = Path(__file__).resolve().parent


def cache_root(environ: dict[str, str] | None = None, platform: str = sys.platform) -> Path:
    """Return the folder that holds bcast's caches (the numba kernels sit in ``numba/``).

    >>> str(cache_root({"BCAST_CACHE_DIR": "/srv/cache"}))
    '/srv/cache'
    >>> str(cache_root({"XDG_CACHE_HOME": "/home/u/.cache"}, "linux"))
    '/home/u/.cache/bcast'
    """
    env = os.environ if environ is None else environ
    if env.get("BCAST_CACHE_DIR"):
        return Path(env["BCAST_CACHE_DIR"])
    home = Path(env.get("HOME") or Path.home())
    if platform == "darwin":
        return home / "Library" / "Caches" / "bcast"
    if platform == "win32":
        local = env.get("LOCALAPPDATA")
        return Path(local) / "bcast" / "Cache" if local else home / "bcast" / "Cache"
    xdg = env.get("XDG_CACHE_HOME")
    return Path(xdg) / "bcast" if xdg else home / ".cache" / "bcast"


COMPILED_FROM: tuple[str, ...] = ("operations", "runner")
"""The engine's modules, besides its ``numba_*`` ones, whose values numba compiles into the
kernels (the operation table, the walker's rank): every entry's stamp covers them too."""


@functools.cache
def _source_hash(path: str) -> str:
    """Return the stamp of an engine module's kernels: the SHA-256 of every module they read.

    numba checks only the source of the function it caches, but a kernel inlines code and
    constants from the engine's other modules (an operation is an index into
    `bcast.engine.numba_rows.NAMES`): a change to any of them must recompile every kernel,
    or a cached kernel would compute another operation.
    """
    folder = Path(path).resolve().parent
    digest = hashlib.sha256()
    sources = sorted(folder.glob("numba_*.py")) + [folder / f"{m}.py" for m in COMPILED_FROM]
    for source in sources:
        digest.update(source.name.encode() + b"\0" + source.read_bytes() + b"\0")
    return digest.hexdigest()


@functools.lru_cache(maxsize=1)
def _kernels_folder() -> Path:
    try:
        version = metadata.version("bcast")
    except metadata.PackageNotFoundError:  # run from a source tree that is not installed
        version = "source"
    return cache_root() / "numba" / version


class _EngineLocator(caching._CacheLocator):  # type: ignore[misc]
    """numba's cache locator for the engine's own modules (any other function: not ours)."""

    def __init__(self, py_func: Any, py_file: str) -> None:
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        self._cache_path = str(_kernels_folder() / Path(py_file).stem)

    def ensure_cache_path(self) -> None:
        os.makedirs(self._cache_path, exist_ok=True)
        tempfile.TemporaryFile(dir=self._cache_path).close()  # writable, or OSError

    def get_cache_path(self) -> str:
        return self._cache_path

    def get_source_stamp(self) -> str:
        return _source_hash(self._py_file)

    def get_disambiguator(self) -> str:
        return str(self._lineno)

    @classmethod
    def from_function(cls, py_func: Any, py_file: str) -> _EngineLocator | None:
        try:
            ours = Path(py_file).resolve().parent == _ENGINE
        except OSError:
            return None
        if not ours:
            return None
        locator = cls(py_func, py_file)
        try:
            locator.ensure_cache_path()
        except OSError:  # not writable: numba's own locators have their turn
            return None
        return locator


def _locked(method: Any) -> Any:
    """Run an index file's ``load``/``save`` under the folder's lock, in bcast's folder."""

    @functools.wraps(method)
    def run(self: Any, *args: Any) -> Any:
        folder = str(getattr(self, "_cache_path", ""))
        if fcntl is None or not folder.startswith(str(_kernels_folder())):
            return method(self, *args)
        with open(os.path.join(folder, ".lock"), "ab") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # let go when the file closes
            return method(self, *args)

    run.bcast_locked = True  # type: ignore[attr-defined]
    return run


def install() -> bool:
    """Put bcast's locator first in numba's list (once); False where numba's is kept.

    numba's own choice is kept where the user set ``NUMBA_CACHE_DIR`` or
    ``NUMBA_CACHE_LOCATOR_CLASSES``.

    >>> install() in (True, False)
    True
    """
    if config.CACHE_DIR or getattr(config, "CACHE_LOCATOR_CLASSES", None):
        return False
    impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl", None)
    classes = getattr(impl, "_locator_classes", None)  # numba >= 0.61: CacheImpl
    if not isinstance(classes, list):  # a numba whose caching we do not know: its own places
        return False
    if _EngineLocator not in classes:
        classes.insert(0, _EngineLocator)
    index = getattr(caching, "IndexDataCacheFile", None)
    if index is not None and not getattr(index.save, "bcast_locked", False):
        index.save = _locked(index.save)
        index.load = _locked(index.load)
    return True


install()
