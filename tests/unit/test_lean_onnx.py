"""The model's worker reads ONNX with onnx's protobuf classes and C++ inference only.

`bcast._spawn.lean_onnx` spares the worker of ``bcast check`` onnx's package init and NumPy
(0.15 s of every check). These tests hold the reader to the same graph, bit for bit, as it
reads with the whole of onnx loaded, on every model fixture (the hostile ones included:
the same error, word for word), and hold bcast's own readings of protobuf values
(`bcast.onnx.protos`) to what ``onnx.helper`` and ``onnx.numpy_helper`` say.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from fresh_python import stdout_of
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from bcast.onnx import protos

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MODELS = sorted(
    str(p)
    for folder in ("real", "deployed", "real_fp16", "hostile")
    for p in (FIXTURES / folder).glob("*.onnx")
)

# Reads each model given on the command line and prints what came of each (the graph's
# digest, or the error), then whether NumPy or onnx's package init loaded. The first
# argument says whether the stand-in is installed first.
_READ_ALL = """
import hashlib, io, json, pickle, sys
from bcast._spawn import lean_onnx
lean = lean_onnx() if sys.argv[1] == "lean" else False
from bcast.models import ModelError
from bcast.onnx.reader import read_onnx
found = {}
for path in sys.argv[2:]:
    try:
        graph = read_onnx(path)
    except ModelError as err:
        found[path] = "error: " + str(err)
    else:
        out = io.BytesIO()
        pickler = pickle.Pickler(out, 5)
        pickler.fast = True  # no memo: the bytes say the values, not which objects are shared
        pickler.dump(graph)
        found[path] = hashlib.sha256(out.getvalue()).hexdigest()
onnx = sys.modules["onnx"]
print(json.dumps({"lean": lean, "numpy": "numpy" in sys.modules,
                  "whole onnx": "load" in vars(onnx), "found": found}))
