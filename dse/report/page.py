"""The HTML page: one self-contained file (inline CSS, SVG and a few lines of script; nothing fetched)."""

from __future__ import annotations

import itertools
from html import escape

import numpy as np
import pandas as pd

from dse.report import serving, svg
from dse.report.breakdown import breakdown, colours, is_loss
from dse.report.buyer import Recommendation, group_values, recommend
from dse.report.data import (
    MAPPING,
    Run,
    design_label,
    fmt,
    front_names,
    front_shared,
    infeasible_kinds,
    interval_of,
    mapping_label,
    more_kinds,
    table_metrics,
    ties,
)
from dse.report.display import axis_title, better, display, label, phrase, tick_text, unit_for, value_text
from dse.report.facets import Facets, facets
from dse.report.first_screen import decision_section, title_of, titles, whatif_section
from dse.report.html import Interval, Mark, Money, Name, Tie, table
from dse.report.style import CSS, JS
from dse.report.twins import TWIN_TOLERANCE, twin_groups, twin_note

#: the reasons' kinds a table lists before it says how many more there are
INFEASIBLE_SHOWN = 8


def _hover(row, run: Run, objectives) -> str:
    label = serving.design_label(row, run.design_columns) if run.serving else design_label(row, run.design_columns)
    parts = [f"{run.name}: {label}", mapping_label(row)]
    parts += [f"{display(m).name}: {value_text(m, row[m])}" for m in objectives]
    for m in (serving.HOVER if run.serving else ("mfu", "goodput", "power_mw", "usd_per_mtok")):
        if m in row and m not in objectives:
            parts.append(f"{display(m).name}: {value_text(m, row[m])}")
    if not bool(row.get("admissible", True)):
        parts.append("infeasible or outside the constraints")
    return "\n".join(parts)


#: the columns a point's hover text reads beside the design's and the objectives
_HOVER_COLUMNS = {"mfu", "goodput", "power_mw", "usd_per_mtok", "admissible", *MAPPING, *serving.HOVER}


def _series(runs: list[Run], fac: Facets, recs: list[Recommendation | None], metrics: list[str],
            fronts: list[pd.DataFrame]) -> list[dict]:
    """Each run's points for a panel of ``metrics``: on ``fronts`` (the run's front on them), dominated or
    infeasible, with their hover text, groups, ties and the recommended design's ring."""
    out = []
    for k, (run, front) in enumerate(zip(runs, fronts)):
        t = run.trials
        on_front = np.zeros(len(t), dtype=bool)
        if "trial" in t.columns and "trial" in front.columns:
            on_front = t["trial"].isin(front["trial"]).to_numpy()
        admissible = t["admissible"].to_numpy(dtype=bool)
        kind = np.where(on_front, "front", np.where(admissible, "dominated", "infeasible"))
        keep = [c for c in set(run.design_columns) | set(metrics) | _HOVER_COLUMNS if c in t]
        titles = [_hover(r, run, metrics) for r in t[keep].to_dict("records")]
        tie = np.zeros(len(t), dtype=bool)
        if on_front.any():
            tied = {int(trial) for trial, others in zip(front["trial"], ties(front, metrics)) if others}
            tie = t["trial"].isin(tied).to_numpy()
        one = dict(label=run.name, colour=svg.PALETTE[k % len(svg.PALETTE)], kind=kind, title=titles, frame=t, tie=tie,
                   attrs=fac.attributes(k))
        rec = recs[k]
        if rec is not None and "trial" in t.columns and "trial" in rec.row:
            one.update(rec=(t["trial"] == rec.row["trial"]).to_numpy(), rec_title=f"recommended: {rec.name}",
                       rec_label=f"recommended ({run.name})" if len(runs) > 1 else "recommended")
        out.append(one)
    return out


