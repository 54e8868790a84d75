"""The buyer's view of a run: which design to buy (:mod:`dse.report.knee`'s rule), why, in one paragraph
from the data, and the best design of each GPU, provider and cloud instance.

"Best" in a group is the design the same rule recommends among the group's own designs: with a deadline
in the space, the group's cheapest design within it; without, the knee of the group's own front. A serving
space's latency targets (dse.report.knee.slo_targets) play the deadline's part: the design with the least
cost per million output tokens among those meeting them. A group
is a GPU always; a provider where the table has ``provider`` or ``instance`` (an instance id starts with
its provider: ``aws-p5.48xlarge``; a design without one is ``owned``) or mixes owned and rented designs;
an instance where the table has ``instance``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from dse.report import serving_buyer
from dse.report.breakdown import breakdown
from dse.report.data import Run, cost_columns
from dse.report.display import phrase, value_text
from dse.report.headline import Decision, decision
from dse.report.knee import (
    DEADLINE_METRIC,
    SERVING_COST,
    cheapest_index,
    cost_metric,
    deadline_days,
    knee_index,
    slo_targets,
)
from dse.report.names import design_names, mapping_words, money, number, shared_axes
from dse.report.owning import owning_sentence
from dse.report.serving import SUMMARY
from dse.report.sureness import sureness
from dse.report.twins import is_twin
from dse.store.pareto import front_table, to_minimization

__all__ = ["Recommendation", "recommend", "cost_columns", "group_kinds", "group_values", "best_per_group",
           "group_table", "terminal_text"]

@dataclass
class Recommendation:
    row: pd.Series  # the recommended design, every column
    position: int | None  # its 1-based number on the front (None: not on it)
    rule: str  # "knee", "deadline", "slo" (serving: the cheapest per token within the targets) or "only"
    name: str  # its name among the front's designs
    text: str  # one paragraph: why, from the data
    decision: Decision | None = None  # the recommendation in one sentence (dse.report.headline), with its caveat


def _amount(metric: str, v: float) -> str:
    """A metric's value with its unit (days, $, MW; a serving metric's: dse.report.serving_buyer)."""
    said = serving_buyer.amount(metric, v)
    if said is not None:
        return said
    if metric.endswith("_usd"):
        return money(v)
    if metric.endswith("_days") and abs(v) < 1:  # under a day, in hours
        return f"{number(v * 24, 3)} h"
    for suffix, unit in (("_days", "days"), ("_mw", "MW"), ("_s", "s"), ("_gb", "GB")):
        if metric.endswith(suffix):
            return f"{number(v, 3)} {unit}"
    return f"{metric} {number(v, 3)}"


def _delta(metric: str, direction: str, a: float, b: float) -> str:
    """How design value ``a`` compares with a neighbour's ``b`` on ``metric``, in words."""
    if not (np.isfinite(a) and np.isfinite(b)):
        return ""
    said = serving_buyer.delta(metric, a, b)
    if said is not None:
        return said
    d = a - b
    if d == 0:
        return f"the same {metric}"
    pct = f" ({'+' if d > 0 else '-'}{number(abs(d / b) * 100, 2)}%)" if b else ""
    size = _amount(metric, abs(d))
    if metric.endswith(("_days", "_s")):
        return f"{size} {'faster' if d < 0 else 'slower'}{pct}"
    if metric.endswith("_usd"):
        return f"{size} {'cheaper' if d < 0 else 'dearer'}{pct}"
    if metric.endswith(("_mw", "_w")):
        return f"{size} {'less' if d < 0 else 'more'} power{pct}"
    better = (d < 0) == (direction == "min")
    return f"{size.replace(metric + ' ', '')} {'better' if better else 'worse'} on {metric}{pct}"


def group_kinds(frame: pd.DataFrame) -> list[str]:
    """The groups a buyer compares in ``frame``: gpu; provider and instance where the table has them and
    they tell designs apart (every design owned is one group: nothing to compare)."""
    kinds = ["gpu"] if "gpu" in frame else []
    mixed = "cost_mode" in frame and frame["cost_mode"].astype(str).nunique() > 1
    if ("provider" in frame or "instance" in frame or mixed) and group_values(frame, "provider").nunique() > 1:
        kinds.append("provider")
    if "instance" in frame and group_values(frame, "instance").nunique() > 1:
        kinds.append("instance")
    return kinds


