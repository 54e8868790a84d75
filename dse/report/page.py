"""The HTML page: one self-contained file (inline CSS, SVG and a few lines of script; nothing fetched)."""

from __future__ import annotations

import itertools
from html import escape

import numpy as np
import pandas as pd

from dse.report import serving, svg
from dse.report.breakdown import breakdown, colours, is_loss
from dse.report.buyer import Recommendation, group_kinds, group_table, group_values, recommend
from dse.report.data import (
    MAPPING,
    Run,
    design_label,
    fmt,
    front_names,
    front_shared,
    interval_of,
    is_dollars,
    mapping_label,
    table_metrics,
    ties,
    why_infeasible,
)
from dse.report.facets import Facets, facets
from dse.report.html import Interval, Mark, Money, Name, Tie, table

CSS = """
body{font:14px/1.4 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1400px;color:#222;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 6px;border-bottom:1px solid #ddd;padding-bottom:3px}
.meta{color:#555}.panels{display:flex;flex-wrap:wrap;gap:8px}
svg text{font-size:11px;fill:#333}svg .axis{font-size:12px;fill:#111}
svg .plot{fill:#fafafa;stroke:#bbb}svg .grid{stroke:#e6e6e6}
svg g.infeasible circle{opacity:.18;fill:#aaa}svg g.dominated circle{opacity:.28}
svg g.front circle{stroke:#000;stroke-width:.8}svg circle:hover{stroke:#000;stroke-width:2;opacity:1}
svg .frontline{fill:none;stroke-width:1.5;opacity:.7}svg .ebar{fill:none;stroke-width:1;opacity:.55}
svg circle[data-tie]{stroke:#e69f00;stroke-width:2.4}td.tie{color:#b35c00;font-weight:600;white-space:normal;max-width:120px}.iv{color:#777;font-size:11px}svg rect.seg:hover{opacity:.75}
table{border-collapse:collapse;font-size:12.5px;margin:6px 0}th,td{padding:3px 7px;border-bottom:1px solid #eee;text-align:right;white-space:nowrap}
th{background:#f3f3f3;cursor:pointer;user-select:none}th.l,td.l{text-align:left}
th[data-dir=asc]::after{content:" \\25B2"}th[data-dir=desc]::after{content:" \\25BC"}
tr:hover td{background:#fff8dc}.legend span{display:inline-block;margin-right:14px}.legend{margin:2px 0}
.facet-buttons{margin:4px 0}.facet-buttons button{font:inherit;font-size:12.5px;margin-right:4px;border:1px solid #bbb;
background:#f6f6f6;border-radius:3px;padding:1px 8px;cursor:pointer}.facet-buttons button.on{background:#222;color:#fff}
td.rec{font-weight:600}svg .rec-label{font-size:11px;font-weight:600;fill:#000}p.recommend{max-width:1150px}
th{white-space:normal;vertical-align:bottom;max-width:110px}th.l{max-width:none}table.front td.name,table.front td.rec{white-space:normal;min-width:160px;max-width:300px}.sw{display:inline-block;width:11px;height:11px;border-radius:6px;margin-right:4px;vertical-align:-1px}
table.serving .iv{display:block;font-size:10.5px}table.serving th,table.serving td{padding:3px 5px}table.serving td.name,table.serving td.rec{min-width:130px}figure.view{margin:0}figure.view figcaption{font-size:12.5px;margin:2px 0 2px 70px}
.pos{color:#1a7f37}.neg{color:#b42318}.note{color:#666;font-size:12.5px}.scroll{overflow-x:auto}
"""

JS = """
(function(){
document.querySelectorAll('table.sortable').forEach(function(t){
 t.querySelectorAll('th').forEach(function(th,i){th.addEventListener('click',function(){
  var b=t.tBodies[0],rows=Array.prototype.slice.call(b.rows),asc=th.dataset.dir!=='asc';
  t.querySelectorAll('th').forEach(function(h){delete h.dataset.dir});th.dataset.dir=asc?'asc':'desc';
  rows.sort(function(a,c){var x=a.cells[i].dataset.v,y=c.cells[i].dataset.v;
   if(x===undefined)x=a.cells[i].textContent;if(y===undefined)y=c.cells[i].textContent;
   var nx=parseFloat(x),ny=parseFloat(y),r=(isNaN(nx)||isNaN(ny))?String(x).localeCompare(String(y)):nx-ny;
   return asc?r:-r;});
  rows.forEach(function(r){b.appendChild(r)});});});});
document.querySelectorAll('.facet-buttons button').forEach(function(b){b.addEventListener('click',function(){
 var w=b.closest('.facets');w.className=w.className.replace(/\\bby-\\S+/g,'').trim()+' by-'+b.dataset.mode;
 w.querySelectorAll('.facet-buttons button').forEach(function(o){o.classList.toggle('on',o===b)});});});
window.addEventListener('load',function(){var m=document.getElementById('render-ms');
 if(m)m.textContent=String(Math.round(performance.now()));});
})();
"""


