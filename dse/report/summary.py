"""The Markdown summary beside the page: the front table, the ranking and the figures as PNG (matplotlib)."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pandas as pd

from dse.report import serving
from dse.report.breakdown import breakdown, colours
from dse.report.buyer import group_kinds, group_table, group_values, recommend
from dse.report.data import Run, fmt, front_names, front_shared, interval_of, is_dollars, table_metrics
from dse.report.display import axis_title, display, human_table, tick_text, unit_for
from dse.report.facets import facets
from dse.report.first_screen import title_of
from dse.report.html import Money
from dse.report.names import money
from dse.report.svg import ALL_SPAN_LOG, FRONT_SPAN_LOG, PALETTE
from dse.report.twins import TWIN_TOLERANCE, twin_groups, twin_note


def _md_table(header: list[str], rows: list[list]) -> str:
    """A Markdown table in display names (dse.report.display.human_table): dollars read $21.7M."""
    header, rows = human_table(header, rows)
    dollars = {i for i, h in enumerate(header) if is_dollars(h)}
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(money(v) if (i in dollars or isinstance(v, Money)) and not isinstance(v, str) else fmt(v)
                                for i, v in enumerate(r)) + " |" for r in rows]
    return "\n".join(lines)


def _plain(v) -> np.ndarray:
    """Values matplotlib can place: infinite and astronomically large ones (a what-if far outside physics) become gaps."""
    v = np.asarray(v, dtype=np.float64)
    return np.where(np.isfinite(v) & (np.abs(v) < 1e100), v, np.nan)


def _whiskers(front: pd.DataFrame, metric: str, value: np.ndarray) -> np.ndarray | None:
    """matplotlib's (2, n) error-bar lengths of ``metric``'s 80% interval, or None where it has none."""
    bounds = interval_of(front, metric)
    if bounds is None:
        return None
    lo, hi = (_plain(b) for b in bounds)
    return np.nan_to_num(np.maximum([value - lo, hi - value], 0.0), nan=0.0)


def _panel(ax, runs: list[Run], fac, recs, xn: str, yn: str, directions: dict[str, str], fronts: list[pd.DataFrame],
           connect: bool) -> None:
    """One panel of ``yn`` against ``xn``: every design, each run's front on them (``fronts``) large and, with
    ``connect``, joined by the boundary of what it dominates; coloured by run or by the page's default kind."""
    for k, (run, front) in enumerate(zip(runs, fronts)):
        c = PALETTE[k % len(PALETTE)]
        t = run.trials
        ok = t["admissible"].to_numpy(dtype=bool)
        tx, ty = _plain(t[xn]), _plain(t[yn])
        ax.scatter(tx[~ok], ty[~ok], s=4, c="#bbbbbb", alpha=0.3, linewidths=0)
        f = front.sort_values(xn)
        fx, fy = _plain(f[xn]), _plain(f[yn])
        if fac.default == "run":
            ax.scatter(tx[ok], ty[ok], s=5, color=c, alpha=0.2, linewidths=0)
            ax.scatter(fx, fy, s=28, color=c, edgecolors="k", linewidths=0.6, label=f"{run.name} front", zorder=3)
        else:  # one run: coloured by GPU (the page's default kind), as the page's legend says
            codes = fac.codes[k][fac.default]
            order = {v: i for i, v in enumerate(fac.values[fac.default])}
            fcodes = group_values(f, fac.default).map(order).fillna(-1).to_numpy(dtype=np.int64)
            for code, value in enumerate(fac.values[fac.default]):
                colour = fac.colour(fac.default, code)
                sel = ok & (codes == code)
                none = not (fcodes == code).any() and sel.any()
                ax.scatter(tx[sel], ty[sel], s=5, color=colour, alpha=0.25, linewidths=0,
                           label=f"{value} (none on the front)" if none else None)
                if (fcodes == code).any():
                    ax.scatter(fx[fcodes == code], fy[fcodes == code], s=28, color=colour, edgecolors="k",
                               linewidths=0.6, label=f"{value} front", zorder=3)
            c = "#555555"
        rec = recs[k]
        if rec is not None and np.isfinite(float(rec.row[xn])) and np.isfinite(float(rec.row[yn])):
            ax.scatter([float(rec.row[xn])], [float(rec.row[yn])], s=160, facecolors="none", edgecolors="k",
                       linewidths=1.6, zorder=4, label="recommended" if k == 0 else None)
        err = {k: _whiskers(f, name, v) for k, name, v in (("xerr", xn, fx), ("yerr", yn, fy))}
        if any(e is not None for e in err.values()):  # the 80% prediction intervals
            ax.errorbar(fx, fy, **err, fmt="none", ecolor=c, elinewidth=0.8, alpha=0.6, zorder=2)
        if connect:  # across then up/down where x is minimized, up/down then across where maximized
            ax.step(fx, fy, where="pre" if directions[xn] == "max" else "post", color=c, alpha=0.7)
    for name, setter in ((xn, ax.set_xscale), (yn, ax.set_yscale)):  # as the page's axes (dse.report.svg.Axis)
        v = _plain(pd.concat([r.trials[name] for r in runs]))
        fv = _plain(pd.concat([f[name] for f in fronts]))
        v, fv = v[np.isfinite(v)], fv[np.isfinite(fv)]
        front_span = len(fv) and fv.min() > 0 and fv.max() / fv.min() > FRONT_SPAN_LOG
        if len(v) and v.min() > 0 and (v.max() / v.min() > ALL_SPAN_LOG or front_span):
            setter("log")
    from matplotlib.ticker import FuncFormatter

    for name, axis, set_label in ((xn, ax.xaxis, ax.set_xlabel), (yn, ax.yaxis, ax.set_ylabel)):
        v = _plain(pd.concat([f[name] for f in fronts]))
        unit = unit_for(name, v[np.isfinite(v)])
        set_label(axis_title(name, directions[name], v[np.isfinite(v)]))
        axis.set_major_formatter(FuncFormatter(lambda t, _, n=name, u=unit: tick_text(n, t, u)))
    ax.grid(alpha=0.3)