def _blank(s: pd.Series) -> pd.Series:
    return s.isna() | s.astype(str).str.strip().isin(("", "nan", "None"))


def group_values(frame: pd.DataFrame, kind: str) -> pd.Series:
    """Each row's group of ``kind``; a design without an instance (or provider) is ``owned``, or ``cloud``
    where its cost_mode rents it without naming an instance."""
    if kind == "gpu":
        return frame["gpu"].astype(str)
    mode = pd.Series("owned", index=frame.index)
    if "cost_mode" in frame:
        mode = mode.where(~frame["cost_mode"].astype(str).isin(("1", "1.0", "cloud")), "cloud")
    if kind == "instance":
        s = frame["instance"] if "instance" in frame else pd.Series(np.nan, index=frame.index)
        return s.astype(str).where(~_blank(s), mode)
    if "provider" in frame:
        s = frame["provider"]
    elif "instance" in frame:
        s = pd.Series([v.split("-", 1)[0] if isinstance(v, str) else np.nan for v in frame["instance"]],
                      index=frame.index, dtype=object)
    else:
        s = pd.Series(np.nan, index=frame.index)
    return s.astype(str).where(~_blank(s), mode)


@dataclass
class Target:
    """What the recommendation meets: a deadline (days) or a serving space's latency targets; and the cost
    it minimizes within it (None: no target, the knee)."""

    rule: str | None  # "deadline", "slo" or None
    cost: str | None
    deadline: float | None = None
    slo: dict | None = None


def target(run: Run) -> Target:
    """The run's target: a serving run's latency targets (least ``usd_per_mtok_out`` within them), else the
    space's deadline (least cost: dse.report.knee.cost_metric)."""
    spec = run.info.get("spec", {})
    constraints = spec.get("constraints") or []
    if run.serving:
        slo = slo_targets(constraints, {**spec.get("workload", {}), **spec.get("cluster", {})})
        if slo and SERVING_COST in run.trials:
            return Target("slo", SERVING_COST, slo=slo)
        return Target(None, None)
    deadline = deadline_days(constraints)
    if deadline is None:
        return Target(None, None)
    return Target("deadline", cost_metric(run.objectives, run.front.columns if len(run.front) else run.trials.columns),
                  deadline=deadline)


def choose(front: pd.DataFrame, trials: pd.DataFrame, objectives: dict, goal: Target):
    """(row, rule) the recommendation rule picks: the cheapest admissible design within the target, or
    the knee of ``front`` (non-dominated, sorted by the first objective)."""
    first = list(objectives)[0]
    cost = goal.cost
    if goal.rule is not None and cost is not None and cost in trials:
        pool = front if cost in objectives else trials[trials["admissible"].astype(bool)]
        i = cheapest_index(pool, cost, first, objectives[first])
        if i is not None:
            return pool.iloc[i], goal.rule
    if len(front) == 1:
        return front.iloc[0], "only"
    F = to_minimization(front[list(objectives)].to_numpy(dtype=np.float64), list(objectives.values()))
    return front.iloc[knee_index(F)], "knee"


def _position(front: pd.DataFrame, row: pd.Series) -> int | None:
    if "trial" in front and "trial" in row:
        hit = np.flatnonzero(front["trial"].to_numpy() == row["trial"])
        return int(hit[0]) + 1 if len(hit) else None
    return None


def _why(rule: str, run: Run, goal: Target, row: pd.Series) -> str:
    objectives = list(run.objectives)
    n = len(run.front)
    if rule == "only":
        return "it is the only design on the front"
    if rule == "deadline":
        return (f"it is the cheapest design (least {phrase(goal.cost)}) of those that train within the space's deadline of "
                f"{number(goal.deadline, 3)} days")
    if rule == "slo":
        meets = int(run.trials["admissible"].astype(bool).sum())
        return (f"it is the cheapest design per output token (least {phrase(goal.cost)}) of the {number(meets)} that meet the "
                f"space's targets, {serving_buyer.targets_text(goal.slo)}")
    through = ("the line between the front's two extremes" if len(objectives) == 2 else
               f"the plane through the front's {len(objectives)} extremes")
    return (f"it is the knee of the front: of its {n} designs, the one farthest from {through} on the "
            f"objectives normalized to [0, 1] (log-scaled where they span more than 10x; Das 1999, Deb & Gupta "
            f"2011), where a step along the front in either direction gives up most for least")


