"""``check``, ``domain`` and ``verify`` on what people deploy (issue 37, item 7).

The fixtures in ``tests/fixtures/deployed/`` were made by ``tools/real_models/deployed.py``:
onnxruntime-quantized (QDQ, QOperator, dynamic, MatMulNBits and blocked DequantizeLinear),
onnxruntime transformer-optimizer output, NNCF int8/int4 weight-compressed and FakeQuantize
OpenVINO IR, a GPT-2 with a KV cache, two U-Nets and a segmentation net with dynamic H/W, a
diffusers UNet and VAE decoder, SSDlite, LSTM/GRU, Mamba, an onnxscript model with
model-local functions, nn.MultiheadAttention by the TorchScript exporter, opsets 7 to 23.
Each mutant carries one bug whose node is known from its construction and which the
runtimes reject (``rejected_by`` in the manifest, measured).

Domain probes run the runtime itself (onnxruntime for ONNX, OpenVINO for IR) in a child
process with a timeout, just inside and just outside every range bcast's domain prints, at
sizes 1, 3 and 65 of every dim it calls "any", and at the manifest's probe points, and
compare with bcast's verdict at that point (``Domain.first_failure``); ``check`` with the
dims bound to each probe point (the ``--dim`` path) must have an error exactly where the
runtime failed (its verdict measured by deployed.py, in the manifest's ``probe_results``).
None of the expectations comes from bcast.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import bcast
from bcast.models import Severity

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "tests" / "fixtures" / "deployed"
PROBE = ROOT / "tools" / "real_models" / "probe.py"
MANIFEST: dict[str, Any] = json.loads((HERE / "manifest.json").read_text())
FILES: dict[str, Any] = MANIFEST["files"]

# What bcast still gets wrong on the corpus (issue 37), each measured, with its reason: the
# test fails without its mark, and a strict xfail fails loudly once the fix lands. None is
# open now (the last ones were fixed on 2026-11-27); a new fixture that finds one adds it here.
XFAIL_VALID: dict[str, str] = {}
XFAIL_MUTANT: dict[str, str] = {}
XFAIL_PROBE: dict[str, str] = {}
XFAIL_VERIFY: dict[str, str] = {}
XFAIL_DIM: dict[tuple[str, int], str] = {}  # (file, index in probe_results)

# The com.microsoft ops issue 37 item 5 asks bcast to model; any other op outside the ONNX
# standard must be listed in coverage as not modelled.
MICROSOFT_MODELLED = {
    "Attention",
    "MultiHeadAttention",
    "GroupQueryAttention",
    "SkipLayerNormalization",
    "SkipSimplifiedLayerNormalization",
    "EmbedLayerNormalization",
    "BiasGelu",
    "FastGelu",
    "BiasAdd",
    "FusedMatMul",
    "QAttention",
    "MatMulNBits",
    "RotaryEmbedding",
    "QLinearAdd",
    "QLinearMul",
    "DynamicQuantizeMatMul",
}


def _param(name: str, marks: dict[str, str]) -> Any:
    reason = marks.get(name)
    mark = [pytest.mark.xfail(strict=True, reason=f"issue 37: {reason}")] if reason else []
    return pytest.param(name, id=name, marks=mark)


VALID = [n for n, e in FILES.items() if e["kind"] == "valid"]
MUTANTS = [n for n, e in FILES.items() if e["kind"] == "mutant"]


def _needs(name: str) -> None:
    if name.endswith(".xml"):
        pytest.importorskip("openvino")


def test_the_corpus_is_the_one_described() -> None:
    # Every kind of the first paragraph is here, every file is the one the manifest
    # hashed, the mutants (24 or more) are each rejected by a runtime, and it stays small.
    import hashlib

    total = 0
    for entry in FILES.values():
        for f in entry["files"]:
            data = (HERE / f["path"]).read_bytes()
            assert hashlib.sha256(data).hexdigest() == f["sha256"], f["path"]
            total += len(data)
    assert total < 8_000_000
    assert len(MUTANTS) >= 24
    runtime = ("ort.session", "ort.run", "ov.read_model", "ov.compile_model", "ov.infer")
    for name in MUTANTS:
        assert set(FILES[name]["rejected_by"]) & set(runtime), name
    for name in VALID:  # the valid files run at their default sizes
        peers = FILES[name]["peers"]
        ran = "ov.infer" if name.endswith(".xml") else "ort.run"
        assert peers[ran]["verdict"] == "pass", (name, peers[ran])
    opsets = {
        o.version
        for n in VALID
        if n.endswith(".onnx")
        for o in onnx.load(HERE / n, load_external_data=False).opset_import
        if o.domain in ("", "ai.onnx")
    }
    assert min(opsets) <= 7 and max(opsets) >= 23


def _all_nodes(graph: Any, functions: dict[tuple[str, str], Any]) -> list[Any]:
    """Every node of a graph, its subgraphs (If/Loop/Scan) and the functions it calls."""
    out: list[Any] = []

    def walk(nodes: Any) -> None:
        for node in nodes:
            out.append(node)
            for attr in node.attribute:
                for g in [attr.g] if attr.HasField("g") else list(attr.graphs):
                    walk(g.node)
            if (node.domain, node.op_type) in functions:  # each call: its own nodes
                walk(functions[node.domain, node.op_type].node)

    walk(graph.node)
    return out


def _microsoft_modelled() -> set[str]:
    """Item 5's ops, and those bcast says it has a rule for (its rule tables)."""
    from bcast.models.rules_microsoft import MICROSOFT_RULES
    from bcast.models.rules_quant import MICROSOFT_QUANT_RULES

    return MICROSOFT_MODELLED | set(MICROSOFT_RULES) | set(MICROSOFT_QUANT_RULES)


