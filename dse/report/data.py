"""The runs a report reads: objectives, the design columns, every design and the front."""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dse.errors import UserError
from dse.report.knee import RUN_COST
from dse.report.names import design_names, shared_axes
from dse.report.serving import TABLE_COLUMNS as SERVING_TABLE
from dse.report.serving import is_serving
from dse.store.pareto import front_table

#: metrics the front table shows after the objectives and the costs (capex, run, lifetime: when the run has them)
TABLE_METRICS = ("time_to_train_days", "mfu", "goodput", "power_mw", "facility_power_peak_mw", "step_time_s",
                 "hbm_used_gb")  # usd_per_mtok follows from the run's cost: in the hover text, not a column
#: the cost columns a buyer compares, in order: (label, candidate columns, newest name first)
COSTS = (("capex", ("capex_usd",)), ("run cost", RUN_COST), ("lifetime cost", ("lifetime_cost_usd",)))
MAPPING = ("dp", "tp", "pp", "cp", "ep", "vp", "attn_dp", "micro_batch", "recompute", "sequence_parallel", "zero_stage")
_SHORT = {"micro_batch": "mb", "sequence_parallel": "sp", "zero_stage": "zero", "recompute": "rc", "attn_dp": "adp"}


@dataclass
class Run:
    """One run directory, loaded for a report."""

    root: Path
    name: str
    info: dict
    objectives: dict[str, str]  # metric -> min|max, in the space's order
    design_columns: list[str]
    trials: pd.DataFrame  # one row per distinct design
    front: pd.DataFrame  # the admissible non-dominated designs, sorted by the first objective, best first
    spec_text: str = ""
    extra: dict = field(default_factory=dict)
    serving: bool = False  # serving deployments (objectives.serving), not training runs


#: named choices the serving model returns as their codes where the space leaves them at their defaults
#: (``instance`` 0 is owned, ``serving`` 0 aggregated: objectives.table.CATEGORIES); read back as names
_CODED = ("instance", "serving")


def _labelled(trials: pd.DataFrame) -> pd.DataFrame:
    """``trials`` with the named choices of :data:`_CODED` stored as codes read back as their names, as the
    training model writes an instance."""
    coded = [c for c in _CODED if c in trials and pd.api.types.is_numeric_dtype(trials[c])]
    if not coded:
        return trials
    try:
        from objectives.table import CATEGORIES
    except ImportError:
        return trials
    out = trials.copy()
    for c in coded:
        labels = np.asarray(CATEGORIES[c], dtype=object)
        codes = trials[c].to_numpy(dtype=np.float64)
        ok = np.isfinite(codes) & (codes >= 0) & (codes < len(labels))
        out[c] = np.where(ok, labels[np.where(ok, codes, 0).astype(np.int64)], None)
    return out


def load_run(root: str | Path, objectives: dict[str, str] | None = None) -> Run:
    """Read a run; with ``objectives``, its front is recomputed on those (an overlay of several runs)."""
    root = Path(root)
    if not (root / "run.json").is_file():
        raise UserError("not a run directory (no run.json)", where=str(root))
    from dse.store import RunStore

    store = RunStore(root)
    info = store.read_run()  # one line where run.json is unreadable or not a run's record
    # the whole committed parts (a part of another run: one line, exit 2); what is left out, said once
    parts, notes = store.committed_parts(info.get("space_hash"), info.get("seed"))
    for note in notes:
        _say_once(f"dse report: {root}: {note}")
    spec = info.get("spec", {})
    try:  # run.json as dse writes it; anything else is no run's record
        own = {str(o["metric"]): o["direction"] for o in spec.get("objectives", [])}
    except (TypeError, KeyError, AttributeError):
        own = {}
    objectives = dict(objectives or own)
    if not objectives or not all(d in ("min", "max") for d in objectives.values()):
        raise UserError("run.json names no objectives a report can rank by (spec.objectives: metric and min|max): "
                        "not a run directory dse wrote", where=str(root))
    cluster = spec.get("cluster") if isinstance(spec.get("cluster"), dict) else {}
    design = [k for k, v in cluster.items() if isinstance(v, (list, dict))] or list(cluster)
    try:
        if parts == []:
            raise ValueError("none of its parts can be read")
        trials = pd.read_parquet(root / "trials" if parts is None else parts)
    except Exception as exc:
        raise UserError(f"cannot read its designs ({exc})", where=str(root / "trials")) from None
    missing = [m for m in objectives if m not in trials.columns]
    if missing:
        raise UserError(f"has no column {missing[0]!r} to compare on", where=str(root))
    design = [c for c in design if c in trials.columns]
    if "admissible" not in trials.columns:
        trials["admissible"] = trials.get("feasible", True)
    trials = _labelled(trials)
    if design:
        trials = trials.drop_duplicates(subset=design, keep="first").reset_index(drop=True)
    front = front_table(trials, objectives, feasible="admissible", dedupe=design or None)
    first = list(objectives)[0]  # best first, as the sweep's table prints it
    front = front.sort_values(first, ascending=objectives[first] == "min", kind="stable").reset_index(drop=True)
    return Run(root=root, name=spec.get("name") or root.name, info=info, objectives=objectives,
               design_columns=design, trials=trials, front=front, spec_text=info.get("spec_text", ""),
               serving=is_serving(trials))


