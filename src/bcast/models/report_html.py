"""Check reports as HTML: the notebook display of a `Report` and ``check --format html``.

Each finding is drawn as `Plan` and `BroadcastError` draw themselves (one row per operand,
one column per output axis, stretched cells shaded, the failing axis marked:
`bcast.core.html`); each report has a summary table and its domain, every input dim's
accepted sizes drawn as a bar. The page is self-contained: inline CSS, no script, no font
or style loaded from anywhere, every text from the model escaped; long lines wrap.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import Enum
from html import escape
from typing import Final, Protocol

from bcast.core.conditions import dim_texts
from bcast.core.errors import BroadcastError
from bcast.core.html import STYLE, alignment_html
from bcast.core.modes import Mode
from bcast.core.planning import plan
from bcast.core.shape import Shape
from bcast.models.domain import DimDomain, Domain, values_text
from bcast.models.pictures import operand_label

__all__ = [
    "CSS",
    "domain_html",
    "finding_html",
    "html_page",
    "report_html",
]


class FindingLike(Protocol):
    """What is drawn of a `bcast.models.Finding` (this module cannot import it: see ReportLike)."""

    @property
    def severity(self) -> Enum: ...
    @property
    def kind(self) -> str: ...
    @property
    def node(self) -> str: ...
    @property
    def op(self) -> str: ...
    @property
    def inputs(self) -> tuple[tuple[str, Shape], ...]: ...
    @property
    def mode(self) -> str | None: ...
    @property
    def axis(self) -> int | None: ...
    @property
    def reason(self) -> str: ...
    @property
    def picture(self) -> tuple[str, ...]: ...
    @property
    def where(self) -> str: ...


class UncheckedLike(Protocol):
    """A node not checked, as the summary counts it."""

    @property
    def node(self) -> str: ...


class ReportLike(Protocol):
    """What is drawn of a `bcast.models.Report`, whose ``to_html`` calls this module."""

    @property
    def path(self) -> str: ...
    @property
    def nodes(self) -> int: ...
    @property
    def findings(self) -> Sequence[FindingLike]: ...
    @property
    def broadcasting(self) -> int: ...
    @property
    def unchecked(self) -> Sequence[UncheckedLike]: ...
    @property
    def domain(self) -> Domain: ...
    def coverage(self) -> str | None: ...


_COLOURS: Final = {"error": "#c92a2a", "warning": "#e67700", "info": "#1971c2"}
_DRAWN_MODES: Final = frozenset(
    {Mode.NUMPY, Mode.NONE, Mode.UNIDIRECTIONAL, Mode.BIDIRECTIONAL}
)  # those whose alignment needs no axis or axes_mapping the finding does not keep

CSS: Final = STYLE + (
    ".bcast-report{overflow-wrap:anywhere;font-family:system-ui,sans-serif}"
    ".bcast-report pre,.bcast-report code{white-space:pre-wrap;overflow-wrap:anywhere}"
    ".bcast-report .scroll{overflow-x:auto;max-width:100%}"
    ".bcast-report .finding{border-left:4px solid #ccc;padding:.2em .8em;margin:.6em 0}"
    ".bcast-report .sev{font-weight:bold}"
    + "".join(
        f".bcast-report .finding.{k}{{border-color:{v}}}.bcast-report .sev.{k}{{color:{v}}}"
        for k, v in _COLOURS.items()
    )
    + "table.summary{border-collapse:collapse;margin:.4em 0}"
    "table.summary th,table.summary td{padding:.15em .6em;border-bottom:1px solid #ddd;"
    "text-align:right}"
    "table.summary th.label,table.summary td.label{text-align:left}"
    "table.domain{border-collapse:collapse;margin:.4em 0;width:100%}"
    "table.domain td{padding:.15em .6em;vertical-align:middle}"
    "table.domain td.bar{width:45%}"
    ".track{position:relative;height:.9em;background:#f1f3f5;border-radius:3px}"
    ".seg{position:absolute;top:0;height:100%;background:#40c057;border-radius:3px}"
    ".seg.open{background:linear-gradient(90deg,#40c057 70%,#b2f2bb)}"
)
"""The CSS of a report (scoped to ``.bcast-report`` and bcast's tables), written once a page."""


@dataclass(frozen=True, slots=True)
class _Drawn:
    """A shape for `alignment_html` with each dim's text (expressions as written)."""

    rank: int | None
    texts: tuple[str, ...]

    def __iter__(self) -> Iterator[object]:
        return iter(self.texts)

    def __str__(self) -> str:
        return "[" + ",".join(self.texts) + "]"


def _drawn(shape: Shape, names: dict[str, str]) -> _Drawn:
    texts = dim_texts(shape)
    for dim, text in zip(shape.dims, texts, strict=True):
        if dim.name is not None:
            names.setdefault(dim.name, text)
    return _Drawn(shape.rank, texts)


def _table(finding: FindingLike) -> str | None:
    """Draw a finding's operands as a table; None where its mode's alignment is not kept."""
    try:
        mode = Mode.parse(finding.mode) if finding.mode else None
    except BroadcastError:
        return None
    shapes = [s for _, s in finding.inputs]
    if mode not in _DRAWN_MODES or len(shapes) < 2 or any(s.rank is None for s in shapes):
        return None
    labels = [operand_label(n, i) for i, (n, _) in enumerate(finding.inputs)]
    names: dict[str, str] = {}
    drawn = [_drawn(s, names) for s in shapes]
    try:
        found = plan(*shapes, mode=mode, labels=labels)
    except BroadcastError as err:
        if err.alignment is None or err.out_rank is None or len(err.alignment) != len(drawn):
            return None
        return alignment_html(drawn, err.alignment, err.out_rank, labels=labels, mark_axis=err.axis)
    stretched = {
        (i, j)
        for i, axes in enumerate(found.alignment)
        if axes is not None
        for j in found.stretched_axes(i)
    }
    result = found.output
    shown = _Drawn(
        result.rank,
        tuple(names.get(d.name, str(d)) if d.name is not None else str(d) for d in result.dims),
    )
    return alignment_html(
        drawn,
        found.alignment,
        result.rank or 0,
        labels=labels,
        result=shown,
        stretched=stretched,
        mark_axis=finding.axis,
    )


def finding_html(finding: FindingLike) -> str:
    """Draw one finding: severity, node, reason, and its operands as a table.

    Examples
    --------
    >>> from bcast import Shape
    >>> from bcast.models import Finding, Severity
    >>> f = Finding(Severity.ERROR, "incompatible", "add", "Add",
    ...             (("x", Shape((2, 3))), ("y", Shape((4,)))), "numpy", 1, "cannot broadcast")
    >>> html = finding_html(f)
    >>> '<th class="failing">1 ✗</th>' in html, 'class="sev error"' in html
    (True, True)
    """
    severity = str(finding.severity.value)
    where = finding.where
    table = _table(finding)
    if table is None and finding.picture:
        table = f"<pre>{escape(chr(10).join(finding.picture))}</pre>"
    inputs = "; ".join(f"{n or '-'} {s}" for n, s in finding.inputs)
    return (
        f'<div class="finding {escape(severity)}">'
        f'<div><span class="sev {escape(severity)}">{escape(severity)}[{escape(finding.kind)}]'
        f"</span> <code>{escape(where)}</code></div>"
        + (f"<div><small>inputs: <code>{escape(inputs)}</code></small></div>" if inputs else "")
        + f"<div>{escape(finding.reason)}</div>"
        + (f'<div class="scroll">{table}</div>' if table else "")
        + "</div>"
    )


def _bar(dim: DimDomain, top: int) -> str:
    """Draw the sizes of one dim on a track from 0 to ``top`` (beyond: the open end)."""
    segments = []
    for lo, hi in dim.sizes:
        left = min(lo, top) / top * 100
        right = 100.0 if hi is None else min(hi + 1, top) / top * 100
        width = max(right - left, 0.8)
        kind = "seg open" if hi is None else "seg"
        title = values_text(((lo, hi),))
        segments.append(
            f'<div class="{kind}" title="{escape(title)}" '
            f'style="left:{left:.2f}%;width:{width:.2f}%"></div>'
        )
    return f'<div class="track">{"".join(segments)}</div>'


def domain_html(domain: Domain) -> str:
    """Draw the domain: a row per input dim with its accepted sizes as a bar, then relations.

    >>> from bcast.models.domain import DimDomain, Domain
    >>> html = domain_html(Domain(dims=(DimDomain("seq", ((1, 64),)),)))
    >>> 'class="seg"' in html and "1..64" in html
    True
    """
    if domain.empty:
        return (
            f'<p class="sev error">no input sizes make this model run: {escape(domain.empty)}</p>'
        )
    if not domain.dims:
        return ""
    bounds = [b for d in domain.dims for lo, hi in d.sizes for b in (lo, hi) if b is not None]
    top = max(8, int(max(bounds, default=0) * 1.25) + 1)
    rows = []
    for d in domain.dims:
        by = ", ".join(str(i) for i in d.imposed)
        rows.append(
            f'<tr><td class="label"><code>{escape(d.name)}</code></td>'
            f"<td><code>{escape(d.text)}</code></td>"
            f'<td class="bar">{_bar(d, top)}</td>'
            f"<td><small>{escape(by)}</small></td></tr>"
        )
    relations = "".join(
        f"<li><code>{escape(r.text)}</code> <small>{escape(', '.join(map(str, r.imposed)))}"
        "</small></li>"
        for r in domain.relations
    )
    return (
        f"<div><b>runs for</b> <small>(bars from 0 to {top}; a faded end: no upper bound)"
        f'</small></div><table class="domain">{"".join(rows)}</table>'
        + (f"<ul>{relations}</ul>" if relations else "")
    )


def _counts(report: ReportLike) -> dict[str, int]:
    counts = {"error": 0, "warning": 0, "info": 0}
    for f in report.findings:
        counts[str(f.severity.value)] += 1
    return counts


def _summary_row(path: str, report: ReportLike | None, unreadable: str = "") -> str:
    if report is None:
        return (
            f'<tr><td class="label"><code>{escape(path)}</code></td>'
            f'<td class="label sev error" colspan="6">unreadable: {escape(unreadable)}</td></tr>'
        )
    counts = _counts(report)
    cells = [
        str(report.nodes),
        str(report.broadcasting),
        *(str(counts[k]) for k in ("error", "warning", "info")),
        str(len(report.unchecked)),
    ]
    return (
        f'<tr><td class="label"><code>{escape(path)}</code></td>'
        + "".join(f"<td>{escape(c)}</td>" for c in cells)
        + "</tr>"
    )


_SUMMARY_HEAD: Final = (
    '<table class="summary"><tr><th class="label">model</th><th>nodes</th>'
    "<th>broadcasting</th><th>errors</th><th>warnings</th><th>info</th>"
    "<th>not checked</th></tr>"
)


def report_html(report: ReportLike, *, style: bool = True) -> str:
    """Return a report as an HTML fragment: summary table, findings drawn, domain drawn.

    Examples
    --------
    >>> from bcast.models import Report
    >>> html = report_html(Report("m.onnx", 3, ()))
    >>> '<table class="summary">' in html, "<pre>" in html
    (True, False)
    """
    findings = "".join(finding_html(f) for f in report.findings)
    coverage = report.coverage()
    body = (
        f"<h3><code>{escape(report.path)}</code></h3>"
        + _SUMMARY_HEAD
        + _summary_row(report.path, report)
        + "</table>"
        + (findings or "<p>no findings</p>")
        + (f"<p><small>{escape(coverage)}</small></p>" if coverage else "")
        + domain_html(report.domain)
    )
    css = f"<style>{CSS}</style>" if style else ""
    return f'{css}<div class="bcast-report">{body}</div>'


def html_page(results: Sequence[tuple[str, ReportLike | str]], summary: dict[str, int]) -> str:
    """Return a whole, self-contained HTML page for ``bcast check --format html``.

    ``results`` pairs each model's path with its report or the message saying why it could
    not be read; ``summary`` is the command's counts.

    >>> page = html_page([("<m>.onnx", "<m>.onnx: no such file")], {"models": 1})
    >>> "&lt;m&gt;.onnx" in page and "<m>" not in page
    True
    """
    rows = []
    sections = []
    for path, result in results:
        if isinstance(result, str):
            rows.append(_summary_row(path, None, result))
            sections.append(
                f'<section class="bcast-report"><h3><code>{escape(path)}</code></h3>'
                f'<p class="sev error">unreadable: {escape(result)}</p></section>'
            )
        else:
            rows.append(_summary_row(path, result))
            sections.append(f"<section>{report_html(result, style=False)}</section>")
    counts = ", ".join(f"{escape(str(v))} {escape(k)}" for k, v in summary.items())
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>bcast check: {len(results)} model(s)</title>"
        "<style>body{font-family:system-ui,sans-serif;margin:2em auto;max-width:70em;"
        "padding:0 1em;overflow-wrap:anywhere}"
        "section{border-top:1px solid #ccc;padding-top:.5em}"
        f"{CSS}</style></head><body>"
        f'<h1>bcast check</h1><p>{counts}</p><div class="bcast-report">{_SUMMARY_HEAD}'
        f"{''.join(rows)}</table></div>{''.join(sections)}</body></html>"
    )
