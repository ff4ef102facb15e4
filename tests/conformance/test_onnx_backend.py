"""ONNX's own backend node tests for every bcast operator, run against `bcast.onnx.backend`.

``onnx.backend.test.BackendTest`` registers every node (and model) test of the installed onnx
twice, ``<name>_cpu`` and ``<name>_cuda``, and filters them with regexes that are
``re.search``-ed against that name. So the patterns are anchored (``test_max`` would also hit
``test_maxpool_*``) and case-sensitive with ``A-Z`` allowed (``test_gemm_transposeA``). Tests
that match no include pattern are left out of the collected classes, and so are the CUDA
variants (the backend is CPU only). See SEMANTICS.md §8 for the mechanics and the upstream
test list.
"""

from __future__ import annotations

import unittest
from pathlib import Path

import numpy as np
import onnx
import onnx.backend.test
import onnx.numpy_helper
import onnx.reference
import pytest

import bcast.onnx

# One entry per operator of DESIGN §1, by its ONNX name in test names.
OPERATORS = (
    "add",
    "sub",
    "mul",
    "div",
    "pow",
    "equal",
    "greater",
    "less",
    "and",
    "or",
    "xor",
    "max",
    "min",
    "mean",
    "sum",
    "where",
    "gemm",
    "prelu",
    "expand",
)

# The operators of issue 38 (ONNX opset 10+), by ONNX name -> the prefix of their test names.
NEW_OPERATORS = {
    "Mod": "mod",
    "BitShift": "bitshift",
    "BitwiseAnd": "bitwise_and",
    "BitwiseOr": "bitwise_or",
    "BitwiseXor": "bitwise_xor",
    "GreaterOrEqual": "greater_equal",
    "LessOrEqual": "less_equal",
    "QuantizeLinear": "quantizelinear",
    "DequantizeLinear": "dequantizelinear",
}

backend_test = onnx.backend.test.BackendTest(bcast.onnx.backend, __name__)
backend_test.include(rf"^test_({'|'.join(OPERATORS)})(_[A-Za-z0-9_]+)?_cpu$")
backend_test.include(rf"^test_({'|'.join(NEW_OPERATORS.values())})(_[A-Za-z0-9_]+)?_cpu$")
backend_test.include(r"^test_(and|or|xor)\d+d_cpu$")  # test_and2d, test_xor4d, ...
# The pytorch-operator category: models exported by PyTorch's ONNX exporter, several of them
# broadcasting (older opsets, some with the legacy broadcast=1 attribute).
backend_test.include(
    r"^test_operator_(add_broadcast|add_size1_broadcast|add_size1_right_broadcast"
    r"|add_size1_singleton_broadcast|max|min|pow)_cpu$"
)
# The pytorch-converted PRelu models (capital letters in their names), opset 6 with a slope
# of shape [1]: PRelu-6 says a slope "of size 1" is shared across channels, which is also
# the unidirectional broadcast of PRelu-7 and later. Their test_PReLU_{1,2,3}d_multiparam
# siblings (x [2,3,4...], slope [3]) stay out: PRelu-6 defines no rule for a slope of
# several elements (onnx.defs.get_schema("PRelu", 6) says only the size-1 case; the
# slope-on-axis-1 reading is the ONNX reference's fallback heuristic, onnxruntime has no
# PRelu-6 kernel, and the test data's slopes are all 0.25, so they cannot tell a rule
# apart); under the unidirectional rule [3] does not fit [..., 4] and bcast raises
# BroadcastError. See docs/peer-differences.md.
backend_test.include(r"^test_PReLU_[123]d_cpu$")
# Other operators whose names start with one of ours.
backend_test.exclude(r"^test_(maxpool|maxroipool|maxunpool|max_pool|mean_variance|sum_square)")
# Function-body variants run the decomposition (other operators), not ours.
backend_test.exclude(r"_expanded_cpu$")


def _selected_only(case: type[unittest.TestCase]) -> type[unittest.TestCase] | None:
    """A copy of one of BackendTest's classes holding only the tests the patterns select.

    BackendTest keeps every other node test of onnx (about 3,900) as a skip; collecting
    those would bury the tests that run under skips that say nothing about bcast. The CUDA
    variants go too: bcast.onnx.backend supports the CPU only.
    """
    kept = {
        name: getattr(case, name)
        for name in dir(case)
        if name.startswith("test_")
        and name.endswith("_cpu")
        and not getattr(getattr(case, name), "__unittest_skip__", False)
    }
    if not kept:
        return None
    return type(case.__name__, (unittest.TestCase,), kept)


