"""The one function that makes text from a model safe for a terminal and a CI log.

A model is untrusted input: its node, tensor and dim names, doc strings, the messages a peer
library writes about it and the path it was read from can hold line breaks, terminal escape
sequences (``ESC [2J`` clears the screen, ``ESC ] 0;`` sets the window title) and CI workflow
commands (a line ``::error ...`` or ``::add-mask::...`` is run by GitHub Actions, ``##[...]``
and ``##vso[...]`` anywhere in a line by the older runners and Azure Pipelines). `safe_text`
shows all of these escaped, as Python writes them in a string literal, so the name stays
recognisable and nothing in it acts. Every output format passes model text through it
(DESIGN §2); the command line also passes every line it writes through it (see
``bcast.cli._safe_output``), so a name that some renderer forgot is still made harmless.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["safe_text"]

# What a CI log would read as a workflow command: "::" where a line could start (at the
# start of the text or after white space, which runners strip), "##[" and "##vso[" anywhere.
_COMMAND: Final = re.compile(r"(?<!\S)::|##(?=\[|vso\[)")
_SHOWN: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _shown(char: str) -> str:
    r"""Return how ``char``, a character that is not printable, is shown (ESC as ``\x1b``)."""
    if char in _SHOWN:
        return _SHOWN[char]
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def safe_text(text: str) -> str:
    r"""Return ``text`` with everything a terminal or a CI log would act on shown escaped.

    Characters that are not printable (``str.isprintable``: the C0 and C1 controls
    including line breaks and ESC, DEL, format characters such as the bidi overrides and
    zero-width spaces, line and paragraph separators, spaces other than the plain space,
    surrogates and unassigned code points) are written as Python writes them in a string
    literal: ``\n``, ``\x1b``, ``\u202e``. A ``::`` at the start of the text or after white
    space has its first colon shown as ``\x3a``, and ``##[`` / ``##vso[`` their first ``#``
    as ``\x23``, so that no part of the text can become a CI workflow command. Everything
    else, backslashes included, is kept, so the name stays recognisable.

    Parameters
    ----------
    text : str
        Text that comes from a model: a name, a doc string, a peer's message, a path.

    Returns
    -------
    str
        One line of printable text; ``text`` itself when nothing needed escaping.

    Examples
    --------
    >>> from bcast.core.text import safe_text
    >>> safe_text("conv1/Add")
    'conv1/Add'
    >>> print(safe_text("x\n::error file=a.py::forged"))
    x\n::error file=a.py::forged
    >>> print(safe_text("::add-mask::secret"))
    \x3a:add-mask::secret
    >>> print(safe_text("node\x1b[2J\x1b]0;title\x07"))
    node\x1b[2J\x1b]0;title\x07
    >>> print(safe_text("abc\u202edef ##[error]x"))
    abc\u202edef \x23#[error]x
    """
    if text.isprintable() and "::" not in text and "##" not in text:
        return text  # the common case, at no cost
    shown = "".join(c if c.isprintable() else _shown(c) for c in text)
    return _COMMAND.sub(lambda m: "\\x3a:" if m.group() == "::" else "\\x23#", shown)
