r"""``bcast check --skip-non-ir``: the pre-commit hook's way with ``.xml`` files (issue 40).

A hook on ``\.(onnx|xml)$`` is handed every XML file of a commit: Maven poms, SVG, CI
configs. Those are not OpenVINO IR, whose root element is ``<net>``; the hook skips them with
a note instead of calling them unreadable models. The file's first 64 KiB are read (opened
without blocking, a regular file only); anything else is left to the reader, which says why.
"""

from __future__ import annotations

import os
import re
import stat
from typing import Final

__all__ = ["not_ir"]

_HEAD: Final = 1 << 16
_PROLOGUE: Final = re.compile(
    rb"\s*(?:<\?.*?\?>|<!--.*?-->|<!DOCTYPE[^>\[]*(?:\[.*?\])?\s*>|\s)*", re.DOTALL
)
_ROOT: Final = re.compile(rb"<\s*([A-Za-z_][\w.\-]*:)?([A-Za-z_][\w.\-]*)")


def not_ir(path: str) -> str | None:
    r"""Say why the ``.xml`` file ``path`` is not an OpenVINO IR; None when it may be one.

    None also when it cannot be told here (unreadable, not a regular file): the reader then
    reports the file as it does any model.

    >>> import os, tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     pom = os.path.join(folder, "pom.xml")
    ...     with open(pom, "w") as out:
    ...         _ = out.write('<?xml version="1.0"?>\n<!-- a build -->\n<project></project>')
    ...     not_ir(pom)
    'its root element is <project>, not the <net> of an OpenVINO IR'
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        head = os.read(fd, _HEAD)
    except OSError:
        return None
    finally:
        os.close(fd)
    head = head.removeprefix(b"\xef\xbb\xbf")
    rest = head[_PROLOGUE.match(head).end() :]  # type: ignore[union-attr]  # always matches
    found = _ROOT.match(rest)
    if found is None:
        return "it has no XML root element" if rest.strip() or not head.strip() else None
    name = found.group(2).decode("ascii", "replace")
    if name == "net":
        return None
    return f"its root element is <{name[:40]}>, not the <net> of an OpenVINO IR"
