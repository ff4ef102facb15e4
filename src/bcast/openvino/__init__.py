"""The OpenVINO adapter: OpenVINO IR (``.xml`` + ``.bin``) for ``bcast check`` and ``verify``.

``openvino`` is imported only inside this package (ruff TID251 enforces it), so
``import bcast`` stays light; importing this package does not import ``openvino`` either,
until a model is read, and then in the worker process of `bcast.models.isolation`.
Importing it turns OpenVINO's telemetry off for the process (see below).

- `bcast.openvino.reader.read_ir`: an IR file as the checker's `bcast.models.Graph`, with
  the broadcast attributes exactly as written (``auto_broadcast``, the PDPD axis or its
  absence, Broadcast modes and ``axes_mapping``).
- `bcast.openvino.verify.verify_ir`: ``bcast verify`` for IR: each broadcasting node run
  alone in OpenVINO's CPU plugin (`bcast.openvino.runtime`) and in `bcast.ops`.
"""

from __future__ import annotations

import sys

__all__: list[str] = []

# No network, no files in the home folder: ``import openvino`` imports its model converter,
# whose telemetry (``openvino_telemetry``) writes ~/intel and sends an event, whatever
# OPENVINO_TELEMETRY_DISABLE says. Without that package it uses its own silent stub. bcast
# reads and runs models in its worker process, where the same is done first thing; this
# covers a process that imports openvino through bcast.
if "openvino" not in sys.modules:
    sys.modules.setdefault("openvino_telemetry", None)  # type: ignore[arg-type]
