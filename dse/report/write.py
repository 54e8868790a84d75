"""Write a report: ``report.html`` and ``report.md`` (with ``report-*.png``) for one run or an overlay."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from dse.report.data import load_runs
from dse.report.page import page
from dse.report.sensitivity import ranking, sensitivity
from dse.store import atomic_write_bytes


def write_report(run_dirs: str | Path | Sequence[str | Path], out: str | Path | None = None, *, with_sensitivity: bool = True,
                 with_png: bool = True, stem: str = "report") -> dict[str, Path]:
    """Report on ``run_dirs`` (the first sets the objectives; several are overlaid) into ``out``
    (default: the first run's directory; ``compare/`` inside it for several runs). Returns the paths.
    Arithmetic on extreme values (infinite objectives of a what-if space) draws no warnings."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _write(run_dirs, out, with_sensitivity, with_png, stem)


def _write(run_dirs, out, with_sensitivity: bool, with_png: bool, stem: str) -> dict[str, Path]:
    run_dirs = [Path(r) for r in ([run_dirs] if isinstance(run_dirs, (str, Path)) else run_dirs)]
    runs = load_runs(run_dirs)
    out = Path(out) if out is not None else (run_dirs[0] if len(run_dirs) == 1 else run_dirs[0] / "compare")
    out.mkdir(parents=True, exist_ok=True)
    sens, ranked = pd.DataFrame(), pd.DataFrame()
    if with_sensitivity:
        try:
            sens = sensitivity(runs[0])
            ranked = ranking(sens, runs[0].objectives)
        except Exception as exc:  # a report without the sensitivity beats no report
            print(f"dse report: sensitivity skipped: {type(exc).__name__}: {exc}", file=sys.stderr)
    from dse.report.first_screen import title_of

    title = title_of(runs)  # the space's question, not its file's name
    paths = {"html": out / f"{stem}.html", "md": out / f"{stem}.md"}
    atomic_write_bytes(paths["html"], page(runs, ranked, sens, title).encode())
    files = {}
    if with_png:
        from dse.report.summary import figures

        try:
            files = figures(runs, out, stem)
        except Exception as exc:  # the page and the tables stand without the PNGs
            print(f"dse report: figures skipped: {type(exc).__name__}: {exc}", file=sys.stderr)
        paths.update({k: out / v for k, v in files.items()})
    from dse.report.summary import markdown

    atomic_write_bytes(paths["md"], markdown(runs, ranked, files, title, paths["html"].name).encode())
    return paths