def _hover(row, run: Run, objectives) -> str:
    label = serving.design_label(row, run.design_columns) if run.serving else design_label(row, run.design_columns)
    parts = [f"{run.name}: {label}", mapping_label(row)]
    parts += [f"{m} = {fmt(row[m])}" for m in objectives]
    for m in (serving.HOVER if run.serving else ("mfu", "goodput", "power_mw", "usd_per_mtok")):
        if m in row and m not in objectives:
            parts.append(f"{m} = {fmt(row[m])}")
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
            one.update(rec=(t["trial"] == rec.row["trial"]).to_numpy(), rec_title=f"recommended: {rec.name}")
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
    return svg.scatter(f"{xn} ({directions[xn]})", f"{yn} ({directions[yn]})", series, connect=connect, size=size,
                       x_max=directions[xn] == "max")


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
    note = ("; whiskers: the front designs' 80% prediction intervals (objectives.intervals); orange ring: a tie, "
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


def recommended_section(runs: list[Run], recs: list[Recommendation | None]) -> str:
    """The design to buy and why (each run), and the best design of each GPU, provider and instance."""
    out = []
    for run, rec in zip(runs, recs):
        head = f"<h3>{escape(run.name)}</h3>" if len(runs) > 1 else ""
        if rec is None:
            out.append(f'{head}<p class="note">No feasible design within the constraints: nothing to recommend.</p>')
            continue
        where = f"#{rec.position} " if rec.position else ""
        out.append(f'{head}<p class="recommend" id="recommended-{escape(run.name, quote=True)}"><b>Recommended: '
                   f'{where}{escape(rec.name)}</b>. {escape(rec.text)}</p>')
        for kind in group_kinds(run.trials):
            header, rows, shared = group_table(run, kind)
            dollars = {i for i, h in enumerate(header) if is_dollars(h)}
            rows = [[Money(v) if i in dollars and isinstance(v, (int, float, np.number)) else v for i, v in enumerate(r)]
                    for r in rows]
            caption = f'<p class="note">Each best design has {escape(shared)}.</p>' if shared else ""
            out.append(f"<h3>Best design per {escape(kind)}{f' ({escape(run.name)})' if len(runs) > 1 else ''}</h3>"
                       + caption + table(header, rows, f"best-{kind}-row", left=2, titles=_titles(header)))
    return "".join(out)


def _titles(header: list[str]) -> list[str]:
    """A tooltip per table header: the metric's unit and meaning (objectives.METRICS)."""
    try:
        import objectives

        metrics = objectives.METRICS
    except ImportError:
        metrics = {}
    return [metrics.get(h, "") for h in header]


def front_table(runs: list[Run], recs: list[Recommendation | None] | None = None) -> str:
    """The sortable table of the front designs: name, objectives with intervals, costs, metrics, ties."""
    recs = recs if recs is not None else [recommend(r) for r in runs]
    objectives = list(runs[0].objectives)
    metrics = table_metrics(runs)
    said = ""
    if all(r.serving for r in runs):  # a deployment column with one value on the whole front: said once
        shared = serving.shared_columns([r.front for r in runs], metrics)
        metrics = [m for m in metrics if m not in shared]
        said = ('<p class="note">Every front design has ' + ", ".join(f"{escape(c)} <b>{escape(fmt(v))}</b>"
                                                                    for c, v in shared.items()) + ".</p>") if shared else ""
    multi = len(runs) > 1
    header = (["run"] if multi else []) + ["#", "design"] + metrics + ["tie with"]
    rows = []
    for run, names, rec in zip(runs, front_names(runs), recs):
        tied = ties(run.front, objectives)
        for i, r in enumerate(run.front.to_dict("records"), start=1):
            cells = []
            for m in metrics:
                v = r.get(m, np.nan)
                number = isinstance(v, (int, float, np.number))
                # intervals: the objectives' (a training table is wide enough), every serving metric's
                if number and (m in objectives or run.serving) and f"{m}_lo" in r and f"{m}_hi" in r:
                    v = Interval(v, r[f"{m}_lo"], r[f"{m}_hi"], dollars=is_dollars(m), short=run.serving)
                elif number and is_dollars(m):
                    v = Money(v)
                cells.append(v)
            name = Mark(names[i - 1]) if rec is not None and rec.position == i else Name(names[i - 1])
            rows.append(([run.name] if multi else []) + [i, name] + cells
                        + [Tie(", ".join(f"#{j}" for j in tied[i - 1]))])
    cls = "front serving" if all(r.serving for r in runs) else "front"
    return said + table(header, rows, "front-row", left=(1 if multi else 0) + 2, titles=_titles(header), cls=cls)


def infeasible_section(runs: list[Run]) -> str:
    """A small table per run: how many designs each kind of reason kept off the front."""
    out = []
    for run in runs:
        why = why_infeasible(run.trials, constraints=run.info.get("spec", {}).get("constraints") or ())
        if why:
            head = f"<h3>{escape(run.name)}</h3>" if len(runs) > 1 else ""
            out.append(head + table(["designs", "reason", "example"], [[n, kind, ex] for kind, n, ex in why],
                                     "why-row", left=3))
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
    header = ["rank", "hardware change", "what changes"] + [f"{m} median gain %" for m in metrics] + \
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
            f"<details><summary>per design: {escape(metrics[0])} gain %</summary>"
            f"{table(dheader, drows, 'sens-design-row', left=2)}</details>")


