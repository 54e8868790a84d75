"""What a person watching a sweep sees: a progress line, then the Pareto designs as a table.

:class:`Progress` is told about the run by :func:`dse.sweep.run`: :meth:`Progress.start` once, before the
first batch; :meth:`Progress.update` after every committed batch (designs evaluated, share that is
feasible and meets the constraints, current front size, designs per second); :meth:`Progress.finish` once
at the end. On a terminal the line redraws in place; otherwise (logs, CI) a line is printed at most every
few seconds. :func:`front_text` renders the closing table.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from typing import TextIO

import numpy as np
import pandas as pd

__all__ = ["Progress", "front_text"]


class Progress:
    """A progress bar on ``stream`` (stderr by default); ``enabled=False`` makes every call a no-op."""

    def __init__(self, stream: TextIO | None = None, enabled: bool = True, every_s: float = 5.0, width: int = 24) -> None:
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.every_s = every_s
        self.width = width
        self.total = 0
        self._last = 0.0
        self._line = ""

    def start(self, total: int, done: int = 0, where: str = "", pool: str = "") -> None:
        """Called once before the first batch."""
        self.total = total
        if not self.enabled:
            return
        resumed = f", resuming at {done}" if done else ""
        print(f"dse sweep: {total} designs{resumed} on {pool} -> {where}", file=self.stream, flush=True)

    def update(self, done: int, admissible: int, front: int, rate: float) -> None:
        """Called after every committed batch."""
        if not self.enabled:
            return
        frac = done / self.total if self.total else 1.0
        filled = int(round(frac * self.width))
        bar = "#" * filled + "-" * (self.width - filled)
        share = admissible / done if done else 0.0
        self._line = (f"[{bar}] {done}/{self.total} designs  feasible {share:5.1%}  front {front}  "
                      f"{rate:,.0f} designs/s")
        now = time.monotonic()
        if self.tty:
            self.stream.write("\r" + self._line)
            self.stream.flush()
        elif now - self._last >= self.every_s or done >= self.total:
            print(self._line, file=self.stream, flush=True)
            self._last = now

    def finish(self) -> None:
        """Called once at the end (also after a stop)."""
        if self.enabled and self.tty and self._line:
            self.stream.write("\n")
            self.stream.flush()


def _fmt(value) -> str:
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return f"{int(value):,}" if abs(int(value)) >= 10000 else str(int(value))
    if isinstance(value, (float, np.floating)):
        v = float(value)
        if not np.isfinite(v):
            return str(v)
        if v != 0 and (abs(v) >= 1e6 or abs(v) < 1e-3):
            return f"{v:.3g}"
        if float(v).is_integer() and abs(v) < 1e6:
            return str(int(v))
        return f"{v:.4g}"
    return str(value)


def front_text(front: pd.DataFrame, objectives: Mapping[str, str], design: Sequence[str],
               mapping: Sequence[str], limit: int = 30) -> str:
    """The Pareto designs as a fixed-width table: objectives, searched columns, then the mapping."""
    if front.empty:
        return "no feasible design met the constraints: the front is empty"
    cols = ["front_index"] + [c for c in objectives] + [c for c in design if c not in objectives]
    cols += [c for c in mapping if c in front.columns and c not in cols]
    cols = [c for c in cols if c in front.columns]
    rows = front.head(limit)
    header = ["#" if c == "front_index" else f"{c} ({objectives[c]})" if c in objectives else c for c in cols]
    body = [[_fmt(v) for v in row] for row in rows[cols].itertuples(index=False)]
    widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(header)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(header, widths))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.rjust(w) for v, w in zip(r, widths)) for r in body]
    if len(front) > limit:
        lines.append(f"... {len(front) - limit} more in pareto.parquet")
    return "\n".join(lines)
