"""The domain decided as integer sets by isl (issue 37 item 2), not by trying sizes.

Expected values are worked out by hand from the arithmetic (``2*((H - 1)//2 + 1) == H``
exactly when H is even) or come from onnxruntime and NumPy running the sizes; each test
names a set that a bounded search (sizes up to 4096, or a 256 x 256 grid) would get wrong or
could not say: a congruence, a failure past 32768, an unbounded range.
"""

from __future__ import annotations

import numpy as np
import pytest
from fresh_python import stdout_of
from hypothesis import given, settings
from hypothesis import strategies as st

import bcast
from bcast.core.expressions import parse_expression
from bcast.core.shape import Shape
from bcast.models import Graph
from bcast.models.condition_sets import never_below, space_of
from bcast.models.domain import ArithmeticRecord
from bcast.models.domain_solve import solve_domain

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

F = TensorProto.FLOAT


def _e(text: str) -> object:
    found = parse_expression(text)
    assert found is not None
    return found


def _model(nodes, inputs, outputs, inits=(), value_info=()):
    graph = helper.make_graph(nodes, "m", inputs, outputs, list(inits), value_info=value_info)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _runs(model, feeds) -> str | None:
    """Run ``model`` in onnxruntime, unoptimised; None if it runs, else its error."""
    options = ort.SessionOptions()
    options.log_severity_level = 4
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        session = ort.InferenceSession(
            model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
        session.run(None, feeds)
    except Exception as err:  # onnxruntime's own error types
        return str(err)
    return None


# -- a congruence ------------------------------------------------------------------------------


def test_a_stride_2_round_trip_makes_the_height_a_multiple_of_2() -> None:
    # A U-Net level: Conv stride 2 then ConvTranspose stride 2 gives 2*((H - 1)//2 + 1),
    # which equals H exactly when H is even (H = 2k: 2k; H = 2k + 1: 2k + 2).
    graph = Graph("m.onnx", "onnx", shapes={"x": Shape.parse("[H]")})
    up = ArithmeticRecord("up", "ConvTranspose", _e("2*((H - 1)//2 + 1)"), "==", _e("H"))
    domain = solve_domain(graph, [up], {})
    (h,) = domain.dims
    assert (h.sizes, h.congruence) == (((2, None),), (2, 0))
    assert h.text == "2, 4, 6, ... (multiples of 2)"
    assert h.to_json()["condition"] == "H is a multiple of 2"
    # torch.export's derived dim (torch.export.Dim docs: "dx = Dim('dx'); 2*dx")
    assert domain.torch_lines()[:2] == ['_H = Dim("_H", min=1)', "H = 2*_H"]
    for size in (2, 4, 4096, 4098, 10**9):
        assert domain.first_failure({"H": size}) is None
    for size in (1, 3, 4097, 10**9 + 1):
        assert domain.first_failure({"H": size}) is not None


def test_a_unet_skip_add_runs_for_1_and_the_even_heights_as_onnxruntime_says() -> None:
    # x [1,1,H,8] -> Conv k3 s2 p1 -> ConvTranspose k2 s2 -> + x. The upsampled height is
    # 2*((H - 1)//2 + 1): H when H is even; at H = 1 it is 2 and broadcasts with x's 1.
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], "down", strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("ConvTranspose", ["c", "wt"], ["u"], "up", strides=[2, 2]),
        helper.make_node("Add", ["x", "u"], ["y"], "skip"),
    ]
    x = helper.make_tensor_value_info("x", F, [1, 1, "H", 8])
    y = helper.make_tensor_value_info("y", F, None)
    inits = [
        numpy_helper.from_array(rng.random((1, 1, 3, 3), np.float32), "w"),
        numpy_helper.from_array(rng.random((1, 1, 2, 2), np.float32), "wt"),
    ]
    model = _model(nodes, [x], [y], inits)
    domain = bcast.check(model).domain
    height = domain.dim("H")
    assert height is not None and height.text == "1; 2, 4, 6, ... (multiples of 2)"
    for h in (1, 2, 3, 25, 26, 27, 28, 4097, 4098):
        error = _runs(model, {"x": np.ones((1, 1, h, 8), np.float32)})
        failure = domain.first_failure({"H": h})
        assert (error is None) == (failure is None), (h, error, failure)
        assert error is None or "skip" in error


# -- past any bound a search would use -----------------------------------------------------------


def _add(first: list, second: list) -> onnx.ModelProto:
    nodes = [helper.make_node("Add", ["a", "b"], ["y"], "add")]
    a = helper.make_tensor_value_info("a", F, first)
    b = helper.make_tensor_value_info("b", F, second)
    return _model(nodes, [a, b], [helper.make_tensor_value_info("y", F, None)])


