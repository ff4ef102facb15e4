"""Broadcasting operators: bcast against NumPy, numexpr, onnxruntime, OpenVINO and PyTorch.

Usage::

    python benchmarks/bench_ops.py [--quick] [--cases add_large,where,...]
                                   [--json PATH] [--markdown PATH] [--png PATH]

Each case is timed as ``_harness`` describes: results checked against NumPy first, peers
interleaved round by round with a 2-thread STREAM probe, medians over samples, and every figure
given as a ratio to the fastest peer and as a fraction of the STREAM bandwidth measured during
that very case. Every library is given 2 threads (the machine's core count); NumPy's ufuncs are
single-threaded by design and are shown as they are.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

# Idle worker threads must sleep, not spin: peers are timed back to back in one process and a
# spinning OpenMP pool (PyTorch) would steal a core from whoever runs next. Must precede the
# torch import.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# bcast's knob, as every library's: THREADS threads (otherwise it uses the cores it finds free).
os.environ.setdefault("BCAST_NUM_THREADS", "2")

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness as h

THREADS = 2
HERE = Path(__file__).resolve().parent


# --------------------------------------------------------------------------------------------
# Cases


@dataclass(frozen=True)
class CaseSpec:
    name: str
    title: str
    op: str  # add | pow | where | expand
    make_inputs: Callable[[np.random.Generator], list[np.ndarray]]
    target: tuple[int, ...] | None = None  # expand only
    rtol: float = 1e-6
    atol: float = 0.0
    bandwidth_bound: bool = True


def _f32(rng: np.random.Generator, shape: tuple[int, ...], lo: float = -1.0, hi: float = 1.0):
    return (rng.random(shape, dtype=np.float32) * np.float32(hi - lo) + np.float32(lo)).astype(
        np.float32, copy=False
    )


CASES: dict[str, CaseSpec] = {
    c.name: c
    for c in [
        CaseSpec(
            "add_large",
            "add (64,1024,1024)+(1024,) [large]",
            "add",
            lambda r: [_f32(r, (64, 1024, 1024)), _f32(r, (1024,))],
        ),
        CaseSpec(
            "add_cache",
            "add (256,256,64)+(64,) [cache-sized]",
            "add",
            lambda r: [_f32(r, (256, 256, 64)), _f32(r, (64,))],
        ),
        CaseSpec(
            "add_half",
            "add (256,256,64)+(64,) float16 [cache-sized, half precision]",
            "add",
            lambda r: [
                _f32(r, (256, 256, 64)).astype(np.float16),
                _f32(r, (64,)).astype(np.float16),
            ],
            rtol=1e-3,
        ),
        CaseSpec(
            "add_outer",
            "add (4096,1)+(1,4096) [outer]",
            "add",
            lambda r: [_f32(r, (4096, 1)), _f32(r, (1, 4096))],
        ),
        CaseSpec(
            "add_midrank",
            "add (32,1,128,128)+(1,64,1,128) [midrank]",
            "add",
            lambda r: [_f32(r, (32, 1, 128, 128)), _f32(r, (1, 64, 1, 128))],
        ),
        CaseSpec(
            "pow",
            "pow (64,1024,1024)^(1024,), base in [0.5,2)",
            "pow",
            lambda r: [_f32(r, (64, 1024, 1024), 0.5, 2.0), _f32(r, (1024,), -2.0, 2.0)],
            rtol=1e-5,
            atol=1e-6,
        ),
        CaseSpec(
            "where",
            "where (1,1024,1024) mask, (64,1,1024), (64,1024,1)",
            "where",
            lambda r: [
                r.random((1, 1024, 1024)) < 0.5,
                _f32(r, (64, 1, 1024)),
                _f32(r, (64, 1024, 1)),
            ],
        ),
        CaseSpec(
            "expand",
            "expand (1024,) -> (64,1024,1024)",
            "expand",
            lambda r: [_f32(r, (1024,))],
            target=(64, 1024, 1024),
        ),
        CaseSpec(
            "expand_call",
            "expand (64,) -> (256,64) [per-call time, 64 KiB]",
            "expand",
            lambda r: [_f32(r, (64,))],
            target=(256, 64),
            bandwidth_bound=False,
        ),
        CaseSpec(
            "tiny",
            "add (4,)+(1,) [per-call time]",
            "add",
            lambda r: [_f32(r, (4,)), _f32(r, (1,))],
            bandwidth_bound=False,
        ),
    ]
}


def reference(spec: CaseSpec, inputs: Sequence[np.ndarray]) -> np.ndarray:
    if spec.op == "add":
        return np.add(*inputs)
    if spec.op == "pow":
        return np.power(*inputs)
    if spec.op == "where":
        return np.where(*inputs)
    if spec.op == "expand":
        assert spec.target is not None
        return np.broadcast_to(inputs[0], np.broadcast_shapes(inputs[0].shape, spec.target)).copy()
    raise ValueError(spec.op)


# --------------------------------------------------------------------------------------------
# Peers, one builder per library. Each returns a list of Peer; a library that is missing or
# cannot express the operator yields skipped peers with the reason.


def _skipped(family: str, names: Sequence[str], why: str) -> list[h.Peer]:
    return [h.Peer(n, family, None, skip=why) for n in names]


def _with_out(out: np.ndarray, call: Callable[[], Any]) -> Callable[[], np.ndarray]:
    def run() -> np.ndarray:
        call()
        return out

    return run


def numpy_peers(spec: CaseSpec, xs: list[np.ndarray], out: np.ndarray) -> list[h.Peer]:
    fam = "NumPy"
    if spec.op == "expand":
        shape = out.shape
        return [
            h.Peer("numpy", fam, lambda: np.broadcast_to(xs[0], shape).copy(),
                   note="broadcast_to(...).copy()"),
            h.Peer("numpy out=", fam, _with_out(out, lambda: np.copyto(out, xs[0])),
                   note="copyto(out, x)"),
        ]  # fmt: skip
    if spec.op == "where":
        return [
            h.Peer("numpy", fam, lambda: np.where(*xs)),
            h.Peer("numpy out=", fam, None, skip="np.where has no out="),
        ]
    ufunc = {"add": np.add, "pow": np.power}[spec.op]
    return [
        h.Peer("numpy", fam, lambda: ufunc(*xs)),
        h.Peer("numpy out=", fam, lambda: ufunc(*xs, out=out)),
    ]


def numexpr_peers(spec: CaseSpec, xs: list[np.ndarray], out: np.ndarray) -> list[h.Peer]:
    fam = "numexpr"
    names = ["numexpr", "numexpr out="]
    try:
        ne = importlib.import_module("numexpr")
    except ImportError as exc:
        return _skipped(fam, names, f"numexpr not installed ({exc})")
    ne.set_num_threads(THREADS)
    expr = {"add": "a + b", "pow": "a ** b", "where": "where(a, b, c)"}.get(spec.op)
    if expr is None:
        return _skipped(fam, names, f"{spec.op} is not expressible in numexpr")
    if any(x.dtype == np.float16 for x in xs):
        return _skipped(fam, names, "numexpr has no float16")
    env = dict(zip("abc", xs, strict=False))
    return [
        h.Peer("numexpr", fam, lambda: ne.evaluate(expr, local_dict=env), note=expr),
        h.Peer(
            "numexpr out=",
            fam,
            lambda: ne.evaluate(expr, local_dict=env, out=out),
            note=expr,
        ),
    ]


def _onnx_model(spec: CaseSpec, xs: list[np.ndarray], out: np.ndarray) -> bytes:
    onnx = importlib.import_module("onnx")
    helper = onnx.helper
    names = ["A", "B", "C"][: len(xs)]
    inputs = [
        helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(x.dtype), list(x.shape))
        for n, x in zip(names, xs, strict=True)
    ]
    output = helper.make_tensor_value_info(
        "Y", helper.np_dtype_to_tensor_dtype(out.dtype), list(out.shape)
    )
    inits = []
    node_inputs = list(names)
    if spec.op == "expand":
        inits.append(
            onnx.numpy_helper.from_array(np.asarray(out.shape, dtype=np.int64), name="shape")
        )
        node_inputs.append("shape")
    op_type = {"add": "Add", "pow": "Pow", "where": "Where", "expand": "Expand"}[spec.op]
    node = helper.make_node(op_type, node_inputs, ["Y"])
    graph = helper.make_graph([node], f"bench_{spec.name}", inputs, [output], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return bytes(model.SerializeToString())


def onnxruntime_peers(spec: CaseSpec, xs: list[np.ndarray], out: np.ndarray) -> list[h.Peer]:
    fam = "onnxruntime"
    names = ["onnxruntime", "onnxruntime iobinding out="]
    try:
        ort = importlib.import_module("onnxruntime")
        model = _onnx_model(spec, xs, out)
    except ImportError as exc:
        return _skipped(fam, names, f"onnx/onnxruntime not installed ({exc})")
    so = ort.SessionOptions()
    so.intra_op_num_threads = THREADS
    so.inter_op_num_threads = 1
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.log_severity_level = 3
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    feeds = dict(zip(["A", "B", "C"], xs, strict=False))

    binding = sess.io_binding()
    for name, x in feeds.items():
        binding.bind_cpu_input(name, x)
    binding.bind_output("Y", "cpu", 0, out.dtype, list(out.shape), out.ctypes.data)

    def bound() -> np.ndarray:
        sess.run_with_iobinding(binding)
        return out

    return [
        h.Peer("onnxruntime", fam, lambda: sess.run(None, feeds)[0], note="session.run"),
        h.Peer("onnxruntime iobinding out=", fam, bound, note="run_with_iobinding"),
    ]


def openvino_peers(spec: CaseSpec, xs: list[np.ndarray], out: np.ndarray) -> list[h.Peer]:
    fam = "OpenVINO"
    names = ["openvino"]
    try:
        ov = importlib.import_module("openvino")
        ops = importlib.import_module("openvino.opset13")
    except ImportError as exc:
        return _skipped(fam, names, f"openvino not installed ({exc})")
    params = [ops.parameter(list(x.shape), x.dtype, name=f"in{i}") for i, x in enumerate(xs)]
    if spec.op == "add":
        node = ops.add(*params, auto_broadcast="numpy")
    elif spec.op == "pow":
        node = ops.power(*params, auto_broadcast="numpy")
    elif spec.op == "where":
        node = ops.select(*params, auto_broadcast="numpy")
    else:
        target = ops.constant(np.asarray(out.shape, dtype=np.int64))
        node = ops.broadcast(params[0], target, broadcast_spec="BIDIRECTIONAL")
    model = ov.Model([node], params, f"bench_{spec.name}")
    compiled = ov.Core().compile_model(
        model,
        "CPU",
        {
            "INFERENCE_NUM_THREADS": THREADS,
            "NUM_STREAMS": 1,
            "PERFORMANCE_HINT": "LATENCY",
            "INFERENCE_PRECISION_HINT": "f32",  # the CPU would otherwise run bf16 where it can
        },
    )
    req = compiled.create_infer_request()
    for i, x in enumerate(xs):
        req.set_input_tensor(i, ov.Tensor(x, shared_memory=True))

    def run() -> np.ndarray:
        # share_outputs: without it infer() copies the output into a fresh array on every call
        return req.infer(share_outputs=True)[0]

    note = "reused infer request, inputs and output shared with NumPy (no copies)"
    return [h.Peer("openvino", fam, run, note=note)]


def torch_peers(spec: CaseSpec, xs: list[np.ndarray], out: np.ndarray) -> list[h.Peer]:
    fam = "PyTorch"
    names = ["torch", "torch out="]
    try:
        torch = importlib.import_module("torch")
    except ImportError as exc:
        return _skipped(fam, names, f"torch not installed ({exc})")
    torch.set_num_threads(THREADS)
    ts = [torch.from_numpy(x) for x in xs]
    tout = torch.from_numpy(out)

    def to_np(t: Any) -> np.ndarray:
        return t.numpy() if hasattr(t, "numpy") else np.asarray(t)

    if spec.op == "expand":
        shape = tuple(out.shape)
        plain = lambda: ts[0].expand(shape).contiguous()  # noqa: E731
        with_out = lambda: tout.copy_(ts[0].expand(shape))  # noqa: E731
        notes = ("expand(...).contiguous()", "out.copy_(x.expand(...))")
    else:
        fn = {"add": torch.add, "pow": torch.pow, "where": torch.where}[spec.op]
        plain = lambda: fn(*ts)  # noqa: E731
        with_out = lambda: fn(*ts, out=tout)  # noqa: E731
        notes = ("", "")
    return [
        h.Peer("torch", fam, plain, to_numpy=to_np, note=notes[0]),
        h.Peer("torch out=", fam, with_out, to_numpy=to_np, note=notes[1]),
    ]


def bcast_peers(spec: CaseSpec, xs: list[np.ndarray], out: np.ndarray) -> list[h.Peer]:
    fam = "bcast"
    names = ["bcast", "bcast out="]
    try:
        bops = importlib.import_module("bcast.ops")
        fn = getattr(bops, spec.op)
    except (ImportError, AttributeError) as exc:
        return _skipped(fam, names, f"bcast.ops.{spec.op} not available yet ({exc})")
    if spec.op == "expand":
        shape = tuple(out.shape)
        return [
            h.Peer("bcast", fam, lambda: fn(xs[0], shape)),
            h.Peer("bcast out=", fam, lambda: fn(xs[0], shape, out=out)),
        ]
    return [
        h.Peer("bcast", fam, lambda: fn(*xs)),
        h.Peer("bcast out=", fam, lambda: fn(*xs, out=out)),
    ]


# --------------------------------------------------------------------------------------------
# GPU peers: only where a CUDA device is present (never on the 2-core reference machine). The
# same operators on device arrays: PyTorch CUDA, CuPy, and bcast.ops on both through the
# array-API path (which keeps everything on the device). Each call synchronises the device so
# that the time is the kernel's, not the launch's. The device's own copy bandwidth (a
# device-to-device copy of 256 MiB) is the reference for the GPU peers' bandwidth fractions.


def cuda_available() -> bool:
    try:
        torch = importlib.import_module("torch")
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def _torch_call(op: str, torch: Any, ts: list[Any], shape: tuple[int, ...], out: Any = None) -> Any:
    if op == "expand":
        return ts[0].expand(shape).contiguous() if out is None else out.copy_(ts[0].expand(shape))
    fn = {"add": torch.add, "pow": torch.pow, "where": torch.where}[op]
    return fn(*ts) if out is None else fn(*ts, out=out)


def gpu_peers(spec: CaseSpec, xs: list[np.ndarray], out: np.ndarray) -> list[h.Peer]:
    if not cuda_available():
        return []
    torch = importlib.import_module("torch")
    bops = importlib.import_module("bcast.ops")
    shape = tuple(out.shape)
    ts = [torch.from_numpy(x).cuda() for x in xs]
    tout = torch.empty(shape, dtype=ts[0].dtype if spec.op != "where" else ts[1].dtype,
                       device="cuda")  # fmt: skip
    sync = torch.cuda.synchronize

    def timed(call: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> Any:
            result = call()
            sync()
            return result

        return run

    def to_np(t: Any) -> np.ndarray:
        return np.asarray(t.cpu().numpy())

    fn = getattr(bops, spec.op)
    args = (lambda: (ts[0], shape)) if spec.op == "expand" else (lambda: tuple(ts))
    peers = [
        h.Peer("torch cuda", "GPU", timed(lambda: _torch_call(spec.op, torch, ts, shape)),
               to_numpy=to_np),
        h.Peer("torch cuda out=", "GPU",
               timed(lambda: _torch_call(spec.op, torch, ts, shape, tout)), to_numpy=to_np),
        h.Peer("bcast torch cuda", "GPU", timed(lambda: fn(*args())), to_numpy=to_np),
        h.Peer("bcast torch cuda out=", "GPU", timed(lambda: fn(*args(), out=tout)),
               to_numpy=to_np),
    ]  # fmt: skip
    try:
        cp = importlib.import_module("cupy")
    except ImportError as exc:
        return [*peers, h.Peer("cupy", "GPU", None, skip=f"cupy not installed ({exc})")]
    cs = [cp.asarray(x) for x in xs]
    cout = cp.empty(shape, dtype=out.dtype)
    cargs = (lambda: (cs[0], shape)) if spec.op == "expand" else (lambda: tuple(cs))
    csync = cp.cuda.Device().synchronize
    if spec.op == "expand":
        plain = lambda: cp.broadcast_to(cs[0], shape).copy()  # noqa: E731
    else:
        ufunc = {"add": cp.add, "pow": cp.power, "where": cp.where}[spec.op]
        plain = lambda: ufunc(*cs)  # noqa: E731

    def ctimed(call: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> Any:
            result = call()
            csync()
            return result

        return run

    return [
        *peers,
        h.Peer("cupy", "GPU", ctimed(plain), to_numpy=cp.asnumpy),
        h.Peer("bcast cupy", "GPU", ctimed(lambda: fn(*cargs())), to_numpy=cp.asnumpy),
        h.Peer("bcast cupy out=", "GPU", ctimed(lambda: fn(*cargs(), out=cout)),
               to_numpy=cp.asnumpy),
    ]  # fmt: skip


def gpu_copy_bandwidth(n_bytes: int = 256 * 2**20, samples: int = 9) -> float | None:
    """Device-to-device copy bandwidth (GB/s, read + write counted, as STREAM Copy)."""
    if not cuda_available():
        return None
    torch = importlib.import_module("torch")
    a = torch.ones(n_bytes // 4, dtype=torch.float32, device="cuda")
    b = torch.empty_like(a)
    b.copy_(a)
    torch.cuda.synchronize()
    rates = []
    for _ in range(samples):
        t0 = time.perf_counter()
        b.copy_(a)
        torch.cuda.synchronize()
        rates.append(2 * n_bytes / (time.perf_counter() - t0) / 1e9)
    return h.median(rates)


BUILDERS = [
    bcast_peers,
    numpy_peers,
    numexpr_peers,
    onnxruntime_peers,
    openvino_peers,
    torch_peers,
    gpu_peers,
]


def library_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for mod in ["bcast", "numpy", "numba", "numexpr", "onnxruntime", "openvino", "torch"]:
        try:
            m = importlib.import_module(mod)
            v = getattr(m, "__version__", None)
            if v is None and mod == "openvino":
                v = m.get_version()
            out[mod] = str(v)
        except ImportError:
            out[mod] = None
    from bcast.engine import compiled as _compiled

    # which path bcast's large work took in this run (numba missing, or BCAST_COMPILED=0)
    out["bcast kernels"] = "compiled (numba)" if _compiled.available() else "NumPy"
    return out


# --------------------------------------------------------------------------------------------
# Running


@dataclass
class Settings:
    samples: int
    min_sample_s: float
    max_wait_s: float
    quiet_cores: float
    seed: int = 0


QUICK = Settings(samples=5, min_sample_s=0.02, max_wait_s=15.0, quiet_cores=0.3)
FULL = Settings(samples=15, min_sample_s=0.2, max_wait_s=60.0, quiet_cores=0.25)


def build_peers(spec: CaseSpec, xs: list[np.ndarray], out: np.ndarray) -> list[h.Peer]:
    peers: list[h.Peer] = []
    for build in BUILDERS:
        try:
            peers.extend(build(spec, xs, out))
        except Exception as exc:  # a library that fails to build the case is reported, not fatal
            fam = build.__name__.removesuffix("_peers")
            peers.append(
                h.Peer(fam, fam, None, skip=f"setup failed: {type(exc).__name__}: {exc}"[:200])
            )
    return peers


def run_case(spec: CaseSpec, settings: Settings, probe: h.StreamProbe) -> h.CaseResult:
    rng = np.random.default_rng(settings.seed)
    xs = spec.make_inputs(rng)
    expected = reference(spec, xs)
    out = np.empty_like(expected)
    case = h.CaseResult(
        name=spec.name,
        title=spec.title,
        op=spec.op,
        input_shapes=[list(x.shape) for x in xs],
        output_shape=list(expected.shape),
        dtype=str(expected.dtype),
        bytes_moved=h.bytes_moved(xs, expected.shape, expected.itemsize),
        bandwidth_bound=spec.bandwidth_bound,
    )
    peers = build_peers(spec, xs, out)

    # Correctness before timing. The shared out= buffer is poisoned before each check so a
    # peer that forgets to write cannot pass on its predecessor's result.
    results = []
    for peer in peers:
        _poison(out)
        results.extend(h.check_peers([peer], expected, rtol=spec.rtol, atol=spec.atol))
    case.peers = results
    del expected
    kernels_ready()

    load = h.wait_for_quiet(threshold_cores=settings.quiet_cores, max_wait_s=settings.max_wait_s)
    meter = h.LoadMeter()
    meter.start()
    probe.reset()
    t0 = time.monotonic()
    ok = {r.name for r in results if r.status == "ok"}
    fns = {p.name: p.fn for p in peers if p.fn is not None and p.name in ok}
    samples, numbers = h.time_interleaved(
        fns,
        samples=settings.samples,
        min_sample_s=settings.min_sample_s,
        seed=settings.seed,
        probe=probe,
    )
    load["background_cores_during"] = _round(meter.stop())
    load["case_seconds"] = round(time.monotonic() - t0, 1)
    case.load = load
    for r in case.peers:
        if r.name in samples:
            r.samples_s = samples[r.name]
            r.number = numbers[r.name]
    case.stream = probe.summary()
    h.summarize(case, case.stream.get("gbps"))
    gpu_gbps = gpu_copy_bandwidth() if any(p.family == "GPU" for p in case.peers) else None
    if gpu_gbps:
        # GPU peers: the fraction of the device's own copy bandwidth, not the host's STREAM.
        case.stream["gpu_copy_gbps"] = gpu_gbps
        for p in case.peers:
            if p.family == "GPU" and p.gbps:
                p.fraction_of_stream = p.gbps / gpu_gbps
    if not load.get("quiet", True):
        case.notes.append(
            f"machine not quiet: {load['background_cores_before']} busy cores after "
            f"{load['waited_s']} s of waiting"
        )
    return case


def kernels_ready() -> None:
    """Wait for the kernels bcast's first calls (the check) queued: time its compiled path.

    Its first calls run on NumPy's path while numba compiles in the background; the
    ``first_call`` case of ``bench_sizes.py`` times that.
    """
    try:
        from bcast.engine import compiled
    except ImportError:
        return
    compiled.wait_for_kernels()


def bcast_threads() -> int | None:
    """The threads bcast's engine runs large work with here (its setting's resolved value)."""
    try:
        from bcast.engine import parallel
    except ImportError:
        return None
    return parallel.threads()


def _poison(out: np.ndarray) -> None:
    """Fill with a value no correct result of these cases contains."""
    if np.issubdtype(out.dtype, np.inexact):
        out.fill(np.nan)
    elif out.dtype == np.bool_:
        np.logical_not(out, out=out)  # whatever was there is now wrong wherever it was right
    else:
        out.fill(np.iinfo(out.dtype).max)


def _round(x: float | None, nd: int = 2) -> float | None:
    return None if x is None else round(x, nd)


def print_case(case: h.CaseResult) -> None:
    s = case.stream
    bw = f"{s['gbps']:.1f} GB/s" if s.get("gbps") else "n/a"
    print(
        f"\n## {case.title}  STREAM {bw}  background "
        f"{case.load.get('background_cores_during')} cores",
        file=sys.stderr,
    )
    for p in case.peers:
        if p.status != "ok":
            print(f"  {p.name:28s} {p.status:8s} {p.note}", file=sys.stderr)
            continue
        assert p.median_s is not None
        frac = f"{100 * p.fraction_of_stream:5.0f}%" if p.fraction_of_stream else "     -"
        print(
            f"  {p.name:28s} {p.median_s * 1e6:12.1f} us  x{p.ratio_to_fastest:6.2f}  {frac}",
            file=sys.stderr,
        )


def run(case_names: Sequence[str], settings: Settings, *, quick: bool) -> dict[str, Any]:
    probe = h.StreamProbe(threads=THREADS)
    cases = []
    try:
        for name in case_names:
            case = run_case(CASES[name], settings, probe)
            print_case(case)
            cases.append(case.to_json())
    finally:
        probe.close()
    notes = []
    if any(p["family"] == "bcast" and p["status"] == "skipped" for c in cases for p in c["peers"]):
        notes.append("bcast.ops was not importable when this ran: its rows are skipped.")
    if not cuda_available():
        notes.append(
            "No CUDA device on this machine: the GPU peers (PyTorch CUDA, CuPy, bcast.ops on "
            "their device arrays) and the device copy-bandwidth probe were not run."
        )
    return {
        "schema": h.SCHEMA,
        "generated": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "quick": quick,
        "threads": THREADS,
        "bcast_threads": bcast_threads(),
        "settings": settings.__dict__,
        "machine": h.machine_info(library_versions()),
        "method": {
            "timing": "interleaved rounds, shuffled order; median of samples",
            "stream": "2-thread STREAM Copy and Add, float32, measured in every round of the "
            "case; reference = the better median",
            "bytes_moved": "inputs read once (broadcast operands at their own size) + output",
            "check": "every peer's result compared with NumPy (shape, dtype, values) first",
        },
        "notes": notes,
        "cases": cases,
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer, shorter samples")
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated case names")
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument("--markdown", type=Path, help="render a Markdown report here")
    ap.add_argument("--png", type=Path, help="render the chart here")
    ap.add_argument("--samples", type=int, help="override the number of samples per peer")
    ap.add_argument("--max-wait", type=float, help="seconds to wait for a quiet machine")
    args = ap.parse_args(argv)

    names = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [n for n in names if n not in CASES]
    if unknown:
        ap.error(f"unknown case(s) {unknown}; known: {', '.join(CASES)}")
    base = QUICK if args.quick else FULL
    settings = Settings(**base.__dict__)
    if args.samples:
        settings.samples = args.samples
    if args.max_wait is not None:
        settings.max_wait_s = args.max_wait

    data = run(names, settings, quick=args.quick)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(data, indent=1) + "\n")
    if args.markdown or args.png:
        import render

        render.render(ops=data, shapes=None, markdown=args.markdown, png=args.png)
    if not args.json and not args.markdown:
        json.dump(data, sys.stdout, indent=1)
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
