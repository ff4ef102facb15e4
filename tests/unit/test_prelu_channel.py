"""OpenVINO PRelu-1's slope rule (`bcast.core.channels`), and PRelu in IR: check and verify.

Expected values: the PRelu-1 specification ("Channels dimension corresponds to the second
dimension of data input tensor. If slope input rank is 1 and its dimension is equal to the
second dimension of data input, then per channel broadcast is applied. Otherwise slope input
is broadcasted with numpy rules"; the output has data's shape) and OpenVINO 2026.4 itself:
its CPU plugin runs every IR below, and its shape inference, which does not look at the
slope at all (type_prop ``prelu.cpp`` accepts slope ``[2]`` on X ``[2,4]``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import bcast
from bcast import BroadcastError, Shape
from bcast.core.channels import channel_plan

# -- the rule, from the specification text ---------------------------------------------------


@pytest.mark.parametrize(
    ("x", "slope", "axes"),
    [
        pytest.param("[2,3,4]", "[3]", (1,), id="per-channel"),
        pytest.param("[2,3,3]", "[3]", (1,), id="channel-before-numpy"),
        pytest.param("[2,3,4,5]", "[3]", (1,), id="nchw"),
        pytest.param("[2,3,4]", "[4]", (2,), id="numpy-last-axis"),
        pytest.param("[2,3,4]", "[1]", (2,), id="numpy-one"),
        pytest.param("[2,3,4]", "[3,1]", (1, 2), id="numpy-2d"),
        pytest.param("[5]", "[5]", (0,), id="1d-data"),
        pytest.param("[2,3,4]", "[]", (), id="scalar-slope"),
    ],
)
def test_slope_placement_follows_the_prelu1_text(x: str, slope: str, axes: tuple[int, ...]) -> None:
    p = channel_plan(x, slope)
    assert p.output == Shape.parse(x)  # "the same shape as data input"
    assert p.alignment == (tuple(range(Shape.parse(x).rank or 0)), axes)


@pytest.mark.parametrize(
    ("x", "slope", "axis"),
    [
        pytest.param("[2,3,4]", "[5]", 2, id="no-channel-no-numpy"),
        pytest.param("[2,4]", "[2]", 1, id="type-prop-case"),
        pytest.param("[3]", "[2,3]", None, id="slope-larger-than-x"),
        pytest.param("[2,3,4]", "[3,2]", 2, id="2d-slope-is-numpy-only"),
    ],
)
def test_a_slope_that_fits_no_rule_is_an_error(x: str, slope: str, axis: int | None) -> None:
    with pytest.raises(BroadcastError) as excinfo:
        channel_plan(x, slope)
    assert excinfo.value.axis == axis


def test_partial_shapes_are_sound() -> None:
    # Only the channel placement fits [3] into [2,?,4] (3 vs 4 fails the NumPy rule).
    assert channel_plan("[2,?,4]", "[3]").output == Shape.parse("[2,3,4]")
    # [4] may be the channel count (then X is [2,4,4]) or NumPy's last axis (X [2,5,4]...).
    assert channel_plan("[2,?,4]", "[4]").output == Shape.parse("[2,?,4]")
    # A slope [?] may go either way: which is decided by the concrete shapes only.
    undecided = channel_plan("[2,3,4]", "[?]")
    assert undecided.output == Shape.parse("[2,3,4]")
    assert undecided.alignment[1] is None
    assert channel_plan("[...]", "[3]").output == Shape.dynamic()


# -- PRelu in IR, against OpenVINO -----------------------------------------------------------


def _prelu_ir(path: Path, x: list[int], slope: list[int]) -> tuple[str, np.ndarray]:
    """Save a one-node IR: PRelu of a parameter ``x`` with a constant ``slope``."""
    ov = pytest.importorskip("openvino")
    values = np.linspace(0.1, 0.9, int(np.prod(slope))).reshape(slope).astype(np.float32)
    data = ov.opset13.parameter(x, np.float32, name="x")
    node = ov.opset13.prelu(data, ov.opset13.constant(values, name="slope"), name="prelu")
    ov.save_model(ov.Model([node], [data], "m"), path, compress_to_fp16=False)
    return str(path), values


@pytest.mark.parametrize(
    ("x", "slope", "placed"),
    [
        pytest.param([2, 3, 4], [3], [1, 3, 1], id="per-channel"),
        pytest.param([2, 3, 3], [3], [1, 3, 1], id="channel-before-numpy"),
        pytest.param([2, 3, 4], [4], [1, 1, 4], id="numpy-last-axis"),
    ],
)
def test_ir_prelu_whose_slope_fits_is_clean_and_runs_in_openvino_and_verify(
    tmp_path: Path, x: list[int], slope: list[int], placed: list[int]
) -> None:
    ov = pytest.importorskip("openvino")
    from bcast.openvino.verify import verify_ir

    path, values = _prelu_ir(tmp_path / "prelu.xml", x, slope)
    report = bcast.check(path)
    assert report.ok, report.findings
    assert not report.findings
    # OpenVINO compiles and runs it, with the slope where the PRelu-1 text puts it.
    data = -np.arange(1, int(np.prod(x)) + 1, dtype=np.float32).reshape(x)
    compiled = ov.Core().compile_model(path, "CPU")
    np.testing.assert_allclose(compiled([data])[0], data * values.reshape(placed), rtol=1e-6)
    outcome = verify_ir(path, seed=1)
    (run,) = outcome.nodes
    assert run.op == "PReLU"
    assert run.comparisons["openvino"].agree, run.comparisons["openvino"].detail


@pytest.mark.parametrize(
    ("x", "slope", "axis", "openvino"),
    [
        pytest.param([2, 3, 4], [5], 2, "Target dim: 5 This dim: 4", id="slope-5"),
        pytest.param([2, 4], [2], 1, "Target dim: 4 This dim: 2", id="type-prop-case"),
    ],
)
def test_ir_prelu_whose_slope_fits_no_channel_count_is_an_error_openvino_rejects_at_compile(
    tmp_path: Path, x: list[int], slope: list[int], axis: int, openvino: str
) -> None:
    ov = pytest.importorskip("openvino")
    from bcast.openvino.verify import verify_ir

    path, _ = _prelu_ir(tmp_path / "prelu.xml", x, slope)
    # OpenVINO reads it (its shape inference gives X's shape, never looking at the slope)...
    model = ov.Core().read_model(path)
    assert list(model.output(0).get_partial_shape().to_shape()) == x
    # ...and its CPU plugin rejects it.
    with pytest.raises(RuntimeError, match=openvino):
        ov.Core().compile_model(model, "CPU")
    report = bcast.check(path)
    (finding,) = report.findings
    assert (finding.severity.value, finding.node, finding.op) == ("error", "prelu", "PReLU")
    assert finding.axis == axis
    assert finding.kind == "unidirectional"
    assert "channel count (axis 1" in finding.reason
    (run,) = verify_ir(path).nodes
    assert run.results["bcast"].error is not None
    assert run.results["openvino"].error is not None
    assert run.comparisons["openvino"].agree  # both reject it


def test_ir_prelu_slope_larger_than_x_is_an_error_where_openvino_reads_part_of_it(
    tmp_path: Path,
) -> None:
    # X [3], slope [2,3]: the output is X's shape, so no rule fits the slope into it. OpenVINO
    # loads and runs it: its CPU plugin uses the slope's first row and ignores the rest.
    ov = pytest.importorskip("openvino")
    from bcast.openvino.verify import verify_ir

    path, values = _prelu_ir(tmp_path / "prelu.xml", [3], [2, 3])
    data = -np.ones(3, np.float32)
    theirs = ov.Core().compile_model(path, "CPU")([data])[0]
    np.testing.assert_allclose(theirs, data * values[0], rtol=1e-6)
    (finding,) = bcast.check(path).findings
    assert (finding.severity.value, finding.kind) == ("error", "unidirectional")
    (run,) = verify_ir(path).nodes
    assert run.results["bcast"].error is not None
    assert not run.comparisons["openvino"].agree