def _unmodelled_expected(path: Path) -> set[str]:
    """Nodes that are neither ONNX standard ops, model-local functions nor modelled ops."""
    model = onnx.load(path)
    functions = {(f.domain, f.name): f for f in model.functions}
    names = set()
    for node in model.graph.node:
        if (node.domain, node.op_type) in functions or node.domain in ("", "ai.onnx"):
            continue
        if node.domain == "com.microsoft" and node.op_type in _microsoft_modelled():
            continue
        names.add(node.name)
    return names


@pytest.mark.parametrize("name", [_param(n, XFAIL_VALID) for n in VALID])
def test_a_valid_deployed_model_has_no_error_and_says_what_it_does_not_model(name: str) -> None:
    _needs(name)
    report = bcast.check(HERE / name)
    errors = [(f.node, f.reason) for f in report.findings if f.severity is Severity.ERROR]
    assert errors == []
    data = report.to_json()
    assert data["error"] is None
    unmodelled = {u["node"] for u in data["coverage"]["unmodelled"]}
    if name.endswith(".onnx"):
        model = onnx.load(HERE / name)
        functions = {(f.domain, f.name): f for f in model.functions}
        # every node is counted, in If/Loop bodies and in each call of a function too, and
        # every element-wise broadcasting node among them: none is silently dropped
        assert data["nodes"] == len(_all_nodes(model.graph, functions))
        assert data["coverage"]["broadcasting_nodes"] >= len(_broadcasting_nodes(name))
        assert _unmodelled_expected(HERE / name) <= unmodelled


def _at(node: str, expected: str) -> bool:
    # A node inside a model-local function is named by its call path: "call/Fn/inner".
    return node == expected or node.startswith(f"{expected}/")


@pytest.mark.parametrize("name", [_param(n, XFAIL_MUTANT) for n in MUTANTS])
def test_every_deployed_mutant_is_reported_at_its_node_without_running(name: str) -> None:
    # Reported at its node; and, with the dynamic dims bound to the sizes the runtimes ran
    # (where they reject it), an error there. A bug that only some sizes reach (a skip off
    # by one fails for height > 1) may be a warning while the dims are free.
    _needs(name)
    entry = FILES[name]
    expected = entry["expected"]["node"]
    report = bcast.check(HERE / name)
    loud = [f for f in report.findings if f.severity is not Severity.INFO]
    assert any(_at(f.node, expected) for f in loud), [(f.node, f.reason) for f in loud]
    dims = {d: entry["defaults"][d] for d in set(_dims_of(entry).values())}
    bound = bcast.check(HERE / name, dims=dims) if name.endswith(".onnx") else report
    assert not bound.ok
    errors = [f for f in bound.findings if f.severity is Severity.ERROR]
    assert any(_at(f.node, expected) for f in errors), [(f.node, f.reason) for f in errors]


def _dims_of(entry: dict[str, Any]) -> dict[str, str]:
    """bcast's name of each dynamic input dim -> the manifest's name of that dim."""
    out = {}
    for inp, spec in entry["inputs"].items():
        for axis, d in enumerate(spec["shape"]):
            if isinstance(d, str):
                out[d] = d  # ONNX dim_param
                out[f"{inp}.{axis}"] = d  # OpenVINO IR: bcast names a dim by input and axis
    return out


# Sizes tried on a dim bcast says is "any": the smallest, an odd one, one past a power of 2.
ANY = (1, 3, 65)