def _neighbours(run: Run, pos: int, names: list[str]) -> list[str]:
    front, objectives = run.front, run.objectives
    first = list(objectives)[0]
    out = []
    me = front.iloc[pos - 1]
    values = front[list(objectives)].to_numpy(dtype=np.float64)
    for step, what in ((1, "the next design along"), (-1, "the next better on")):
        other = pos + step  # the nearest design that is not a near-twin (dse.report.twins)
        while 1 <= other <= len(front) and is_twin(values[pos - 1], values[other - 1]):
            other += step
        if not 1 <= other <= len(front):
            continue
        them = front.iloc[other - 1]
        if first == DEADLINE_METRIC:
            what = "the next-slower design" if other > pos else "the next-faster design"
        else:
            what = f"{what} {phrase(first)}"
        deltas = [d for m, direction in objectives.items()
                  if (d := _delta(m, direction, float(me[m]), float(them[m])))]
        said = ", ".join(deltas[:-1]) + " and " + deltas[-1] if len(deltas) > 1 else "".join(deltas)
        out.append(f"against #{other} ({names[other - 1]}), {what}, it is {said}")
    return out


def _split(row: pd.Series) -> str:
    """The run's cost split by part (the ``tco_*_usd`` / ``run_cost_*_usd`` breakdown columns)."""
    parts = {}
    for c in row.index:
        for prefix in ("run_cost_", "tco_"):
            if c.startswith(prefix) and c.endswith("_usd") and c.count("_") >= 2 and not c.endswith(("_lo", "_hi")):
                label = c[len(prefix):-len("_usd")]
                if label and label not in parts and np.isfinite(float(row[c])):
                    parts[label] = float(row[c])
    total = sum(v for v in parts.values() if v > 0)
    if total <= 0:
        return ""
    shown = [f"{k} {v / total:.0%}" for k, v in sorted(parts.items(), key=lambda kv: -kv[1]) if v / total >= 0.005]
    return ", ".join(shown)


def _profile(row: pd.Series) -> list[str]:
    """The design's size, mapping, step breakdown and cost split, in sentences."""
    out = []
    gpus = f"{number(row['n_gpus'])} {row.get('gpu', 'GPUs')}" if "n_gpus" in row else "its GPUs"
    inst = row.get("instance")
    if isinstance(inst, str) and inst.strip():
        gpus += f" ({inst}{', ' + str(row['pricing']) if isinstance(row.get('pricing'), str) else ''})"
    mfu = f" at MFU {number(row['mfu'], 2)}" if "mfu" in row and np.isfinite(float(row["mfu"])) else ""
    out.append(f"its {gpus} run {mapping_words(row)}{mfu}")
    parts = breakdown(pd.DataFrame([row]))
    if len(parts.columns) and "step_time_s" in row:
        total = float(parts.iloc[0].sum())
        top = parts.iloc[0].sort_values(ascending=False)
        top = [f"{k} {v / total:.0%}" for k, v in top.items() if v / total >= 0.03][:4]
        out.append(f"a {number(row['step_time_s'], 3)} s step goes to {', '.join(top)} (goodput losses included)")
    split = _split(row)
    costs = [f"{label} {money(row[c])}" + (f" ({split})" if label == "run cost" and split else "")
             for label, c in cost_columns(row.index) if np.isfinite(float(row[c]))]
    if costs:
        out.append("it costs " + ", ".join(costs))
    return out


def _gives(run: Run, row: pd.Series) -> str:
    """What the design gives on the objectives (a serving design: in a serving buyer's words, then any
    objective those leave out)."""
    if run.serving:
        said = serving_buyer.gives(row)
        rest = [m for m in run.objectives if m not in SUMMARY]
        return said + "".join(f", {_amount(m, float(row[m]))}" for m in rest)
    gives = [f"{phrase(m)} {value_text(m, float(row[m]))}" for m in run.objectives]
    return "it gives " + (", ".join(gives[:-1]) + " and " + gives[-1] if len(gives) > 1 else gives[0])


