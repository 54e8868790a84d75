"""`dse evaluate` on a serving table (one with ``input_len`` and ``output_len`` columns).

Every row is one model instance's deployment evaluated by the serving model (objectives.serving,
docs/serving.md): its mapping as given, or its blank tp, pp, ep and attn_dp cells searched
(objectives.search_serving); its concurrency as given or the largest meeting its targets. Written
in slices of rows as the training evaluation is (dse.tables.write_evaluated), with the units in the file.
A row whose engine does not run on its GPU (TensorRT-LLM on an AMD GPU: objectives.serving.engines
.ENGINE_VENDORS) is bad input: one line naming the row, the engine, the GPU and the engines that run on it,
exit 2 (the model marks such a row infeasible, ``con_engine_vendor``, as a sweep's designs are).
"""

from __future__ import annotations

import numpy as np

import objectives
from dse.tables import write_evaluated
from objectives.serving.engines import engine_gpu_text

__all__ = ["run_serving"]


def run_serving(args, cols: dict[str, np.ndarray], n: int, names: list[str] | None, slice_rows: int,
                check_names) -> int:
    """Evaluate ``cols`` (n rows) and write ``args.out`` (``names``: only these columns, in order)."""
    feasible = 0

    def evaluated(part: dict[str, np.ndarray], lo: int, hi: int) -> dict[str, np.ndarray]:
        nonlocal feasible
        out = objectives.search_serving(part)
        wrong = np.flatnonzero(np.asarray(out["con_engine_vendor"]) > 0)
        if len(wrong):  # a fixed design the engine cannot run: the table's mistake (rows of this slice)
            row = int(wrong[0])
            raise objectives.InputError(engine_gpu_text(str(out["engine"][row]), str(out["gpu"][row])),
                                        column="engine", row=row)
        if names is not None and lo == 0:
            check_names(names, list(out))
        feasible += int(np.sum(out["feasible"]))
        return out

    width = write_evaluated(evaluated, cols, n, args.out, args.input, {"dse.units": repr(objectives.METRICS)}, names,
                            slice_rows)
    print(f"wrote {args.out}: {n} serving designs, {feasible} feasible, {width} columns")
    return 0
