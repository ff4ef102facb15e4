"""Plans, errors and reports in a notebook and in print(); `bcast.check` as onnx.checker is used.

Expected stretches come from NumPy's rule (an operand is replicated along an axis where its
aligned dim is 1 and the result's is not), never from bcast's own output.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import onnx
import pytest
from onnx import TensorProto, helper

import bcast
from bcast.cli._output import load_schema
from bcast.models import ModelError

ROOT = Path(__file__).resolve().parents[2]


def cells(html: str) -> list[list[str]]:
    """The table's rows, each a list of its cells' text (tags removed)."""
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", html)
    return [[re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", r)]
            for r in rows]  # fmt: skip


# -- Plan ----------------------------------------------------------------------------------


def test_print_plan_draws_the_picture() -> None:
    text = str(bcast.plan("[2,1]", "[3]"))
    assert text.splitlines() == ["numpy: [2,1], [3] -> [2,3]", "  #0  2  1", "  #1     3",
                                 "  =   2  3"]  # fmt: skip
    assert "Plan(" in repr(bcast.plan("[2,1]", "[3]"))  # repr stays the dataclass's


def test_plan_html_rows_are_operands_columns_are_axes_stretched_cells_shaded() -> None:
    html = bcast.plan("[2,1]", "[3]")._repr_html_()
    assert cells(html) == [
        ["axis", "0", "1", "shape"],
        ["#0", "2", "1", "[2,1]"],
        ["#1", "&middot;", "3", "[3]"],
        ["result", "2", "3", "[2,3]"],
    ]
    # NumPy: [2,1] is replicated along axis 1; [3] (aligned [1,3]) along axis 0.
    stretched = re.findall(r'<td class="stretched[^"]*">([^<]*)</td>', html)
    assert sorted(stretched) == ["&middot;", "1"]
    assert html.count('class="stretched') == 2


def test_plan_html_escapes_names() -> None:
    html = bcast.plan([bcast.Dim.symbol("N<b>"), 1], [1, 3])._repr_html_()
    assert "N&lt;b&gt;" in html and "N<b>" not in html


# -- BroadcastError ------------------------------------------------------------------------


def test_broadcast_error_html_marks_the_failing_axis() -> None:
    with pytest.raises(bcast.BroadcastError) as info:
        bcast.broadcast_shapes("[2,3]", "[4]")
    html = info.value._repr_html_()
    assert "3 vs 4" in html
    rows = cells(html)
    assert rows[0] == ["axis", "0", "1 ✗", "shape"]
    assert re.findall(r'<td class="failing">(\d)</td>', html) == ["3", "4"]
    assert str(info.value).splitlines()[-1].strip() == "^ axis 1"


# -- bcast.check, the onnx.checker of broadcasting -----------------------------------------


def _model(tmp_path: Path, y_shape: list[object]) -> Path:
    f = TensorProto.FLOAT
    node = helper.make_node("Add", ["x", "y"], ["z"], name="add_1")
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info("x", f, ["batch", 3]),
            helper.make_tensor_value_info("y", f, y_shape),
        ],
        [helper.make_tensor_value_info("z", f, [None, None])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    return path


def test_check_reports_like_the_cli(tmp_path: Path) -> None:
    path = _model(tmp_path, [4])
    report = bcast.check(str(path))
    assert not report.ok
    (error,) = report.errors
    assert (error.kind, error.node, error.op, error.axis) == ("incompatible", "add_1", "Add", 1)
    schema = load_schema("check")
    model_schema = {**schema["$defs"]["model"], "$defs": schema["$defs"]}
    jsonschema.validate(report.to_json(), model_schema)
    text = str(report)
    assert text.splitlines()[0] == f"{path} (1 node): 1 error"
    assert "^ axis 1" in text
    html = report._repr_html_()
    assert '<th class="failing">1 ✗</th>' in html and "add_1 (Add)" in html  # a table


def test_check_takes_a_model_proto_and_a_path_object(tmp_path: Path) -> None:
    path = _model(tmp_path, [3])
    assert bcast.check(path).ok
    assert bcast.check(onnx.load(path)).ok


def test_check_raise_on_error_as_onnx_checker(tmp_path: Path) -> None:
    path = _model(tmp_path, [4])
    with pytest.raises(ModelError, match="add_1"):
        bcast.check(str(path), raise_on_error=True)
    assert bcast.check(str(_model(tmp_path, ["batch", 1])), raise_on_error=True).ok


def test_check_dims_bind_symbols(tmp_path: Path) -> None:
    path = _model(tmp_path, [2, 3])  # [batch,3] + [2,3]: fails unless batch is 1 or 2
    assert not bcast.check(str(path)).ok
    assert bcast.check(str(path), dims={"batch": 2}).ok
    assert not bcast.check(str(path), dims={"batch": 5}).ok


@pytest.mark.slow
def test_example_models_pass_onnx_checker(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, str(ROOT / "examples" / "build_models.py"), str(tmp_path)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    models = sorted(tmp_path.glob("*.onnx"))
    assert len(models) == 8
    for path in models:
        onnx.checker.check_model(str(path))  # raises for an invalid model
    rejected = set()
    for path in models:
        try:
            onnx.checker.check_model(str(path), full_check=True)
        except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError):
            rejected.add(path.name)
    # What the README says ONNX's own shape inference rejects (invalid on purpose).
    assert rejected == {"block_broken.onnx", "broken_add.onnx"}
    assert (
        json.loads(json.dumps(bcast.check(str(tmp_path / "block.onnx")).to_json()))["findings"]
        == []
    )
