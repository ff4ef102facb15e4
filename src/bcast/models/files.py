"""Opening model files: regular files only, their size checked before a byte is read.

A model path is untrusted: a pull request can add ``models/m.onnx`` as a symlink to
``/dev/zero`` (read without end), a FIFO (an ``open`` that never returns) or a device. Every
model file bcast reads in its own process goes through `read_model_file`, which opens the
path without blocking, asks the opened file (not the path, which could change in between)
what it is, and reads it only when it is a regular file no larger than the limit: the
protobuf limit of 2 GiB and the memory limit in force (``--max-memory``). This module knows
no model format.
"""

from __future__ import annotations

import os
import stat
from typing import Final

from bcast.core.errors import show_bytes
from bcast.models.graph import ModelError
from bcast.models.isolation import current_limits

__all__ = ["MAX_MODEL_BYTES", "model_file_size", "read_model_file"]

MAX_MODEL_BYTES: Final = 2**31 - 1
"""The largest model file read (protobuf refuses larger messages; so does ONNX)."""

_KINDS: Final = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _limit() -> int:
    budget = current_limits().memory()
    return MAX_MODEL_BYTES if budget is None else min(MAX_MODEL_BYTES, budget)


def _open(path: str) -> tuple[int, int]:
    """Open ``path`` for reading without blocking; return the descriptor and the size."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_BINARY", 0))
    except OSError as err:
        raise ModelError(f"{path}: cannot read the file ({err.strerror or err})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = next((k for test, k in _KINDS if test(info.st_mode)), "not a regular file")
            raise ModelError(f"{path}: is {kind}, not a model file; refusing to read it")
        limit = _limit()
        if info.st_size > limit:
            raise ModelError(
                f"{path}: the file has {show_bytes(info.st_size)}, more than bcast reads "
                f"({show_bytes(limit)}: the memory limit, see --max-memory, or protobuf's 2 GiB)"
            )
    except BaseException:
        os.close(fd)
        raise
    return fd, info.st_size


def model_file_size(path: str) -> int:
    """Return the size of the model file ``path``; `ModelError` if bcast would not read it.

    >>> import os, tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     model = os.path.join(folder, "m.onnx")
    ...     with open(model, "wb") as handle:
    ...         _ = handle.write(b"abc")
    ...     model_file_size(model)
    3
    >>> model_file_size("/dev/zero")
    Traceback (most recent call last):
    ...
    bcast.models.ModelError: /dev/zero: is a character device, not a model file; ...
    """
    fd, size = _open(path)
    os.close(fd)
    return size


def read_model_file(path: str) -> bytes:
    """Return the bytes of the model file ``path``, read only if it is a fit regular file.

    Raises
    ------
    ModelError
        If ``path`` cannot be opened, is not a regular file (a FIFO, a device, a directory;
        a symlink is followed to what it points at), or is larger than the limit.
    """
    fd, size = _open(path)
    try:
        chunks, left = [], size + 1  # one byte more: a file that grows is refused too
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 24))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as err:
        raise ModelError(f"{path}: cannot read the file ({err.strerror or err})") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > size:
        raise ModelError(f"{path}: the file grew while it was read; refusing it")
    return data
