"""Run ``bcast check`` and ``bcast verify`` on every real fixture; write a Markdown report.

    python tools/real_models/run_bcast.py [--bcast .venv/bin/bcast] [--report PATH]
                                          [--raw DIR] [--timeout 120]

Runs with any Python (standard library only); ``--bcast`` is the command to test.  For each
mutant it says whether ``check`` reported an error at the expected node and output axis
(from tests/fixtures/real/manifest.json), and whether ``verify`` flagged that node.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures" / "real"


def run(cmd: list[str], timeout: int) -> dict[str, Any]:
    """Run one bcast command; keep rc, parsed JSON and stderr."""
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"rc": "timeout", "json": None, "stderr": "", "secs": timeout}
    try:
        js = json.loads(p.stdout) if p.stdout.strip() else None
    except json.JSONDecodeError:
        js = None
    return {
        "rc": p.returncode,
        "json": js,
        "stdout": p.stdout if js is None else "",
        "stderr": p.stderr,
        "secs": round(time.time() - t0, 1),
    }


def short(s: str, n: int = 220) -> str:
    """One line, cut."""
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 1] + "…"


def check_findings(res: dict[str, Any]) -> list[dict[str, Any]]:
    """All findings of a check run."""
    js = res["json"] or {}
    return [f for m in js.get("models", []) for f in m.get("findings", [])]


def verify_flags(res: dict[str, Any]) -> list[dict[str, Any]]:
    """Verify node entries with a disagreement or an error."""
    js = res["json"] or {}
    out = []
    for n in js.get("nodes", []):
        errs = {k: v.get("error") for k, v in n.get("results", {}).items() if v.get("error")}
        dis = {
            k: v.get("detail") for k, v in n.get("comparisons", {}).items() if not v.get("agree")
        }
        if errs or dis:
            out.append(
                {
                    "node": n["node"],
                    "op": n.get("op"),
                    "axis": n.get("axis"),
                    "errors": errs,
                    "disagree": dis,
                    "inputs": n.get("inputs"),
                }
            )
    return out


def main(argv: list[str]) -> int:
    """Entry point."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--bcast", default=str(ROOT / ".venv" / "bin" / "bcast"))
    ap.add_argument("--report", default="/tmp/real_models_report.md")
    ap.add_argument("--raw", default="/tmp/real_models_bcast_raw")
    ap.add_argument("--timeout", type=int, default=120)
    ap.add_argument("files", nargs="*")
    a = ap.parse_args(argv)
    manifest = json.loads((FIX / "manifest.json").read_text())
    raw = Path(a.raw)
    raw.mkdir(parents=True, exist_ok=True)
    names = a.files or list(manifest["files"])
    lines: list[str] = []
    summary: list[str] = []
    for name in names:
        e = manifest["files"][name]
        path = str(FIX / name)
        chk = run([a.bcast, "check", path, "--json"], a.timeout)
        ver = run([a.bcast, "verify", path, "--json"], a.timeout)
        (raw / f"{name}.check.json").write_text(json.dumps(chk, indent=1))
        (raw / f"{name}.verify.json").write_text(json.dumps(ver, indent=1))
        finds = check_findings(chk)
        flags = verify_flags(ver)
        lines.append(f"### `{name}` ({e['kind']}, {e['exporter_short']})")
        lines.append("")
        cs = (chk["json"] or {}).get("summary", {})
        lines.append(
            f"- check: rc={chk['rc']} ({chk['secs']} s); errors={cs.get('errors')} "
            f"warnings={cs.get('warnings')} info={cs.get('info')}"
        )
        for m in (chk["json"] or {}).get("models", []):
            if m.get("error"):
                lines.append(f"  - model error: `{short(str(m['error']), 400)}`")
        for f in finds:
            ins = ", ".join(
                f"{i.get('name', '')[:40]} {i.get('shape')}" for i in f.get("inputs", [])
            )
            lines.append(
                f"  - {f.get('severity')} {f.get('kind')} `{f.get('node')}` ({f.get('op')}) "
                f"axis={f.get('axis')} [{ins}]: {short(f.get('reason', ''))}"
            )
        vs = (ver["json"] or {}).get("summary", {})
        lines.append(
            f"- verify: rc={ver['rc']} ({ver['secs']} s); compared={vs.get('compared')} "
            f"skipped={vs.get('skipped')} disagreements={vs.get('disagreements')}"
        )
        vj = ver["json"] or {}
        if vj.get("error"):
            lines.append(f"  - error: `{short(str(vj['error']), 400)}`")
        for fl in flags[:8]:
            lines.append(
                f"  - `{fl['node']}` ({fl['op']}): errors={short(json.dumps(fl['errors']), 300)} "
                f"disagree={short(json.dumps(fl['disagree']), 300)}"
            )
        if len(flags) > 8:
            lines.append(f"  - … {len(flags) - 8} more flagged nodes")
        skipped = vj.get("skipped") or []
        if skipped:
            reasons: dict[str, int] = {}
            for s in skipped:
                r = short(str(s.get("reason", s) if isinstance(s, dict) else s), 160)
                reasons[r] = reasons.get(r, 0) + 1
            for r, c in list(reasons.items())[:5]:
                lines.append(f"  - skipped x{c}: {r}")
        for notes in (vj.get("notes") or [])[:3]:
            lines.append(f"  - note: {short(str(notes), 200)}")
        for label, res in (("check", chk), ("verify", ver)):
            if res["rc"] not in (0, 1) or "Traceback" in res.get("stderr", ""):
                tail = "\n".join(res.get("stderr", "").strip().splitlines()[-6:])
                lines.append(f"- {label} stderr (rc={res['rc']}):\n\n```\n{tail}\n```")
            if res["json"] is None and res["rc"] != "timeout":
                lines.append(f"- {label}: no JSON on stdout: `{short(res.get('stdout', ''), 200)}`")
        if e["kind"] == "mutant":
            ex = e["expected"]
            hit = [
                f
                for f in finds
                if f.get("node") == ex["node"]
                and f.get("axis") == ex["axis"]
                and f.get("severity") == "error"
            ]
            near = [f for f in finds if f.get("node") == ex["node"]]
            vhit = [fl for fl in flags if fl["node"] == ex["node"]]
            verdict = "CAUGHT" if hit else ("AT NODE, WRONG AXIS/SEVERITY" if near else "MISSED")
            lines.append(
                f"- expected: `{ex['node']}` axis {ex['axis']} ({ex['why']})"
                f" -> check: **{verdict}**; verify flagged that node: {'yes' if vhit else 'no'}"
            )
            summary.append(
                f"| `{name}` | mutant | {chk['rc']} | {verdict} | {ver['rc']} | "
                f"{'yes' if vhit else 'no'} |"
            )
        else:
            errs = [f for f in finds if f.get("severity") == "error"]
            warns = [f for f in finds if f.get("severity") != "error"]
            fa = f"{len(errs)} errors, {len(warns)} warn/info" if finds else "clean"
            summary.append(
                f"| `{name}` | valid | {chk['rc']} | {fa} | {ver['rc']} | {len(flags)} flagged |"
            )
        lines.append("")
        print(summary[-1], flush=True)
    head = [
        "# bcast on the real-model fixtures",
        "",
        f"bcast: `{a.bcast}`; fixtures: `{FIX}`; timeout {a.timeout} s per command. "
        "Raw JSON per run in " + f"`{raw}`.",
        "",
        "| file | kind | check rc | check result | verify rc | verify |",
        "|---|---|---|---|---|---|",
        *summary,
        "",
        "## Per file",
        "",
    ]
    Path(a.report).write_text("\n".join(head + lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
