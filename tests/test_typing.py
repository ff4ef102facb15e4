"""What a mypy user sees: `bcast.ops` after `import bcast`, NumPy in and out, Literal modes.

Runs mypy (strict) on user-style snippets against this repository's sources; errors inside
bcast are not the user's and are not reported (``--follow-imports=silent``), as for an
installed package.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mypy")

ROOT = Path(__file__).resolve().parents[1]

GOOD = """\
import numpy as np
import numpy.typing as npt

import bcast

x: npt.NDArray[np.float32] = np.ones(3, np.float32)
reveal_type(bcast.ops.add(x, 1.0))
reveal_type(bcast.ops.max(x, x, 0.0))
reveal_type(bcast.broadcast_to(x, shape=(2, 3), mode="NUMPY"))
reveal_type(bcast.check("model.onnx").ok)
shape = bcast.broadcast_shapes((2, 1), (3,), mode="pdpd")
reveal_type(shape)
"""

BAD = """\
import numpy as np

import bcast

bcast.broadcast_shapes((2, 1), (3,), mode="nmupy")
bcast.ops.add(np.ones(3), np.ones(3), broadcast="explicit")
"""


def mypy(tmp_path: Path, name: str, code: str) -> tuple[int, str]:
    snippet = tmp_path / name
    snippet.write_text(code)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--follow-imports=silent",
            "--cache-dir",
            str(ROOT / ".mypy_cache" / "typing-test"),
            str(snippet),
        ],
        capture_output=True,
        text=True,
        env={"MYPYPATH": str(ROOT / "src"), "PATH": "", "HOME": str(tmp_path)},
        cwd=tmp_path,
        timeout=600,
    )
    return done.returncode, done.stdout


@pytest.mark.slow
def test_a_user_snippet_type_checks_with_numpy_in_numpy_out(tmp_path: Path) -> None:
    _, out = mypy(tmp_path, "good.py", GOOD)
    revealed = [
        line.split("Revealed type is ", 1)[1] for line in out.splitlines() if "Revealed" in line
    ]
    assert "error" not in out, out
    assert len(revealed) == 5, out
    assert all(r.startswith('"numpy.ndarray[') for r in revealed[:3]), revealed
    assert "float" in revealed[0] and "32" in revealed[0]  # float32 in, float32 out
    assert revealed[3] in ('"bool"', '"builtins.bool"')
    assert revealed[4] == '"bcast.core.shape.Shape"'


@pytest.mark.slow
def test_a_misspelt_mode_is_a_type_error(tmp_path: Path) -> None:
    code, out = mypy(tmp_path, "bad.py", BAD)
    assert code == 1
    assert 'bad.py:5: error: Argument "mode" to "broadcast_shapes" has incompatible type' in out
    assert "Literal['nmupy']" in out
    assert 'bad.py:6: error: Argument "broadcast" to "add" has incompatible type' in out


SHAPES = """\
import numpy as np
import numpy.typing as npt
import torch

import bcast

shape = bcast.broadcast_shapes((2, 1), (3,))
a: npt.NDArray[np.float64] = np.zeros(shape)
b: npt.NDArray[np.float32] = np.ones(shape, dtype=np.float32)
c = np.empty(bcast.Shape.parse("[4,5]"))
t: torch.Tensor = torch.zeros(shape.to_tuple())
first: int = int(shape[0])
for dim in shape:
    reveal_type(dim)
"""


@pytest.mark.slow
def test_a_static_shape_is_a_shape_to_numpy_and_torch_under_mypy_strict(tmp_path: Path) -> None:
    # The README's idiom: np.zeros(bcast.broadcast_shapes(...)). NumPy's stubs take a
    # SupportsIndex or a Sequence[SupportsIndex]; Shape must be the second.
    pytest.importorskip("torch")
    code, out = mypy(tmp_path, "shapes.py", SHAPES)
    assert "error" not in out, out
    assert code == 0, out
    assert 'Revealed type is "bcast.core.dim.Dim"' in out, out
