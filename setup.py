"""The build's one compiled part: the tiny path of the binary operators (`bcast.ops._tinyc`).

Everything else is declared in pyproject.toml. The extension is optional: where it cannot be
compiled (no C compiler, no Python headers) the build goes on without it and bcast runs the
same operators through NumPy (`bcast.ops._tiny`), only slower on tiny arrays.
"""

import sys

import numpy
from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "bcast.ops._tinyc",
            ["src/bcast/ops/_tinyc.c"],
            include_dirs=[numpy.get_include()],
            define_macros=[("NPY_TARGET_VERSION", "NPY_1_26_API_VERSION")],
            # no debug information: 650 KB of it against 40 KB of code
            extra_compile_args=[] if sys.platform == "win32" else ["-g0"],
            optional=True,
        )
    ]
)
