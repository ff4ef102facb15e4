"""The last guard on what ``bcast`` writes: no line a terminal or a CI log would act on.

Every renderer passes text from a model through `bcast.core.text.safe_text` where it puts
it on a line. This module is the net under them: while a command runs, stdout and stderr are
`SafeStream` s, which pass every line through the same function, so a name that a renderer
(or a peer's message, or a traceback) carried through raw still cannot clear the screen, set
the window title or become a GitHub Actions workflow command. Only bcast's own colours are
let through (SGR sequences, on a terminal or with FORCE_COLOR; on a terminal also the
cursor movements of a progress display), and only `write_commands` writes workflow commands
(``--format github``).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Final, TextIO

from bcast.core.text import safe_text

__all__ = ["SafeStream", "guarded_streams", "safe_json", "write_commands"]

# Rich's colours (on a terminal, or where FORCE_COLOR asks for them), and on a terminal also
# what a live progress display moves the cursor with; elsewhere rich writes no escape at all.
_COLOUR: Final = re.compile(r"(\x1b\[[0-9;]*m)")
_TERMINAL: Final = re.compile(r"(\x1b\[[0-9;]*[mAGK]|\x1b\[\?25[hl]|\r)")
_COMMANDS: Final = ("::error ", "::warning ", "::notice ")
# In JSON text, what is not printable can only stand inside a string (the structure is ASCII
# and "\n"); "##[" too, as a workflow command of the older runners.
_JSON_UNSAFE: Final = re.compile(r"[^\n\x20-\x7e]|##")


def _json_escape(match: re.Match[str]) -> str:
    char = match.group()
    if char == "##":
        return "#\\u0023"
    if char.isprintable():
        return char
    code = ord(char)
    if code > 0xFFFF:  # JSON writes a surrogate pair
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def safe_json(obj: Any) -> str:
    r"""Return ``obj`` as indented JSON in which nothing a terminal or CI acts on is raw.

    The values are exactly ``obj``'s: a name with ESC, a bidi override or a line separator
    is written with JSON's ``\u`` escapes, which any JSON reader decodes back.

    >>> text = safe_json({"name": "a\x9b2J\u202e##[error]"})
    >>> text
    '{\n  "name": "a\\u009b2J\\u202e#\\u0023[error]"\n}'
    >>> json.loads(text)["name"] == "a\x9b2J\u202e##[error]"
    True
    """
    return _JSON_UNSAFE.sub(_json_escape, json.dumps(obj, indent=2, ensure_ascii=False))


class SafeStream:
    r"""A text stream that shows escaped, line by line, what a terminal or CI would act on.

    Parameters
    ----------
    stream : TextIO
        The stream written to (``sys.stdout`` or ``sys.stderr``).

    Examples
    --------
    >>> import io
    >>> out = io.StringIO()
    >>> SafeStream(out).write("a\x1b]0;title\x07\n::add-mask::x\n")
    26
    >>> print(out.getvalue(), end="")
    a\x1b]0;title\x07
    \x3a:add-mask::x
    """

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        try:
            terminal = bool(stream.isatty())
        except (AttributeError, ValueError, OSError):
            terminal = False
        forced = any(os.environ.get(k) for k in ("FORCE_COLOR", "TTY_COMPATIBLE"))  # rich's
        self._kept = _TERMINAL if terminal else _COLOUR if forced else None

    def write(self, text: str) -> int:
        """Write ``text`` with every line made safe; return ``len(text)`` as streams do."""
        if isinstance(text, (bytes, bytearray)) and text:  # click echoes completion as bytes
            return self.write(bytes(text).decode(self.stream.encoding or "utf-8", "replace"))
        if not isinstance(text, str):  # click probes with b"": fail as a text stream does
            return self.stream.write(text)
        lines = text.split("\n")
        self.stream.write("\n".join(self._safe_line(line) for line in lines))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        """Write each of ``lines``."""
        for line in lines:
            self.write(line)

    def _safe_line(self, line: str) -> str:
        if line.isprintable() and "##" not in line:  # JSON lines always (see safe_json)
            body = line.lstrip()  # a runner strips the indent before it looks for "::"
            return line if not body.startswith("::") else safe_text(line)
        if self._kept is None:  # a pipe or a CI log without forced colour: rich wrote none
            return safe_text(line)
        parts = self._kept.split(line)  # odd indexes: bcast's own escape sequences
        return "".join(p if k % 2 else safe_text(p) for k, p in enumerate(parts))

    def __getattr__(self, name: str) -> Any:
        if name == "buffer":  # bytes would bypass the guard: click then writes text here
            raise AttributeError(name)
        return getattr(self.stream, name)


@contextmanager
def guarded_streams() -> Iterator[None]:
    """Make ``sys.stdout`` and ``sys.stderr`` `SafeStream` s while the block runs."""
    saved = sys.stdout, sys.stderr
    sys.stdout = SafeStream(saved[0])
    sys.stderr = SafeStream(saved[1])
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def write_commands(lines: Iterable[str]) -> None:
    """Write GitHub Actions workflow commands to stdout, past the guard of `SafeStream`.

    Only commands bcast writes pass: each line starts with ``::error``, ``::warning`` or
    ``::notice`` and is otherwise one safe line (its model text escaped by `safe_text`
    and %-encoded). Anything else is written through the guard.
    """
    out: Any = sys.stdout
    raw = out.stream if isinstance(out, SafeStream) else out
    for line in lines:
        ok = line.startswith(_COMMANDS) and line.isprintable() and "##" not in line
        (raw if ok else out).write(line + "\n")
    out.flush()
