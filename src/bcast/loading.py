"""Models by file type: the one place that picks the reader and the verifier for a path.

OpenVINO IR for ``.xml``, ONNX otherwise (an ``onnx.ModelProto`` too). An ONNX file is
parsed and read whole in the worker process of `bcast.models.isolation` (its limits bound
the parse too) and its graph comes back pickled: ``bcast check`` never imports onnx itself.
`check` is the Python form of ``bcast check``: ``bcast.check(path)`` as
``onnx.checker.check_model(path)``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from bcast._spawn import kinds_for
from bcast.models import DEFAULT_MAX_ELEMENTS, Graph, ModelError, Report, Severity, check_graph
from bcast.models.baseline import Baseline, fails, read_baseline
from bcast.models.deviations import TARGETS
from bcast.models.files import model_file_size
from bcast.models.isolation import prestart, run_isolated
from bcast.models.presburger import load_meanwhile
from bcast.models.ranges import DimValue

if TYPE_CHECKING:
    from bcast.models.verification import Verification

__all__ = ["check", "is_ir", "load_graph", "prestart_for", "verifier_for"]

_EXTRA = {"onnx": "bcast[onnx]", "openvino": "bcast[openvino]"}


def is_ir(path: str) -> bool:
    """Tell whether ``path`` names an OpenVINO IR (its ``.xml``), not an ONNX model.

    >>> is_ir("model.XML"), is_ir("model.onnx")
    (True, False)
    """
    return path.lower().endswith(".xml")


def prestart_for(args: Sequence[str]) -> None:
    """Start the worker that reads models now, if the command line ``args`` will read any.

    ``args`` follow ``bcast``: the command, then its arguments (`bcast._spawn.kinds_for`).
    The worker imports the peer library the named files need (ONNX for ``.onnx``, OpenVINO
    for ``.xml``) while the command line loads; a command's own limits (``--max-memory``)
    restart it where they ask for others. Other commands, and ``--help``, start nothing.
    """
    kinds = kinds_for(args)
    if kinds is not None:
        prestart(kinds)


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
    load_meanwhile()  # the checker's isl loads here while the worker reads the model
    if is_ir(path):
        try:
            from bcast.openvino.reader import read_ir
        except ImportError as err:
            raise _needs(path, "reading OpenVINO IR", "openvino", err) from None
        return read_ir(path)
    try:  # parsed and read whole in the worker: this process never imports onnx for it
        return run_isolated(
            "ONNX", "reading the model", _read_onnx_file, path, os.getcwd(), where=path
        )
    except ImportError as err:
        raise _needs(path, "reading ONNX", "onnx", err) from None


def _read_onnx_file(path: str, cwd: str) -> Graph:
    """Read an ONNX file with `bcast.onnx.reader.read_onnx`: what the worker runs.

    The worker outlives a change of directory here: a relative ``path`` is read from ``cwd``
    (and named as given).
    """
    from bcast.onnx.reader import read_onnx

    os.chdir(cwd)
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
    dims: Mapping[str, DimValue] | None = None,
    max_elements: int = DEFAULT_MAX_ELEMENTS,
    raise_on_error: bool = False,
    fail_on: str | None = None,
    baseline: str | os.PathLike[str] | Baseline | None = None,
    target: str | None = None,
) -> Report:
    """Check the broadcasting nodes of a model; the Python form of ``bcast check``.

    Parameters
    ----------
    model : str, path or onnx.ModelProto
        An ONNX model (file or ``ModelProto``) or an OpenVINO IR (its ``.xml``).
    dims : mapping of str to int or range, optional
        Values for symbolic dims (``{"batch": 4}``), as ``--dim`` gives them; or ranges of
        sizes to prove the model for (``{"seq": (1, 512)}``, ``"1..512"``, ``"1.."``): a
        condition met at no size of the range is no finding; one met inside it is an error
        (``fails-in-range``) at the first size where it fails.
    max_elements : int, default 2**31
        Broadcast outputs with more elements are reported.
    raise_on_error : bool, default False
        Raise `ModelError` when the report has an error finding, as
        ``onnx.checker.check_model`` raises (the same as ``fail_on="error"``).
    fail_on : {"error", "warning", "info", "never"}, optional
        Raise `ModelError` when a finding of this severity or a higher one is found
        (``--fail-on``; None or ``"never"``: never raise).
    baseline : path or Baseline, optional
        A baseline file (``bcast check --write-baseline``): the findings it holds are left
        out of the report, so that only new ones count.
    target : {"onnxruntime", "openvino", "tract"}, optional
        Also warn (``runtime-deviation``) at nodes where that runtime is known to depart
        from the specification (``--target``; `bcast.models.deviations`).

    Returns
    -------
    Report
        ``.findings``, ``.ok`` (no error or warning), ``.to_json()``.

    Raises
    ------
    ModelError
        If the model or the baseline cannot be read, or (``fail_on``, ``raise_on_error``)
        a finding fails the check.
    ValueError
        If a value of ``dims``, ``fail_on`` or ``target`` is not one of those above.

    Examples
    --------
    >>> import bcast
    >>> bcast.check("no-such-model.onnx")
    Traceback (most recent call last):
    ...
    bcast.models.ModelError: no-such-model.onnx: no such file
    """
    threshold = "error" if raise_on_error and fail_on is None else fail_on or "never"
    fails(Severity.ERROR, threshold)  # a ValueError for a threshold it does not know
    known = read_baseline(baseline) if isinstance(baseline, (str, os.PathLike)) else baseline
    if target is not None and target not in TARGETS:
        raise ValueError(f"target takes {', '.join(TARGETS)}; got {target!r:.40}")
    graph = load_graph(model)
    report = check_graph(graph, dims=dims, max_elements=max_elements, target=target)
    if known is not None:
        path = os.fspath(model) if isinstance(model, (str, os.PathLike)) else report.path
        report, _ = known.apply(path, report)
    failing = [f for f in report.findings if fails(f.severity, threshold)]
    if failing:
        first = failing[0]
        raise ModelError(
            f"{report.path}: {len(failing)} broadcasting finding(s) at or above "
            f"{threshold}; first: {first.severity.value}[{first.kind}] node {first.node} "
            f"({first.op}): {first.reason}"
        )
    return report
