"""The ``bcast shape`` and ``bcast explain`` commands: output, exit codes, JSON, help.

Expected shapes come from the specifications (ONNX Broadcasting.md, the OpenVINO broadcast
rules) and DESIGN's worked examples, never from running bcast. Most tests use click's
CliRunner; `TestInstalledEntryPoint` runs the real ``python -m bcast`` in a subprocess.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner, Result

from bcast import Mode
from bcast.cli import main
from bcast.cli._output import load_schema
from bcast.cli.shapes import MODE_NAMES
from bcast.core.modes import ALIASES

WIDTH = 80
# A fixed, non-TTY terminal: no colour forced on, 80 columns.
ENV: dict[str, str | None] = {
    "COLUMNS": str(WIDTH),
    "LINES": "25",
    "FORCE_COLOR": None,
    "NO_COLOR": None,
    "TTY_COMPATIBLE": None,
    "TTY_INTERACTIVE": None,
    "TERM": "xterm-256color",
}
README_COMMAND = ["explain", "[2,3,4,5]", "[3,1]", "--mode", "pdpd", "--axis", "1"]
ANSI = re.compile(r"\x1b\[")


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), env=ENV, catch_exceptions=False)


def lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines()]


# -- JSON schemas ----------------------------------------------------------------------------
# The schemas that ship in the package (bcast/cli/schemas/*.json) are the contract; the tests
# validate against them and pin, beside, what DESIGN says of them.

SHAPE_SCHEMA = load_schema("shape")
EXPLAIN_SCHEMA = load_schema("explain")


def parse_json(result: Result, schema: dict[str, Any]) -> dict[str, Any]:
    """Stdout is exactly one JSON object (json.loads rejects two) and fits the schema."""
    obj = json.loads(result.stdout)
    assert isinstance(obj, dict)
    jsonschema.validate(obj, schema)
    return obj


# -- bcast shape: results --------------------------------------------------------------------

SHAPE_CASES = [
    pytest.param(["[2,1,5]", "[4,1]"], "[2,4,5]", id="numpy-onnx-doc"),
    pytest.param(["[2,3,4,5]", "[5]"], "[2,3,4,5]", id="numpy-trailing"),
    pytest.param(["[2,3,4,5]", "[]"], "[2,3,4,5]", id="numpy-scalar"),
    pytest.param(["[1,4,5]", "[2,3,1,1]"], "[2,3,4,5]", id="numpy-both-ways"),
    pytest.param(["[N,1,8]", "[1,4,?]"], "[N,4,8]", id="numpy-partial"),
    pytest.param(["N,1,8", "1,4,?"], "[N,4,8]", id="no-brackets"),
    pytest.param(["[ 2, 1 ]", "[3]"], "[2,3]", id="spaces"),
    pytest.param(["[?]", "[5]"], "[5]", id="unknown-vs-static"),
    pytest.param(["[N]", "[3]"], "[3]", id="symbol-vs-static"),
    pytest.param(["[N]", "[M]"], "[?]", id="two-symbols"),
    pytest.param(["[2..10]", "[3..5]"], "[3..5]", id="intervals"),
    pytest.param(["[0]", "[1]"], "[0]", id="zero-with-one"),
    pytest.param(["[...]", "[2,3]"], "[...]", id="unknown-rank"),
    pytest.param([], "[]", id="no-operands"),
    pytest.param(["[3,1]", "[1,4]", "--mode", "multidirectional"], "[3,4]", id="alias"),
    pytest.param(["[2,3]", "[2,3]", "--mode", "none"], "[2,3]", id="none"),
    pytest.param(
        ["[2,3,4,5]", "[3,1]", "--mode", "pdpd", "--axis", "1"], "[2,3,4,5]", id="pdpd-readme"
    ),
    pytest.param(["[2,3,4,5]", "[4,5]", "--mode", "pdpd"], "[2,3,4,5]", id="pdpd-default"),
    pytest.param(
        ["[2,3,4,5]", "[4,5]", "--mode", "pdpd", "--axis", "-1"], "[2,3,4,5]", id="pdpd-minus-1"
    ),
    pytest.param(["[4,3]", "[3]", "--mode", "unidirectional"], "[4,3]", id="unidirectional"),
    pytest.param(["[2,3]", "[4,1,1]", "--mode", "bidirectional"], "[4,2,3]", id="bidirectional"),
    pytest.param(
        ["[16]", "[1,16,50,50]", "--mode", "explicit", "--axes-mapping", "1"],
        "[1,16,50,50]",
        id="explicit",
    ),
    pytest.param(
        ["[3,1]", "[2,3,4]", "--mode", "explicit", "--axes-mapping", "[1,2]"],
        "[2,3,4]",
        id="explicit-brackets",
    ),
    pytest.param(
        ["[]", "[2,3]", "--mode", "explicit", "--axes-mapping", "[]"], "[2,3]", id="explicit-scalar"
    ),
]


@pytest.mark.parametrize(("args", "expected"), SHAPE_CASES)
def test_shape_prints_the_result_in_text_form(args: list[str], expected: str) -> None:
    result = run("shape", *args)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == expected + "\n"
    assert result.stderr == ""


@pytest.mark.parametrize(("args", "expected"), SHAPE_CASES)
def test_shape_json_has_the_result(args: list[str], expected: str) -> None:
    result = run("shape", *args, "--json")
    assert result.exit_code == 0
    obj = parse_json(result, SHAPE_SCHEMA)
    assert obj["result"] == expected
    assert obj["error"] is None


def test_shape_json_writes_shapes_and_parameters_in_canonical_form() -> None:
    result = run("shape", "N, 1,8", "1,4,?", "--mode", "multidirectional", "--json")
    obj = parse_json(result, SHAPE_SCHEMA)
    assert obj == {
        "schema_version": 1,
        "mode": "numpy",
        "shapes": ["[N,1,8]", "[1,4,?]"],
        "axis": -1,
        "axes_mapping": None,
        "result": "[N,4,8]",
        "error": None,
    }


# -- incompatible shapes: exit 1 ---------------------------------------------------------------

INCOMPATIBLE = [
    pytest.param(["[2,3]", "[4]"], 1, 1, "3 vs 4", id="numpy"),
    pytest.param(["[2,1,5]", "[4,3]"], 2, 1, "5 vs 3", id="numpy-last-axis"),
    pytest.param(["[0]", "[2]"], 0, 1, "0 vs 2", id="zero-vs-two"),
    pytest.param(["[2,3]", "[2,4]", "--mode", "none"], 1, 1, "3 vs 4", id="none"),
    pytest.param(["[2]", "[3,2]", "--mode", "none"], None, None, "differ in rank", id="none-rank"),
    pytest.param(["[2,3,4]", "[3,5]", "--mode", "pdpd", "--axis", "1"], 2, 1, "5 vs 4", id="pdpd"),
    pytest.param(
        ["[2,3]", "[2,3,1]", "--mode", "pdpd"], None, 1, "rank(B) <= rank(A)", id="pdpd-rank"
    ),
    pytest.param(["[1]", "[3]", "--mode", "unidirectional"], 0, 1, "3 vs 1", id="unidirectional"),
    pytest.param(
        ["[3]", "[2,3,4]", "--mode", "explicit", "--axes-mapping", "0"],
        0,
        0,
        "3 vs 2",
        id="explicit",
    ),
]


@pytest.mark.parametrize(("args", "axis", "operand", "fragment"), INCOMPATIBLE)
def test_shape_explains_incompatible_shapes_on_stderr_and_exits_1(
    args: list[str], axis: int | None, operand: int | None, fragment: str
) -> None:
    result = run("shape", *args)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert fragment in result.stderr
    assert "Traceback" not in result.stderr
    if axis is not None:
        assert f"^ axis {axis}" in result.stderr  # the aligned picture, caret under the axis


@pytest.mark.parametrize(("args", "axis", "operand", "fragment"), INCOMPATIBLE)
def test_shape_json_carries_the_error_and_its_axis(
    args: list[str], axis: int | None, operand: int | None, fragment: str
) -> None:
    result = run("shape", *args, "--json")
    assert result.exit_code == 1
    assert result.stderr == ""
    obj = parse_json(result, SHAPE_SCHEMA)
    assert obj["result"] is None
    error = obj["error"]
    assert error["kind"] == "incompatible"
    assert error["axis"] == axis
    assert error["operand"] == operand
    assert fragment in error["message"]


# -- bad usage: exit 2, one line ---------------------------------------------------------------

USAGE = [
    pytest.param(["2,,3"], "empty dimension", id="empty-dim"),
    pytest.param(["[2,3"], "unbalanced brackets", id="unbalanced"),
    pytest.param(["[-1,2]"], "non-negative", id="negative-dim"),
    pytest.param(["[2.5]"], "2.5", id="float-dim"),
    pytest.param(["[2]", "--mode", "foo"], "'foo' is not one of", id="unknown-mode"),
    pytest.param(["[2]", "--mode", "pdpd"], "exactly 2 operands", id="pdpd-one-operand"),
    pytest.param(["[2]", "[2]", "[2]", "--mode", "explicit"], "exactly 2", id="explicit-three"),
    pytest.param(["--mode", "none"], "at least one operand", id="none-no-operand"),
    pytest.param(["[2]", "[2]", "--axis", "1"], "only used by mode 'pdpd'", id="axis-numpy"),
    pytest.param(["[2]", "[2]", "--axis", "x"], "'x' is not a valid integer", id="axis-text"),
    pytest.param(
        ["[2,3]", "[3]", "--mode", "pdpd", "--axis", "-2"], "-1 or a non-negative", id="axis-neg"
    ),
    pytest.param(["[2]", "[2]", "--axes-mapping", "0"], "only used by mode 'explicit'", id="map"),
    pytest.param(["[2]", "[2,3]", "--mode", "explicit"], "needs axes_mapping", id="map-missing"),
    pytest.param(
        ["[2]", "[2,3]", "--mode", "explicit", "--axes-mapping", "a"],
        "integers separated by commas or spaces",
        id="map-text",
    ),
    pytest.param(
        ["[2]", "[2,3]", "--mode", "explicit", "--axes-mapping", "1,,2"],
        "integers separated by commas or spaces",
        id="map-empty-entry",
    ),
    pytest.param(
        ["[2,3]", "[2,3,4]", "--mode", "explicit", "--axes-mapping", "1,0"],
        "strictly increasing",
        id="map-order",
    ),
    pytest.param(
        ["[2]", "[2,3]", "--mode", "explicit", "--axes-mapping", "0,1"],
        "one entry per data axis",
        id="map-length",
    ),
    pytest.param(
        ["[2]", "[2,3]", "--mode", "explicit", "--axes-mapping", "2"],
        "below the target rank",
        id="map-range",
    ),
    pytest.param(["[2]", "--bogus"], "No such option", id="unknown-option"),
    # numbers past what Python writes as text (4300 digits): our message, not a traceback
    pytest.param(["[" + "9" * 5000 + "]"], "got a number of 5000 digits", id="dim-5000-digits"),
    pytest.param(
        ["[2,3]", "[3]", "--mode", "pdpd", "--axis", "9" * 5000], "out of range", id="axis-huge"
    ),
    pytest.param(
        ["[3]", "[2,3]", "--mode", "explicit", "--axes-mapping", "9" * 5000],
        "out of range",
        id="map-huge",
    ),
]


@pytest.mark.parametrize("command", ["shape", "explain"])
@pytest.mark.parametrize(("args", "fragment"), USAGE)
def test_bad_usage_is_one_line_on_stderr_and_exits_2(
    command: str, args: list[str], fragment: str
) -> None:
    result = run(command, *args)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith("Error: ")
    assert fragment in result.stderr
    assert f"Try 'bcast {command} -h' for help." in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("command", ["shape", "explain"])
@pytest.mark.parametrize(("args", "fragment"), USAGE)
def test_bad_usage_with_json_still_prints_one_object(
    command: str, args: list[str], fragment: str
) -> None:
    result = run(command, *args, "--json")
    assert result.exit_code == 2
    obj = parse_json(result, SHAPE_SCHEMA if command == "shape" else EXPLAIN_SCHEMA)
    assert obj["error"]["kind"] == "usage"
    assert fragment in obj["error"]["message"]
    assert len(result.stderr.splitlines()) == 1


def test_an_unknown_command_is_one_line_and_exits_2() -> None:
    result = run("nosuch")
    assert result.exit_code == 2
    assert lines(result.stderr) == ["Error: No such command 'nosuch'. Try 'bcast -h' for help."]


def test_mode_choices_are_every_mode_and_alias() -> None:
    assert set(MODE_NAMES) == {m.value for m in Mode} | set(ALIASES)
    help_text = run("shape", "--help").stdout
    for name in MODE_NAMES:
        assert name in help_text


# -- bcast explain -----------------------------------------------------------------------------


def test_explain_readme_command_draws_the_alignment_table() -> None:
    result = run(*README_COMMAND)
    assert result.exit_code == 0
    out = lines(result.stdout)
    assert out[0] == "pdpd  A [2,3,4,5]  B [3,1]  axis=1  →  [2,3,4,5]"
    assert any("B is placed in A starting at axis 1" in line for line in out[1:3])
    table = [p for line in out if (p := line.split()) and (p[-1] == "shape" or p[-1][0] == "[")]
    rows = {p[0]: p[1:] for p in table[1:]}  # table[0] is the heading line
    assert rows["axis"] == ["0", "1", "2", "3", "shape"]
    assert rows["A"] == ["2", "3", "4", "5", "[2,3,4,5]"]
    assert rows["B"] == ["·", "3", "1", "·", "[3,1]"]
    assert rows["result"] == ["2", "3", "4", "5", "[2,3,4,5]"]
    notes = [line for line in out if line.startswith("axis ") and ":" in line]
    assert notes == [
        "axis 0: A is 2; B has no axis here (counts as 1), stretched to 2",
        "axis 1 ← B axis 0: A and B are 3",
        "axis 2 ← B axis 1: A is 4; B is 1, stretched to 4",
        "axis 3: A is 5; B has no axis here (counts as 1), stretched to 5",
    ]
    assert out[-1] == "stretched: B along axes 0, 2, 3"


def test_explain_output_fits_80_columns_and_has_no_ansi_codes_off_a_tty() -> None:
    result = run(*README_COMMAND)
    assert not ANSI.search(result.stdout)
    assert max(len(line) for line in result.stdout.splitlines()) <= WIDTH


def test_explain_never_truncates_a_wide_table() -> None:
    a = "[" + ",".join(str(n) for n in range(2, 16)) + "]"
    b = "[" + ",".join(["1..10"] * 14) + "]"
    result = run("explain", a, b)
    assert result.exit_code == 0
    assert "…" not in result.stdout
    result_row = next(line for line in lines(result.stdout) if line.startswith("result"))
    assert result_row.split()[1:-1] == [str(n) for n in range(2, 16)]


def test_explain_explicit_says_which_data_axis_lands_where() -> None:
    result = run("explain", "[16]", "[1,16,50,50]", "--mode", "explicit", "--axes-mapping", "1")
    assert result.exit_code == 0
    out = lines(result.stdout)
    assert "axis 1 ← data axis 0: data and target are 16" in out
    assert "axis 2: target is 50; data has no axis here (counts as 1), stretched to 50" in out
    assert "stretched: data along axes 2, 3" in out


def test_explain_pdpd_shows_the_trailing_ones_it_ignores() -> None:
    result = run("explain", "[2,3,4]", "[3,4,1]", "--mode", "pdpd", "--axis", "1")
    assert result.exit_code == 0
    out = lines(result.stdout)
    assert any("ignored" in line.split() for line in out)  # the table's extra column
    assert "B axis 2 (1) lies past the last axis of A: a trailing one, ignored" in out


def test_explain_pdpd_draws_b_overhanging_a_when_a_non_one_lies_past_a() -> None:
    # A [2,3], B [3,2] from axis 1: B's 2 would sit past A's last axis. It is the cause of
    # the failure, not an ignored trailing one: drawn in its own column, never "ignored".
    result = run("explain", "[2,3]", "[3,2]", "--mode", "pdpd", "--axis", "1")
    assert result.exit_code == 1
    out = lines(result.stdout)
    rows = {line.split()[0]: line.split() for line in out if line.split()}
    assert rows["axis"] == ["axis", "0", "1", "2", "shape"]
    assert rows["A"] == ["A", "2", "3", "·", "[2,3]"]
    assert rows["B"] == ["B", "·", "3", "2", "[3,2]"]
    assert "2 (B axis 1) would lie past A's last axis" in " ".join(out)
    obj = parse_json(
        run("explain", "[2,3]", "[3,2]", "--mode", "pdpd", "--axis", "1", "--json"),
        EXPLAIN_SCHEMA,
    )
    assert obj["dropped"] == []
    assert [a["dims"] for a in obj["axes"]] == [["2", None], ["3", "3"], [None, "2"]]


@pytest.mark.parametrize(
    ("args", "rows"),
    [
        pytest.param(
            ["[2,3]", "[4,5,6]", "--mode", "pdpd"],
            {"A": ["·", "2", "3"], "B": ["4", "5", "6"]},
            id="pdpd-rank",
        ),
        pytest.param(
            ["[2,3]", "[3]", "--mode", "none"],
            {"#0": ["2", "3"], "#1": ["·", "3"]},
            id="none-rank",
        ),
    ],
)
def test_explain_draws_rank_errors_right_aligned(
    args: list[str], rows: dict[str, list[str]]
) -> None:
    result = run("explain", *args)
    assert result.exit_code == 1
    drawn = {line.split()[0]: line.split()[1:-1] for line in lines(result.stdout) if line.strip()}
    for label, cells in rows.items():
        assert drawn[label] == cells
    assert "(counts as 1)" not in result.stdout  # a rank mismatch, not a stretch


def test_explain_partial_shapes_say_where_a_dim_may_stretch() -> None:
    result = run("explain", "[N,1,8]", "[1,4,?]")
    assert result.exit_code == 0
    out = lines(result.stdout)
    assert "axis 0: #0 is N; #1 is 1, stretched to N" in out
    assert "axis 2: #0 is 8; #1 is ?, stretched to 8 where it is 1" in out


def test_explain_failure_marks_the_axis_and_exits_1() -> None:
    result = run("explain", "[2,3]", "[4]")
    assert result.exit_code == 1
    out = lines(result.stdout)
    assert out[0].endswith("→  ✗")
    assert ["axis", "0", "1", "✗", "shape"] in [line.split() for line in out]
    assert out[-1] == "numpy: cannot broadcast [2,3] and [4] at axis 1: 3 vs 4"
    assert not ANSI.search(result.stdout)


@pytest.mark.parametrize("mode", [m.value for m in Mode])
def test_explain_renders_every_mode(mode: str) -> None:
    args = {
        "explicit": ["[3]", "[2,3]", "--axes-mapping", "1"],
        "none": ["[2,3]", "[2,3]"],
    }.get(mode, ["[2,3]", "[3]"])
    result = run("explain", *args, "--mode", mode)
    assert result.exit_code == 0, result.output
    assert lines(result.stdout)[1].startswith(f"{mode}")
    obj = parse_json(run("explain", *args, "--mode", mode, "--json"), EXPLAIN_SCHEMA)
    assert obj["result"] == "[2,3]"


def test_explain_json_describes_each_axis() -> None:
    result = run(*README_COMMAND, "--json")
    assert result.exit_code == 0
    obj = parse_json(result, EXPLAIN_SCHEMA)
    assert obj["mode"] == "pdpd"
    assert obj["shapes"] == ["[2,3,4,5]", "[3,1]"]
    assert obj["labels"] == ["A", "B"]
    assert obj["start_axis"] == 1
    assert obj["result"] == "[2,3,4,5]"
    assert [a["dims"] for a in obj["axes"]] == [["2", None], ["3", "3"], ["4", "1"], ["5", None]]
    assert [a["stretched"] for a in obj["axes"]] == [[1], [], [1], [1]]
    assert [a["result"] for a in obj["axes"]] == ["2", "3", "4", "5"]


def test_explain_json_failure_has_the_error_and_the_aligned_dims() -> None:
    result = run("explain", "[2,3,4]", "[3,5]", "--mode", "pdpd", "--axis", "1", "--json")
    assert result.exit_code == 1
    obj = parse_json(result, EXPLAIN_SCHEMA)
    assert obj["result"] is None
    assert obj["error"]["axis"] == 2
    assert obj["error"]["operand"] == 1
    assert [a["dims"] for a in obj["axes"]] == [["2", None], ["3", "3"], ["4", "5"]]


def test_explain_json_of_unknown_rank() -> None:
    obj = parse_json(run("explain", "[...]", "[2,3]", "--json"), EXPLAIN_SCHEMA)
    assert obj["result"] == "[...]"
    assert "#0 has unknown rank [...]: it adds no information" in obj["notes"]


# -- help and version --------------------------------------------------------------------------


@pytest.mark.parametrize("args", [["-h"], ["--help"], ["shape", "-h"], ["explain", "--help"]])
def test_help_is_sentences_with_the_syntax_and_examples(args: list[str]) -> None:
    result = run(*args)
    assert result.exit_code == 0
    assert "[...]" in result.stdout
    assert "Examples:" in result.stdout
    assert "Exit status" in result.stdout


def test_group_help_lists_the_commands() -> None:
    out = run("--help").stdout
    assert re.search(r"^\s+shape\s", out, re.MULTILINE)
    assert re.search(r"^\s+explain\s", out, re.MULTILINE)


def test_version() -> None:
    result = run("--version")
    assert result.exit_code == 0
    assert result.stdout == "bcast, version 0.1.0\n"


# -- the installed entry point, for real -------------------------------------------------------


def _subprocess_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if v is not None}
    for key, value in ENV.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def bcast_cli(*args: str, exe: Sequence[str] = (sys.executable, "-m", "bcast")) -> Any:
    return subprocess.run(
        [*exe, *args], capture_output=True, text=True, env=_subprocess_env(), check=False
    )


class TestInstalledEntryPoint:
    def test_python_m_bcast_runs_the_readme_command(self) -> None:
        proc = bcast_cli(*README_COMMAND)
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr == ""
        assert not ANSI.search(proc.stdout)
        assert "axis 2 ← B axis 1: A is 4; B is 1, stretched to 4" in proc.stdout
        assert max(len(line) for line in proc.stdout.splitlines()) <= WIDTH

    def test_python_m_bcast_exit_codes(self) -> None:
        ok = bcast_cli("shape", "[2,1,5]", "[4,1]")
        assert (ok.returncode, ok.stdout) == (0, "[2,4,5]\n")
        bad = bcast_cli("shape", "[2,3]", "[4]", "--json")
        assert bad.returncode == 1
        jsonschema.validate(json.loads(bad.stdout), SHAPE_SCHEMA)
        usage = bcast_cli("shape", "2,,3")
        assert usage.returncode == 2
        assert len(usage.stderr.splitlines()) == 1
        assert "Traceback" not in usage.stderr

    def test_the_command_leaves_with_its_status_handlers_run_and_streams_flushed(self) -> None:
        # bcast.__main__.leave skips the interpreter's teardown, not the exit handlers (the
        # worker stopped), not buffered output, not a thread that is not a daemon
        code = (
            "import atexit, sys, threading, time\n"
            "from bcast.__main__ import leave\n"
            "atexit.register(lambda: print('handler ran'))\n"
            "if sys.argv[1] == 'thread':\n"
            "    threading.Thread(target=lambda: (time.sleep(0.2), print('thread done'))).start()\n"
            "print('x' * 100000, end='')\n"
            "leave(None if sys.argv[1] == 'none' else 'said' if sys.argv[1] == 'text' else 3)\n"
        )
        for how, status in (("int", 3), ("none", 0), ("text", 1), ("thread", 3)):
            proc = _python(code, how)
            assert proc.returncode == status, (how, proc.stderr)
            assert proc.stdout.startswith("x" * 100000), how
            assert "handler ran" in proc.stdout, how
            assert ("thread done" in proc.stdout) == (how == "thread")
            assert proc.stderr.strip() == ("said" if how == "text" else ""), how

    def test_console_script_is_declared_and_runs(self) -> None:
        (script,) = entry_points(group="console_scripts", name="bcast")
        assert script.value == "bcast.__main__:main"
        from bcast.__main__ import main as script_main

        assert script.load() is script_main
        exe = Path(sys.executable).with_name("bcast")
        if not exe.exists():
            pytest.skip("the bcast script is not installed next to this interpreter")
        proc = bcast_cli("shape", "[N,1,8]", "[1,4,?]", exe=(str(exe),))
        assert (proc.returncode, proc.stdout) == (0, "[N,4,8]\n")

    def test_check_of_an_onnx_file_imports_neither_onnx_nor_numpy_here(self) -> None:
        # the file is parsed and read in the worker (bcast.loading): this process, the one
        # the user waits on, loads neither library, by the API nor by the command line
        code = (
            "import atexit, sys\n"
            "atexit.register(lambda: print(sorted({'onnx', 'numpy'} & set(sys.modules)),"
            " file=sys.stderr))\n"
            "import bcast\n"
            "if sys.argv[1] == 'api':\n"
            "    assert bcast.check(sys.argv[2]).nodes > 0\n"
            "else:\n"
            "    from bcast.__main__ import main\n"
            "    sys.argv = ['bcast', 'check', sys.argv[2], '--json']\n"
            "    main()\n"
        )
        for how in ("api", "cli"):
            proc = _python(code, how, RESNET)
            assert proc.returncode == 0, proc.stderr
            assert proc.stderr.strip().splitlines()[-1] == "[]", (how, proc.stderr)

    def test_the_command_runs_with_the_collector_on(self) -> None:
        # off while the modules load (__main__), on (and they frozen) for the command itself
        code = (
            "import gc, sys\n"
            "import bcast.cli as c\n"
            "real = c.main\n"
            "def spy(**kw):\n"
            "    print(gc.isenabled(), gc.get_freeze_count() > 1000, file=sys.stderr)\n"
            "    return real(**kw)\n"
            "c.main = spy\n"
            "sys.argv = ['bcast', 'check', sys.argv[1], '--json']\n"
            "from bcast.__main__ import main\n"
            "main()\n"
        )
        proc = _python(code, RESNET)
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr.strip().splitlines()[0] == "True True", proc.stderr

    def test_the_worker_starts_before_anything_else_of_bcast_loads(self) -> None:
        # python -m bcast check: the worker's interpreter and onnx load while bcast loads here
        code = (
            "import sys, bcast._spawn as s\n"
            "real = s.spawn\n"
            "def spy(preload):\n"
            "    loaded = sorted(m for m in sys.modules if m.startswith(('bcast', 'click')))\n"
            "    import gc\n"
            "    print(loaded, preload, 'typing' in sys.modules, gc.isenabled(), file=sys.stderr)\n"
            "    return real(preload)\n"
            "s.spawn = spy\n"
            "sys.argv = ['bcast', 'check', sys.argv[1], '--json']\n"
            "from bcast.__main__ import main\n"
            "main()\n"
        )
        proc = _python(code, RESNET)
        assert proc.returncode == 0, proc.stderr
        said = proc.stderr.strip().splitlines()
        # typing takes 8 ms to import: it loads after the worker's start
        loaded, preload, typing, collecting = said[0].rsplit(" ", 3)
        assert loaded == "['bcast', 'bcast.__main__', 'bcast._spawn']", said
        assert (preload, typing) == ("bcast._spawn:lean_onnx,bcast.onnx.reader", "False")
        assert collecting == "False"  # modules load without collection passes (7 ms)
        assert json.loads(proc.stdout)["models"][0]["error"] is None

    def test_import_bcast_loads_nothing_but_finds_every_name(self) -> None:
        code = (
            "import sys, bcast\n"
            "print(sorted(m for m in sys.modules if m.startswith('bcast')))\n"
            "names = bcast.__all__\n"
            "print(all(hasattr(bcast, n) for n in names), set(names) <= set(dir(bcast)))\n"
        )
        proc = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        assert proc.stdout.splitlines() == ["['bcast']", "True True"]

    def test_import_bcast_does_not_import_click_or_rich(self) -> None:
        code = "import sys, bcast; print(sorted({'click', 'rich'} & set(sys.modules)))"
        proc = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        assert proc.stdout.strip() == "[]"


RESNET = str(Path(__file__).parents[1] / "fixtures" / "real" / "resnet_torchscript.onnx")


def _python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``python -c code args...`` in a fresh interpreter; its output as text."""
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120
    )