def _points(entry: dict[str, Any], domain: Any) -> list[dict[str, int]]:
    """The manifest's probe points, just inside / just outside every range printed, and a
    few sizes of every dim said to be "any"."""
    names = _dims_of(entry)
    points = [dict(p) for p in entry.get("probes", [])]
    for dim in domain.dims:
        if dim.name not in names or not dim.sizes:
            continue
        ours = names[dim.name]
        parts = list(dim.sizes)
        if parts == [(1, None)] and not getattr(dim, "congruence", None):
            points += [{ours: v} for v in ANY]
            continue
        edges: set[int] = set()
        for lo, hi in parts[:2] + parts[-1:]:
            edges |= {lo, lo - 1}
            if hi is not None:
                edges |= {hi, hi + 1}
        if congruence := getattr(dim, "congruence", None):  # "a multiple of m": m apart too
            nxt = parts[0][0] + congruence[0]
            edges |= {nxt - 1, nxt, nxt + 1}
        points += [{ours: v} for v in sorted(edges) if 1 <= v <= 4096]
    unique = {json.dumps(p, sort_keys=True): p for p in points}  # IR: one dim, two names
    return list(unique.values())


def _runtime(name: str, entry: dict[str, Any], points: list[dict[str, int]]) -> list[Any]:
    cmd = [
        sys.executable,
        str(PROBE),
        str(HERE / name),
        json.dumps(entry["inputs"]),
        json.dumps(entry["defaults"]),
        json.dumps(points),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return list(json.loads(proc.stdout.strip().splitlines()[-1]))


PROBED = VALID


@pytest.mark.parametrize("name", [_param(n, XFAIL_PROBE) for n in PROBED])
def test_the_domain_agrees_with_the_runtime_just_inside_and_just_outside(name: str) -> None:
    _needs(name)
    entry = FILES[name]
    report = bcast.check(HERE / name)
    points = _points(entry, report.domain)
    if not points:
        return  # every dim "any" and no probe point: nothing printed to probe
    wrong = []
    for result in _runtime(name, entry, points):
        sizes = {**entry["defaults"], **result["point"]}
        bindings = {ours: sizes[d] for ours, d in _dims_of(entry).items()}
        ours = report.domain.first_failure(bindings)
        if (ours is None) != result["runs"]:
            wrong.append((result["point"], str(ours), (result["message"] or "runs")[:200]))
    assert wrong == []


VERIFIED = [n for n in ("onnxscript_functions.onnx", "ssdlite_torchscript.onnx") if n in FILES]


def _broadcasting_nodes(name: str) -> list[str]:
    """Names of the element-wise broadcasting nodes, in bodies and functions too (by spec)."""
    ops = {
        "Add",
        "Sub",
        "Mul",
        "Div",
        "Pow",
        "Where",
        "Equal",
        "Less",
        "Greater",
        "And",
        "Or",
        "Max",
        "Min",
        "Mod",
        "PRelu",
        "Expand",
        "LessOrEqual",
        "GreaterOrEqual",
    }
    model = onnx.load(HERE / name)
    functions = {(f.domain, f.name): f for f in model.functions}
    return [
        n.name or n.op_type
        for n in _all_nodes(model.graph, functions)
        if n.op_type in ops and n.domain in ("", "ai.onnx")
    ]


@pytest.mark.parametrize("name", [_param(n, XFAIL_VERIFY) for n in VERIFIED])
def test_verify_leaves_no_broadcasting_node_silently_uncompared(name: str) -> None:
    from click.testing import CliRunner

    from bcast.cli import main

    args = ["verify", "--json", "--runtime", "onnxruntime", str(HERE / name)]
    result = CliRunner().invoke(main, args)
    data = json.loads(result.stdout)
    seen = {n["node"] for n in data["nodes"]} | {s["node"] for s in data["skipped"]}
    every = _broadcasting_nodes(name)
    # each broadcasting node (by count: inner nodes may carry their caller's name) is
    # compared or listed as skipped with its reason
    assert len(data["nodes"]) + len(data["skipped"]) >= len(every), sorted(set(every) - seen)
    assert all(s["reason"] for s in data["skipped"])


BOUND = [
    pytest.param(
        name,
        i,
        id=f"{name}@{json.dumps(r['point'], sort_keys=True)}",
        marks=[pytest.mark.xfail(strict=True, reason=f"issue 37: {XFAIL_DIM[name, i]}")]
        if (name, i) in XFAIL_DIM
        else [],
    )
    for name in VALID
    for i, r in enumerate(FILES[name].get("probe_results", []))
]


@pytest.mark.parametrize(("name", "index"), BOUND)
def test_check_with_the_dims_bound_agrees_with_the_runtime(name: str, index: int) -> None:
    # The --dim path: bcast.check with every dim bound to a probe point has an error exactly
    # where the runtime failed there (the runtime's verdict, measured by deployed.py).
    _needs(name)
    entry = FILES[name]
    result = entry["probe_results"][index]
    sizes = {**entry["defaults"], **result["point"]}
    report = bcast.check(HERE / name, dims={d: sizes[d] for d in set(_dims_of(entry).values())})
    assert report.ok == result["runs"], ([f.reason for f in report.errors], result["message"])
