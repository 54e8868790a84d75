"""Pareto reports of sweep runs: one self-contained ``report.html`` and a Markdown summary with PNG figures.

One concept per module: :mod:`~dse.report.data` (runs, fronts, labels), :mod:`~dse.report.breakdown`
(step time and goodput losses per front design), :mod:`~dse.report.sensitivity` (which hardware change
pays most, computed with the model), :mod:`~dse.report.svg` (inline SVG charts), :mod:`~dse.report.page`
(the HTML page), :mod:`~dse.report.summary` (Markdown and matplotlib PNGs). :func:`write_report` runs them.
"""

from __future__ import annotations

from dse.report.write import write_report

__all__ = ["write_report"]