def _panel(series_of: list[dict], xn: str, yn: str, directions: dict[str, str], connect: bool,
           size: tuple[int, int]) -> str:
    series = []
    for s in series_of:
        one = dict(s, x=s["frame"][xn].to_numpy(dtype=np.float64), y=s["frame"][yn].to_numpy(dtype=np.float64))
        for axis, name in (("xerr", xn), ("yerr", yn)):
            bounds = interval_of(s["frame"], name)
            if bounds is not None:
                one[axis] = bounds
        series.append(one)
    xs = np.concatenate([s["x"] for s in series]) if series else np.zeros(0)
    ys = np.concatenate([s["y"] for s in series]) if series else np.zeros(0)
    xu, yu = unit_for(xn, xs[np.isfinite(xs)]), unit_for(yn, ys[np.isfinite(ys)])
    return svg.scatter(axis_title(xn, directions[xn], xs), axis_title(yn, directions[yn], ys), series,
                       connect=connect, size=size, x_max=directions[xn] == "max",
                       x_tick=lambda v: tick_text(xn, v, xu), y_tick=lambda v: tick_text(yn, v, yu))


def front_panels(runs: list[Run], fac: Facets | None = None, recs: list[Recommendation | None] | None = None) -> str:
    """The front's panels, points coloured by ``fac`` (default: :func:`~dse.report.facets.facets` of the
    runs), each run's recommended design ringed (default: :func:`~dse.report.buyer.recommend`)."""
    fac = fac if fac is not None else facets(runs)
    recs = recs if recs is not None else [recommend(r) for r in runs]
    objectives = runs[0].objectives
    names = list(objectives)
    pairs = list(itertools.combinations(names, 2)) if len(names) > 2 else [tuple(names[:2])]
    if len(names) < 2:
        return "<p>One objective: no front to draw.</p>"
    series_of = _series(runs, fac, recs, names, [r.front for r in runs])
    out = [_panel(series_of, xn, yn, objectives, len(names) == 2, (760, 430) if len(pairs) == 1 else (svg.W, svg.H))
           for xn, yn in pairs]
    legend = fac.legends(runs, [s["colour"] for s in series_of])
    bars = any(interval_of(runs[0].front, m) is not None for m in names)
    note = ("; whiskers: the front designs' 80% prediction intervals (objectives.training.intervals); orange ring: a tie, "
            "its intervals overlap another front design's on every objective") if bars else ""
    return (f'<div class="facets by-{fac.default}">{legend}<p class="note">large: Pareto front; small: dominated; grey: '
            f'infeasible or outside the constraints; black ring: the recommended design; hover a point for its design '
            f'and mapping{note}</p><div class="panels">{"".join(out)}</div></div>')


def serving_panels(runs: list[Run], fac: Facets, recs: list[Recommendation | None]) -> str:
    """The two serving pictures (dse.report.serving.VIEWS), each with its own front of every evaluated
    design on its two metrics, coloured like the space's front."""
    out = []
    for view in serving.VIEWS:
        fronts = [serving.view_front(r.trials, view, r.design_columns) for r in runs]
        series_of = _series(runs, fac, recs, list(view.objectives), fronts)
        n = sum(len(f) for f in fronts)
        by = ""
        if fac.default != "run" and n:
            counts = pd.concat([group_values(f, fac.default) for f in fronts]).value_counts()
            by = ": " + ", ".join(f"{escape(str(g))} {c}" for g, c in counts.items())
        out.append(f'<figure class="view" id="view-{view.key}"><figcaption><b>{escape(view.title)}</b> (front of '
                   f'{n} designs{by})</figcaption>'
                   f'{_panel(series_of, view.x[0], view.y[0], view.objectives, True, (640, 400))}</figure>')
    legend = fac.legends(runs, [svg.PALETTE[k % len(svg.PALETTE)] for k in range(len(runs))], counts=False)
    return (f'<div class="facets by-{fac.default}">{legend}<p class="note">Every evaluated design on the two '
            f'pictures serving is judged by, whatever the space\'s objectives; each has its own front (large points, '
            f'joined): the designs no other feasible design within the constraints beats on both of its axes. '
            f'Left, the throughput-interactivity curve vendors publish: output tokens/s per GPU (up) against tokens/s '
            f'per user (right), more requests in flight buying throughput with each user\'s speed. Right, cost per '
            f'million output tokens against time to first token. Black ring: the recommended design; hover a point '
            f'for its design and mapping.</p><div class="panels">{"".join(out)}</div></div>')


