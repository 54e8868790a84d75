"""Pareto reports of sweep runs: one self-contained ``report.html`` and a Markdown summary with PNG figures.

One concept per module: :mod:`~dse.report.data` (runs, fronts, labels), :mod:`~dse.report.names` (design
names of the axes that vary, with units), :mod:`~dse.report.knee` (the recommendation rule: the knee of the
front, or the cheapest design within the space's deadline), :mod:`~dse.report.buyer` (the recommended
design and why, the best design per GPU, provider and instance), :mod:`~dse.report.serving` (a serving
run's two pictures with their own fronts, its table columns and time per output token),
:mod:`~dse.report.serving_buyer` (the recommendation in a serving buyer's words), :mod:`~dse.report.facets` (colouring the
front by GPU, provider or instance), :mod:`~dse.report.breakdown` (step time and goodput losses per front
design), :mod:`~dse.report.sensitivity` (which hardware change pays most, computed with the model),
:mod:`~dse.report.svg` (inline SVG charts), :mod:`~dse.report.html` (table cells),
:mod:`~dse.report.page` (the HTML page), :mod:`~dse.report.summary` (Markdown and matplotlib PNGs).
:func:`write_report` runs them.
"""

from __future__ import annotations

from dse.report.write import write_report

__all__ = ["write_report"]
