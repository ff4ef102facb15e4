"""Fuzzing the classes of hostile input of issue 39, in every command and output format.

- Names: node, tensor and dim names, doc strings and file names holding control characters,
  line breaks, bidi controls, terminal escapes and CI workflow commands (``::error``,
  ``##[error]``). No output line may carry a raw control character or start a workflow
  command that bcast did not write.
- Shape text: expression dims as bcast prints them (``Min(64, s)``), nested and broken, and
  control characters in symbol names.
- Option values: absurd limits and sizes are a usage error (exit 2, one line).
- Special files: FIFOs, devices, directories, dangling symlinks, huge sparse files.

Every run ends with exit 0, 1 or 2 and no traceback. The CI budget is small (about 30 s);
``BCAST_FUZZ_EXAMPLES=N`` runs N examples per test (see docs/errors.md).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import bcast
from bcast.cli import main

EXAMPLES = int(os.environ.get("BCAST_FUZZ_EXAMPLES", "0"))
LIMITS = ["--timeout", "30", "--max-memory", "1GiB"]
ENV = {"COLUMNS": "80", "FORCE_COLOR": None, "TTY_COMPATIBLE": None}
# Raw characters no output may hold: C0 but the line feed, DEL, C1, bidi and separators.
RAW = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2066-\u2069]")
BCAST_COMMAND = re.compile(r"^::(error|warning|notice) file=[^:]*,title=[^:]*::")


def budget(ci: int) -> settings:
    return settings(
        max_examples=EXAMPLES or ci,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )


def _run(*args: str, limits: bool = True) -> Result:
    result = CliRunner().invoke(
        main, [*args, *(LIMITS if limits else [])], env=ENV, catch_exceptions=True
    )
    note(f"{args}: exit {result.exit_code}: {result.stderr[-400:]}")
    event(f"{args[0]} exit {result.exit_code}")
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert result.exit_code in (0, 1, 2)
    assert "Traceback" not in result.stdout + result.stderr
    return result


def _assert_safe(result: Result, *, github: bool = False) -> None:
    for stream in (result.stdout, result.stderr):
        assert not RAW.search(stream), repr(RAW.search(stream))
        assert "##[" not in stream and "##vso[" not in stream
        for line in stream.splitlines():
            if line.lstrip().startswith("::"):
                assert github and BCAST_COMMAND.match(line), line


# -- names ---------------------------------------------------------------------------------

HOSTILE_PIECES = [
    "\n",
    "\r",
    "\r\n",
    "\t",
    "\x00",
    "\x07",
    "\x1b[2J",
    "\x1b]0;title\x07",
    "\x1b]8;;http://x\x1b\\",
    "\x9b31m",
    "\x85",
    "\u2028",
    "\u202e",
    "\u200b",
    "\ufeff",
    "::error file=evil.py,line=1::forged",
    "::add-mask::secret",
    "::stop-commands::tok",
    " ::warning ::x",
    "##[error]old",
    "##vso[task.setvariable]x",
    "%0A::error::x",
    "<script>",
    "&amp;",
    '"',
    ",",
    "[",
    "..",
    "Min(64, s)",
]
names = st.lists(
    st.one_of(st.sampled_from(HOSTILE_PIECES), st.text(max_size=4)), min_size=1, max_size=4
).map("".join)


def _named_model(node: str, x: str, y: str, dim: str, doc: str) -> bytes:
    """Two nodes, an Add that fails and a Mul with a symbolic dim, named as given."""
    xi = helper.make_tensor_value_info(x, TensorProto.FLOAT, [dim, 3])
    yi = helper.make_tensor_value_info(y, TensorProto.FLOAT, [4])
    wi = helper.make_tensor_value_info("w" + y, TensorProto.FLOAT, [dim, "M" + dim])
    add = helper.make_node("Add", [x, y], ["z" + x], name=node, doc_string=doc)
    mul = helper.make_node("Mul", [x, "w" + y], ["v" + x], name="m" + node)
    outputs = [
        helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("z" + x, "v" + x)
    ]
    graph = helper.make_graph([add, mul], doc or "g", [xi, yi, wi], outputs, doc_string=doc)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], doc_string=doc)
    model.ir_version = 8
    data: bytes = model.SerializeToString()
    return data


@budget(10)
@given(
    node=names,
    x=names,
    y=names,
    dim=names,
    doc=names,
    fmt=st.sampled_from(["text", "json", "sarif", "github", "html"]),
    then=st.sampled_from(["domain", "domain --json", "verify", "verify --json", "none"]),
)
def test_model_text_never_acts_on_a_terminal_or_ci(
    tmp_path_factory: pytest.TempPathFactory,
    node: str,
    x: str,
    y: str,
    dim: str,
    doc: str,
    fmt: str,
    then: str,
) -> None:
    if len({x, y, "w" + y}) < 3:
        return  # one tensor with two producers: another model than the one meant
    path = tmp_path_factory.mktemp("names") / "m.onnx"
    path.write_bytes(_named_model(node, x, y, dim, doc))
    result = _run("check", "--format", fmt, str(path))
    _assert_safe(result, github=fmt == "github")
    if fmt in ("json", "sarif") and result.stdout:
        json.loads(result.stdout)  # still one JSON document
    if then != "none":
        command, *rest = then.split()
        runtime = ["--runtime", "onnxruntime"] if command == "verify" else []
        result = _run(command, *rest, str(path), *runtime)
        _assert_safe(result)
        if rest:
            json.loads(result.stdout)


@budget(5)
@given(name=names)
def test_a_hostile_file_name_never_acts_on_a_terminal_or_ci(
    tmp_path_factory: pytest.TempPathFactory, name: str
) -> None:
    folder = tmp_path_factory.mktemp("files")
    safe = "".join(c for c in name if c not in "/\x00") or "m"
    path = folder / (safe[:100] + ".onnx")
    try:
        path.write_bytes(_named_model("add", "x", "y", "N", ""))
    except (OSError, ValueError):
        return  # a name this file system refuses
    for fmt in ("text", "github"):
        _assert_safe(_run("check", "--format", fmt, str(path)), github=fmt == "github")
    _assert_safe(_run("check", str(folder / (safe[:100] + ".missing"))))


# -- shape text ------------------------------------------------------------------------------

symbols = st.sampled_from(["s", "s0", "batch", "h", "N"])
expressions = st.recursive(
    st.one_of(symbols, st.integers(0, 99).map(str)),
    lambda inner: st.one_of(
        st.tuples(st.sampled_from(["Min", "Max", "floor", "CeilToInt"]), inner, inner).map(
            lambda t: f"{t[0]}({t[1]}, {t[2]})" if t[0] in ("Min", "Max") else f"{t[0]}({t[1]})"
        ),
        st.tuples(inner, st.sampled_from([" + ", "*", " - ", "//"]), inner).map("".join),
        inner.map(lambda e: f"({e})"),
    ),
    max_leaves=6,
)
dims = st.one_of(
    expressions,
    st.sampled_from(["?", "1..", "2..5", "N", "0", "3", "(", ")", ",", "Min(", ""]),
    st.text(max_size=3),
    st.sampled_from(HOSTILE_PIECES),
)


@budget(150)
@given(parts=st.lists(dims, min_size=0, max_size=4), brackets=st.booleans())
def test_shape_text_with_expressions_is_one_dim_per_top_level_comma(
    parts: list[str], brackets: bool
) -> None:
    text = ",".join(parts)
    text = f"[{text}]" if brackets else text
    try:
        shape = bcast.Shape.parse(text)
    except bcast.BroadcastError as err:
        assert not RAW.search(str(err)), str(err)  # the text is quoted escaped
        return
    body = text.strip()
    body = body[1:-1].strip() if body.startswith("[") else body
    if shape.rank is not None and body not in ("", "..."):
        depth_zero_commas = sum(
            1 for k, c in enumerate(text) if c == "," and text[:k].count("(") == text[:k].count(")")
        )
        assert shape.rank == depth_zero_commas + 1
    assert bcast.Shape.parse(str(shape)) == shape  # what bcast prints it reads back
    for dim in shape.dims if shape.rank else ():
        assert dim.name is None or dim.name.isprintable()


@budget(20)
@given(a=st.lists(dims, min_size=1, max_size=3), b=st.lists(dims, min_size=1, max_size=3))
def test_shape_and_explain_commands_on_expression_text(a: list[str], b: list[str]) -> None:
    sa, sb = "[" + ",".join(a) + "]", "[" + ",".join(b) + "]"
    for args in (("shape", sa, sb), ("explain", sa, sb), ("shape", "--json", sa, sb)):
        result = _run(*args, limits=False)
        _assert_safe(result)
        if result.exit_code == 0 and args[1] != "--json" and args[0] == "shape":
            assert bcast.Shape.parse(result.stdout.strip()).rank is not None


# -- option values -------------------------------------------------------------------------

absurd = st.one_of(
    st.sampled_from(
        [
            "nan",
            "NaN",
            "inf",
            "-inf",
            "1e309",
            "-0",
            "0",
            "-1",
            "1e-320",
            "18446744073709551616",
            "9" * 400,
            "1e30GiB",
            "0x10",
            "٣",
            "1_000",
            " 5",
            "",
            "1GiB",
            "64MiB",
            "3",
        ]
    ),
    st.text(max_size=6),
)


@budget(25)
@given(
    command=st.sampled_from(["check", "verify", "domain"]),
    option=st.sampled_from(["--timeout", "--max-memory", "--max-elements", "--seed", "--dim"]),
    value=absurd,
)
def test_absurd_option_values_are_usage_errors(command: str, option: str, value: str) -> None:
    model = str(Path(__file__).parent.parent / "fixtures" / "hostile" / "dimparam_minus1.onnx")
    if option == "--dim":
        value = f"batch={value}"
    result = _run(command, model, option, value, limits=False)
    _assert_safe(result)
    if result.exit_code == 2 and "Invalid value" in result.stderr:
        assert len(result.stderr.strip().splitlines()) == 1
    assert "unreadable" not in result.stdout + result.stderr or option != "--max-memory"


# -- special files ---------------------------------------------------------------------------


def _special(folder: Path, kind: str) -> Path | None:
    path = folder / ("m.xml" if kind == "ir-bin-zero" else "m.onnx")
    if kind in ("zero", "null", "tty", "ir-bin-zero"):
        target = {"zero": "/dev/zero", "null": "/dev/null", "tty": "/dev/tty"}.get(
            kind, "/dev/zero"
        )
        if not os.path.exists(target):
            return None
        if kind == "ir-bin-zero":
            hostile = Path(__file__).parent.parent / "fixtures" / "hostile"
            path.write_bytes((hostile / "ov_broadcast_bomb.xml").read_bytes())
            (folder / "m.bin").symlink_to(target)
        else:
            path.symlink_to(target)
    elif kind == "fifo":
        if not hasattr(os, "mkfifo"):
            return None
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "dangling":
        path.symlink_to(folder / "nowhere")
    elif kind == "loop":
        path.symlink_to(path)
    elif kind == "empty":
        path.write_bytes(b"")
    else:  # huge and sparse: never read
        with open(path, "wb") as handle:
            handle.truncate(3 * 2**30)
    return path


@budget(15)
@given(
    kind=st.sampled_from(
        [
            *("zero", "null", "tty", "fifo", "directory"),
            *("dangling", "loop", "empty", "huge", "ir-bin-zero"),
        ]
    ),
    command=st.sampled_from(["check", "verify", "domain"]),
    as_json=st.booleans(),
)
def test_special_files_are_refused_in_one_line(
    tmp_path_factory: pytest.TempPathFactory, kind: str, command: str, as_json: bool
) -> None:
    path = _special(tmp_path_factory.mktemp("special"), kind)
    if path is None:
        pytest.skip(f"no {kind} here")
    result = _run(command, *(["--json"] if as_json else []), str(path))
    _assert_safe(result)
    assert result.exit_code == 2
    if as_json:
        assert json.loads(result.stdout)["error"] is not None or command == "check"
    else:
        errors = [ln for ln in result.stderr.splitlines() if not ln.startswith("bcast: warn")]
        assert len(errors) == 1, result.stderr