@pytest.mark.parametrize("cap", [64, 5000, 100_000])
def test_a_cap_is_found_wherever_it_lies(cap: int) -> None:
    # NumPy: (s,) with (Min(cap, s),) broadcast up to s = cap and not at cap + 1.
    np.broadcast_shapes((cap,), (min(cap, cap),))
    with pytest.raises(ValueError):
        np.broadcast_shapes((cap + 1,), (min(cap, cap + 1),))
    report = bcast.check(_add(["s"], [f"Min({cap}, s)"]))
    (found,) = report.findings
    assert found.reason.startswith(f"fails when s > {cap}: ")
    assert "checked" not in found.reason
    assert report.domain.dim("s").text == f"1..{cap}"


# -- relations between dims ------------------------------------------------------------------------


def test_a_kv_cache_length_must_be_past_plus_seq_as_onnxruntime_says() -> None:
    # The keys are Concat(past, new) on axis 1: past + seq rows; a mask of `total` rows is
    # added to them: total must equal past + seq (or be 1).
    nodes = [
        helper.make_node("Concat", ["past", "new"], ["keys"], "cat", axis=1),
        helper.make_node("Add", ["keys", "mask"], ["y"], "mask_add"),
    ]
    inputs = [
        helper.make_tensor_value_info("past", F, [1, "past", 4]),
        helper.make_tensor_value_info("new", F, [1, "seq", 4]),
        helper.make_tensor_value_info("mask", F, [1, "total", 4]),
    ]
    keys = helper.make_tensor_value_info("keys", F, [1, "past + seq", 4])
    model = _model(nodes, inputs, [helper.make_tensor_value_info("y", F, None)], (), [keys])
    domain = bcast.check(model).domain
    (tie,) = [r for r in domain.relations if set(r.dims) == {"past", "seq", "total"}]
    assert tie.decided and tie.condition
    for past, seq, total in [(5, 3, 7), (5, 3, 8), (5, 3, 1), (5, 3, 9), (1, 1, 2), (7, 1, 8)]:
        feeds = {
            "past": np.ones((1, past, 4), np.float32),
            "new": np.ones((1, seq, 4), np.float32),
            "mask": np.ones((1, total, 4), np.float32),
        }
        error = _runs(model, feeds)
        failure = domain.first_failure({"past": past, "seq": seq, "total": total})
        assert (error is None) == (failure is None), (past, seq, total, error)


def test_an_arithmetic_relation_is_said_in_words_and_decided() -> None:
    graph = Graph("m.onnx", "onnx", shapes={"k": Shape.parse("[past,seq,total]")})
    cat = ArithmeticRecord("cat", "Concat", _e("total"), "==", _e("past + seq"))
    domain = solve_domain(graph, [cat], {})
    (tie,) = domain.relations
    assert (tie.kind, tie.text, tie.decided) == ("holds", "total must equal past + seq", True)
    assert domain.first_failure({"past": 5, "seq": 3, "total": 7}).node == "cat"
    assert domain.first_failure({"past": 5, "seq": 3, "total": 8}) is None
    # past and seq alone may be any size; total = past + seq is at least 2.
    assert [(d.name, d.text) for d in domain.dims] == [
        ("past", "any"),
        ("seq", "any"),
        ("total", "2.."),
    ]


# -- ranges: set inclusion, bounded or not ------------------------------------------------


def test_an_unbounded_range_is_proved_or_refuted_exactly() -> None:
    model = _add(["s"], ["Min(100000, s)"])
    (inside,) = bcast.check(model, dims={"s": (1, 100_000)}).findings or (None,)
    assert inside is None  # every s in 1..100000 runs: the condition goes
    (outside,) = bcast.check(model, dims={"s": "1.."}).findings
    assert outside.kind == "fails-in-range"
    assert outside.reason.startswith("fails at s=100001, inside --dim s=1..")
    never = _add(["s"], ["Max(1, s)"])  # s with Max(1, s) = s: equal for every size
    assert [f.kind for f in bcast.check(never, dims={"s": "7.."}).findings] == []


# -- products of dims ------------------------------------------------------------------------------


