"""OpenVINO's recurrent sequence layers' weights and states, held against OpenVINO (issue 37).

An IR LSTMSequence, GRUSequence or RNNSequence whose W, R or B is one element short is the
kind of file a hand edit or a converter writes; OpenVINO refuses it when it reads the file.
OpenVINO's own Python API refuses to build such a layer, so each mutant is a valid IR whose
XML is edited: the constant's shape and byte size, and the layer's input port, one short.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import bcast
from bcast.models import Severity

ov = pytest.importorskip("openvino")
o = pytest.importorskip("openvino.opset13")

HIDDEN, SIZE, BATCH, SEQ = 4, 3, 2, 5
GATES = {"LSTMSequence": 4, "GRUSequence": 3, "RNNSequence": 1}


def _save(tmp_path: Path, op: str, reset: bool = False) -> Path:
    """Save one sequence layer with constant W, R, B named so (a GRU: linear_before_reset)."""
    x = o.parameter([-1, SEQ, SIZE], np.float32, name="x")
    h = o.parameter([-1, 1, HIDDEN], np.float32, name="h")
    lengths = o.parameter([-1], np.int32, name="lengths")
    g = GATES[op]
    bias = (g + 1 if reset else g) * HIDDEN
    w, r, b = (
        o.constant(np.full(shape, 0.1, np.float32), name=name)
        for name, shape in (("W", (1, g * HIDDEN, SIZE)), ("R", (1, g * HIDDEN, HIDDEN)),
                            ("B", (1, bias)))
    )  # fmt: skip
    params = [x, h, lengths]
    if op == "LSTMSequence":
        c = o.parameter([-1, 1, HIDDEN], np.float32, name="c")
        params.insert(2, c)
        layer = o.lstm_sequence(x, h, c, lengths, w, r, b, HIDDEN, "forward")
    elif op == "GRUSequence":
        layer = o.gru_sequence(x, h, lengths, w, r, b, HIDDEN, "forward",
                               linear_before_reset=reset)  # fmt: skip
    else:
        layer = o.rnn_sequence(x, h, lengths, w, r, b, HIDDEN, "forward")
    path = tmp_path / f"{op}.xml"
    ov.save_model(ov.Model([layer.output(0)], params, "m"), str(path), compress_to_fp16=False)
    return path


def _one_short(path: Path, name: str) -> Path:
    """Edit the IR: constant ``name`` one element short on its last axis."""
    tree = ET.parse(path)
    root = tree.getroot()
    (const,) = [layer for layer in root.iter("layer") if layer.get("name") == name]
    data = const.find("data")
    assert data is not None
    dims = [int(v) for v in (data.get("shape") or "").split(",")]
    itemsize = int(data.get("size") or 0) // int(np.prod(dims))
    dims[-1] -= 1
    data.set("shape", ",".join(map(str, dims)))
    data.set("size", str(int(np.prod(dims)) * itemsize))
    layers = {layer.get("id"): layer for layer in root.iter("layer")}
    ports = list(const.iter("port"))
    for edge in root.iter("edge"):
        if edge.get("from-layer") == const.get("id"):
            to = layers[edge.get("to-layer")]
            ports += [p for p in to.iter("port") if p.get("id") == edge.get("to-port")]
    for port in ports:
        port.findall("dim")[-1].text = str(dims[-1])
    edited = path.with_name(f"{path.stem}_{name}_short.xml")
    tree.write(edited)
    edited.with_suffix(".bin").write_bytes(path.with_suffix(".bin").read_bytes())
    return edited


def _openvino_runs(path: Path, op: str) -> bool:
    state = np.zeros((BATCH, 1, HIDDEN), np.float32)
    feeds: list[Any] = [np.ones((BATCH, SEQ, SIZE), np.float32), state]
    if op == "LSTMSequence":
        feeds.append(state)
    feeds.append(np.full(BATCH, SEQ, np.int32))
    try:
        ov.Core().compile_model(str(path), "CPU")(feeds)
    except RuntimeError:  # OpenVINO's refusal, when it reads or compiles the file
        return False
    return True


def _errors(path: Path) -> list[Any]:
    return [f for f in bcast.check(path).findings if f.severity is Severity.ERROR]


@pytest.mark.parametrize(
    ("op", "reset"),
    [("LSTMSequence", False), ("GRUSequence", False), ("GRUSequence", True),
     ("RNNSequence", False)],
)  # fmt: skip
def test_a_sequence_weight_one_short_is_refused_by_openvino_and_found_at_its_node(
    tmp_path: Path, op: str, reset: bool
) -> None:
    path = _save(tmp_path, op, reset)
    assert _openvino_runs(path, op)
    assert not _errors(path)
    for name in ("W", "R", "B"):
        short = _one_short(path, name)
        assert not _openvino_runs(short, op), name
        (error,) = _errors(short)
        assert error.op == op and f"{op} {name} " in error.reason, error.reason


@pytest.mark.parametrize("written", ["0", "-3", "1e3"])
def test_a_hidden_size_openvino_refuses_is_an_error_or_not_modelled(
    tmp_path: Path, written: str
) -> None:
    # OpenVINO reads these files and refuses to compile them. An integer that is no size is
    # an error at the layer; text that is no integer leaves the layer unmodelled (listed in
    # the coverage), never "no findings" as if it had been checked.
    path = _save(tmp_path, "GRUSequence")
    text = path.read_text()
    assert text.count(f'hidden_size="{HIDDEN}"') == 1
    edited = path.with_name("edited.xml")
    edited.write_text(text.replace(f'hidden_size="{HIDDEN}"', f'hidden_size="{written}"'))
    edited.with_suffix(".bin").write_bytes(path.with_suffix(".bin").read_bytes())
    assert not _openvino_runs(edited, "GRUSequence")
    report = bcast.check(edited)
    if written == "1e3":
        assert [u.op for u in report.unmodelled] == ["GRUSequence"]
        assert "no integer hidden_size" in (report.coverage() or "")
    else:
        (error,) = _errors(edited)
        assert error.op == "GRUSequence" and "hidden_size" in error.reason
