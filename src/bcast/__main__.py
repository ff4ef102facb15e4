"""``python -m bcast`` and the ``bcast`` script: the command line (`bcast.cli`).

The worker process that reads models starts first (`bcast.loading.prestart_for`), so that
its interpreter and the peer library it needs load while click and the command load here.
"""

from __future__ import annotations

import sys


def main() -> None:
    """Run the ``bcast`` command line on ``sys.argv``."""
    from bcast.loading import prestart_for

    prestart_for(sys.argv[1:])
    from bcast.cli import main as cli

    cli(prog_name="bcast")


if __name__ == "__main__":
    main()