def _units(runs: list[Run], metrics: list[str]) -> dict[str, tuple[str, float]]:
    """Each metric's unit over every run's front (dse.report.display.unit_for)."""
    out = {}
    for m in metrics:
        values = [pd.to_numeric(r.front[m], errors="coerce").to_numpy(dtype=np.float64) for r in runs if m in r.front]
        out[m] = unit_for(m, np.concatenate(values) if values else None)
    return out


def _front_cell(r: dict, m: str, unit: tuple[str, float], interval: bool, short: bool):
    """A front table cell of metric ``m`` in ``unit``: with its 80% interval where ``interval``, dollars as Money."""
    v = r.get(m, np.nan)
    if not isinstance(v, (int, float, np.number)) or isinstance(v, (bool, np.bool_)):
        return v
    f, dollars = unit[1], unit[0] == "$"
    if interval and f"{m}_lo" in r and f"{m}_hi" in r:
        return Interval(v * f, r[f"{m}_lo"] * f, r[f"{m}_hi"] * f, dollars=dollars, short=short)
    return Money(v * f) if dollars else v * f


def front_table(runs: list[Run], recs: list[Recommendation | None] | None = None) -> str:
    """The sortable table of the front designs: name, objectives with intervals, costs, metrics, ties; a
    group of near-twins (dse.report.twins) is one row, the others named in it."""
    recs = recs if recs is not None else [recommend(r) for r in runs]
    objectives = list(runs[0].objectives)
    metrics = table_metrics(runs)
    said = ""
    if all(r.serving for r in runs):  # a deployment column with one value on the whole front: said once
        shared = serving.shared_columns([r.front for r in runs], metrics)
        metrics = [m for m in metrics if m not in shared]
        said = ('<p class="note">Every front design has ' + ", ".join(
            f"{escape(phrase(c))} <b>{escape(fmt(v))}</b>"
            for c, v in shared.items()) + ".</p>") if shared else ""
    multi = len(runs) > 1
    units = _units(runs, metrics)
    raw = (["run"] if multi else []) + ["#", "design"] + metrics + ["tie with"]
    header = [h if h not in units else f"{display(h).name} ({units[h][0]})" if units[h][0] else display(h).name
              for h in raw]
    rows = []
    for run, names, rec in zip(runs, front_names(runs), recs):
        tied = ties(run.front, objectives)
        records = run.front.to_dict("records")
        keep = rec.position - 1 if rec is not None and rec.position else None
        for group in twin_groups(run.front, objectives, keep=keep):
            i, r = group[0] + 1, records[group[0]]
            # intervals: the objectives' (a training table is wide enough), every serving metric's
            cells = [_front_cell(r, m, units[m], m in objectives or run.serving, run.serving) for m in metrics]
            name = Mark(names[i - 1]) if rec is not None and rec.position == i else Name(names[i - 1])
            name.alike = twin_note(names, group)
            rows.append(([run.name] if multi else []) + [i, name] + cells
                        + [Tie(", ".join(f"#{j}" for j in tied[i - 1] if j - 1 not in group))])
    cls = "front serving" if all(r.serving for r in runs) else "front"
    return said + table(header, rows, "front-row", left=(1 if multi else 0) + 2, titles=titles(raw), cls=cls)


def infeasible_section(runs: list[Run]) -> str:
    """A small table per run: how many designs each kind of reason kept off the front."""
    out = []
    for run in runs:
        kinds = infeasible_kinds(run.trials, constraints=run.info.get("spec", {}).get("constraints") or ())
        if kinds:
            head = f"<h3>{escape(run.name)}</h3>" if len(runs) > 1 else ""
            total = sum(k[1] for k in kinds)
            more = more_kinds(kinds, INFEASIBLE_SHOWN)
            out.append(head + f'<p class="note">{total:,} of {len(run.trials):,} distinct designs, '
                       f'{len(kinds)} kind{"s" if len(kinds) > 1 else ""} of reason.</p>'
                       + table(["distinct designs", "reason", "example"],
                               [[n, kind, ex] for kind, n, ex in kinds[:INFEASIBLE_SHOWN]], "why-row", left=3)
                       + (f'<p class="note">{escape(more)}: {escape("; ".join(k[0] for k in kinds[INFEASIBLE_SHOWN:]))}'
                          f'</p>' if more else ""))
    return "".join(out) or '<p class="note">Every design was feasible and within the constraints.</p>'


