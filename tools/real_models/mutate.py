"""Inject one broadcasting bug into a saved model file.

ONNX: an initializer is cut to a smaller shape (a prefix along each axis), nothing else in
the file changes.  OpenVINO IR: a ``Const`` layer gets a new shape; its data is the prefix
of the old data, appended to a copy of the ``.bin`` with ``offset``/``size`` pointing at it,
and the dims of its output port and of the consuming input ports are rewritten to match, so
the file is self-consistent up to the consumer (as if a converter had produced it).
"""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any


def onnx_initializer(src: Path, dst: Path, name: str, new_dims: list[int]) -> dict[str, Any]:
    """Cut initializer ``name`` to ``new_dims``; return what changed."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(src))
    for i, init in enumerate(model.graph.initializer):
        if init.name == name:
            arr = numpy_helper.to_array(init)
            assert arr.ndim == len(new_dims), (arr.shape, new_dims)
            cut = np.ascontiguousarray(arr[tuple(slice(0, d) for d in new_dims)])
            model.graph.initializer[i].CopyFrom(numpy_helper.from_array(cut, name))
            old = list(arr.shape)
            break
    else:
        raise KeyError(f"no initializer {name!r} in {src}")
    # the dynamo exporter also declares every initializer in value_info: keep that in step
    # (value_info of tensors computed from it is left as it was, as after hand editing)
    for vi in [*model.graph.value_info, *model.graph.input]:
        if vi.name == name:
            dims = vi.type.tensor_type.shape.dim
            del dims[:]
            for d in new_dims:
                dims.add().dim_value = d
    onnx.save(model, str(dst))
    return {"initializer": name, "old_shape": old, "new_shape": list(new_dims)}


_NP_TYPES = {"f32": "float32", "f16": "float16", "i64": "int64", "i32": "int32"}


def ir_const(src_xml: Path, dst_xml: Path, const_name: str, new_shape: list[int]) -> dict[str, Any]:
    """Give IR Const ``const_name`` the shape ``new_shape``; write dst .xml and .bin."""
    import numpy as np

    tree = ET.parse(src_xml)
    root = tree.getroot()
    layers = {lay.get("id"): lay for lay in root.iter("layer")}
    const = next(
        (
            lay
            for lay in layers.values()
            if lay.get("name") == const_name and lay.get("type") == "Const"
        ),
        None,
    )
    if const is None:
        raise KeyError(f"no Const {const_name!r} in {src_xml}")
    data = const.find("data")
    assert data is not None
    old_shape = [int(d) for d in data.get("shape", "").split(",") if d]
    dtype = np.dtype(_NP_TYPES[data.get("element_type", "f32")])
    src_bin = src_xml.with_suffix(".bin")
    dst_bin = dst_xml.with_suffix(".bin")
    shutil.copyfile(src_bin, dst_bin)
    blob = src_bin.read_bytes()
    off, size = int(data.get("offset", "0")), int(data.get("size", "0"))
    arr = np.frombuffer(blob[off : off + size], dtype=dtype).reshape(old_shape)
    cut = np.ascontiguousarray(arr[tuple(slice(0, d) for d in new_shape)])
    with open(dst_bin, "ab") as f:
        f.write(cut.tobytes())
    data.set("offset", str(len(blob)))
    data.set("size", str(cut.nbytes))
    data.set("shape", ",".join(str(d) for d in new_shape))

    def set_dims(port: ET.Element) -> None:
        for d in list(port.findall("dim")):
            port.remove(d)
        for v in new_shape:
            ET.SubElement(port, "dim").text = str(v)

    out_port = const.find("output/port")
    assert out_port is not None
    set_dims(out_port)
    consumers = []
    for e in root.iter("edge"):
        if e.get("from-layer") == const.get("id") and e.get("from-port") == out_port.get("id"):
            to = layers[e.get("to-layer")]
            for p in to.findall("input/port"):
                if p.get("id") == e.get("to-port"):
                    set_dims(p)
            consumers.append({"id": to.get("id"), "name": to.get("name"), "type": to.get("type")})
    tree.write(dst_xml, encoding="utf-8", xml_declaration=True)
    return {
        "const": const_name,
        "old_shape": old_shape,
        "new_shape": new_shape,
        "consumers": consumers,
    }
