"""`dse evaluate` on a serving table (one with ``input_len`` and ``output_len`` columns).

Every row is one model instance's deployment evaluated by the serving model (objectives.serving,
docs/serving.md): its mapping as given, or its blank tp, pp, ep and attn_dp cells searched
(objectives.search_serving); its concurrency as given or the largest meeting its targets. Written
in slices of rows as the training evaluation is (dse/commands/evaluate.py), with the units in the file.
"""

from __future__ import annotations

import itertools

import numpy as np

import objectives
from dse.tables import describe_input_error, write_slices, write_table

__all__ = ["run_serving"]


def run_serving(args, cols: dict[str, np.ndarray], n: int, names: list[str] | None, slice_rows: int,
                check_names) -> int:
    """Evaluate ``cols`` (n rows) and write ``args.out`` (``names``: only these columns, in order)."""
    feasible = 0

    def evaluated(lo: int, hi: int) -> dict[str, np.ndarray]:
        nonlocal feasible
        part = cols if (lo, hi) == (0, n) else {k: v[lo:hi] for k, v in cols.items()}
        try:
            out = objectives.search_serving(part)
        except objectives.InputError as exc:
            if exc.row is not None:
                exc.row += lo
            raise describe_input_error(exc, args.input) from None
        if names is not None and lo == 0:
            check_names(names, list(out))
        feasible += int(np.sum(out["feasible"]))
        return out

    metadata = {"dse.units": repr(objectives.METRICS)}
    if str(args.out).lower().endswith(".csv"):
        out = evaluated(0, n)
        write_table(out, args.out, metadata=metadata, names=names)
        width = len(names or out)
    else:
        slices = (evaluated(lo, min(lo + slice_rows, n)) for lo in range(0, n, slice_rows))
        first = next(slices)
        width = len(names or first)
        write_slices(itertools.chain((first,), slices), args.out, metadata=metadata, names=names)
    print(f"wrote {args.out}: {n} serving designs, {feasible} feasible, {width} columns")
    return 0
