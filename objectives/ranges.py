"""Input values with no physical meaning, refused where a design table enters (objectives.pipeline.prepare):
one InputError naming the cell, never a row of negative days or dollars."""

from __future__ import annotations

import numpy as np

from objectives.columns import all_at_least, bad_row, distinct_cells, has_nan
from objectives.table import Columns, InputError

__all__ = ["MAX_GLOBAL_BATCH", "FRACTIONS", "LIMITS", "check_ranges"]

#: fractions of the owning cost (objectives.economics.capital): name -> (lowest, highest, whether the lowest is allowed, meaning)
FRACTIONS = {
    "cost_of_capital_frac": (0.0, 1.0, True, "a yearly rate from 0 (straight-line) to 1"),
    "utilization_frac": (0.0, 1.0, False, "the share of the cluster's hours doing paid work, > 0 and at most 1"),
    "residual_value_frac": (0.0, 1.0, True, "the share of the servers' price resold at the end of their life, 0 to 1"),
}
#: limits a row may set (objectives/economics/facility.py): blank (none) or a finite number > 0, and what it is
LIMITS = {"facility_mw": "a facility's power in MW", "rack_kw_max": "the most one rack may draw, in kW"}
#: the largest global batch a row may give, in sequences (published runs use at most ~16K; a ceiling keeps a
#: typo such as 1e300 from yielding finite-looking nonsense)
MAX_GLOBAL_BATCH = 1e8


def check_ranges(floats: Columns, cells) -> None:
    """Raise InputError for a value with no physical meaning: ``train_tokens`` blank or a finite count > 0 (a
    negative, zero, infinite or NaN token count made negative, zero or NaN days and dollars), ``global_batch``
    at most MAX_GLOBAL_BATCH sequences, each of :data:`LIMITS` blank or a finite number > 0, each of
    :data:`FRACTIONS` within its range."""
    tokens = cells("train_tokens")
    given = tokens[~np.isnan(tokens)] if has_nan(tokens) else tokens
    if len(given) and not all_at_least(given, 0):
        v = distinct_cells(floats["train_tokens"])
        row = bad_row(~np.isnan(v) & ~((v > 0) & np.isfinite(v)))
        raise InputError(f"{v[row]:g} is not valid; needs a finite number of tokens > 0, or blank (no training run "
                         "costed)", column="train_tokens", row=row)
    batch = cells("global_batch")
    if len(batch) and np.max(batch) > MAX_GLOBAL_BATCH:
        v = distinct_cells(floats["global_batch"])
        row = bad_row(v > MAX_GLOBAL_BATCH)
        raise InputError(f"{v[row]:g} sequences is not valid; at most {MAX_GLOBAL_BATCH:.0e}", column="global_batch",
                         row=row)
    for name, meaning in LIMITS.items():
        v = cells(name) if name in floats else np.empty(0)
        given = v[~np.isnan(v)]
        if len(given) and not ((given > 0) & np.isfinite(given)).all():
            v = distinct_cells(floats[name])
            row = bad_row(~np.isnan(v) & ~((v > 0) & np.isfinite(v)))
            raise InputError(f"{v[row]:g} is not valid; needs {meaning}, a finite number > 0, or blank (no limit)",
                             column=name, row=row)
    for name, (low, high, low_ok, meaning) in FRACTIONS.items():
        v = cells(name) if name in floats else np.empty(0)
        inside = ((v >= low) if low_ok else (v > low)) & (v <= high)
        if len(v) and not inside.all():
            v = distinct_cells(floats[name])
            row = bad_row(~(((v >= low) if low_ok else (v > low)) & (v <= high)))
            raise InputError(f"{v[row]:g} is not valid; needs {meaning}", column=name, row=row)
