"""The recommendation's sentence on owning against renting (dse/report/owning.py), from the break-even columns
of objectives.economics.breakeven."""

import numpy as np
import pandas as pd

from dse.report.owning import owning_sentence


def _row(**given):
    base = dict(breakeven_rental="coreweave-gb200-nvl72", breakeven_rental_usd_per_gpu_hr=10.5,
                breakeven_utilization_frac=0.2256, breakeven_years=0.951, owned_usd_per_gpu_hr=3.06,
                utilization_frac=0.8, cost_of_capital_frac=0.1)
    return pd.Series({**base, **given})


def test_an_owned_design_says_where_owning_wins():
    assert owning_sentence(_row()) == (
        "owning beats renting coreweave-gb200-nvl72 on demand ($10.50 per GPU-hour) above 23% utilization, or after "
        "0.95 years of full use; at the assumed 80% utilization and 10% cost of capital an owned GPU-hour costs $3.06")


def test_a_rental_cheaper_at_any_utilization_is_said_so():
    said = owning_sentence(_row(breakeven_utilization_frac=1.7, breakeven_rental="market",
                                breakeven_rental_usd_per_gpu_hr=1.2))
    assert said.startswith("renting at a quoted or market price ($1.20 per GPU-hour) costs less than owning at any "
                           "utilization")
    assert "costs less than owning" in owning_sentence(_row(breakeven_utilization_frac=np.inf))


def test_a_rented_design_has_no_sentence():
    assert owning_sentence(_row(breakeven_rental="", breakeven_rental_usd_per_gpu_hr=np.nan,
                                breakeven_utilization_frac=np.nan)) == ""
    assert owning_sentence(pd.Series({"run_cost_usd": 1.0})) == ""
