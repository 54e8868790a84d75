"""The report's prediction intervals: whiskers on the front, intervals in the table, ties marked."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from dse.report.data import Run, ties
from dse.report.page import front_panels, front_table


def _front() -> pd.DataFrame:
    """Three front designs (time min, cost min):
    #1 time 10 [9, 11],     cost 100 [90, 110]
    #2 time 12 [10.5, 13],  cost 95 [85, 105]   overlaps #1 on both: a tie
    #3 time 20 [18, 22],    cost 50 [45, 55]    apart from both on time (and cost): no tie."""
    return pd.DataFrame({
        "trial": [0, 1, 2], "gpu": ["h100-sxm", "b200", "gb200"], "admissible": True,
        "time_to_train_days": [10.0, 12.0, 20.0], "time_to_train_days_lo": [9.0, 10.5, 18.0],
        "time_to_train_days_hi": [11.0, 13.0, 22.0],
        "tco_usd": [100.0, 95.0, 50.0], "tco_usd_lo": [90.0, 85.0, 45.0], "tco_usd_hi": [110.0, 105.0, 55.0],
    })


def test_ties_are_designs_whose_intervals_overlap_on_every_objective():
    front = _front()
    assert ties(front, ["time_to_train_days", "tco_usd"]) == [[2], [1], []]
    # an objective without an interval is exact: #1 and #2 differ on it, so they are no longer a tie
    front["capex_usd"] = [1.0, 2.0, 3.0]
    assert ties(front, ["time_to_train_days", "tco_usd", "capex_usd"]) == [[], [], []]
    # widening #3's time interval to reach #2's (and its cost to reach #1's) ties all three
    front["time_to_train_days_lo"] = [9.0, 10.5, 10.8]
    front["tco_usd_hi"] = [110.0, 105.0, 95.0]
    assert ties(front, ["time_to_train_days", "tco_usd"]) == [[2, 3], [1, 3], [1, 2]]
    # a blank bound counts as the point value: #3's time then stays at 20, apart from both
    front.loc[2, "time_to_train_days_lo"] = np.nan
    assert ties(front, ["time_to_train_days", "tco_usd"]) == [[2], [1], []]


def test_page_draws_whiskers_and_marks_ties():
    front = _front()
    run = Run(root=Path("run"), name="r", info={}, objectives={"time_to_train_days": "min", "tco_usd": "min"},
              design_columns=["gpu"], trials=front.copy(), front=front.copy())
    panels = front_panels([run])
    assert panels.count('<circle class="front"') == 3
    assert panels.count('data-tie="1"') == 2  # #1 and #2
    whiskers = re.search(r'<path class="ebar"[^>]* d="([^"]+)"', panels).group(1)
    assert whiskers.count("M") == 3 * 2 * 3  # per point and axis: the bar and its two end ticks
    table = front_table([run])
    assert table.count('<td class="l tie">') == 2
    assert '<td class="l tie">#2</td>' in table and '<td class="l tie">#1</td>' in table
    assert '<span class="iv">9–11</span>' in table and '<span class="iv">$85–$105</span>' in table  # dollars as $
    assert ">tie with<" in table


def test_a_run_without_intervals_draws_none():
    front = _front()[["trial", "gpu", "admissible", "time_to_train_days", "tco_usd"]]
    run = Run(root=Path("run"), name="r", info={}, objectives={"time_to_train_days": "min", "tco_usd": "min"},
              design_columns=["gpu"], trials=front.copy(), front=front.copy())
    assert 'class="ebar"' not in front_panels([run])
    table = front_table([run])
    assert 'class="iv"' not in table and 'class="l tie"' not in table