def test_a_product_against_a_constant_is_split_over_its_divisors() -> None:
    graph = Graph("m.onnx", "onnx", shapes={"x": Shape.parse("[a,b]")})
    flat = ArithmeticRecord("flat", "Reshape", _e("a*b"), "==", _e("12"))
    domain = solve_domain(graph, [flat], {})
    # a*b = 12 with a, b >= 1: a divides 12.
    assert domain.dim("a").text == "1..4, 6, 12"
    (tie,) = domain.relations
    pairs = [(a, b) for (a, _), ((b, _),) in tie.boxes]
    assert tie.decided and pairs == [(1, 12), (2, 6), (3, 4), (4, 3), (6, 2), (12, 1)]


def test_a_product_against_a_product_is_said_undecided_as_a_set() -> None:
    graph = Graph("m.onnx", "onnx", shapes={"x": Shape.parse("[a,b,c,d]")})
    counts = ArithmeticRecord("r", "Reshape", _e("a*b*32"), "==", _e("c*d"))
    domain = solve_domain(graph, [counts], {})
    (tie,) = domain.relations
    assert not tie.decided and not tie.condition
    assert any("not decided as a set" in line for line in domain.lines())
    assert tie.to_json()["decided_as_set"] is False
    assert domain.first_failure({"a": 2, "b": 3, "c": 12, "d": 16}) is None  # 192 = 192
    assert domain.first_failure({"a": 2, "b": 3, "c": 12, "d": 15}).node == "r"


