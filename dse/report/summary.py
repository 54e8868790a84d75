"""The Markdown summary beside the page: the front table, the ranking and the figures as PNG (matplotlib)."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pandas as pd

from dse.report.breakdown import breakdown, colours
from dse.report.data import TABLE_METRICS, Run, design_label, fmt, interval_of, mapping_label, why_infeasible
from dse.report.svg import PALETTE


def _md_table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(fmt(v) for v in r) + " |" for r in rows]
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


def figures(runs: list[Run], out: Path, stem: str) -> dict[str, str]:
    """Write the PNGs; returns figure name -> file name."""
    from matplotlib.figure import Figure  # no pyplot: no backend, no global state, faster to import

    files = {}
    names = list(runs[0].objectives)
    pairs = list(itertools.combinations(names, 2)) if len(names) > 2 else [tuple(names[:2])]
    if len(names) >= 2:
        fig = Figure(figsize=(5.2 * len(pairs), 4.2))
        axes = fig.subplots(1, len(pairs), squeeze=False)
        for ax, (xn, yn) in zip(axes[0], pairs):
            for k, run in enumerate(runs):
                c = PALETTE[k % len(PALETTE)]
                t = run.trials
                ok = t["admissible"].to_numpy(dtype=bool)
                tx, ty = _plain(t[xn]), _plain(t[yn])
                ax.scatter(tx[~ok], ty[~ok], s=4, c="#bbbbbb", alpha=0.3, linewidths=0)
                ax.scatter(tx[ok], ty[ok], s=5, color=c, alpha=0.2, linewidths=0)
                f = run.front.sort_values(xn)
                fx, fy = _plain(f[xn]), _plain(f[yn])
                ax.scatter(fx, fy, s=28, color=c, edgecolors="k", linewidths=0.6, label=f"{run.name} front", zorder=3)
                err = {k: _whiskers(f, name, v) for k, name, v in (("xerr", xn, fx), ("yerr", yn, fy))}
                if any(e is not None for e in err.values()):  # the 80% prediction intervals
                    ax.errorbar(fx, fy, **err, fmt="none", ecolor=c, elinewidth=0.8, alpha=0.6, zorder=2)
                if len(names) == 2:
                    ax.step(fx, fy, where="post", color=c, alpha=0.7)
            for name, setter in ((xn, ax.set_xscale), (yn, ax.set_yscale)):
                v = _plain(pd.concat([r.trials[name] for r in runs]))
                v = v[np.isfinite(v)]
                if len(v) and v.min() > 0 and v.max() / v.min() > 20:
                    setter("log")
            ax.set_xlabel(f"{xn} ({runs[0].objectives[xn]})")
            ax.set_ylabel(f"{yn} ({runs[0].objectives[yn]})")
            ax.grid(alpha=0.3)
        axes[0][0].legend(fontsize=8)
        fig.subplots_adjust(left=0.1 / len(pairs) + 0.02, right=0.98, bottom=0.13, top=0.96, wspace=0.3)
        files["front"] = f"{stem}-front.png"
        fig.savefig(out / files["front"], dpi=110)
    bars = [(run, breakdown(run.front)) for run in runs if not run.front.empty]
    n = sum(len(p) for _, p in bars)
    if n:
        fig = Figure(figsize=(10, 0.32 * n + 1.6))
        ax = fig.subplots()
        labels, y = [], 0
        col = colours()
        seen = set()
        for run, parts in bars:
            for i, r in enumerate(run.front.to_dict("records")):
                left = 0.0
                for name in parts.columns:
                    v = float(np.nan_to_num(_plain(parts[name].iloc[i]), nan=0.0))
                    ax.barh(y, v, left=left, color=col.get(name, "#999"), label=None if name in seen else name)
                    seen.add(name)
                    left += v
                labels.append((f"{run.name}: " if len(runs) > 1 else "") + f"{i + 1}. "
                              + design_label(r, run.design_columns))
                y += 1
        ax.set_yticks(range(n), labels, fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("seconds per step (step time + goodput losses)")
        ax.legend(fontsize=7, ncol=2, loc="upper right")
        h = 0.32 * n + 1.6
        fig.subplots_adjust(left=0.3, right=0.98, bottom=0.75 / h, top=1 - 0.2 / h)
        files["breakdown"] = f"{stem}-breakdown.png"
        fig.savefig(out / files["breakdown"], dpi=110)
    return files


def markdown(runs: list[Run], ranked: pd.DataFrame | None, files: dict[str, str], title: str, html_name: str) -> str:
    objectives = list(runs[0].objectives)
    design = list(dict.fromkeys(c for r in runs for c in r.design_columns))
    metrics = objectives + [m for m in TABLE_METRICS if m not in objectives and any(m in r.front for r in runs)]
    multi = len(runs) > 1
    rows = [([run.name] if multi else []) + [i] + [r.get(c, "") for c in design] + [mapping_label(r)]
            + [r.get(m, np.nan) for m in metrics]
            for run in runs for i, r in enumerate(run.front.to_dict("records"), start=1)]
    parts = [f"# {title}", "",
             "Objectives: " + ", ".join(f"`{m}` ({d})" for m, d in runs[0].objectives.items())
             + f". Interactive version: `{html_name}`.", ""]
    for run in runs:
        parts.append(f"- **{run.name}** (`{run.root}`): {len(run.trials)} distinct designs, "
                     f"{int(run.trials['admissible'].sum())} feasible, front {len(run.front)}")
    parts += ["", "## Pareto front", ""]
    if "front" in files:
        parts += [f"![Pareto front]({files['front']})", ""]
    parts += [_md_table((["run"] if multi else []) + ["#"] + design + ["mapping"] + metrics, rows), ""]
    for run in runs:
        why = why_infeasible(run.trials)
        if why:
            parts += [f"## Why designs were infeasible{f' ({run.name})' if multi else ''}", "",
                      _md_table(["designs", "reason", "example"], [[n, kind, example] for kind, n, example in why]), ""]
    if "breakdown" in files:
        parts += ["## What bounds each front design", "", f"![time per step]({files['breakdown']})", ""]
    if ranked is not None and not ranked.empty:
        parts += [f"## Which hardware change pays most ({runs[0].name})", "",
                  "Median gain (percent, positive is better) over the front designs when one hardware parameter "
                  "improves by 10%, the mapping searched again:", ""]
        rows = [[i, name, r["what"]] + [r[m] for m in objectives] + [r["mean"]]
                for i, (name, r) in enumerate(ranked.iterrows(), start=1)]
        parts += [_md_table(["rank", "change", "what"] + [f"{m} %" for m in objectives] + ["mean %"], rows), ""]
    return "\n".join(parts)