def breakdown_section(runs: list[Run]) -> str:
    out = []
    for run, names in zip(runs, front_names(runs)):
        if run.front.empty:
            continue
        head = f"<h3>{escape(run.name)}</h3>" if len(runs) > 1 else ""
        if run.serving:
            parts = serving.tpot_parts(run.front)
            if parts.empty:
                out.append(f'{head}<p class="note">The run has no step columns (step_time_decode_s, step_time_mixed_s, '
                           f'mixed_step_frac): no breakdown.</p>')
                continue
            labels = [f"{i}. {name}" for i, name in enumerate(names, 1)]
            cols = {c: parts[c].to_numpy() * 1e3 for c in parts.columns}
            out.append(head + svg.stacked_bars(labels, cols, dict(serving.TPOT_PARTS), unit="ms"))
            continue
        parts = breakdown(run.front)
        labels = [f"{i}. {name}" for i, name in enumerate(names, 1)]
        step = [c for c in parts.columns if not is_loss(c)]
        loss = [c for c in parts.columns if is_loss(c)]
        cols = {c: parts[c].to_numpy() for c in step + loss}
        out.append(head + svg.stacked_bars(labels, cols, colours()))
    return "".join(out)


def sensitivity_section(run: Run, ranked: pd.DataFrame, sens: pd.DataFrame) -> str:
    if ranked is None or ranked.empty:
        return '<p class="note">No sensitivity (no feasible front design, or the model was not available).</p>'
    metrics = [c for c in ranked.columns if c not in ("what", "mean", "best_on_front")]
    header = ["rank", "hardware change", "what changes"] + [f"{display(m).name} median gain %" for m in metrics] + \
        ["mean gain %", "best design gain %"]
    rows = [[i, name, r["what"]] + [r[m] for m in metrics] + [r["mean"], r["best_on_front"]]
            for i, (name, r) in enumerate(ranked.iterrows(), start=1)]
    ranking = table(header, rows, "sens-row", left=3)
    per = sens.pivot_table(index="design", columns="change", values=metrics[0], sort=False)
    per = per[[c for c in ranked.index if c in per.columns]]
    dheader = ["#", "design"] + [f"{c}" for c in per.columns]
    names = front_names([run])[0]
    drows = [[i + 1, names[i]] + list(per.loc[i]) for i in per.index]
    how = ("its tp, pp, ep and attention data parallelism searched again by the serving model "
           "(objectives.search_serving) at the design's concurrency" if run.serving else "its mapping searched again")
    extra = (f" ({', '.join(metrics[len(run.objectives):])} beside the objectives: what a serving buyer compares)"
             if len(metrics) > len(run.objectives) else "")
    return (f"{ranking}<p class='note'>Gain: how much better each metric gets (percent; positive is better) when "
            f"one hardware parameter of every front design improves by 10%, {how}. "
            f"Median over the {len(run.front)} front designs{extra}; ranked by the mean over the objectives; a price "
            f"the designs do not pay (cloud rates for owned designs) gains nothing.</p>"
            f"<details><summary>per design: {escape(display(metrics[0]).name)} gain %</summary>"
            f"{table(dheader, drows, 'sens-design-row', left=2)}</details>")


