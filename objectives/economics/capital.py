"""What owning costs per year and per delivered GPU-hour: capital recovered over an asset's life.

Finance's level annuity (capital recovery factor; e.g. Brealey, Myers & Allen, *Principles of Corporate
Finance*, ch. 6, "equivalent annual cost"): an asset bought for P, lasting n years, worth R at the end, costs
(P - R / (1 + r)^n) x r (1 + r)^n / ((1 + r)^n - 1) a year at the owner's cost of capital r. At r = 0 that is
Epoch's straight-line amortization (P - R) / n (S24). A cluster that does paid work ``utilization_frac`` of
its hours charges each delivered hour 1 / utilization_frac of an hour's time-based cost (capital, upkeep):
the idle hours are paid for by the busy ones.
"""

from __future__ import annotations

import numpy as np

__all__ = ["capital_recovery_factor", "annual_capital_usd"]


def capital_recovery_factor(rate_frac, years):
    """r (1+r)^n / ((1+r)^n - 1), and 1/n where r = 0: the share of a price paid back each year."""
    r = np.asarray(rate_frac, dtype=np.float64)
    n = np.asarray(years, dtype=np.float64)
    growth = np.power(1.0 + r, n)
    safe = np.where(r > 0, r, 1.0)
    return np.where(r > 0, safe * growth / np.where(r > 0, growth - 1.0, 1.0), 1.0 / n)


def annual_capital_usd(price_usd, rate_frac, years, residual_frac=0.0):
    """The level yearly cost of owning ``price_usd`` for ``years`` at ``rate_frac``, crediting the resale
    ``residual_frac`` of the price at the end (discounted to today)."""
    r = np.asarray(rate_frac, dtype=np.float64)
    resale = np.asarray(price_usd, dtype=np.float64) * residual_frac / np.power(1.0 + r, years)
    return (price_usd - resale) * capital_recovery_factor(r, years)
