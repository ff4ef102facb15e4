"""Fuzzing ``bcast check`` and ``bcast verify`` with mutated models.

Seeds are the example models (``examples/build_models.py``): ONNX models and OpenVINO IR.
Mutations: byte flips, truncation, protobuf field changes (dims, element types, operator set
versions, attribute types and values, names), and IR XML changes (attribute values, element
types, dims, layer types). Every run must end with exit 0, 1 or 2, no traceback, within
generous time limits (hang guards, not timings). The budget is small in CI;
``BCAST_FUZZ_EXAMPLES=N`` runs N examples per test (see docs/errors.md).
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

from bcast.cli import main

EXAMPLES = int(os.environ.get("BCAST_FUZZ_EXAMPLES", "0"))
ROOT = Path(__file__).parent.parent.parent
LIMITS = ["--timeout", "30", "--max-memory", "1GiB"]


def budget(ci: int) -> settings:
    return settings(
        max_examples=EXAMPLES or ci,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )


@pytest.fixture(scope="module")
def seeds(tmp_path_factory) -> Path:
    pytest.importorskip("openvino")
    out = tmp_path_factory.mktemp("seeds")
    subprocess.run(
        [sys.executable, str(ROOT / "examples" / "build_models.py"), str(out)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return out


def _run(*args: str) -> None:
    result = CliRunner().invoke(main, [*args, *LIMITS], catch_exceptions=True)
    note(f"exit {result.exit_code}: {result.stderr[-500:]}")
    event(f"{args[0]} exit {result.exit_code}")
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert result.exit_code in (0, 1, 2)
    assert "Traceback" not in result.stdout + result.stderr
    if result.exit_code == 2 and args[0] == "check" and "--json" not in args:
        errors = [ln for ln in result.stderr.splitlines() if not ln.startswith("bcast: warning")]
        assert len(errors) == 1 and errors[0].startswith("bcast: "), result.stderr


# -- mutations -------------------------------------------------------------------------------


def _flip(data: bytes, rng: random.Random, count: int) -> bytes:
    raw = bytearray(data)
    for _ in range(count):
        if raw:
            raw[rng.randrange(len(raw))] = rng.randrange(256)
    return bytes(raw)


_INT_FIELDS = (
    lambda m, r: m.opset_import[0].__setattr__("version", r.choice([0, 1, 6, 7, 99, 2**40])),
    lambda m, r: m.__setattr__("ir_version", r.choice([0, 1, 3, 99, 2**40])),
)


def _mutate_proto(model: onnx.ModelProto, rng: random.Random) -> None:
    """Change one field of a node, a value info, an initializer or the imports."""
    graph = model.graph
    choice = rng.randrange(8)
    if choice == 0 and graph.node:
        node = rng.choice(graph.node)
        node.op_type = rng.choice(["Add", "Expand", "Gemm", "PRelu", "Where", "If", "Nope"])
    elif choice == 1 and graph.node:
        node = rng.choice(graph.node)
        attr = node.attribute.add()
        attr.name = rng.choice(["axis", "broadcast", "transA", "value", "then_branch"])
        attr.type = rng.choice([1, 2, 3, 4, 5, 6, 7, 8, 10, 11])
        attr.i = rng.choice([-1, 0, 1, 2**62])
    elif choice == 2:
        infos = [*graph.input, *graph.value_info, *graph.output]
        if infos:
            info = rng.choice(infos)
            dims = info.type.tensor_type.shape.dim
            if dims:
                dim = rng.choice(dims)
                dim.dim_value = rng.choice([0, 1, 3, 2**40, 2**62])
            info.type.tensor_type.elem_type = rng.choice([0, 1, 7, 9, 16, 40, 255])
    elif choice == 3 and graph.initializer:
        tensor = rng.choice(graph.initializer)
        if tensor.dims:
            tensor.dims[rng.randrange(len(tensor.dims))] = rng.choice([0, 1, 2**40, -1])
        tensor.data_type = rng.choice([1, 6, 7, 40])
    elif choice == 4 and graph.node:
        node = rng.choice(graph.node)
        if node.input:
            node.input[rng.randrange(len(node.input))] = rng.choice(
                [node.output[0] if node.output else "", "", "nosuch"]
            )
    elif choice == 5:
        rng.choice(_INT_FIELDS)(model, rng)
    elif choice == 6 and graph.node:
        del graph.node[rng.randrange(len(graph.node))]
    elif graph.node:
        graph.node.append(rng.choice(graph.node))


def _mutate_xml(text: str, rng: random.Random) -> str:
    """Change one attribute value, a dim, a type or an element of the IR XML."""
    choice = rng.randrange(5)
    if len(text) < 2:
        return text
    values = list(re.finditer(r'="([^"]*)"', text))
    if choice == 0 and values:
        match = rng.choice(values)
        new = rng.choice(["-1", "0", "999999999999", "pdpd", "Broadcast", "", "f32", "1,2,3"])
        return text[: match.start(1)] + new + text[match.end(1) :]
    if choice == 1:
        dims = list(re.finditer(r"<dim>([^<]*)</dim>", text))
        if dims:
            match = rng.choice(dims)
            new = rng.choice(["-1", "0", "33554432", "1..", "?", "x", "2..1"])
            return text[: match.start(1)] + new + text[match.end(1) :]
    types = list(re.finditer(r'type="([^"]*)"', text))
    if choice == 2 and types:
        match = rng.choice(types)
        new = rng.choice(["Add", "Broadcast", "Parameter", "Const", "Select", "Reshape"])
        return text[: match.start(1)] + new + text[match.end(1) :]
    if choice == 3:
        cut = rng.randrange(len(text))
        return text[:cut]
    lines = text.splitlines()
    index = rng.randrange(len(lines))
    return "\n".join(lines[:index] + lines[index + 1 :])


ONNX_SEEDS = ["block.onnx", "block_broken.onnx", "broken_gemm.onnx", "huge_expand.onnx"]
IR_SEEDS = ["pdpd_subtract.xml", "pdpd_no_axis.xml"]


@budget(25)
@given(
    seed_name=st.sampled_from(ONNX_SEEDS),
    how=st.sampled_from(["flip", "truncate", "proto", "proto", "proto"]),
    rng_seed=st.integers(0, 2**32),
    mutations=st.integers(1, 4),
)
def test_check_of_mutated_onnx(seeds, tmp_path_factory, seed_name, how, rng_seed, mutations):
    rng = random.Random(rng_seed)
    data = (seeds / seed_name).read_bytes()
    if how == "flip":
        data = _flip(data, rng, mutations)
    elif how == "truncate":
        data = data[: rng.randrange(len(data))]
    else:
        model = onnx.ModelProto()
        model.ParseFromString(data)
        for _ in range(mutations):
            _mutate_proto(model, rng)
        data = model.SerializeToString()
    path = tmp_path_factory.mktemp("m") / "m.onnx"
    path.write_bytes(data)
    _run("check", str(path))
    if rng.random() < 0.2:
        _run("verify", str(path), "--runtime", "onnxruntime")


@budget(15)
@given(
    seed_name=st.sampled_from(IR_SEEDS),
    rng_seed=st.integers(0, 2**32),
    mutations=st.integers(1, 3),
)
def test_check_and_verify_of_mutated_ir(seeds, tmp_path_factory, seed_name, rng_seed, mutations):
    rng = random.Random(rng_seed)
    text = (seeds / seed_name).read_text()
    for _ in range(mutations):
        text = _mutate_xml(text, rng)
    folder = tmp_path_factory.mktemp("ir")
    (folder / "m.xml").write_text(text)
    (folder / "m.bin").write_bytes((seeds / seed_name).with_suffix(".bin").read_bytes())
    _run("check", str(folder / "m.xml"))
    if rng.random() < 0.3:
        _run("verify", str(folder / "m.xml"))
