"""Arrays: a `Plan` applied to arrays of any library, as zero-copy views.

>>> import bcast
>>> import numpy as np
>>> bcast.broadcast_to(np.arange(3), (2, 3)).strides
(0, 8)
"""

from __future__ import annotations

from bcast.arrays.libraries import NUMPY, Library, library_of
from bcast.arrays.views import Array, broadcast_arrays, broadcast_to

__all__ = ["NUMPY", "Array", "Library", "broadcast_arrays", "broadcast_to", "library_of"]
