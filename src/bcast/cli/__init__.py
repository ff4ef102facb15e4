"""The ``bcast`` command line: presentation only, every answer comes from the library.

Commands are registered explicitly below, one line each; there is no discovery.

Exit status of every command: 0 clean, 1 findings (incompatible shapes, model findings,
runtime disagreements), 2 bad usage, unreadable input or an internal error, 130 interrupted.
"""

from __future__ import annotations

import click

import bcast

from ._output import BcastGroup
from .check_cmd import check, check_skeleton
from .domain_cmd import domain
from .shapes import explain, explain_skeleton, shape, shape_skeleton
from .verify_cmd import verify, verify_skeleton

__all__ = ["main"]


@click.group(
    "bcast",
    cls=BcastGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="""\b
Examples:
  bcast shape "[2,1,5]" "[4,1]"
  bcast explain "[2,3,4,5]" "[3,1]" --mode pdpd --axis 1
  bcast shape "[N,1,8]" "[1,4,?]" --json""",
)
@click.version_option(bcast.__version__, "--version", prog_name="bcast")
def main() -> None:
    """Tensor broadcasting as the ONNX and OpenVINO specifications define it.

    Shapes are written in bcast's text form: [2,3,4,5]; ? an unknown dim; 1..10 an interval
    (1.. without upper bound); N a symbol (an ONNX dim_param); [] a scalar; [...] unknown
    rank. The brackets are optional (2,3,?); quote shapes in the shell, since [ ] and ? are
    glob characters.

    Every command takes --json: one JSON object on stdout (with a schema_version; the JSON
    Schemas ship in the package), shapes in the text form, and a failure described under
    "error". check also writes --format sarif, github or html. Exit status: 0 clean, 1
    findings (such as incompatible shapes), 2 bad usage, unreadable input or an internal
    error, 130 interrupted.

    Shell completion: eval "$(_BCAST_COMPLETE=bash_source bcast)" (zsh_source, fish_source).
    """


# Commands, registered explicitly, one line each (bcast check / bcast verify go here too).
main.add_command(shape)
main.add_command(explain)
main.add_command(check)
main.add_command(verify)
main.add_command(domain)
BcastGroup.json_skeletons.update(
    shape=shape_skeleton, explain=explain_skeleton, check=check_skeleton, verify=verify_skeleton
)