BOUNDS_TRAINING = """<h2 id="breakdown">What bounds each front design: time per step</h2>
<p class="note">Compute, exposed communication of each kind, pipeline bubble and optimizer sum to the step time;
checkpoint stalls, failure rework and restarts and planned maintenance are the goodput losses as seconds per step.</p>"""
BOUNDS_SERVING = """<h2 id="breakdown">What bounds each front design: time per output token</h2>
<p class="note">Each user waits TPOT for a token: pp stages of the engine's mean step (objectives.serving.batching). It
splits into the decode-only step and what the steps that carry a prefill chunk add to it: prefill's interference with
decoding, none where the prefill runs on its own pool (serving: disaggregated). The serving model gives its step time
per kind of step, not per kernel (weights, KV cache, GEMMs, collectives, host), so the bars stop there.</p>"""


def page(runs: list[Run], ranked: pd.DataFrame, sens: pd.DataFrame, title: str) -> str:
    """The report page: the runs, their fronts, what bounds each design and the hardware ranking."""
    first = runs[0]
    objs = ", ".join(f"{m} ({d})" for m, d in first.objectives.items())
    runs_meta = "".join(
        f"<li><b>{escape(r.name)}</b> <code>{escape(str(r.root))}</code>: {len(r.trials)} distinct designs, "
        f"{int(r.trials['admissible'].sum())} feasible, front {len(r.front)}; "
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
<p class="meta">Objectives: {escape(objs)}.</p><ul class="meta">{runs_meta}</ul>
<h2 id="front">Pareto front</h2>{front_panels(runs, fac, recs)}{views}
<h2 id="recommended">Recommended design</h2>{recommended_section(runs, recs)}
<h2 id="table">Front designs</h2><p class="note">Each design is named by the axes that vary across the front{shared}; &#9733;: the recommended design. Click a column to sort. Grey: the 80% prediction interval
(objectives.intervals: the model's error on published runs it was not fitted to, wider for a stack, GPU generation
or MoE it is less sure of and for designs far from every validated run). "tie with": front designs whose
intervals overlap this one's on every objective; the published evidence cannot order them. Two designs on one
stack and GPU share much of their error, so the intervals overstate how uncertain their order is.</p>{front_table(runs, recs)}
<h2 id="infeasible">Why designs were infeasible</h2>
<p class="note">Designs the model marked infeasible, by the first constraint each breaks (numbers as #), and the
designs a constraint of the space excludes.</p>{infeasible_section(runs)}
{bounds}
{breakdown_section(runs)}
<h2 id="sensitivity">{sens_title}</h2>{sensitivity_section(first, ranked, sens)}
<p class="note">Written by dse report. Loaded in <span id="render-ms">?</span> ms.</p>
<script>{JS}</script>
</body></html>
"""
