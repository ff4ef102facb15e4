"""Text from a model never acts on a terminal or a CI log, in any command or format.

Names holding line breaks, ``::error``/``::add-mask::`` workflow commands and terminal
escapes (``tests/fixtures/hostile/inj_gh.onnx``, ``inj_ansi.onnx``) are shown escaped by the
one function `bcast.core.text.safe_text`, and the command line passes every line it writes
through it too.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from bcast.cli import main
from bcast.cli._safe_output import SafeStream, safe_json
from bcast.core.text import safe_text

HOSTILE = Path(__file__).parent.parent / "fixtures" / "hostile"
ENV = {"COLUMNS": "100", "FORCE_COLOR": None, "TTY_COMPATIBLE": None}
# Any control character but the line feed, DEL, C1, bidi controls, line separators.
RAW = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2066-\u2069]")
BCAST_COMMAND = re.compile(r"^::(error|warning|notice) file=[^:]*,title=[^:]*::")


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), env=ENV, catch_exceptions=False)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        pytest.param("conv1/Add", "conv1/Add", id="plain-name-kept"),
        pytest.param("aten::add_1", "aten::add_1", id="inner-double-colon-kept"),
        pytest.param("a\nb\rc\td", "a\\nb\\rc\\td", id="line-breaks"),
        pytest.param("x\x1b[2J\x1b]0;t\x07", "x\\x1b[2J\\x1b]0;t\\x07", id="ansi-and-osc"),
        pytest.param("a\x9bb\x7f\x00", "a\\x9bb\\x7f\\x00", id="c1-del-nul"),
        pytest.param("ab\u202ecd\u2028e", "ab\\u202ecd\\u2028e", id="bidi-and-separator"),
        pytest.param("::add-mask::s", "\\x3a:add-mask::s", id="command-at-start"),
        pytest.param("a ::error x::y", "a \\x3a:error x::y", id="command-after-space"),
        pytest.param(
            "p ##[error]x ##vso[task]", "p \\x23#[error]x \\x23#vso[task]", id="old-runners"
        ),
        pytest.param("C:\\models\\m.onnx", "C:\\models\\m.onnx", id="backslashes-kept"),
    ],
)
def test_safe_text_shows_what_a_terminal_or_ci_would_act_on_escaped(text: str, shown: str) -> None:
    assert safe_text(text) == shown
    assert "\n" not in safe_text(text) and not RAW.search(safe_text(text))


def test_safe_json_keeps_values_exact_and_escapes_them() -> None:
    value = {"n": "a\x1b[2J\x9b\u202e##[error]\U0001f600\n::x"}
    text = safe_json(value)
    assert json.loads(text) == value
    assert not RAW.search(text) and "##[" not in text


def test_guarded_stream_keeps_forced_colours_and_escapes_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import io

    text = "\x1b[1mbold\x1b[0m \x1b[2J\n  ::error x::y\n"
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich then colours a pipe: those codes stay
    out = io.StringIO()
    SafeStream(out).write(text)
    assert out.getvalue() == "\x1b[1mbold\x1b[0m \\x1b[2J\n  \\x3a:error x::y\n"
    monkeypatch.delenv("FORCE_COLOR")  # a pipe or a CI log: rich writes no escape at all
    out = io.StringIO()
    SafeStream(out).write(text)
    assert out.getvalue() == "\\x1b[1mbold\\x1b[0m \\x1b[2J\n  \\x3a:error x::y\n"


def test_guarded_stream_leaves_json_lines_alone() -> None:
    import io

    out = io.StringIO()
    line = safe_json({"name": " ::warning ::x\x1b[2J"}) + "\n"
    SafeStream(out).write(line)  # a "\x3a" inside a JSON string would be invalid JSON
    assert out.getvalue() == line and json.loads(line)["name"] == " ::warning ::x\x1b[2J"


def _cases() -> list[tuple[str, ...]]:
    cases: list[tuple[str, ...]] = []
    for model in ("inj_gh.onnx", "inj_ansi.onnx", "inj_html.onnx"):
        path = str(HOSTILE / model)
        for fmt in ("text", "json", "sarif", "github", "html"):
            cases.append(("check", "--format", fmt, path))
        for fmt in ("text", "json"):
            cases.append(("verify", "--format", fmt, path) if fmt != "text" else ("verify", path))
            cases.append(("domain", "--json", path) if fmt == "json" else ("domain", path))
        cases.append(("domain", path, "--dim", "M=2"))
    shape = "[x\x1b]0;t\x07\n::add-mask::s,3]"
    for fmt in ("text", "json", "svg", "html"):
        cases.append(("explain", shape, "[4]", "--format", fmt))
        cases.append(("explain", "[N,3]", "[4]", "--format", fmt))
    cases.append(("shape", shape, "[4]"))
    cases.append(("check", str(HOSTILE / "no\nsuch\x1b[2J.onnx")))
    cases.append(("check", "--format", "github", str(HOSTILE / "::error x::no\nsuch.onnx")))
    return cases


@pytest.mark.parametrize("args", _cases(), ids=lambda a: " ".join(a).replace(str(HOSTILE), ""))
def test_no_output_line_a_terminal_or_ci_would_act_on(args: tuple[str, ...]) -> None:
    result = run(*args)
    assert result.exit_code in (0, 1, 2), result.output
    assert "Traceback" not in result.stdout + result.stderr
    github = "github" in args
    for stream in (result.stdout, result.stderr):
        assert not RAW.search(stream), stream
        assert "##[" not in stream
        for line in stream.splitlines():
            if line.lstrip().startswith("::"):
                assert github and BCAST_COMMAND.match(line), line
    if github and result.exit_code == 1:  # one annotation per finding, model text escaped
        lines = result.stdout.splitlines()
        assert lines and all(BCAST_COMMAND.match(line) for line in lines)


def test_a_model_name_stays_recognisable_on_one_line() -> None:
    result = run("check", str(HOSTILE / "inj_gh.onnx"))
    assert result.exit_code == 1
    assert "nodex\\n\\x3a:error file=evil.py,line=1::forged by model" not in result.stdout
    assert "nodex\\n::error file=evil.py,line=1::forged by model\\n" in result.stdout


@pytest.mark.parametrize("model", ["inj_gh.onnx", "inj_ansi.onnx"])
def test_the_python_reports_show_model_text_escaped(model: str) -> None:
    import bcast

    report = bcast.check(str(HOSTILE / model))
    domain = report.domain
    assert domain is not None
    for text in (str(report), report.to_html(), str(domain), domain._repr_html_()):
        assert not RAW.search(text)
        assert not any(line.lstrip().startswith("::") for line in text.splitlines())
