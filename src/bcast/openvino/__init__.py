"""The OpenVINO adapter: OpenVINO IR (``.xml`` + ``.bin``) for ``bcast check`` and ``verify``.

``openvino`` is imported only inside this package (ruff TID251 enforces it), so
``import bcast`` stays light; importing this package does not import ``openvino`` either,
until a model is read.

- `bcast.openvino.reader.read_ir`: an IR file as the checker's `bcast.models.Graph`, with
  the broadcast attributes exactly as written (``auto_broadcast``, the PDPD axis or its
  absence, Broadcast modes and ``axes_mapping``).
- `bcast.openvino.verify.verify_ir`: ``bcast verify`` for IR: each broadcasting node run
  alone in OpenVINO's CPU plugin (`bcast.openvino.runtime`) and in `bcast.ops`.
"""

from __future__ import annotations

__all__: list[str] = []