BOUNDS_TRAINING = """<h2 id="breakdown">What bounds each front design: time per step</h2>
<p class="note">Compute, exposed communication of each kind, pipeline bubble and optimizer sum to the step time;
checkpoint stalls, failure rework and restarts and planned maintenance are the goodput losses as seconds per step.</p>"""
BOUNDS_SERVING = """<h2 id="breakdown">What bounds each front design: time per output token</h2>
<p class="note">Each user waits TPOT for a token: pp stages of the engine's mean step (objectives.serving.batching). It
splits into the decode-only step and what the steps that carry a prefill chunk add to it: prefill's interference with
decoding, none where the prefill runs on its own pool (serving: disaggregated). The serving model gives its step time
per kind of step, not per kernel (weights, KV cache, GEMMs, collectives, host), so the bars stop there.</p>"""


def page(runs: list[Run], ranked: pd.DataFrame, sens: pd.DataFrame, title: str | None = None) -> str:
    """The report page: the decision first (dse.report.first_screen), then the fronts, the front designs,
    why designs were infeasible, what bounds each design and the hardware ranking."""
    first = runs[0]
    title = title or title_of(runs)
    objs = ", ".join(f"{label(m)} {better(d)}" for m, d in first.objectives.items())
    counts = "; ".join(f"{escape(r.name) + ': ' if len(runs) > 1 else ''}{len(r.trials):,} distinct designs, "
                       f"{int(r.trials['admissible'].sum()):,} feasible, front {len(r.front)}" for r in runs)
    runs_meta = "".join(
        f"<li><b>{escape(r.name)}</b> <code>{escape(str(r.root))}</code>: "
        f"{escape(str(r.info.get('spec', {}).get('description', '')))} "
        f"(status {escape(str(r.info.get('status', '?')))}, seed {escape(str(r.info.get('seed', '?')))}, "
        f"commit {escape(str(r.info.get('git_commit') or '?')[:10])})</li>" for r in runs)
    sens_title = "Sensitivity: which hardware change pays most" + (f" ({escape(first.name)})" if len(runs) > 1 else "")
    fac = facets(runs)
    recs = [recommend(r) for r in runs]
    common = front_shared(runs)
    shared = f" (every front design has <b>{escape(common)}</b>)" if common else ""
    serving_run = all(r.serving for r in runs)
    views = ('<h2 id="serving">Serving: throughput against interactivity, cost against time to first token</h2>'
             + serving_panels(runs, fac, recs)) if serving_run else ""
    bounds = BOUNDS_SERVING if serving_run else BOUNDS_TRAINING
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>{escape(title)}</title><style>{CSS}{fac.css()}</style></head><body>
<h1>{escape(title)}</h1>
<p class="meta">Objectives: {escape(objs)}. {counts}.</p>
<section id="recommended">{decision_section(runs, recs)}</section>
{whatif_section(runs)}
<h2 id="front">Pareto front</h2>{front_panels(runs, fac, recs)}{views}
<h2 id="table">Front designs</h2><p class="note">Each design is named by the axes that vary across the front{shared}; &#9733;: the recommended design. Click a column to sort. Grey: the 80% prediction interval
(objectives.training.intervals: the model's error on published runs it was not fitted to, wider for a stack, GPU generation
or MoE it is less sure of and for designs far from every validated run). "tie with": front designs whose
intervals overlap this one's on every objective; the published evidence cannot order them. Two designs on one
stack and GPU share much of their error, so the intervals overstate how uncertain their order is. Near-twins,
within {TWIN_TOLERANCE:.1%} of each other on every objective (dse.report.twins), are one row: "and N more alike"
names the others and what tells them apart.</p>{front_table(runs, recs)}
<h2 id="infeasible">Why designs were infeasible</h2>
<p class="note">Distinct designs the model marked infeasible, by the first constraint each breaks (numbers as #),
and the designs a constraint of the space excludes.</p>{infeasible_section(runs)}
{bounds}
{breakdown_section(runs)}
<h2 id="sensitivity">{sens_title}</h2>{sensitivity_section(first, ranked, sens)}
<h2 id="runs">Runs</h2><ul class="meta">{runs_meta}</ul>
<p class="note">Written by dse report. Loaded in <span id="render-ms">?</span> ms.</p>
<script>{JS}</script>
</body></html>
"""
