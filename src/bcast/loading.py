"""Models by file type: the one place that picks the reader and the verifier for a path.

OpenVINO IR for ``.xml``, ONNX otherwise (an ``onnx.ModelProto`` too). `check` is the Python
form of ``bcast check``: ``bcast.check(path)`` as ``onnx.checker.check_model(path)``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from bcast.models import DEFAULT_MAX_ELEMENTS, Graph, ModelError, Report, check_graph
from bcast.models.files import model_file_size

if TYPE_CHECKING:
    from bcast.models.verification import Verification

__all__ = ["check", "is_ir", "load_graph", "verifier_for"]

_EXTRA = {"onnx": "bcast[onnx]", "openvino": "bcast[openvino]"}


def is_ir(path: str) -> bool:
    """Tell whether ``path`` names an OpenVINO IR (its ``.xml``), not an ONNX model.

    >>> is_ir("model.XML"), is_ir("model.onnx")
    (True, False)
    """
    return path.lower().endswith(".xml")


def _needs(path: str, what: str, package: str, err: ImportError) -> ModelError:
    return ModelError(
        f"{path}: {what} needs the {package} package ({err}); "
        f'install it with: pip install "{_EXTRA[package]}"'
    )


def load_graph(source: str | os.PathLike[str] | Any) -> Graph:
    """Read a model: a path (OpenVINO IR for ``.xml``, ONNX otherwise) or an ONNX ModelProto.

    Raises
    ------
    ModelError
        With a one-line message, for anything that is not a readable model.
    """
    if not isinstance(source, (str, os.PathLike)):
        try:
            from bcast.onnx.reader import read_onnx
        except ImportError as err:
            raise _needs("<model>", "reading ONNX", "onnx", err) from None
        return read_onnx(source)
    path = os.fspath(source)
    if os.path.isdir(path):
        raise ModelError(f"{path}: is a directory, not a model file")
    if not os.path.exists(path):
        raise ModelError(f"{path}: no such file")
    model_file_size(path)  # a regular file within the limits (not a FIFO or /dev/zero)
    if is_ir(path):
        try:
            from bcast.openvino.reader import read_ir
        except ImportError as err:
            raise _needs(path, "reading OpenVINO IR", "openvino", err) from None
        return read_ir(path)
    try:
        from bcast.onnx.reader import read_onnx
    except ImportError as err:
        raise _needs(path, "reading ONNX", "onnx", err) from None
    return read_onnx(path)


def verifier_for(path: str) -> Callable[..., Verification]:
    """Return the verifier of a model file: `verify_ir` for IR, `verify_model` for ONNX.

    Raises
    ------
    ModelError
        If the library the verifier needs is not installed (naming the extra to install).
    """
    if is_ir(path):
        try:
            from bcast.openvino.verify import verify_ir
        except ImportError as err:
            raise _needs(path, "verify", "openvino", err) from None
        return verify_ir
    try:
        from bcast.onnx.verify import verify_model
    except ImportError as err:
        raise _needs(path, "verify", "onnx", err) from None
    return verify_model


def check(
    model: str | os.PathLike[str] | Any,
    *,
    dims: Mapping[str, int] | None = None,
    max_elements: int = DEFAULT_MAX_ELEMENTS,
    raise_on_error: bool = False,
) -> Report:
    """Check the broadcasting nodes of a model; the Python form of ``bcast check``.

    Parameters
    ----------
    model : str, path or onnx.ModelProto
        An ONNX model (file or ``ModelProto``) or an OpenVINO IR (its ``.xml``).
    dims : mapping of str to int, optional
        Values for symbolic dims (``{"batch": 4}``), as ``--dim`` gives them.
    max_elements : int, default 2**31
        Broadcast outputs with more elements are reported.
    raise_on_error : bool, default False
        Raise `ModelError` when the report has an error finding, as
        ``onnx.checker.check_model`` raises.

    Returns
    -------
    Report
        ``.findings``, ``.ok`` (no error or warning), ``.to_json()``.

    Raises
    ------
    ModelError
        If the model cannot be read, or (``raise_on_error``) has an error finding.

    Examples
    --------
    >>> import bcast
    >>> bcast.check("no-such-model.onnx")
    Traceback (most recent call last):
    ...
    bcast.models.ModelError: no-such-model.onnx: no such file
    """
    report = check_graph(load_graph(model), dims=dims, max_elements=max_elements)
    if raise_on_error and report.errors:
        first = report.errors[0]
        raise ModelError(
            f"{report.path}: {len(report.errors)} broadcasting error(s); first: node "
            f"{first.node} ({first.op}): {first.reason}"
        )
    return report
