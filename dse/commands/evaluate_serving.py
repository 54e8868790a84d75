"""`dse evaluate` on a serving table (one with ``input_len`` and ``output_len`` columns).

Every row is one model instance's deployment evaluated by the serving model (objectives.serving,
docs/serving.md): its mapping as given, or its blank tp, pp, ep and attn_dp cells searched
(objectives.search_serving); its concurrency as given or the largest meeting its targets. Written
in slices of rows as the training evaluation is (dse.tables.write_evaluated), with the units in the file.
"""

from __future__ import annotations

import numpy as np

import objectives
from dse.tables import write_evaluated

__all__ = ["run_serving"]


def run_serving(args, cols: dict[str, np.ndarray], n: int, names: list[str] | None, slice_rows: int,
                check_names) -> int:
    """Evaluate ``cols`` (n rows) and write ``args.out`` (``names``: only these columns, in order)."""
    feasible = 0

    def evaluated(part: dict[str, np.ndarray], lo: int, hi: int) -> dict[str, np.ndarray]:
        nonlocal feasible
        out = objectives.search_serving(part)
        if names is not None and lo == 0:
            check_names(names, list(out))
        feasible += int(np.sum(out["feasible"]))
        return out

    width = write_evaluated(evaluated, cols, n, args.out, args.input, {"dse.units": repr(objectives.METRICS)}, names,
                            slice_rows)
    print(f"wrote {args.out}: {n} serving designs, {feasible} feasible, {width} columns")
    return 0
