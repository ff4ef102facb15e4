"""No network, no writes outside what the user asked for, during ``check`` and ``verify``.

The command runs in a subprocess (and so does its worker process) with HOME set to an empty
folder and an audit hook, installed by a ``sitecustomize`` module, that records every socket
connect, every DNS lookup and every file opened for writing, in every Python process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).parent.parent.parent / "examples"

HOOK = textwrap.dedent(
    """
    import os, sys

    _LOG = os.environ["BCAST_AUDIT_LOG"]
    _HOME = os.path.realpath(os.environ["HOME"])

    def _record(line):
        fd = os.open(_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (line + "\\n").encode("utf-8", "backslashreplace"))
        finally:
            os.close(fd)

    def _hook(event, args):
        if event in ("socket.connect", "socket.getaddrinfo", "socket.gethostbyname"):
            _record(f"{os.getpid()} {event} {args!r}")
        elif event == "open" and args and isinstance(args[0], (str, bytes)):
            path, mode, flags = args[0], args[1], args[2]
            writing = (mode and any(c in mode for c in "wax+")) or (
                flags and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)
            )
            name = os.fsdecode(path)
            if writing and name != _LOG:
                _record(f"{os.getpid()} write {name}")
        elif event in ("os.mkdir", "os.makedirs") and args:
            _record(f"{os.getpid()} mkdir {os.fsdecode(args[0])}")

    sys.addaudithook(_hook)
    """
)


def _ir(tmp_path: Path) -> Path:
    """Write the example IR with a pdpd Subtract (examples/build_models.py builds it)."""
    pytest.importorskip("openvino")
    out = tmp_path / "models"
    subprocess.run(
        [sys.executable, str(EXAMPLES / "build_models.py"), str(out)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return out / "pdpd_subtract.xml"


def _environment(tmp_path: Path) -> tuple[dict[str, str], Path, Path]:
    home = tmp_path / "home"
    home.mkdir()
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(HOOK)
    log = tmp_path / "audit.log"
    src = Path(__file__).parent.parent.parent / "src"
    env = {
        **os.environ,
        "HOME": str(home),
        "BCAST_AUDIT_LOG": str(log),
        "PYTHONPATH": os.pathsep.join([str(hooks), str(src), os.environ.get("PYTHONPATH", "")]),
    }
    env.pop("CI", None)  # OpenVINO's telemetry stays quiet in CI: test the ordinary case
    return env, home, log


def _offences(home: Path, log: Path) -> list[str]:
    events = log.read_text().splitlines() if log.exists() else []
    network = [e for e in events if " socket." in e]
    writes = [e for e in events if str(home) in e or os.path.realpath(home) in e]
    return network + writes + [str(p) for p in home.iterdir()]


@pytest.mark.parametrize("command", ["check", "verify"])
def test_no_network_and_no_writes_in_home(tmp_path, command):
    model = _ir(tmp_path)
    env, home, log = _environment(tmp_path)
    result = subprocess.run(
        [sys.executable, "-c", "from bcast.cli import main; main()", command, str(model)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode in (0, 1), result.stderr
    assert _offences(home, log) == []


def test_the_hook_sees_what_openvino_does_on_its_own(tmp_path):
    """The control: ``import openvino`` alone writes ~/intel (its telemetry)."""
    pytest.importorskip("openvino")
    env, home, log = _environment(tmp_path)
    subprocess.run([sys.executable, "-c", "import openvino"], env=env, check=True, timeout=300)
    assert any("intel" in offence for offence in _offences(home, log))
