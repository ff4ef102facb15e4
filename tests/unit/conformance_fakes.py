"""Deliberately wrong runtimes for tests/unit/test_conformance*.py, registered as plug-ins.

Each computes Sub (and Div) with the ONNX reference evaluator or NumPy, then goes wrong in
one way. `install` writes this module and a ``.dist-info`` with entry points into a folder,
so the kit finds them through ``importlib.metadata`` exactly as a third party's runtime.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import onnx
import pytest
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator

RUNTIMES = {
    "honest": "Honest",
    "swapper": "Swapper",
    "shaper": "Shaper",
    "lenient": "Lenient",
    "refuser": "Refuser",
    "aborter": "Aborter",
    "flaky": "Flaky",
    "ghost": "Ghost",
    "sleeper": "Sleeper",
}


def install(folder: Path) -> None:
    """Write this module and its entry points (group bcast.conformance_runtimes) to ``folder``."""
    shutil.copy(__file__, folder / "bcast_fake_runtimes.py")
    info = folder / "bcast_fake_runtimes-0.1.dist-info"
    info.mkdir(exist_ok=True)
    meta = "Metadata-Version: 2.1\nName: bcast-fake-runtimes\nVersion: 0.1\n"
    (info / "METADATA").write_text(meta)
    lines = ["[bcast.conformance_runtimes]"]
    lines += [f"{name} = bcast_fake_runtimes:{cls}" for name, cls in RUNTIMES.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")


def _operands(model: bytes, inputs: dict[str, Any]) -> tuple[onnx.ModelProto, list[np.ndarray]]:
    proto = onnx.ModelProto()
    proto.ParseFromString(model)
    constants = {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}
    node = proto.graph.node[0]
    return proto, [np.asarray(inputs[n]) if n in inputs else constants[n] for n in node.input]


class Honest:
    """The ONNX reference evaluator as it is."""

    name: ClassVar[str] = "honest"

    def version(self) -> str:
        return "1.0"

    def configurations(self) -> list[dict[str, str]]:
        return [{"kind": "reference"}]

    def run(self, model: bytes, inputs: Any, *, config: Any, path: str) -> list[np.ndarray]:
        proto = onnx.ModelProto()
        proto.ParseFromString(model)
        return [np.asarray(y) for y in ReferenceEvaluator(proto).run(None, dict(inputs))]


class Swapper(Honest):
    """Sub with its operands swapped: B - A."""

    name: ClassVar[str] = "swapper"

    def run(self, model: bytes, inputs: Any, *, config: Any, path: str) -> list[np.ndarray]:
        _proto, (a, b) = _operands(model, inputs)
        out = np.subtract(b, a)
        return [np.asarray(out, dtype=a.dtype)]


class Shaper(Honest):
    """The right values with an extra leading axis."""

    name: ClassVar[str] = "shaper"

    def run(self, model: bytes, inputs: Any, *, config: Any, path: str) -> list[np.ndarray]:
        return [y[None] for y in super().run(model, inputs, config=config, path=path)]


class Lenient(Honest):
    """Never refuses: operands that do not broadcast give zeros of the first one's shape."""

    name: ClassVar[str] = "lenient"

    def run(self, model: bytes, inputs: Any, *, config: Any, path: str) -> list[np.ndarray]:
        _proto, (a, b) = _operands(model, inputs)
        try:
            np.broadcast_shapes(a.shape, b.shape)
        except ValueError:
            return [np.zeros_like(a)]
        return super().run(model, inputs, config=config, path=path)


class Refuser(Honest):
    """Refuses every model with a zero-size operand."""

    name: ClassVar[str] = "refuser"

    def run(self, model: bytes, inputs: Any, *, config: Any, path: str) -> list[np.ndarray]:
        _proto, operands = _operands(model, inputs)
        if any(x.size == 0 for x in operands):
            raise RuntimeError("zero-size tensors are not supported")
        return super().run(model, inputs, config=config, path=path)


class Aborter(Honest):
    """Aborts the process on any 0-d operand."""

    name: ClassVar[str] = "aborter"

    def run(self, model: bytes, inputs: Any, *, config: Any, path: str) -> list[np.ndarray]:
        _proto, operands = _operands(model, inputs)
        if any(x.ndim == 0 for x in operands):
            os.abort()
        return super().run(model, inputs, config=config, path=path)


class Flaky(Honest):
    """Aborts on the fourth case a process runs: a crash that depends on history."""

    name: ClassVar[str] = "flaky"
    runs = 0

    def run(self, model: bytes, inputs: Any, *, config: Any, path: str) -> list[np.ndarray]:
        Flaky.runs += 1
        if Flaky.runs == 4:
            os.abort()
        return super().run(model, inputs, config=config, path=path)


class Ghost(Honest):
    """A registered runtime whose library is not installed."""

    name: ClassVar[str] = "ghost"

    def __init__(self) -> None:
        import bcast_no_such_runtime_library  # noqa: F401


class Sleeper(Honest):
    """Takes a minute a case: only an interrupt ends a run of it early."""

    name: ClassVar[str] = "sleeper"

    def run(self, model: bytes, inputs: Any, *, config: Any, path: str) -> list[np.ndarray]:
        import time

        time.sleep(60)
        return super().run(model, inputs, config=config, path=path)


@pytest.fixture(scope="module")
def plugins(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fake runtimes installed into a folder, as a third party's package would be."""
    folder = tmp_path_factory.mktemp("plugins")
    install(folder)
    return folder


@pytest.fixture
def registered(plugins: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fake runtimes, visible to this process and to the kit's worker processes."""
    monkeypatch.syspath_prepend(str(plugins))
    path = [str(plugins), *filter(None, [os.environ.get("PYTHONPATH")])]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(path))
    return plugins
