"""The design to launch: the run's recommendation or front design #N, named as the report names it, and
its columns read as a writer needs them (whole numbers, named choices whether stored as text or codes)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dse.errors import UserError
from dse.report.buyer import recommend
from dse.report.data import Run, fmt
from dse.report.names import design_names

__all__ = ["Design", "pick", "objectives_text", "whole", "number", "flag", "label", "gpus_per_node", "nodes",
           "RACK_TRAY_GPUS"]

#: GPUs one host (a Slurm node) holds in a rack-scale NVLink system: the catalog's NVL72 racks are 18
#: compute trays of 4 GPUs each (objectives/catalog/gpus.yaml gb200/gb300 ``system``); its ``server_gpus``
#: is the rack (72), the unit of price and of the NVLink domain, not the unit a launcher counts
RACK_TRAY_GPUS = 4


@dataclass
class Design:
    """A front design picked to launch."""

    row: pd.Series  # every column of the design
    name: str  # as the report names it among the front's designs
    position: int | None  # 1-based on the front (None: the recommendation is off the front)
    how: str  # why this one: "recommended (knee of the front)", "front design #3 of 7"
    objectives: dict[str, str]  # metric -> min|max
    run_name: str


def pick(run: Run, number: int | None) -> Design:
    """Front design #``number`` of ``run`` (1-based, as the report numbers them), or the recommended one
    (dse.report.buyer.recommend) where ``number`` is None. A run with an empty front, or a number off the
    front, is a UserError in one line."""
    n = len(run.front)
    if n == 0:
        raise UserError("its front is empty: no design meets the space's constraints, so there is no design to "
                        "launch (see `dse report` for why designs were infeasible)", where=str(run.root))
    if number is None:
        rec = recommend(run)
        rules = {"knee": "the knee of the front", "deadline": "the cheapest within the space's deadline",
                 "slo": "the cheapest per token within the space's latency targets", "only": "the only front design"}
        where = f", #{rec.position} of {n} on the front" if rec.position else ""
        return Design(rec.row, rec.name, rec.position, f"recommended: {rules.get(rec.rule, rec.rule)}{where}",
                      dict(run.objectives), run.name)
    if not 1 <= number <= n:
        raise UserError(f"design #{number} is not on the front: its front has {n} design{'s' * (n != 1)}, "
                        f"#1 to #{n} as `dse report` numbers them", where=str(run.root))
    names = design_names(run.front, run.design_columns)
    return Design(run.front.iloc[number - 1], names[number - 1], number, f"front design #{number} of {n}",
                  dict(run.objectives), run.name)


def objectives_text(design: Design) -> list[str]:
    """'time_to_train_days (min): 12.5' for each objective of the run, the design's value."""
    return [f"{m} ({d}): {fmt(design.row.get(m, np.nan))}" for m, d in design.objectives.items()]


def _float(row: pd.Series, column: str) -> float | None:
    v = row.get(column)
    if v is None or isinstance(v, (str, bool, np.bool_)):
        return None
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def whole(row: pd.Series, column: str, default: int | None = None) -> int | None:
    """The column as a whole number (a count, a degree), ``default`` where blank."""
    v = _float(row, column)
    return int(round(v)) if v is not None else default


def number(row: pd.Series, column: str, default: float | None = None) -> float | None:
    """The column as a finite float, ``default`` where blank."""
    v = _float(row, column)
    return v if v is not None else default


def flag(row: pd.Series, column: str) -> bool:
    """A 0/1 column (sequence_parallel) as a bool; blank is False."""
    v = row.get(column)
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    return bool(whole(row, column, 0))


def label(row: pd.Series, column: str, default: str | None = None) -> str | None:
    """A named choice (objectives.table.CATEGORIES) as its name, whether the table stores the name
    ('fp8', 'selective') or the code (1.0); ``default`` where blank."""
    from objectives.table import CATEGORIES, InputError, encode

    v = row.get(column)
    names = CATEGORIES[column]
    if isinstance(v, str):  # a name or an alias of one (objectives.table: 'megatron' is megatron-core)
        try:
            code = float(encode(column, np.array([v], dtype=object))[0])
        except InputError:
            return default
        return names[int(code)] if math.isfinite(code) else default
    code = whole(row, column)
    return names[code] if code is not None and 0 <= code < len(names) else default


def gpus_per_node(row: pd.Series) -> int:
    """GPUs on one host (a Slurm node) of the design: a rented instance's GPUs, else an owned server's; a
    rack-scale system of more than 8 (an NVL72 rack) counts its compute tray's (:data:`RACK_TRAY_GPUS`); at
    most the design's GPUs."""
    n = whole(row, "n_gpus", 1) or 1
    per = whole(row, "instance_gpus")
    if per is None or per <= 0:
        per = whole(row, "server_gpus", 8) or 8
    per = RACK_TRAY_GPUS if per > 8 else per
    return max(1, min(per, n))


def nodes(row: pd.Series) -> int:
    """Hosts the design's GPUs fill."""
    return -(-(whole(row, "n_gpus", 1) or 1) // gpus_per_node(row))
