"""Check reports people want to look at: the notebook `Report` and ``check --format html``.

Parsed with `html.parser`: findings are tables (stretched cells shaded, the failing axis
marked), each model has a summary table and its domain drawn as bars, the page loads
nothing from anywhere and long text wraps.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

from click.testing import CliRunner

import bcast
from bcast.cli import main

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
BERT = str(REAL / "bert_dynamo.onnx")  # warns: fails when s41 > 64 (position table)
BERT_31 = str(REAL / "bert_dynamo__pos_embedding_width_31.onnx")  # 32 vs 31 at axis 2


class Tree(HTMLParser):
    """Every start tag with its attributes, the text under each element, in order."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.stack: list[tuple[str, dict[str, str]]] = []
        self.cells: list[tuple[str, str, str]] = []  # (tag, class, text) of th/td
        self.css = ""
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        self.tags.append((tag, found))
        self.stack.append((tag, found))

    def handle_endtag(self, tag: str) -> None:
        while self.stack and self.stack.pop()[0] != tag:
            pass

    def handle_data(self, data: str) -> None:
        if not self.stack:
            return
        tag, attrs = self.stack[-1]
        if tag == "style":
            self.css += data
        if tag in ("td", "th"):
            self.cells.append((tag, attrs.get("class", ""), data))

    def having(self, tag: str, cls: str) -> list[dict[str, str]]:
        return [a for t, a in self.tags if t == tag and cls in a.get("class", "").split()]


def test_notebook_report_draws_tables_with_stretched_cells_and_the_failing_axis() -> None:
    tree = Tree(bcast.check(BERT)._repr_html_())
    assert not [t for t, _ in tree.tags if t == "pre"]  # no plain text dump
    assert tree.having("table", "bcast") and tree.having("table", "summary")
    # node_add_18: [s18,s41,32] + [1,Min(64, s41),32] fails unless s41 <= 64 at axis 1;
    # NumPy stretches the 1 of embedding_2 at axis 0 over s18.
    assert ("th", "failing", "1 ✗") in tree.cells
    assert ("td", "failing", "Min(64, s41)") in tree.cells
    assert ("td", "stretched", "1") in tree.cells
    assert tree.css  # the style comes with the fragment


def test_notebook_report_marks_the_axis_of_an_error() -> None:
    tree = Tree(bcast.check(BERT_31)._repr_html_())
    assert ("th", "failing", "2 ✗") in tree.cells
    assert ("td", "failing", "31") in tree.cells and ("td", "failing", "32") in tree.cells


def test_domain_is_drawn_as_a_bar_per_input_dim() -> None:
    tree = Tree(bcast.check(BERT)._repr_html_())
    segments = {a["title"]: a["style"] for a in tree.having("div", "seg")}
    # bcast domain says: s18 any, s41 1..64, s43 any
    assert set(segments) == {"any", "1..64"}
    left, width = map(float, re.findall(r"([\d.]+)%", segments["1..64"]))
    right = left + width
    top = float(re.search(r"bars from 0 to (\d+)", bcast.check(BERT)._repr_html_())[1])
    assert abs(left - 100 / top) < 0.01 and abs(right - 65 * 100 / top) < 0.01
    assert [a for a in tree.having("div", "seg") if "open" in a["class"]]  # any: no upper end


def test_check_html_page_has_a_summary_row_per_model_and_loads_nothing(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.onnx")
    result = CliRunner().invoke(main, ["check", BERT, BERT_31, missing, "--format", "html"])
    assert result.exit_code == 2  # an unreadable model (docs/errors.md)
    page = result.stdout
    tree = Tree(page)
    summary = tree.having("table", "summary")
    assert summary
    first = page.index('<table class="summary">')
    rows = page[first : page.index("</table>", first)].count("<tr>") - 1
    assert rows == 3  # the two models and the unreadable one
    assert len(tree.having("table", "bcast")) == 2  # one finding each, drawn
    # Self-contained: no script, no external stylesheet, font or image.
    assert not [t for t, _ in tree.tags if t in ("script", "link", "img", "iframe")]
    for _, attrs in tree.tags:
        for value in attrs.values():
            assert not re.search(r"(?i)https?://", value)
    assert not re.search(r"(?i)https?://|@import|url\(", tree.css)
    # Long lines wrap instead of running off the page.
    assert "overflow-wrap:anywhere" in tree.css and "white-space:pre-wrap" in tree.css
