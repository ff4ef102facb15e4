"""``python -m bcast``: the ``bcast`` command line."""

from __future__ import annotations

from bcast.cli import main

if __name__ == "__main__":
    main(prog_name="bcast")
