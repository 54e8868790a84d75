"""HTML table cells and tables of the report page: numbers with their sort keys, intervals, ties, dollars."""

from __future__ import annotations

from html import escape

import numpy as np

from dse.report.data import fmt
from dse.report.names import money, number

__all__ = ["Interval", "Tie", "Mark", "Name", "Money", "cell", "table"]


class Interval(float):
    """A table value with its 80% interval, shown as 'value lo–hi' and sorted by the value."""

    def __new__(cls, value, lo, hi, dollars: bool = False, short: bool = False):
        out = super().__new__(cls, value)
        out.lo, out.hi, out.dollars, out.short = lo, hi, dollars, short  # short: bounds to 3 digits
        return out


class Tie(str):
    """The front designs a design ties with (a table cell, marked)."""


class Mark(str):
    """A design's name, marked as the recommended one (a table cell in bold with a star); ``alike``: its
    near-twins, said after it."""


class Name(str):
    """A design's name (a table cell that wraps, in a column wide enough to read it)."""


class Money(float):
    """Dollars, shown as $21.7M and sorted by the value."""


def _cell(v, left=False) -> str:
    num = isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))
    dv = f' data-v="{float(v):.6g}"' if num and np.isfinite(float(v)) else ""
    return f'<td{dv}{" class=l" if left or not num else ""}>{escape(fmt(v))}</td>'


def cell(v, left=False) -> str:
    """One <td>: numbers carry ``data-v`` (the sort key) and right-align; text aligns left."""
    if isinstance(v, Interval):
        show = money if v.dollars else fmt
        bound = show if v.dollars or not v.short else (lambda x: number(x, 3))
        inner = _cell(float(v))
        inner = inner[: inner.index(">") + 1] + escape(show(float(v)))  # '<td data-v=..>value'
        span = "" if np.isnan(v.lo) and np.isnan(v.hi) else \
            f' <span class="iv">{escape(bound(float(v.lo)))}–{escape(bound(float(v.hi)))}</span>'
        return f"{inner}{span}</td>"
    if isinstance(v, Money):
        inner = _cell(float(v))
        return inner[: inner.index(">") + 1] + escape(money(float(v))) + "</td>"
    if isinstance(v, Tie):
        return f'<td class="l tie">{escape(str(v))}</td>' if v else '<td class="l"></td>'
    alike = getattr(v, "alike", "")  # near-twins the row stands for (dse.report.twins)
    alike = f' <span class="alike">{escape(alike)}</span>' if alike else ""
    if isinstance(v, Mark):
        return f'<td class="l rec" title="the recommended design">&#9733; {escape(str(v))}{alike}</td>'
    if isinstance(v, Name):
        return f'<td class="l name">{escape(str(v))}{alike}</td>'
    return _cell(v, left)


def table(header: list[str], rows: list[list], row_class: str, left: int = 0, titles: list[str] | None = None,
          cls: str = "") -> str:
    """A sortable table (click a header); the first ``left`` columns align left; ``titles``: a tooltip per header."""
    titles = titles or [""] * len(header)
    head = "".join(f'<th{" class=l" if i < left else ""}{f" title={chr(34)}{escape(t)}{chr(34)}" if t else ""}>'
                   f'{escape(h)}</th>' for i, (h, t) in enumerate(zip(header, titles)))
    body = "".join(f'<tr class="{row_class}">' + "".join(cell(v, i < left) for i, v in enumerate(r)) + "</tr>"
                   for r in rows)
    return (f'<div class="scroll"><table class="sortable{" " + cls if cls else ""}"><thead><tr>{head}</tr></thead>'
            f'<tbody>{body}</tbody></table></div>')