def recommend(run: Run) -> Recommendation | None:
    """The design to buy of ``run``, and why (None where its front is empty)."""
    if run.front.empty or not run.objectives:
        return None
    goal = target(run)
    row, rule = choose(run.front, run.trials, run.objectives, goal)
    pos = _position(run.front, row)
    names = design_names(run.front, run.design_columns)
    # a design off the front is named among the front's (a frame of its own keeps its numbers numbers)
    name = names[pos - 1] if pos else design_names(pd.concat([run.front, pd.DataFrame([row.to_dict()])], ignore_index=True),
                                                   run.design_columns)[-1]
    said = [_why(rule, run, goal, row), _gives(run, row)]
    sure = "" if run.serving else sureness(list(run.objectives)[0], row, _amount)
    if sure:
        said.append(sure)
    owning = "" if run.serving else owning_sentence(row)
    if owning:
        said.append(owning)
    if pos:
        said += _neighbours(run, pos, names)
    said += serving_buyer.profile(row) if run.serving else _profile(row)
    text = ". ".join(s[0].upper() + s[1:] for s in said) + "."
    return Recommendation(row=row, position=pos, rule=rule, name=name, text=text,
                          decision=decision(run.objectives, row, serving=run.serving))


def best_per_group(run: Run, kind: str) -> pd.DataFrame:
    """One row per group of ``kind``: its designs, feasible designs, front designs, and its best design (the
    recommendation rule applied to the group's designs), sorted by that design's first objective."""
    trials, objectives = run.trials, run.objectives
    goal = target(run)
    groups = group_values(trials, kind)
    on_front = group_values(run.front, kind).value_counts() if not run.front.empty else pd.Series(dtype=int)
    rows = []
    for g in sorted(groups.unique()):
        sub = trials[(groups == g).to_numpy()]
        admissible = int(sub["admissible"].astype(bool).sum())
        front = front_table(sub, objectives, feasible="admissible", dedupe=run.design_columns or None)
        first = list(objectives)[0]
        front = front.sort_values(first, ascending=objectives[first] == "min", kind="stable").reset_index(drop=True)
        base = {"group": g, "designs": len(sub), "feasible": admissible, "on front": int(on_front.get(g, 0))}
        if front.empty:
            rows.append(base)
            continue
        row, _ = choose(front, sub, objectives, goal)
        rows.append({**row.to_dict(), **base})
    out = pd.DataFrame(rows)
    first = list(objectives)[0]
    if first in out:
        out = out.sort_values(first, ascending=objectives[first] == "min", kind="stable", na_position="last")
    return out.reset_index(drop=True)


def group_table(run: Run, kind: str) -> tuple[list[str], list[list], str]:
    """(header, rows, shared) of :func:`best_per_group` as a table: the group, its best design's name (the
    axes that vary across these best designs), its counts, objectives and costs; ``shared``: what the best
    designs have in common (the axes their names leave out)."""
    best = best_per_group(run, kind)
    objectives = list(run.objectives)
    costs = cost_columns(best, objectives)
    if run.serving:  # what a serving buyer compares, beside the objectives; the deployment's cost per hour
        objectives += [m for m in SUMMARY if m in best and m not in objectives]
        costs += [("usd_per_hr", "usd_per_hr")] if "usd_per_hr" in best else []
    header = [kind, "best design", "designs", "feasible", "on front"] + objectives + [label for label, _ in costs]
    has = best[objectives[0]].notna() if objectives[0] in best else pd.Series(False, index=best.index)
    names, shared = [""] * len(best), ""
    if has.any():
        shown = design_names(best[has], [c for c in run.design_columns if c in best])
        shared = shared_axes(best[has], [c for c in run.design_columns if c in best])
        for i, n in zip(np.flatnonzero(has.to_numpy()), shown):
            names[i] = n
    rows = []
    for i, r in enumerate(best.to_dict("records")):
        rows.append([r["group"], names[i] or "(none feasible)", r["designs"], r["feasible"], r["on front"]]
                    + [r.get(m, np.nan) for m in objectives] + [r.get(c, np.nan) for _, c in costs])
    return header, rows, shared


def terminal_text(run: Run, width: int = 110) -> str:
    """What ``dse sweep`` and ``dse report`` print at the end (dse.report.terminal)."""
    from dse.report.terminal import terminal_text as text

    return text(run, width)
