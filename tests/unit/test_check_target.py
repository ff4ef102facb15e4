"""``bcast check --target``: the runtime's known deviations become warnings (issue 38 item 3).

Each warning is held against the runtime itself: the same IR, compiled and run by OpenVINO's
CPU plugin, does not give the result (or the acceptance) the specification gives, and a
node the rule leaves alone does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

import bcast
from bcast.cli import main
from bcast.cli._output import load_schema

ov = pytest.importorskip("openvino")
jsonschema = pytest.importorskip("jsonschema")
from openvino.utils.node_factory import NodeFactory  # noqa: E402

PDPD_0 = {"auto_broadcast": "pdpd", "auto_broadcast.auto_broadcast_axis": 0}


def _ir(tmp_path: Path, op: str, shapes: list[tuple[int, ...]], dtype: Any = np.float32) -> str:
    params = [ov.opset13.parameter(list(s), dtype, name=f"in{k}") for k, s in enumerate(shapes)]
    node = NodeFactory("opset13").create(op, [p.output(0) for p in params], PDPD_0)
    node.set_friendly_name(f"pdpd_{op.lower()}")
    path = tmp_path / f"{op}.xml"
    ov.save_model(ov.Model([node], params, op), path)
    return str(path)


def _openvino_runs_as_the_spec(path: str, inputs: list[np.ndarray], want: np.ndarray) -> bool:
    try:
        got = np.asarray(ov.Core().compile_model(path, "CPU")(inputs)[0])
    except Exception:  # refused or failed: not what the specification gives
        return False
    return got.shape == want.shape and bool(np.array_equal(got, want))


def _deviations(*args: str) -> list[dict[str, Any]]:
    result = CliRunner().invoke(main, ["check", "--json", *args])
    doc = json.loads(result.stdout)
    jsonschema.validate(doc, load_schema("check"))
    findings = doc["models"][0]["findings"]
    return [f for f in findings if f["kind"] == "runtime-deviation"]


LOST = ["Subtract", "Divide", "Equal", "Greater", "Less"]


@pytest.mark.parametrize("op", [*LOST, "Add", "Multiply"])
def test_a_pdpd_axis_the_cpu_plugin_loses_is_a_warning_under_target_openvino(
    tmp_path: Path, op: str
) -> None:
    # A [2,1] op B [2], axis 0: B covers A's axis 0, the result is [2,1] (the seed's rule)
    path = _ir(tmp_path, op, [(2, 1), (2,)])
    a, b = np.array([[6.0], [3.0]], np.float32), np.array([1.0, 3.0], np.float32)
    ufunc = {"Add": np.add, "Multiply": np.multiply, "Subtract": np.subtract}.get(op)
    spec = {"Divide": np.divide, "Equal": np.equal, "Greater": np.greater, "Less": np.less}
    want = (ufunc or spec[op])(a, b.reshape(2, 1))
    deviates = not _openvino_runs_as_the_spec(path, [a, b], want)
    assert deviates == (op in LOST)  # what the runtime does, in this process
    found = _deviations(path, "--target", "openvino")
    assert bool(found) == deviates
    if found:
        (finding,) = found
        assert finding["node"] == f"pdpd_{op.lower()}" and finding["severity"] == "warning"
        assert "docs/peer-differences.md" in finding["reason"]
    assert _deviations(path) == []  # no target: the specification only
    assert _deviations(path, "--target", "onnxruntime") == []


def test_pdpd_greater_equal_off_the_right_edge_fails_in_openvino_and_is_told(
    tmp_path: Path,
) -> None:
    path = _ir(tmp_path, "GreaterEqual", [(2, 3, 4), (2, 1)])
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    b = np.array([[5.0], [20.0]], np.float32)
    assert not _openvino_runs_as_the_spec(path, [a, b], a >= b.reshape(2, 1, 1))
    (finding,) = _deviations(path, "--target", "OPENVINO")
    assert "GreaterEqual" in finding["reason"]


def test_the_example_pdpd_subtract_warns_only_under_its_target(tmp_path: Path) -> None:
    path = _ir(tmp_path, "Subtract", [(2, 1), (2,)])
    runner = CliRunner()
    assert runner.invoke(main, ["check", path]).exit_code == 0
    told = runner.invoke(main, ["check", path, "--target", "openvino"])
    assert told.exit_code == 1 and "warning[runtime-deviation]" in told.stdout
    assert (
        runner.invoke(main, ["check", path, "--target", "openvino", "--fail-on", "error"]).exit_code
        == 0
    )
    sarif = json.loads(
        runner.invoke(main, ["check", path, "--target", "openvino", "--format", "sarif"]).stdout
    )
    (rule,) = sarif["runs"][0]["tool"]["driver"]["rules"]
    assert rule["id"] == "runtime-deviation" and rule["help"]["text"]
    bad = runner.invoke(main, ["check", path, "--target", "nope"])
    assert bad.exit_code == 2 and "Traceback" not in bad.output


def test_the_python_api_takes_a_target(tmp_path: Path) -> None:
    path = _ir(tmp_path, "Subtract", [(2, 1), (2,)])
    assert [f.kind for f in bcast.check(path, target="openvino").findings] == ["runtime-deviation"]
    assert bcast.check(path, target="tract").findings == ()
    with pytest.raises(ValueError, match="target takes"):
        bcast.check(path, target="nope")


def test_the_target_of_a_pyproject_table_applies_and_the_command_line_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _ir(tmp_path, "Subtract", [(2, 1), (2,)])
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.bcast]\ntarget = "openvino"\n')
    assert len(_deviations(path)) == 1
    assert _deviations(path, "--target", "onnxruntime") == []
    (tmp_path / "pyproject.toml").write_text('[tool.bcast]\ntarget = "tvm"\n')
    result = CliRunner().invoke(main, ["check", path])
    assert result.exit_code == 2 and "target takes" in result.output


def _node_ir(
    tmp_path: Path,
    op: str,
    inputs: list[np.ndarray],
    attrs: dict[str, Any],
    *,
    dynamic: bool = False,
) -> str:
    shapes = [ov.PartialShape([-1] * x.ndim) if dynamic else list(x.shape) for x in inputs]
    params = [
        ov.opset13.parameter(shape, x.dtype, name=f"in{k}")
        for k, (shape, x) in enumerate(zip(shapes, inputs, strict=True))
    ]
    node = NodeFactory("opset13").create(op, [p.output(0) for p in params], attrs)
    node.set_friendly_name(op.lower())
    path = tmp_path / f"{op}_{len(list(tmp_path.iterdir()))}.xml"
    ov.save_model(ov.Model([node], params, op), path)
    return str(path)


SELECT_PDPD = {"auto_broadcast": "pdpd", "auto_broadcast.auto_broadcast_axis": -1}


def test_a_pdpd_select_condition_with_a_trailing_one_is_told_and_misread(tmp_path: Path) -> None:
    then = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    other = np.array([-1, -2, -3, -4], np.float32)
    short = np.array([[True], [False], [True]])  # [3,1] at then's axis 1
    want = np.where(short.reshape(1, 3, 1), then, other)
    for dynamic in (True, False):  # shapes decided at run time: misread; static: read right
        path = _node_ir(tmp_path, "Select", [short, then, other], SELECT_PDPD, dynamic=dynamic)
        assert _openvino_runs_as_the_spec(path, [short, then, other], want) is not dynamic
        assert len(_deviations(path, "--target", "openvino")) == int(dynamic)
    full = np.arange(24).reshape(2, 3, 4) % 3 == 0  # the whole shape: read right
    path = _node_ir(tmp_path, "Select", [full, then, other], SELECT_PDPD, dynamic=True)
    assert _openvino_runs_as_the_spec(path, [full, then, other], np.where(full, then, other))
    assert _deviations(path, "--target", "openvino") == []


def test_fake_quantize_limits_of_a_higher_rank_than_x_are_told_and_fail(tmp_path: Path) -> None:
    x = np.array([0.25, 0.75, 1.25, 1.75], np.float32)
    attrs = {"levels": 5, "auto_broadcast": "numpy"}
    for low_shape, told in (((2, 4), True), ((4,), False)):
        low, high = np.zeros(low_shape, np.float32), np.full(low_shape, 2.0, np.float32)
        inputs = [x, low, high, np.zeros((), np.float32), np.full((), 4.0, np.float32)]
        path = _node_ir(tmp_path, "FakeQuantize", inputs, attrs)
        ours = bcast.ops.fake_quantize(*inputs, levels=5)
        assert _openvino_runs_as_the_spec(path, inputs, ours) is not told
        assert bool(_deviations(path, "--target", "openvino")) is told


_SCALAR = """
import sys
import numpy as np
import openvino as ov
data = ov.opset13.parameter([], np.float32, name="data")
target = ov.opset13.constant(np.array([], np.int64))
node = ov.opset13.broadcast(data, target, broadcast_spec=sys.argv[2])
node.set_friendly_name("to_scalar")
ov.save_model(ov.Model([node], [data], "m"), sys.argv[1])
if sys.argv[3] == "run":
    ov.Core().compile_model(sys.argv[1], "CPU")([np.array(3.0, np.float32)])
"""


@pytest.mark.parametrize("spec", ["numpy", "bidirectional"])
def test_a_scalar_broadcast_to_a_scalar_target_is_told_and_crashes_openvino(
    tmp_path: Path, spec: str
) -> None:
    import subprocess
    import sys

    path = str(tmp_path / f"{spec}.xml")
    made = subprocess.run([sys.executable, "-c", _SCALAR, path, spec, "save"], timeout=120)
    assert made.returncode == 0
    (finding,) = _deviations(path, "--target", "openvino")
    assert finding["node"] == "to_scalar" and "segmentation fault" in finding["reason"]
    ran = subprocess.run(  # in a child: the CPU plugin's crash must not take pytest with it
        [sys.executable, "-c", _SCALAR, path, spec, "run"], capture_output=True, timeout=120
    )
    assert ran.returncode < 0  # killed by a signal (SIGSEGV)
