"""The page's first screen, what a roadmap review must know in 30 seconds: the space's question as the
title, the recommended design in one sentence with its 80% intervals (dse.report.headline), the caveat
where it stands on thin ground, the best design per GPU, provider and instance, then why, then what each
value of a swept hardware field buys (dse.report.swept_hardware). The plots come after."""

from __future__ import annotations

from html import escape

from dse.report.buyer import Recommendation, group_kinds, group_table
from dse.report.data import Run
from dse.report.display import human_table, label
from dse.report.html import table
from dse.report.swept_hardware import effect_table, swept_fields

#: a group's kind as a heading says it
KIND_NAMES = {"gpu": "GPU"}

__all__ = ["title_of", "decision_section", "whatif_section", "titles"]


def title_of(runs: list[Run]) -> str:
    """The space's description (its question); an overlay's names after it; the run's name without one."""
    descriptions = [str(r.info.get("spec", {}).get("description") or "").strip() for r in runs]
    names = " vs ".join(r.name for r in runs)
    distinct = list(dict.fromkeys(d for d in descriptions if d))
    if len(runs) == 1:
        return descriptions[0] or f"Pareto report: {runs[0].name}"
    if len(distinct) == 1:
        return f"{distinct[0]} ({names})"
    return names


def titles(header: list[str]) -> list[str]:
    """A tooltip per table header: the metric's unit and meaning (objectives.METRICS), by its column name."""
    try:
        import objectives

        metrics = objectives.METRICS
    except ImportError:
        metrics = {}
    return [metrics.get(h, "") for h in header]


def _group_tables(run: Run, multi: bool) -> list[str]:
    out = []
    for kind in group_kinds(run.trials):
        header, rows, shared = group_table(run, kind)
        tips = titles(header)
        header, rows = human_table(header, rows)
        caption = f'<p class="note">Each best design has {escape(shared)}.</p>' if shared else ""
        out.append(f"<h2 id=\"best-{escape(kind)}\">Best design per {escape(KIND_NAMES.get(kind, kind))}"
                   f"{f' ({escape(run.name)})' if multi else ''}</h2>"
                   + caption + table(header, rows, f"best-{kind}-row", left=2, titles=tips))
    return out


def decision_section(runs: list[Run], recs: list[Recommendation | None]) -> str:
    """Each run's decision sentence and caveat, the best design per group, and why."""
    multi = len(runs) > 1
    heads, tables, whys = [], [], []
    for run, rec in zip(runs, recs):
        who = f"<b>{escape(run.name)}:</b> " if multi else ""
        if rec is None:
            heads.append(f'<p class="headline note">{who}No feasible design within the constraints: nothing to '
                         f'recommend.</p>')
            continue
        sentence = rec.decision.sentence
        lead, rest = sentence.split(":", 1) if sentence.startswith("Recommended:") else ("", sentence)
        heads.append(f'<p class="headline recommend" id="recommended-{escape(run.name, quote=True)}">{who}'
                     f'<b>{escape(lead)}:</b>{escape(rest)}</p>')
        if rec.decision.caveat:
            heads.append(f'<p class="caveat">{escape(rec.decision.caveat)}</p>')
        tables += _group_tables(run, multi)
        where = f"#{rec.position} on the front, " if rec.position else ""
        whys.append(f'<p class="why"><b>Why{f" ({escape(run.name)})" if multi else ""}</b> ({escape(where)}'
                    f'&#9733; {escape(rec.name)} in the tables below): {escape(rec.text)}</p>')
    return "".join(heads) + "".join(tables) + "".join(whys)


def whatif_section(runs: list[Run]) -> str:
    """Per swept hardware field of each run: the best design at each value and its change against the
    catalog's values (dse.report.swept_hardware)."""
    out = []
    for run in runs:
        for field in swept_fields(run):
            header, rows, baseline = effect_table(run, field)
            header, rows = human_table(header, rows)
            out.append(f'<h3>What {escape(label(field))} buys{f" ({escape(run.name)})" if len(runs) > 1 else ""}'
                       f'</h3><p class="note">The space sweeps {escape(field)}: the best design among each value\'s '
                       f'designs (the recommendation\'s rule), and its change against the best design at '
                       f'{escape(baseline)}. The front below can be coloured by it.</p>'
                       + table(header, rows, "whatif-row", left=2))
    if not out:
        return ""
    return '<h2 id="whatif">What-ifs the space sweeps</h2>' + "".join(out)
