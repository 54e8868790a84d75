"""Colouring the front by what a buyer compares: each design's GPU (always), provider and cloud instance
(where the runs have them), or its run (an overlay of several). Every point carries its group's code in a
``data-<kind>`` attribute; the page's CSS colours points by the chosen kind (``.by-gpu``, ...) and a button
row switches kinds; each kind has its legend. Without a script the default kind shows: GPU for one run,
the run for an overlay."""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape

import numpy as np
import pandas as pd

from dse.report.buyer import group_kinds, group_values
from dse.report.data import Run
from dse.report.display import display
from dse.report.swept_hardware import swept_fields, value_name

__all__ = ["Facets", "facets", "GROUP_PALETTE"]

#: colours of groups (Tableau 20 reordered: the ten strong hues first, then their light partners)
GROUP_PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#17becf", "#8c564b", "#e377c2",
                 "#bcbd22", "#7f7f7f", "#aec7e8", "#ff9896", "#98df8a", "#ffbb78", "#c5b0d5", "#9edae5",
                 "#c49c94", "#f7b6d2", "#dbdb8d", "#c7c7c7")


def _kind_name(kind: str) -> str:
    """A colour kind as a legend says it: 'gpu', 'provider', or a swept field's display name ('HBM bandwidth')."""
    return kind if kind in ("run", "gpu", "provider", "instance") else display(kind).name


@dataclass
class Facets:
    kinds: list[str]  # "run" first for an overlay, then gpu, provider, instance as the runs have them
    default: str
    values: dict[str, list[str]] = field(default_factory=dict)  # kind -> its groups, in colour order
    codes: list[dict[str, np.ndarray]] = field(default_factory=list)  # per run: kind -> code of each trial
    front_codes: list[dict[str, np.ndarray]] = field(default_factory=list)  # per run: kind -> code of each front row

    def colour(self, kind: str, code: int) -> str:
        return GROUP_PALETTE[code % len(GROUP_PALETTE)]

    def css(self) -> str:
        """Rules that colour points (front and dominated; infeasible stay grey) by each kind when chosen."""
        rules = []
        for kind in self.kinds:
            if kind == "run":
                continue
            for code in range(len(self.values[kind])):
                sel = f'[data-{kind}="{code}"]'
                rules.append(f".by-{kind} g.front circle{sel},.by-{kind} g.dominated circle{sel}"
                             f"{{fill:{self.colour(kind, code)}}}")
            rules.append(f".by-{kind} .frontline{{stroke:#555}}.by-{kind} .ebar{{stroke:#666}}")
        shown = "".join(f".by-{k} .legend-{k}" + ("," if i < len(self.kinds) - 1 else "")
                        for i, k in enumerate(self.kinds))
        return "".join(rules) + ".legend-kind{display:none}" + (f"{shown}{{display:block}}" if self.kinds else "")

    def attributes(self, run_index: int, mask: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """kind -> each trial's code (the ``data-<kind>`` attributes of the run's points)."""
        codes = self.codes[run_index]
        return {k: (v if mask is None else v[mask]) for k, v in codes.items()}

    def legends(self, runs: list[Run], run_colours: list[str], counts: bool = True) -> str:
        """One legend per kind (swatch, group, its front and total designs; without ``counts``, its designs)
        and, with several kinds, the buttons."""
        out = []
        for kind in self.kinds:
            items = []
            if kind == "run":
                for k, run in enumerate(runs):
                    items.append((run_colours[k], run.name, len(run.front), len(run.trials)))
            else:
                for code, value in enumerate(self.values[kind]):
                    n_front = sum(int((fc[kind] == code).sum()) for fc in self.front_codes)
                    n_all = sum(int((c[kind] == code).sum()) for c in self.codes)
                    items.append((self.colour(kind, code), value, n_front, n_all))
            spans = "".join(f'<span class="item" data-group="{escape(str(v), quote=True)}"><i class="sw" '
                            f'style="background:{c}"></i>{escape(str(v))} '
                            f'({f"front {f} of " if counts else ""}{a} designs)</span>'
                            for c, v, f, a in items)
            out.append(f'<div class="legend legend-kind legend-{kind}" data-kind="{kind}"><b>by {_kind_name(kind)}:</b> '
                       f'{spans}</div>')
        buttons = ""
        if len(self.kinds) > 1:
            buttons = '<div class="facet-buttons">colour by: ' + "".join(
                f'<button type="button" data-mode="{k}"{" class=on" if k == self.default else ""}>{_kind_name(k)}</button>'
                for k in self.kinds) + "</div>"
        return buttons + "".join(out)


def _values(frame: pd.DataFrame, kind: str, swept: list[str]) -> pd.Series:
    """Each row's group of ``kind``: a swept field's value with its unit ('HBM 8 TB/s'), else its GPU, provider
    or instance (dse.report.buyer.group_values)."""
    if kind in swept:
        return frame[kind].map(lambda v: value_name(kind, v) if pd.notna(v) else "")
    return group_values(frame, kind)


def _codes(values: pd.Series, order: list[str]) -> np.ndarray:
    index = {v: i for i, v in enumerate(order)}
    return values.map(index).fillna(-1).to_numpy(dtype=np.int64)


def facets(runs: list[Run]) -> Facets:
    """The kinds the runs can be coloured by, their groups and every point's code."""
    kinds = (["run"] if len(runs) > 1 else [])
    columns = ("gpu", "provider", "instance", "cost_mode")
    kinds += group_kinds(pd.concat([r.trials[[c for c in columns if c in r.trials]] for r in runs], ignore_index=True))
    swept = [f for f in swept_fields(runs[0]) if all(f in r.trials for r in runs)]  # what-ifs: a value per group
    kinds += swept
    out = Facets(kinds=kinds, default=kinds[0] if kinds else "run")
    per_run = [{k: _values(r.trials, k, swept) for k in kinds if k != "run"} for r in runs]
    per_front = [{k: _values(r.front, k, swept) for k in kinds if k != "run"} for r in runs]
    for k in kinds:
        if k == "run":
            continue
        if k in swept:  # a swept value's groups in the order of the values
            numbers = pd.concat([r.trials[k] for r in runs]).dropna().unique()
            out.values[k] = [value_name(k, v) for v in sorted(numbers)]
            continue
        # colour order: groups on a front first, by their best front position, then the rest by name
        seen: dict[str, float] = {}
        for fr in per_front:
            for pos, v in enumerate(fr[k]):
                seen.setdefault(v, pos)
        rest = sorted(set().union(*(set(p[k]) for p in per_run)) - set(seen))
        out.values[k] = sorted(seen, key=seen.get) + rest
    out.codes = [{k: _codes(p[k], out.values[k]) for k in p} for p in per_run]
    out.front_codes = [{k: _codes(p[k], out.values[k]) for k in p} for p in per_front]
    return out
