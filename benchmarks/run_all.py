"""Run every benchmark and render the report: the one command of ``benchmarks/README.md``.

Usage::

    python benchmarks/run_all.py [--quick] [--cases add_large,where,...] [--out-dir docs]
                                 [--skip-ops] [--skip-shapes] [--skip-sizes] [--skip-check]
                                 [--keep]
    python benchmarks/run_all.py --targets [--quick]

``--targets`` runs only what the speed targets read (the tiny add, ``broadcast_shapes``, the
(n,64)+(64,) add of the size sweep; about 13 minutes) and prints their table
(``render_targets.py``); it writes nothing to ``--out-dir``.

``--keep`` re-runs only the parts not skipped and keeps the others' last results (from
``<out-dir>/benchmarks.json``); each section of the report says when it ran.

Runs ``bench_ops.py`` (operators), ``bench_shapes.py`` (``broadcast_shapes`` against NumPy,
ONNX and OpenVINO shape inference), ``bench_sizes.py`` (add from 64 KiB to 1 GiB, and the
first call), ``bench_check_models.py`` and ``bench_check.py`` (``bcast check`` against the
runtimes' session creation, and on 30,000 nodes), each in its own process, then writes
``<out-dir>/benchmarks.md`` (Markdown tables), ``<out-dir>/benchmarks.png`` and
``benchmarks_sizes.png`` (charts) and ``<out-dir>/benchmarks.json`` (every result set, for
machines).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import render  # noqa: E402
import render_targets  # noqa: E402


def _run(cmd: list[str]) -> int:
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    return subprocess.run(cmd, cwd=ROOT, check=False).returncode


def run_ops(args: argparse.Namespace, tmp: Path) -> dict[str, Any] | None:
    path = tmp / "ops.json"
    cmd = [sys.executable, str(HERE / "bench_ops.py"), "--json", str(path)]
    if args.quick:
        cmd.append("--quick")
    if args.cases:
        cmd += ["--cases", args.cases]
    rc = _run(cmd)
    if rc != 0 or not path.exists():
        print(f"bench_ops.py failed (exit {rc})", file=sys.stderr)
        return None
    return dict(json.loads(path.read_text()))


def run_sizes(args: argparse.Namespace, tmp: Path) -> dict[str, Any] | None:
    """Run ``bench_sizes.py`` (the size sweep and the first call) and read its JSON output."""
    path = tmp / "sizes.json"
    cmd = [sys.executable, str(HERE / "bench_sizes.py"), "--json", str(path)]
    if args.quick:
        cmd.append("--quick")
    if args.targets:
        cmd += ["--only", "sweep", "--families", "bias2d"]
    rc = _run(cmd)
    if rc != 0 or not path.exists():
        print(f"bench_sizes.py failed (exit {rc})", file=sys.stderr)
        return None
    return dict(json.loads(path.read_text()))


def run_shapes(args: argparse.Namespace, tmp: Path) -> dict[str, Any] | None:
    """Run ``bench_shapes.py`` through its own command line and read its JSON output."""
    script = HERE / "bench_shapes.py"
    if not script.exists():
        print("bench_shapes.py not found: shape inference is left out", file=sys.stderr)
        return None
    usage = subprocess.run(
        [sys.executable, str(script), "--help"], cwd=ROOT, capture_output=True, text=True
    ).stdout
    path = tmp / "shapes.json"
    cmd = [sys.executable, str(script)]
    if "--json" in usage:
        cmd += ["--json", str(path)]
    if args.quick and "--quick" in usage:
        cmd.append("--quick")
    if "--json" in usage:
        rc = _run(cmd)
    else:  # no --json option: the script prints its JSON on stdout
        print("+", " ".join(cmd), file=sys.stderr, flush=True)
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
        sys.stderr.write(proc.stderr)
        rc = proc.returncode
        if rc == 0:
            path.write_text(proc.stdout)
    if rc != 0 or not path.exists():
        print(f"bench_shapes.py failed (exit {rc})", file=sys.stderr)
        return None
    try:
        return dict(json.loads(path.read_text()))
    except (ValueError, TypeError) as exc:
        print(f"bench_shapes.py output is not a JSON object: {exc}", file=sys.stderr)
        return None


def run_check(args: argparse.Namespace, tmp: Path) -> dict[str, Any] | None:
    """Run ``bench_check_models.py`` and ``bench_check.py``; return both JSON results."""
    repeat = "1" if args.quick else "3"
    found: dict[str, Any] = {}
    for key, script, extra in (
        ("models", "bench_check_models.py", ["--repeat", repeat]),
        ("large", "bench_check.py", ["--repeat", repeat]),
    ):
        path = tmp / f"check_{key}.json"
        rc = _run([sys.executable, str(HERE / script), *extra, "--json", str(path)])
        if rc != 0 or not path.exists():
            print(f"{script} failed (exit {rc})", file=sys.stderr)
            return None
        found[key] = json.loads(path.read_text())
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer, shorter samples")
    ap.add_argument("--cases", help="operator cases to run (default: all)")
    ap.add_argument("--out-dir", type=Path, default=ROOT / "docs")
    ap.add_argument("--skip-ops", action="store_true")
    ap.add_argument("--skip-shapes", action="store_true")
    ap.add_argument("--skip-sizes", action="store_true", help="no size sweep, no first call")
    ap.add_argument("--skip-check", action="store_true", help="no bcast check timings")
    ap.add_argument(
        "--keep",
        action="store_true",
        help="a part skipped keeps its last results from <out-dir>/benchmarks.json "
        "(each section of the report says when it ran)",
    )
    ap.add_argument(
        "--targets",
        action="store_true",
        help="only what the speed targets read; print their table, write nothing",
    )
    args = ap.parse_args(argv)
    if args.targets:
        args.cases = "tiny"
        with tempfile.TemporaryDirectory(prefix="bcast-bench-") as tmpdir:
            tmp = Path(tmpdir)
            ops, shapes, sizes = run_ops(args, tmp), run_shapes(args, tmp), run_sizes(args, tmp)
        print("\n".join(render_targets.markdown(ops, sizes, shapes)))
        return 1 if None in (ops, shapes, sizes) else 0
    kept: dict[str, Any] = {}
    if args.keep and (args.out_dir / "benchmarks.json").exists():
        kept = json.loads((args.out_dir / "benchmarks.json").read_text())

    with tempfile.TemporaryDirectory(prefix="bcast-bench-") as tmpdir:
        tmp = Path(tmpdir)
        ops = kept.get("ops") if args.skip_ops else run_ops(args, tmp)
        shapes = kept.get("shapes") if args.skip_shapes else run_shapes(args, tmp)
        sizes = kept.get("sizes") if args.skip_sizes else run_sizes(args, tmp)
        check = kept.get("check") if args.skip_check else run_check(args, tmp)

    out: Path = args.out_dir
    out.mkdir(parents=True, exist_ok=True)
    combined = {
        "schema": render.COMBINED_SCHEMA,
        "generated": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "quick": args.quick,
        "ops": ops,
        "shapes": shapes,
        "sizes": sizes,
        "check": check,
    }
    (out / "benchmarks.json").write_text(json.dumps(combined, indent=1) + "\n")
    render.render(
        ops=ops,
        shapes=shapes,
        markdown=out / "benchmarks.md",
        png=out / "benchmarks.png" if ops or sizes else None,
        sizes=sizes,
        check=check,
    )
    print(f"wrote {out / 'benchmarks.md'}, benchmarks.png, benchmarks.json", file=sys.stderr)
    failed = (
        (ops is None and not args.skip_ops)
        or (sizes is None and not args.skip_sizes)
        or (check is None and not args.skip_check)
        or (shapes is None and not args.skip_shapes and (HERE / "bench_shapes.py").exists())
    )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
