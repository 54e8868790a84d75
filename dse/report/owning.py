"""Owning against renting in one sentence, for an owned design (objectives.economics.breakeven, objectives.economics.capital).

"owning beats renting coreweave-gb200-nvl72 on demand ($10.50 per GPU-hour) above 23% utilization, or after
0.9 years of full use; at the assumed 80% utilization and 10% cost of capital an owned GPU-hour costs $3.06"."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dse.report.names import number

__all__ = ["owning_sentence"]


def _finite(v) -> bool:
    return isinstance(v, (int, float, np.number)) and bool(np.isfinite(float(v)))


def owning_sentence(row: pd.Series) -> str:
    """The break-even of an owned design against its compared rental; '' for a rented design or a table
    without the columns."""
    rent, u_star = row.get("breakeven_rental_usd_per_gpu_hr"), row.get("breakeven_utilization_frac")
    if not (_finite(rent) and u_star is not None):
        return ""
    offer = row.get("breakeven_rental")
    what = (f"renting {offer} on demand" if isinstance(offer, str) and offer not in ("", "market")
            else "renting at a quoted or market price") + f" (${float(rent):.2f} per GPU-hour)"
    owned, busy, rate = row.get("owned_usd_per_gpu_hr"), row.get("utilization_frac"), row.get("cost_of_capital_frac")
    assumed = ""
    if _finite(owned) and _finite(busy) and _finite(rate):
        assumed = (f"; at the assumed {float(busy):.0%} utilization and {float(rate):.0%} cost of capital an owned "
                   f"GPU-hour costs ${float(owned):.2f}")
    if not _finite(u_star) or float(u_star) > 1.0:
        return f"{what} costs less than owning at any utilization{assumed}"
    years = row.get("breakeven_years")
    after = f", or after {number(years, 2)} years of full use" if _finite(years) else ""
    return f"owning beats {what} above {float(u_star):.0%} utilization{after}{assumed}"
