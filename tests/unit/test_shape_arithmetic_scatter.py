"""ScatterND's and ScatterElements' requirements, held against onnxruntime (issue 37).

ScatterND writes ``updates`` into ``data`` at the index tuples ``indices[..., :k]``: the
updates must be ``indices.shape[:-1] + data.shape[k:]`` and each index inside the data dim it
addresses. A KV-cache export writes the new positions into a cache this way. ``bcast check``
with ``--dim`` must report an error at exactly the sizes where onnxruntime refuses the model:
every expected answer comes from running onnxruntime at that point.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

import bcast
from bcast.models import Severity

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
helper, numpy_helper, TensorProto = onnx.helper, onnx.numpy_helper, onnx.TensorProto
ort.set_default_logger_severity(3)


def _model(nodes: list[Any], inputs: list[Any], inits: Sequence[Any] = ()) -> Any:
    graph = helper.make_graph(
        nodes, "g", inputs, [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
        list(inits),
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _float(name: str, dims: list[int | str]) -> Any:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)


def _ort_runs(model: Any, feeds: dict[str, np.ndarray]) -> bool:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    try:
        session.run(None, feeds)
    except Exception:  # onnxruntime's refusal (InvalidArgument, RuntimeException)
        return False
    return True


def _bcast_runs(model: Any, dims: dict[str, int]) -> bool:
    report = bcast.check(model, dims=dims)
    return not any(f.severity is Severity.ERROR for f in report.findings)


def _scatter_nd(updates: list[int | str]) -> Any:
    """``put = ScatterND(data [N, 8], indices [M, 1], updates)``."""
    scatter = helper.make_node("ScatterND", ["data", "indices", "updates"], ["out"], name="put")
    indices = helper.make_tensor_value_info("indices", TensorProto.INT64, ["M", 1])
    return _model([scatter], [_float("data", ["N", 8]), indices, _float("updates", updates)])


def test_scatter_nd_updates_must_be_the_indexed_rows_as_onnxruntime_requires() -> None:
    # data [N, 8], indices [M, 1], updates [U, 8]: onnxruntime runs only where U = M.
    model = _scatter_nd(["U", 8])
    for u in (2, 3, 4):
        feeds = {
            "data": np.zeros((5, 8), np.float32),
            "indices": np.array([[0], [2], [4]], np.int64),
            "updates": np.ones((u, 8), np.float32),
        }
        assert _bcast_runs(model, {"N": 5, "M": 3, "U": u}) == _ort_runs(model, feeds) == (u == 3)
    (relation,) = bcast.check(model).domain.relations
    assert (relation.text, relation.imposed[0].node) == ("M = U", "put")


def test_a_scatter_nd_update_of_the_wrong_width_is_reported_at_its_node() -> None:
    model = _scatter_nd(["M", 7])
    feeds = {
        "data": np.zeros((5, 8), np.float32),
        "indices": np.array([[1]], np.int64),
        "updates": np.ones((1, 7), np.float32),
    }
    assert not _ort_runs(model, feeds)
    (error,) = [f for f in bcast.check(model).findings if f.severity is Severity.ERROR]
    assert error.node == "put"


def test_scatter_nd_positions_from_a_range_must_fit_the_cache_as_onnxruntime_requires() -> None:
    # A KV-cache write: the new rows' positions 0..P-1 (Range over the updates' length)
    # index the cache's N rows, so onnxruntime runs only where P <= N.
    nodes = [
        helper.make_node("Shape", ["updates"], ["shape"]),
        helper.make_node("Gather", ["shape", "zero"], ["length"], axis=0),
        helper.make_node("Range", ["zero", "length", "one"], ["positions"]),
        helper.make_node("Unsqueeze", ["positions", "last"], ["column"]),
        helper.make_node("Concat", ["column"], ["indices"], axis=-1),
        helper.make_node("ScatterND", ["data", "indices", "updates"], ["out"], name="put"),
    ]
    inits = [
        numpy_helper.from_array(np.array(0, np.int64), "zero"),
        numpy_helper.from_array(np.array(1, np.int64), "one"),
        numpy_helper.from_array(np.array([-1], np.int64), "last"),
    ]
    model = _model(nodes, [_float("data", ["N", 8]), _float("updates", ["P", 8])], inits)
    for p in (4, 5, 6):
        feeds = {"data": np.zeros((5, 8), np.float32), "updates": np.ones((p, 8), np.float32)}
        assert _bcast_runs(model, {"N": 5, "P": p}) == _ort_runs(model, feeds) == (p <= 5)


def test_scatter_elements_indices_and_updates_share_a_shape_as_onnxruntime_requires() -> None:
    scatter = helper.make_node(
        "ScatterElements", ["data", "indices", "updates"], ["out"], name="put", axis=0
    )
    model = _model(
        [scatter],
        [_float("data", [4, "W"]),
         helper.make_tensor_value_info("indices", TensorProto.INT64, [2, "W"]),
         _float("updates", [2, "V"])],
    )  # fmt: skip
    for v in (2, 3):
        feeds = {
            "data": np.zeros((4, 3), np.float32),
            "indices": np.zeros((2, 3), np.int64),
            "updates": np.ones((2, v), np.float32),
        }
        assert _bcast_runs(model, {"W": 3, "V": v}) == _ort_runs(model, feeds) == (v == 3)


def test_the_ir_scatter_updates_are_held_as_openvino_holds_them(tmp_path: Any) -> None:
    # The IR's ScatterNDUpdate and ScatterElementsUpdate, on dynamic inputs: OpenVINO runs
    # each only where the updates are the indexed rows (ND) or the indices' shape (elements).
    ov = pytest.importorskip("openvino")
    o = ov.opset13
    data = o.parameter([-1, 3], np.float32, name="data")
    rows = o.parameter([-1, 1], np.int64, name="indices")
    axis = o.constant(np.array(0, np.int64))
    for name, width in (("nd", 3), ("elements", 1)):
        updates = o.parameter([-1, width], np.float32, name="updates")
        layer = (
            o.scatter_nd_update(data, rows, updates)
            if name == "nd"
            else o.scatter_elements_update(data, rows, updates, axis)
        )
        path = str(tmp_path / f"{name}.xml")
        ov.save_model(ov.Model([layer], [data, rows, updates], name), path)
        compiled = ov.Core().compile_model(path, "CPU")
        named = {d.name for d in bcast.check(path).domain.dims}
        for u in (2, 3, 4):
            index = np.array([[0], [2], [4]], np.int64)
            arrays = [np.zeros((5, 3), np.float32), index, np.ones((u, width), np.float32)]
            try:
                compiled(arrays)
                ran = True
            except RuntimeError:  # OpenVINO's refusal
                ran = False
            sizes = {"data.0": 5, "indices.0": 3, "updates.0": u}
            assert set(sizes) <= named
            assert _bcast_runs(path, sizes) == ran == (u == 3), (name, u)