def figures(runs: list[Run], out: Path, stem: str) -> dict[str, str]:
    """Write the PNGs; returns figure name -> file name."""
    from matplotlib.figure import Figure  # no pyplot: no backend, no global state, faster to import

    files = {}
    fac = facets(runs)
    recs = [recommend(r) for r in runs]
    names = list(runs[0].objectives)
    pairs = list(itertools.combinations(names, 2)) if len(names) > 2 else [tuple(names[:2])]
    if len(names) >= 2:
        fig = Figure(figsize=(5.2 * len(pairs), 4.2))
        axes = fig.subplots(1, len(pairs), squeeze=False)
        for ax, (xn, yn) in zip(axes[0], pairs):
            _panel(ax, runs, fac, recs, xn, yn, runs[0].objectives, [r.front for r in runs], len(names) == 2)
        axes[0][0].legend(fontsize=8)
        fig.subplots_adjust(left=0.15 / len(pairs) + 0.02, right=0.98, bottom=0.13, top=0.96, wspace=0.3)
        files["front"] = f"{stem}-front.png"
        fig.savefig(out / files["front"], dpi=110)
    if all(r.serving for r in runs):  # the serving pictures, each with its own front (dse.report.serving)
        fig = Figure(figsize=(11, 4.4))
        axes = fig.subplots(1, len(serving.VIEWS), squeeze=False)
        for ax, view in zip(axes[0], serving.VIEWS):
            fronts = [serving.view_front(r.trials, view, r.design_columns) for r in runs]
            _panel(ax, runs, fac, recs, view.x[0], view.y[0], view.objectives, fronts, True)
            ax.set_title(view.title, fontsize=9)
        axes[0][0].legend(fontsize=7)
        fig.subplots_adjust(left=0.08, right=0.98, bottom=0.12, top=0.93, wspace=0.25)
        files["serving"] = f"{stem}-serving.png"
        fig.savefig(out / files["serving"], dpi=110)
    tpot = all(r.serving for r in runs)  # serving: time per output token, in ms (dse.report.serving.tpot_parts)
    bars = [(run, serving.tpot_parts(run.front) * 1e3 if tpot else breakdown(run.front))
            for run in runs if not run.front.empty]
    n = sum(len(p) for _, p in bars if len(p.columns))
    if n:
        fig = Figure(figsize=(10, 0.32 * n + 1.6))
        ax = fig.subplots()
        labels, y = [], 0
        col = dict(serving.TPOT_PARTS) if tpot else colours()
        seen = set()
        for (run, parts), shown in zip(bars, front_names([run for run, _ in bars])):
            for i in range(len(run.front)):
                left = 0.0
                for name in parts.columns:
                    v = float(np.nan_to_num(_plain(parts[name].iloc[i]), nan=0.0))
                    ax.barh(y, v, left=left, color=col.get(name, "#999"), label=None if name in seen else name)
                    seen.add(name)
                    left += v
                labels.append((f"{run.name}: " if len(runs) > 1 else "") + f"{i + 1}. " + shown[i])
                y += 1
        ax.set_yticks(range(n), labels, fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("ms per output token (TPOT: decode step + prefill chunks)" if tpot else
                      "seconds per step (step time + goodput losses)")
        ax.legend(fontsize=7, ncol=2, loc="upper right")
        h = 0.32 * n + 1.6
        fig.subplots_adjust(left=0.3, right=0.98, bottom=0.75 / h, top=1 - 0.2 / h)
        files["breakdown"] = f"{stem}-breakdown.png"
        fig.savefig(out / files["breakdown"], dpi=110)
    return files


def _decision_md(runs: list[Run], recs) -> list[str]:
    """The decision first: each run's sentence and caveat, the best design per group, what-ifs, why."""
    from dse.report.swept_hardware import effect_table, swept_fields

    multi = len(runs) > 1
    parts, why = [], []
    for run, rec in zip(runs, recs):
        if rec is None:
            parts += [f"{run.name}: no feasible design within the constraints.", ""]
            continue
        lead, rest = rec.decision.sentence.split(":", 1)
        parts += [f"{run.name + ': ' if multi else ''}**{lead}:**{rest}", ""]
        if rec.decision.caveat:
            parts += [f"> {rec.decision.caveat}", ""]
        for kind in group_kinds(run.trials):
            header, grows, shared = group_table(run, kind)
            parts += [f"Best design per {kind}{f' ({run.name})' if multi else ''}"
                      f"{f' (each has {shared})' if shared else ''}:", "", _md_table(header, grows), ""]
        for field in swept_fields(run):
            header, grows, baseline = effect_table(run, field)
            parts += [f"What `{field}` buys{f' ({run.name})' if multi else ''}: the best design at each value and "
                      f"its change against the best at {baseline}:", "", _md_table(header, grows), ""]
        where = f"#{rec.position} on the front, " if rec.position else ""
        why += [f"**Why{f' ({run.name})' if multi else ''}** ({where}★ {rec.name}): {rec.text}", ""]
    return parts + why


def markdown(runs: list[Run], ranked: pd.DataFrame | None, files: dict[str, str], title: str | None,
             html_name: str) -> str:
    """The Markdown summary: the decision first, then the front, the front designs (near-twins one row), why
    designs were infeasible (every kind counted), what bounds each design and the hardware ranking."""
    from dse.report.data import infeasible_kinds, more_kinds

    metrics = table_metrics(runs)
    serving_runs = all(r.serving for r in runs)
    constant = serving.shared_columns([r.front for r in runs], metrics) if serving_runs else {}
    metrics = [m for m in metrics if m not in constant]
    multi = len(runs) > 1
    recs = [recommend(r) for r in runs]
    objectives = list(runs[0].objectives)
    rows = []
    for run, names, rec in zip(runs, front_names(runs), recs):
        records = run.front.to_dict("records")
        keep = rec.position - 1 if rec is not None and rec.position else None
        for group in twin_groups(run.front, objectives, keep=keep):
            i, r = group[0] + 1, records[group[0]]
            alike = twin_note(names, group)
            name = ("★ " if rec is not None and rec.position == i else "") + names[i - 1] + (f" ({alike})" if alike else "")
            rows.append(([run.name] if multi else []) + [i, name] + [r.get(m, np.nan) for m in metrics])
    parts = [f"# {title or title_of(runs)}", ""] + _decision_md(runs, recs)
    parts += ["Objectives: " + ", ".join(f"`{m}` ({'lower' if d == 'min' else 'higher'} is better)"
                                         for m, d in runs[0].objectives.items())
              + f". Interactive version: `{html_name}`.", ""]
    for run in runs:
        parts.append(f"- **{run.name}** (`{run.root}`): {len(run.trials):,} distinct designs, "
                     f"{int(run.trials['admissible'].sum()):,} feasible, front {len(run.front)}")
    parts += ["", "## Pareto front", ""]
    if "front" in files:
        parts += [f"![Pareto front]({files['front']})", ""]
    if serving_runs:
        counts = "; ".join(f"{view.title.lower()}: front of "
                           f"{sum(len(serving.view_front(r.trials, view, r.design_columns)) for r in runs)} designs"
                           for view in serving.VIEWS)
        parts += ["## Serving: throughput against interactivity, cost against time to first token", "",
                  "Every evaluated design on the two pictures serving is judged by, each with its own front of the "
                  f"feasible designs within the constraints ({counts}).", ""]
        if "serving" in files:
            parts += [f"![Serving fronts]({files['serving']})", ""]
    common = front_shared(runs)
    parts += ["## Front designs", "", "Each design is named by the axes that vary across the front"
              + (f" (every front design has {common})" if common else "") + "; ★: the recommended design; "
              f"near-twins (within {TWIN_TOLERANCE:.1%} on every objective) are one row."
              + ("" if not constant else " Every front design has " + ", ".join(f"{c} {fmt(v)}" for c, v in constant.items())
                 + "."), "",
              _md_table((["run"] if multi else []) + ["#", "design"] + metrics, rows), ""]
    for run in runs:
        kinds = infeasible_kinds(run.trials, constraints=run.info.get("spec", {}).get("constraints") or ())
        if kinds:
            more = more_kinds(kinds, 8)
            parts += [f"## Why designs were infeasible{f' ({run.name})' if multi else ''}", "",
                      f"{sum(k[1] for k in kinds):,} of {len(run.trials):,} distinct designs:", "",
                      _md_table(["distinct designs", "reason", "example"],
                                [[n, kind, example] for kind, n, example in kinds[:8]]), ""]
            if more:
                parts += [f"{more}: " + "; ".join(k[0] for k in kinds[8:]), ""]
    if "breakdown" in files:
        what = "time per output token" if serving_runs else "time per step"
        parts += ["## What bounds each front design", "", f"![{what}]({files['breakdown']})", ""]
    if ranked is not None and not ranked.empty:
        shown = [c for c in ranked.columns if c not in ("what", "mean", "best_on_front")]
        parts += [f"## Which hardware change pays most ({runs[0].name})", "",
                  "Median gain (percent, positive is better) over the front designs when one hardware parameter "
                  "improves by 10%, the mapping searched again; ranked by the mean over the objectives:", ""]
        rows = [[i, name, r["what"]] + [r[m] for m in shown] + [r["mean"]]
                for i, (name, r) in enumerate(ranked.iterrows(), start=1)]
        parts += [_md_table(["rank", "change", "what"] + [f"{display(m).name} %" for m in shown] + ["mean %"], rows), ""]
    return "\n".join(parts)