for _name, _case in backend_test.test_cases.items():
    _filtered = _selected_only(_case)
    if _filtered is not None:
        globals()[_name] = _filtered
del _name, _case, _filtered  # a TestCase class left in globals would be collected whole

# The number of CPU tests the patterns above select with onnx 1.23.2: 149 node tests,
# test_expand_shape_model1..4 (Simple category), 7 pytorch-operator models and the 3
# pytorch-converted test_PReLU_{1,2,3}d. Obtained by counting the methods of
# `backend_test.test_cases` that end in `_cpu` and are not wrapped in unittest.skip (the
# function `selected_tests` below; test_selection_has_not_shrunk prints it), on 2026-11-23.
# A newer onnx may add tests; a drop means a pattern stopped matching, which must fail loudly.
SELECTED_FLOOR = 163


def selected_tests() -> list[str]:
    """Names of the CPU tests that the include/exclude patterns leave to run."""
    names = []
    for case in backend_test.test_cases.values():
        assert issubclass(case, unittest.TestCase)
        for name in dir(case):
            method = getattr(case, name)
            if (
                name.startswith("test_")
                and name.endswith("_cpu")
                and not getattr(method, "__unittest_skip__", False)
            ):
                names.append(name)
    return sorted(names)


def test_selection_has_not_shrunk() -> None:
    selected = selected_tests()
    print(f"ONNX backend conformance: {len(selected)} CPU tests selected")
    assert len(selected) >= SELECTED_FLOOR, selected


@pytest.mark.parametrize("operator", OPERATORS)
def test_every_operator_has_node_tests(operator: str) -> None:
    prefix = f"test_{operator}"
    assert any(
        name == f"{prefix}_cpu" or name.startswith((f"{prefix}_", f"{prefix}2", f"{prefix}3"))
        for name in selected_tests()
    )


def test_patterns_cover_exactly_the_backend_operators() -> None:
    supported = {op.lower() for op in bcast.onnx.backend.SUPPORTED_OPS}
    assert supported == set(OPERATORS) | {op.lower() for op in NEW_OPERATORS}


# The node tests of the issue-38 operators in onnx 1.23.2 (the _expanded function-body
# variants aside): 28 BitShift, 12 BitwiseAnd/Or/Xor, 8 GreaterOrEqual, 8 LessOrEqual,
# 19 Mod, 13 QuantizeLinear, 14 DequantizeLinear; counted with
# onnx.backend.test.case.node.collect_testcases on 2026-11-27.
NEW_NODE_TESTS = 102


def test_every_new_operator_node_test_is_selected() -> None:
    prefixes = tuple(f"test_{p}" for p in NEW_OPERATORS.values())
    selected = [n for n in selected_tests() if n.startswith(prefixes)]
    print(f"ONNX backend conformance, issue-38 operators: {len(selected)} CPU tests selected")
    assert len(selected) >= NEW_NODE_TESTS, selected


@pytest.mark.parametrize("rank", ["1d", "2d", "3d"])
def test_prelu6_multiparam_models_raise_where_the_reference_uses_its_channel_fallback(
    rank: str,
) -> None:
    # PRelu-6 defines a shared slope "of size 1" only; bcast applies the unidirectional rule
    # of PRelu-7+, under which a slope [3] does not fit x [2,3,4,...] (axis of the last dim).
    # The ONNX reference matches the 3 to x's axis 1 and reproduces the test data.
    folder = (
        Path(onnx.backend.test.__file__).parent
        / "data"
        / "pytorch-converted"
        / f"test_PReLU_{rank}_multiparam"
    )
    if not folder.is_dir():
        pytest.skip("this onnx build has no pytorch-converted test data")
    model = onnx.load(str(folder / "model.onnx"))
    assert [(o.domain, o.version) for o in model.opset_import] == [("", 6)]
    data = folder / "test_data_set_0"
    x = onnx.numpy_helper.to_array(onnx.load_tensor(str(data / "input_0.pb")))
    y = onnx.numpy_helper.to_array(onnx.load_tensor(str(data / "output_0.pb")))
    reference = onnx.reference.ReferenceEvaluator(model).run(None, {"0": x})[0]
    np.testing.assert_allclose(reference, y, rtol=1e-6)
    with pytest.raises(bcast.BroadcastError) as excinfo:
        bcast.onnx.backend.prepare(model).run([x])
    assert excinfo.value.axis == x.ndim - 1