_SAID: set[str] = set()


def _say_once(line: str) -> None:
    """A warning on stderr, once per process (a report loads its runs more than once)."""
    if line not in _SAID:
        _SAID.add(line)
        print(line, file=sys.stderr)


def load_runs(roots: Sequence[str | Path]) -> list[Run]:
    """The first run sets the objectives; the others' fronts are recomputed on them."""
    first = load_run(roots[0])
    runs = [first] + [load_run(r, first.objectives) for r in roots[1:]]
    names = [r.name for r in runs]
    for r in runs:  # two runs of one space: tell them apart by directory
        if names.count(r.name) > 1:
            r.name = r.root.name
    return runs


def interval_of(frame: pd.DataFrame, metric: str) -> tuple[np.ndarray, np.ndarray] | None:
    """The 80% interval (lo, hi) of ``metric`` in ``frame`` (objectives.training.intervals: ``<metric>_lo`` / ``_hi``),
    or None where the metric has none (an exact figure, or a run scored before intervals existed)."""
    lo, hi = f"{metric}_lo", f"{metric}_hi"
    if lo not in frame or hi not in frame:
        return None
    return frame[lo].to_numpy(dtype=np.float64), frame[hi].to_numpy(dtype=np.float64)


def ties(front: pd.DataFrame, objectives) -> list[list[int]]:
    """For each front design, the other front designs (1-based, in the front's order) it ties with: their
    80% intervals overlap on every objective. An objective without an interval counts as exact (its
    interval is its value), so designs that differ on it are no tie, and so does a blank bound."""
    n = len(front)
    overlap = np.ones((n, n), dtype=bool)
    for m in objectives:
        v = front[m].to_numpy(dtype=np.float64)
        lo, hi = interval_of(front, m) or (v, v)
        lo, hi = np.fmin(lo, v), np.fmax(hi, v)  # the point prediction lies in its interval
        overlap &= (lo[:, None] <= hi[None, :]) & (lo[None, :] <= hi[:, None])  # NaN compares False: no tie
    np.fill_diagonal(overlap, False)
    return [[int(j) + 1 for j in np.flatnonzero(row)] for row in overlap]


def why_infeasible(trials: pd.DataFrame, top: int = 8, constraints: Sequence[str] = ()) -> list[tuple[str, int, str]]:
    """(kind, designs, an example reason) for the designs that are not admissible, most first: the model's
    ``infeasible_reason`` with its numbers left out ('memory: # GB needed, # GB usable'), or, for a design the
    model finds feasible and a constraint of the space excludes, that constraint and the best value any
    feasible design reaches ('space: time_to_train_days <= 0.5: the best design reaches 6.56'), the first
    constraint it breaks (``constraints``: run.json's ``spec.constraints``); 'space: outside the space's
    constraints' where the table lacks the constraint's column."""
    if "admissible" not in trials or trials.empty:
        return []
    out = trials.loc[~trials["admissible"].astype(bool)]
    reason = out["infeasible_reason"].fillna("").astype(str) if "infeasible_reason" in out else pd.Series("", out.index)
    reason = reason.where(reason != "", _space_reasons(trials, out, constraints))
    counts = reason.value_counts()  # per distinct reason, then their numbers left out
    kinds: dict[str, list] = {}
    for text, n in sorted(counts.items(), key=lambda tn: (-tn[1], tn[0])):
        kind = re.sub(r"(?<![\w-])-?\d+(\.\d+)?(?!\w)", "#", text)  # not the 8 of fp8, the 2024 of a stack, the 48 of p5.48xlarge
        entry = kinds.setdefault(kind, [0, text])
        entry[0] += int(n)
    ranked = sorted(kinds.items(), key=lambda kv: (-kv[1][0], kv[0]))
    return [(kind, n, example) for kind, (n, example) in ranked][:top]


def infeasible_kinds(trials: pd.DataFrame, constraints: Sequence[str] = ()) -> list[tuple[str, int, str]]:
    """Every kind of reason :func:`why_infeasible` finds, most first: (kind, distinct designs, example)."""
    return why_infeasible(trials, top=len(trials) + 1, constraints=constraints)


def more_kinds(kinds: Sequence[tuple[str, int, str]], top: int) -> str:
    """What a list of the first ``top`` kinds leaves out: 'and 3 more kinds (57 designs)'; '' if nothing."""
    rest = kinds[top:]
    if not rest:
        return ""
    n = sum(k[1] for k in rest)
    return f"and {len(rest)} more kind{'s' if len(rest) > 1 else ''} ({n:,} design{'s' if n != 1 else ''})"