"""


def _read_all(how: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _READ_ALL, how, *MODELS],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
        env={**os.environ, "PYTHONHASHSEED": "0"},  # sets of names pickle in one order
    )
    found: dict[str, object] = json.loads(done.stdout)
    return found


def test_every_model_reads_the_same_without_numpy_or_onnx_init() -> None:
    assert len(MODELS) > 80
    lean, whole = _read_all("lean"), _read_all("whole")
    assert lean["lean"] is True and whole["lean"] is False
    assert lean["numpy"] is False, "the lean reader loaded NumPy"
    assert lean["whole onnx"] is False, "the lean reader ran onnx's package init"
    assert whole["numpy"] is True and whole["whole onnx"] is True
    assert isinstance(lean["found"], dict) and isinstance(whole["found"], dict)
    differ = [p for p in MODELS if lean["found"][p] != whole["found"][p]]
    assert not differ, differ
    assert sum(str(v).startswith("error: ") for v in lean["found"].values()) >= 3  # hostile


def test_the_stand_in_becomes_the_whole_package_when_asked_for_more() -> None:
    code = (
        "import sys\n"
        "from bcast._spawn import lean_onnx\n"
        "assert lean_onnx() and not lean_onnx()  # once; then onnx is loaded\n"
        "import onnx\n"
        "assert onnx.ModelProto is onnx.onnx_ml_pb2.ModelProto\n"
        "assert 'numpy' not in sys.modules\n"
        "node = onnx.helper.make_node('Relu', ['x'], ['y'])  # a submodule: imported now\n"
        "assert 'load' not in vars(onnx)\n"
        "print(onnx.__version__, onnx.load is not None, type(node) is onnx.NodeProto)\n"
    )
    assert stdout_of(code).split() == [onnx.__version__, "True", "True"]


def test_nothing_is_replaced_where_onnx_is_loaded_already() -> None:
    from bcast._spawn import lean_onnx

    assert "onnx" in sys.modules
    whole = sys.modules["onnx"]
    assert lean_onnx() is False
    assert sys.modules["onnx"] is whole


def test_the_check_command_s_worker_is_the_lean_one() -> None:
    """``python -m bcast check`` preloads the stand-in (bcast._spawn.PRELOADS)."""
    from bcast._spawn import PRELOADS

    assert PRELOADS["onnx"][0] == "bcast._spawn:lean_onnx"


# -- bcast's readings of protobuf values, against onnx's helpers ---------------------------

TYPES = [v for v in TensorProto.DataType.values() if v != TensorProto.UNDEFINED]


@pytest.mark.parametrize("elem_type", TYPES, ids=TensorProto.DataType.Name)
def test_item_sizes_and_fields_are_onnx_s(elem_type: int) -> None:
    assert protos.ITEM_SIZES[elem_type] == helper.tensor_dtype_to_np_dtype(elem_type).itemsize
    assert protos.FIELDS[elem_type] == helper.tensor_dtype_to_field(elem_type)


def test_unknown_element_types_have_no_size() -> None:
    assert set(protos.ITEM_SIZES) == set(TYPES)
    assert TensorProto.UNDEFINED not in protos.ITEM_SIZES and 99 not in protos.ITEM_SIZES


_ATTRIBUTES = [
    helper.make_attribute("f", 0.5),
    helper.make_attribute("i", -3),
    helper.make_attribute("s", "nearest"),
    helper.make_attribute("t", numpy_helper.from_array(np.arange(3))),
    helper.make_attribute("g", helper.make_graph([], "g", [], [])),
    helper.make_attribute("floats", [1.5, 2.0]),
    helper.make_attribute("ints", [1, 0]),
    helper.make_attribute("strings", ["a", "b"]),
    helper.make_attribute("tensors", [numpy_helper.from_array(np.zeros(1))]),
    helper.make_attribute("graphs", [helper.make_graph([], "g", [], [])]),
    helper.make_attribute("tp", helper.make_tensor_type_proto(1, [2])),
    helper.make_attribute("tps", [helper.make_tensor_type_proto(7, None)]),
    helper.make_attribute("empty", [], attr_type=onnx.AttributeProto.INTS),
    onnx.AttributeProto(name="undefined"),
]


@pytest.mark.parametrize("attr", _ATTRIBUTES, ids=lambda a: a.name)
def test_attribute_values_are_onnx_helper_s(attr: onnx.AttributeProto) -> None:
    assert protos.attribute_value(attr) == helper.get_attribute_value(attr)


def test_a_reference_attribute_is_refused_in_onnx_s_words() -> None:
    attr = onnx.AttributeProto(name="r", ref_attr_name="alpha", type=onnx.AttributeProto.FLOAT)
    with pytest.raises(ValueError) as theirs:
        helper.get_attribute_value(attr)
    with pytest.raises(ValueError) as ours:
        protos.attribute_value(attr)
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize(
    "dims", [[], [3], [0], [2, "n", None], ["batch"]], ids=lambda d: str(d).replace(" ", "")
)
def test_types_and_value_infos_are_built_as_onnx_helper_builds_them(dims: list) -> None:
    assert protos.tensor_type(7, dims) == helper.make_tensor_type_proto(7, dims)
    assert protos.value_info("v", 1, dims) == helper.make_tensor_value_info("v", 1, dims)
    ours = protos.value_info("v", 1, dims).SerializeToString()
    assert ours == helper.make_tensor_value_info("v", 1, dims).SerializeToString()


def _numpy_reading(tensor: TensorProto) -> tuple[str, tuple[object, ...]] | None:
    """What the reader took from onnx.numpy_helper: kinds b, i, u, f, as Python scalars.

    A negative dim is no value (NumPy reads ``[-1]`` as "whatever the data holds").
    """
    if len(tensor.dims) > 1 or not 0 <= math.prod(tensor.dims) <= 64:
        return None
    try:
        array = np.asarray(numpy_helper.to_array(tensor)).reshape(-1)
    except (ValueError, TypeError, RuntimeError, KeyError):
        return None
    cast = {"b": bool, "i": int, "u": int, "f": float}.get(array.dtype.kind)
    if cast is None:
        return None
    return array.dtype.kind, tuple(cast(v) for v in array)


_STORED = {
    "float_data": st.floats(width=32),
    "double_data": st.floats(),
    "int64_data": st.integers(-(2**63), 2**63 - 1),
    "uint64_data": st.integers(0, 2**64 - 1),
    "int32_data": st.integers(-(2**31), 2**31 - 1),
}


@st.composite
def _tensors(draw: st.DrawFn) -> TensorProto:
    data_type = draw(st.sampled_from(TYPES))
    tensor = TensorProto(data_type=data_type)
    if draw(st.booleans()):
        tensor.dims.append(draw(st.integers(-1, 6)))
    count = max(math.prod(tensor.dims), 0) + draw(st.sampled_from([0, 0, 0, 1, -1]))
    if draw(st.booleans()) and data_type != TensorProto.STRING:
        size = protos.ITEM_SIZES[data_type] * max(count, 0) + draw(st.sampled_from([0, 0, 1]))
        tensor.raw_data = draw(st.binary(min_size=size, max_size=size))
    else:
        field = protos.FIELDS[data_type]
        values = _STORED.get(field, st.just(b"ab"))
        getattr(tensor, field).extend(draw(st.lists(values, min_size=max(count, 0),
                                                   max_size=max(count, 0))))  # fmt: skip
    return tensor


def _same(a: object, b: object) -> bool:
    if a is None or b is None:
        return a is b
    assert isinstance(a, tuple) and isinstance(b, tuple)
    return (
        a[0] == b[0]
        and len(a[1]) == len(b[1])
        and all(x == y or (x != x and y != y) for x, y in zip(a[1], b[1], strict=True))
    )


@settings(max_examples=1500, deadline=None)
@given(_tensors())
def test_small_values_are_read_as_numpy_helper_reads_them(tensor: TensorProto) -> None:
    protos._decoded.cache_clear()
    ours = protos.small_values(tensor)
    assert _same(ours, _numpy_reading(tensor)), (tensor, ours)
    if ours is not None:  # Python scalars, never NumPy's (the worker has no NumPy)
        assert all(type(v) in (bool, int, float) for v in ours[1])


def test_another_layout_of_onnx_is_loaded_whole(tmp_path: Path) -> None:
    """A future onnx without onnx_ml_pb2 (or its C++ module): nothing is half-loaded."""
    fake = tmp_path / "onnx"
    fake.mkdir()
    (fake / "__init__.py").write_text("WHOLE = True\n")
    code = (
        "import sys\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        "from bcast._spawn import lean_onnx\n"
        "assert lean_onnx() is False\n"
        "assert not [m for m in sys.modules if m == 'onnx' or m.startswith('onnx.')]\n"
        "import onnx\n"
        "print(onnx.WHOLE)\n"
    )
    assert stdout_of(code).strip() == "True"
