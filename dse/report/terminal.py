"""The closing lines ``dse sweep`` and ``dse report`` print: the decision first (dse.report.headline), its
caveat, why (dse.report.buyer), and the best design per GPU, provider and instance in display names."""

from __future__ import annotations

import textwrap

from dse.report.buyer import group_kinds, group_table, recommend
from dse.report.data import Run, fmt
from dse.report.display import human_table
from dse.report.html import Money
from dse.report.names import money

__all__ = ["terminal_text", "text_table"]


def text_table(header: list[str], rows: list[list]) -> str:
    """A plain-text table: the first two columns left-aligned, numbers right; Money as $3.7M."""
    body = [[v if isinstance(v, str) else money(v) if isinstance(v, Money) else fmt(v) for v in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in body)) if body else len(h) for i, h in enumerate(header)]
    left = {0, 1}

    def line(cells):
        return "  ".join(c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    return "\n".join([line(header), "  ".join("-" * w for w in widths)] + [line(r) for r in body])


def terminal_text(run: Run, width: int = 110) -> str:
    """The decision, its caveat, why, and the best design per group."""
    rec = recommend(run)
    if rec is None:
        return "no recommended design: the front is empty"
    out = textwrap.wrap(rec.decision.sentence, width=width, subsequent_indent="  ")
    if rec.decision.caveat:
        out += textwrap.wrap(rec.decision.caveat, width=width, initial_indent="  ", subsequent_indent="  ")
    where = f"#{rec.position} on the front, " if rec.position else ""
    out += ["", textwrap.fill(f"Why ({where}{rec.name}): {rec.text}", width=width, initial_indent="  ",
                              subsequent_indent="  ")]
    for kind in group_kinds(run.trials):
        header, rows, shared = group_table(run, kind)
        if len(rows) > 1 or kind == "gpu":
            header, rows = human_table(header, rows)
            out += ["", f"best design per {kind}{f' (each has {shared})' if shared else ''}:", text_table(header, rows)]
    return "\n".join(out)
