"""``bcast check`` against the runtime's own start, model by model: process wall time.

For each model (by default every valid fixture of ``tests/fixtures/real/`` and
``tests/fixtures/deployed/``; mutants, named ``*__*``, are left out), three commands run as
separate processes, interleaved, ``--repeat`` times each, and the median wall time of each
is kept:

- ``python -m bcast check MODEL --json --fail-on never`` (its worker process parses the file
  and reads it, ONNX shape inference included; the command checks the graph it sends back
  and solves the domain);
- the peer a user would otherwise run: ``onnxruntime.InferenceSession(MODEL)`` for ONNX, and
  OpenVINO's ``Core().compile_model(MODEL, "CPU")`` for IR (both with the interpreter start
  and the import, as ``bcast check`` pays its own).

Both run as an installed package would: compiled bytecode is written (to a temporary
``PYTHONPYCACHEPREFIX``, even where ``PYTHONDONTWRITEBYTECODE`` is set, as it is on this
project's machines) and one untimed run of each command comes first. The ratio is bcast's
time over the peer's. Target (issue 37 item 6): a median ratio of at
most 1.0 and a worst of at most 2.0 over the corpus.

    python benchmarks/bench_check_models.py [MODEL...] [--repeat 3] [--json PATH] [--markdown PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = [ROOT / "tests" / "fixtures" / "real", ROOT / "tests" / "fixtures" / "deployed"]

ORT = (
    "import sys, onnxruntime as o; "
    "o.InferenceSession(sys.argv[1], providers=['CPUExecutionProvider'])"
)
OPENVINO = "import sys, openvino as ov; ov.Core().compile_model(sys.argv[1], 'CPU')"


def models(paths: list[str]) -> list[Path]:
    """Return the models to time: ``paths``, or every valid fixture."""
    if paths:
        return [Path(p) for p in paths]
    found = []
    for folder in FIXTURES:
        if folder.is_dir():
            found += [
                p
                for p in sorted(folder.iterdir())
                if p.suffix in (".onnx", ".xml") and "__" not in p.name
            ]
    return found


ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def wall(cmd: list[str]) -> tuple[float, int]:
    """Run ``cmd``, output discarded; return its wall time in seconds and its exit status."""
    start = time.perf_counter()
    done = subprocess.run(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=ENV
    )
    return time.perf_counter() - start, done.returncode


def measure(path: Path, repeat: int) -> dict[str, object]:
    """Time bcast check and the peer on one model, interleaved; return the row."""
    peer_name = "openvino compile" if path.suffix == ".xml" else "onnxruntime session"
    peer = [sys.executable, "-c", OPENVINO if path.suffix == ".xml" else ORT, str(path)]
    check = [sys.executable, "-m", "bcast", "check", str(path), "--json", "--fail-on", "never"]
    ours, theirs = [], []
    status = {"bcast": 0, "peer": 0}
    wall(check), wall(peer)  # untimed: bytecode written, files in the page cache
    for _ in range(repeat):
        seconds, status["bcast"] = wall(check)
        ours.append(seconds)
        seconds, status["peer"] = wall(peer)
        theirs.append(seconds)
    bcast_s, peer_s = statistics.median(ours), statistics.median(theirs)
    return {
        "model": str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path),
        "peer": peer_name,
        "bcast_s": round(bcast_s, 4),
        "peer_s": round(peer_s, 4),
        "ratio": round(bcast_s / peer_s, 3),
        "exit": status,
    }


def _floor(repeat: int) -> str:
    """Time the imports alone: what no model can make either side go below.

    ``bcast check`` waits for its worker, which parses and reads the ONNX file: the worker's
    imports (onnx's protobuf classes and C++ inference, `bcast._spawn.lean_onnx`, and bcast's
    reader) are on its path before any model is read, as onnxruntime's are on the peer's.
    """
    worker = (
        "from bcast._spawn import lean_onnx; lean_onnx(); "
        "import bcast.models.isolation, bcast.onnx.reader"
    )
    sides = {
        "worker": [sys.executable, "-c", worker],
        "onnx": [sys.executable, "-c", "import onnx"],
        "onnxruntime": [sys.executable, "-c", "import onnxruntime"],
    }
    for command in sides.values():
        wall(command)
    took = {k: statistics.median(wall(c)[0] for _ in range(repeat)) for k, c in sides.items()}
    return (
        "The imports alone, in the same run: bcast's worker (onnx's protobuf classes and C++ "
        f"inference, bcast's reader; no NumPy) {took['worker']:.3f} s, where `import onnx` "
        f"whole would take {took['onnx']:.3f} s; `import onnxruntime` "
        f"{took['onnxruntime']:.3f} s: a ratio of {took['worker'] / took['onnxruntime']:.2f} "
        "before any model is read."
    )


def _run_info() -> dict[str, str]:
    """Return when, on which commit and with which peers' versions the run was made."""
    versions = [f"Python {sys.version.split()[0]}"]
    for name in ("onnx", "onnxruntime", "openvino"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            versions.append(f"{name} {importlib.metadata.version(name)}")
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "src", "benchmarks"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout.strip()
    return {
        "generated": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "commit": (commit or "?") + ("+changes" if dirty else ""),
        "versions": ", ".join(versions),
    }


def markdown(rows: list[dict[str, object]], summary: dict[str, object]) -> str:
    lines = [
        "| model | peer | bcast check (s) | peer (s) | bcast / peer |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| `{r['model']}` | {r['peer']} | {r['bcast_s']:.3f} | {r['peer_s']:.3f} "
            f"| {r['ratio']:.2f} |"
        )
    lines.append("")
    lines.append(
        f"{summary['models']} models, median of {summary['repeat']} runs each: median ratio "
        f"**{summary['median_ratio']:.2f}**, worst **{summary['worst_ratio']:.2f}** "
        f"({summary['worst_model']})."
    )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", help="model files (default: the fixtures)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path, help="write the rows and the summary here")
    parser.add_argument("--markdown", type=Path, help="write the Markdown table here")
    args = parser.parse_args(argv)
    rows = []
    todo = models(args.models)
    ENV["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="bcast-bench-pyc-")
    for i, path in enumerate(todo, 1):
        row = measure(path, args.repeat)
        rows.append(row)
        print(
            f"[{i}/{len(todo)}] {row['model']}: bcast {row['bcast_s']:.3f} s, "
            f"{row['peer']} {row['peer_s']:.3f} s, ratio {row['ratio']:.2f}",
            file=sys.stderr,
            flush=True,
        )
    if not rows:
        print("no models to time", file=sys.stderr)
        return 2
    floor = _floor(args.repeat)
    ratios = [float(str(r["ratio"])) for r in rows]
    worst = max(rows, key=lambda r: float(str(r["ratio"])))
    summary: dict[str, object] = {
        "models": len(rows),
        "repeat": args.repeat,
        "median_ratio": round(statistics.median(ratios), 3),
        "worst_ratio": round(max(ratios), 3),
        "worst_model": worst["model"],
    }
    text = markdown(rows, summary)
    print(text)
    if args.json:
        result = {"rows": rows, "summary": summary, "floor": floor, **_run_info()}
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    if args.markdown:
        args.markdown.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