def test_a_product_against_a_product_of_its_floors_holds_where_each_factor_divides() -> None:
    # A window partition's counts: 16*a*b elements into 256*(a//4)*(b//4). a//4 <= a/4, so
    # the two are equal exactly where 4 divides a and b: a set, each dim's own.
    graph = Graph("m.onnx", "onnx", shapes={"x": Shape.parse("[a,b]")})
    counts = ArithmeticRecord("r", "Reshape", _e("16*a*b"), "==", _e("256*(a//4)*(b//4)"))
    domain = solve_domain(graph, [counts], {})
    assert domain.dim("a").congruence == (4, 0) and domain.dim("a").sizes == ((4, None),)
    assert not domain.relations  # it says nothing the dims' sizes do not
    for a in range(1, 41):
        for b in (1, 3, 4, 8, 9, 12):
            equal = 16 * a * b == 256 * (a // 4) * (b // 4)
            assert (domain.first_failure({"a": a, "b": b}) is None) is equal, (a, b)


def test_a_padded_window_partition_holds_everywhere_and_is_not_said() -> None:
    # Padded to a multiple of 7 first: (h + (7 - h % 7) % 7) is 7 times its //7, always.
    padded = "(h + (7 - h % 7) % 7)"
    graph = Graph("m.onnx", "onnx", shapes={"x": Shape.parse("[h,w]")})
    counts = ArithmeticRecord("r", "Reshape", _e(f"8*{padded}*w"), "==", _e(f"56*({padded}//7)*w"))
    domain = solve_domain(graph, [counts], {})
    assert domain.dim("h").text == "any" and not domain.relations
    assert all(domain.first_failure({"h": h, "w": 3}) is None for h in range(1, 50))


def test_products_whose_factors_do_not_pair_stay_undecided_as_a_set() -> None:
    # h*w == 12*(h//2): h = 2m gives w = 6, h = 3 gives w = 4: no ratio per dim says it
    graph = Graph("m.onnx", "onnx", shapes={"x": Shape.parse("[h,w]")})
    counts = ArithmeticRecord("r", "Reshape", _e("h*w"), "==", _e("12*(h//2)"))
    domain = solve_domain(graph, [counts], {})
    (tie,) = domain.relations
    assert not tie.decided
    assert domain.first_failure({"h": 3, "w": 4}) is None
    assert domain.first_failure({"h": 4, "w": 6}) is None
    assert domain.first_failure({"h": 4, "w": 4}).node == "r"


def test_a_product_over_ranges_is_decided_by_z3() -> None:
    # Not Presburger sets: z3 decides them over the --dim ranges, bounded or not.
    from bcast.models.ranges import decide

    graph = Graph("m.onnx", "onnx", shapes={"x": Shape.parse("[a,b,c,d]")})
    counts = ArithmeticRecord("r", "Reshape", _e("a*b*32"), "==", _e("c*d"))
    rows = ArithmeticRecord("g", "Gather", _e("a"), "<=", _e("a*b"))  # b >= 1: always
    domain = solve_domain(graph, [counts, rows], {})
    assert not any(r.decided for r in domain.relations)
    decision = decide(domain, {"a": (1, 4), "b": (1, 4), "c": (1, 8), "d": (1, None)})
    assert decision.proven == {"g"}
    point = decision.failing["r"][1]
    assert point["a"] * point["b"] * 32 != point["c"] * point["d"]  # it does fail there
    assert 1 <= point["a"] <= 4 and 1 <= point["b"] <= 4 and 1 <= point["c"] <= 8


def test_a_one_dim_requirement_that_is_not_a_set_is_said_not_hidden() -> None:
    # s with s*s: NumPy broadcasts (1,) with (1,) only; at s = 2, (2,) with (4,) fails.
    np.broadcast_shapes((1,), (1,))
    with pytest.raises(ValueError):
        np.broadcast_shapes((2,), (4,))
    domain = bcast.check(_add(["s"], ["s*s"])).domain
    (said,) = domain.relations
    assert said.dims == ("s",) and not said.decided
    assert domain.first_failure({"s": 2}) is not None and domain.first_failure({"s": 1}) is None


def test_sizes_of_several_residues_are_said_residue_by_residue() -> None:
    # Two stride-2 levels: (h - 1)//2 + 1 rows against 2*((h - 1)//2//2 + 1). NumPy decides
    # each h; the sizes that broadcast are h % 4 in {0, 3}, and h = 1, 2 (a row of 1).
    def runs(h: int) -> bool:
        try:
            np.broadcast_shapes(((h - 1) // 2 + 1,), (2 * ((h - 1) // 2 // 2 + 1),))
        except ValueError:
            return False
        return True

    assert {h for h in range(1, 400) if runs(h)} == {
        h for h in range(1, 400) if h % 4 in (0, 3) or h in (1, 2)
    }
    report = bcast.check(_add(["(h - 1)//2 + 1"], ["2*((h - 1)//2//2 + 1)"]))
    (found,) = report.findings
    assert found.reason.startswith("fails unless h % 4 ∈ {0, 3} or h = 1 or h = 2: ")
    assert report.domain.dim("h").text == "h % 4 ∈ {0, 3} or h = 1 or h = 2"
    assert not report.domain.dim("h").exact


_PLAIN = st.one_of(
    st.just("s"),
    st.integers(0, 70).map(str),
    st.builds(
        lambda op, args: f"{op}(s, {', '.join(args)})",
        st.sampled_from(["Min", "Max"]),
        st.lists(st.one_of(st.just("s"), st.integers(0, 70).map(str)), min_size=1, max_size=2),
    ),
)


@settings(max_examples=300, deadline=None)
@given(_PLAIN, _PLAIN)
def test_never_below_answers_as_isl_where_it_skips_isl(big: str, small: str) -> None:
    """Min(64, s) against s is answered without loading isl; the answer is isl's."""
    a, b = parse_expression(big), parse_expression(small)
    assert a is not None and b is not None
    if len(a.symbols | b.symbols) != 1 or a == b:
        return
    space = space_of(("s",))
    below = space.sizes.subtract(space.compare(a, ">=", b))  # sizes where a < b: isl
    assert never_below(a, b) is below.is_empty()


def test_a_truncated_position_length_is_ordered_without_loading_isl() -> None:
    """BERT's and GPT-2's ``Min(64, seq)`` beside ``seq``: the model's worker reads it
    without importing islpy (12 ms of every such check)."""
    code = (
        "import sys\n"
        "from bcast.core.expressions import parse_expression as p\n"
        "from bcast.models.condition_sets import never_below\n"
        "assert never_below(p('seq'), p('Min(64, seq)'))\n"
        "assert not never_below(p('Min(64, seq)'), p('seq'))\n"
        "assert not never_below(p('Min(seq, 8)'), p('Max(seq, 3)'))\n"
        "print('islpy' in sys.modules)\n"
    )
    assert stdout_of(code).strip() == "False"


def test_a_reshape_count_of_pooled_dims_is_written_as_the_product_it_is() -> None:
    # Pool 2x2 then flatten to 12: ((H - 2)//2 + 1)*((W - 2)//2 + 1) must equal 12. The
    # factors are sums: written without their parentheses the text said another number.
    nodes = [
        helper.make_node("MaxPool", ["x"], ["p"], "pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Reshape", ["p", "t"], ["y"], "flat"),
    ]
    x = helper.make_tensor_value_info("x", F, [1, 1, "H", "W"])
    t = numpy_helper.from_array(np.array([1, 12], np.int64), "t")
    model = _model(nodes, [x], [helper.make_tensor_value_info("y", F, None)], [t])
    (tie,) = bcast.check(model).domain.relations
    left = tie.text.removesuffix(" must equal 12")
    said = _e(left)
    for h, w in [(4, 12), (6, 8), (9, 9), (5, 23)]:
        assert said.evaluate({"H": h, "W": w}) == (h // 2) * (w // 2), (h, w, left)