def _space_reasons(trials: pd.DataFrame, out: pd.DataFrame, constraints: Sequence[str]) -> pd.Series:
    """For each of ``out``'s rows, the first space constraint it breaks, and where no feasible design keeps it,
    the best value they reach on it ('time_to_train_days <= 0.5: the best design reaches 0.5407'); where some
    keep it, the constraint alone (the best value would read as if it were out of reach); the generic text
    where none can be named."""
    from dse.spec.schema import Constraint

    said = pd.Series("space: outside the space's constraints", index=out.index)
    feasible = trials["feasible"].astype(bool) if "feasible" in trials else pd.Series(True, index=trials.index)
    named = pd.Series(False, index=out.index)
    for c in filter(None, map(Constraint.from_text, constraints)):
        if c.column not in trials:
            continue
        values = pd.to_numeric(trials[c.column], errors="coerce")
        reach = values[feasible]
        best = reach.min() if c.op in ("<=", "<") else reach.max()
        broken = ~named & (c.violation(out[c.column].to_numpy(dtype=np.float64)) > 0)
        if np.isfinite(best) and c.violation(np.array([best], dtype=np.float64))[0] > 0:
            said[broken] = f"space: {c.text}: the best design reaches {fmt(best)}"
        elif np.isfinite(best):
            said[broken] = f"space: {c.text}"
        named |= broken
    return said


def fmt(v: Any) -> str:
    """A number as a reviewer reads it: 4 significant digits, thousands grouped; text as it is."""
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (int, float, np.integer, np.floating)):
        v = float(v)
        if np.isnan(v):
            return "–"
        if np.isinf(v):
            return "inf" if v > 0 else "-inf"
        if v == int(v) and abs(v) < 1e6:
            return f"{int(v):,}"
        if abs(v) >= 1e6:
            return f"{v:.4g}" if abs(v) >= 1e12 else f"{v / 1e6:,.4g}M"
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        return f"{v:.4g}"
    return str(v)


def is_dollars(column: str) -> bool:
    """A column (or table header) of dollars: ``_usd``, a price per unit (``usd_per_mtok_out``, ``usd_per_hr``)
    or a cost's label (capex, run cost, lifetime cost)."""
    return column.endswith("_usd") or (column.startswith("usd_per_") and column.isidentifier()) or column in dict(COSTS)


def cost_columns(frame, objectives=()) -> list[tuple[str, str]]:
    """(label, column) of capex, the run's cost and the lifetime cost that ``frame`` has; the run's cost
    is ``run_cost_usd``, or ``tco_usd`` where the table predates the rename; none that is an objective."""
    out = []
    taken = set(objectives)
    for label, names in COSTS:
        column = next((c for c in names if c in frame), None)
        if column is not None and not taken & set(names):
            out.append((label, column))
    return out


def table_metrics(runs: Sequence[Run]) -> list[str]:
    """The front table's metric columns: the objectives, then capex, the run's cost and the lifetime cost
    (``run_cost_usd``, or ``tco_usd`` before the rename; an alias of an objective is left out), then
    TABLE_METRICS, each where a run has it. Serving runs: the serving columns (dse.report.serving) in their
    order, the objectives among them, each where a run has it."""
    objectives = list(runs[0].objectives)
    columns = set().union(*(r.front.columns for r in runs))
    if all(r.serving for r in runs):
        return [m for m in objectives if m not in SERVING_TABLE] + [m for m in SERVING_TABLE if m in columns]
    costs = [c for _, c in cost_columns(columns, objectives)]
    return objectives + costs + [m for m in TABLE_METRICS if m not in objectives and m not in costs and m in columns]


def front_names(runs: Sequence[Run]) -> list[list[str]]:
    """Each run's front designs' names: the axes that vary across every run's front, with units."""
    fronts = [r.front for r in runs]
    if not any(len(f) for f in fronts):
        return [[] for _ in runs]
    design = list(dict.fromkeys(c for r in runs for c in r.design_columns))
    names = design_names(pd.concat(fronts, ignore_index=True), design)
    out, at = [], 0
    for f in fronts:
        out.append(names[at:at + len(f)])
        at += len(f)
    return out


def front_shared(runs: Sequence[Run]) -> str:
    """What every run's front designs share (the axes their names leave out), as one name; '' if nothing."""
    fronts = [r.front for r in runs if len(r.front)]
    if not fronts:
        return ""
    return shared_axes(pd.concat(fronts, ignore_index=True), list(dict.fromkeys(c for r in runs for c in r.design_columns)))


def design_label(row: Mapping[str, Any], design: list[str]) -> str:
    """A design's searched values, as a reviewer reads them."""
    return " ".join(fmt(row[c]) for c in design if c in row)


def mapping_label(row: Mapping[str, Any]) -> str:
    """A design's mapping in short (``tp4 pp8 mb1 ...``; unset columns left out)."""
    parts = []
    for c in MAPPING:
        if c in row and not (isinstance(row[c], float) and np.isnan(row[c])):
            v = row[c]
            if c in ("cp", "ep", "vp", "attn_dp") and fmt(v) == "1":
                continue
            parts.append(f"{_SHORT.get(c, c)}{'=' if c == 'recompute' else ''}{fmt(v)}")
    return " ".join(parts)
