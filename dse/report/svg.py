"""Inline SVG charts (no script, no external file): a scatter panel of two objectives and stacked bars.
Every point carries its design and mapping in a <title>, which the browser shows on hover."""

from __future__ import annotations

import math
from html import escape

import numpy as np

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")
W, H, ML, MR, MT, MB = 520, 360, 70, 16, 14, 46


#: a front spanning more than this factor on an axis gets a log axis (as the knee's normalization does:
#: dse.report.knee); every design's values spanning more than ALL_SPAN_LOG do too
FRONT_SPAN_LOG, ALL_SPAN_LOG = 10.0, 20.0


def _span(v: np.ndarray) -> float:
    v = v[np.isfinite(v) & (np.abs(v) < 1e100)]
    return float(v.max() / v.min()) if len(v) and v.min() > 0 else 0.0


class Axis:
    """Linear, or logarithmic when the values are positive and the front's (``front``) span more than
    FRONT_SPAN_LOG, or all of them more than ALL_SPAN_LOG."""

    def __init__(self, values: np.ndarray, lo_px: float, hi_px: float, front: np.ndarray | None = None) -> None:
        v = values[np.isfinite(values) & (np.abs(values) < 1e100)]
        lo, hi = (float(v.min()), float(v.max())) if len(v) else (0.0, 1.0)
        front_span = _span(np.asarray(front, dtype=np.float64)) if front is not None else 0.0
        self.log = lo > 0 and (hi / lo > ALL_SPAN_LOG or front_span > FRONT_SPAN_LOG)
        if self.log:
            lo, hi = math.log10(lo), math.log10(hi)
        if not hi > lo or not math.isfinite(hi - lo):
            lo, hi = (lo - 0.5, hi + 0.5) if math.isfinite(hi - lo) else (0.0, 1.0)
        pad = (hi - lo) * 0.04
        self.lo, self.hi, self.lo_px, self.hi_px = lo - pad, hi + pad, lo_px, hi_px

    def __call__(self, v: np.ndarray | float) -> np.ndarray:
        """Pixel positions of values (NaN where a log axis cannot place them)."""
        v = np.asarray(v, dtype=np.float64)
        if self.log:
            v = np.log10(np.where(v > 0, v, np.nan))
        return self.lo_px + (v - self.lo) / (self.hi - self.lo) * (self.hi_px - self.lo_px)

    def ticks(self) -> list[float]:
        if self.log:
            out = [m * 10.0 ** e for e in range(math.floor(self.lo), math.ceil(self.hi) + 1) for m in (1, 2, 5)]
            out = [t for t in out if self.lo <= math.log10(t) <= self.hi]
            return out if len(out) >= 2 else [10 ** self.lo, 10 ** self.hi]
        step = 10 ** math.floor(math.log10((self.hi - self.lo) / 5))
        for m in (1, 2, 5, 10):
            if (self.hi - self.lo) / (step * m) <= 7:
                step *= m
                break
        start = math.ceil(self.lo / step) * step
        return [start + i * step for i in range(int((self.hi - start) / step) + 1)]


def _placeable(v) -> np.ndarray:
    """Values a chart can place: finite and not astronomically large (a what-if far outside physics)."""
    v = np.asarray(v, dtype=np.float64)
    return np.isfinite(v) & (np.abs(v) < 1e100)


def tick_label(v: float) -> str:
    a = abs(v)
    if a >= 1e9:
        return f"{v / 1e9:g}G"
    if a >= 1e6:
        return f"{v / 1e6:g}M"
    if a >= 1e4:
        return f"{v / 1e3:g}k"
    return f"{v:.4g}"


def scatter(xname: str, yname: str, series: list[dict], connect: bool = True, size: tuple[int, int] = (W, H),
            x_max: bool = False, x_tick=tick_label, y_tick=tick_label) -> str:
    """One panel. ``series``: dicts with label, colour, and arrays x, y, kind ('front', 'dominated',
    'infeasible'), title (hover text); ``x_tick`` / ``y_tick``: a tick's text ('$2M'); fronts are drawn on
    top and, with ``connect``, joined by a step line:
    the boundary of what the front dominates, across then up or down to the next point where x is
    minimized, up or down then across where it is maximized (``x_max``)."""
    W, H = size
    allx = np.concatenate([s["x"] for s in series]) if series else np.zeros(0)
    ally = np.concatenate([s["y"] for s in series]) if series else np.zeros(0)
    front = [s["kind"] == "front" for s in series]
    fx = np.concatenate([s["x"][f] for s, f in zip(series, front)]) if series else None
    fy = np.concatenate([s["y"][f] for s, f in zip(series, front)]) if series else None
    ax, ay = Axis(allx, ML, W - MR, fx), Axis(ally, H - MB, MT, fy)
    out = [f'<svg class="scatter" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" '
           f'aria-label="{escape(yname)} against {escape(xname)}">',
           f'<rect x="{ML}" y="{MT}" width="{W - ML - MR}" height="{H - MT - MB}" class="plot"/>']
    for t in ax.ticks():
        px = float(ax(t))
        out.append(f'<line x1="{px:.1f}" y1="{MT}" x2="{px:.1f}" y2="{H - MB}" class="grid"/>'
                   f'<text x="{px:.1f}" y="{H - MB + 14}" class="tick" text-anchor="middle">{escape(x_tick(t))}</text>')
    for t in ay.ticks():
        py = float(ay(t))
        out.append(f'<line x1="{ML}" y1="{py:.1f}" x2="{W - MR}" y2="{py:.1f}" class="grid"/>'
                   f'<text x="{ML - 4}" y="{py + 4:.1f}" class="tick" text-anchor="end">{escape(y_tick(t))}</text>')
    out.append(f'<text x="{(ML + W - MR) / 2}" y="{H - 8}" class="axis" text-anchor="middle">{escape(xname)}'
               f'{" (log)" if ax.log else ""}</text>'
               f'<text transform="translate(14 {(MT + H - MB) / 2}) rotate(-90)" class="axis" text-anchor="middle">'
               f'{escape(yname)}{" (log)" if ay.log else ""}</text>')
    for layer in ("infeasible", "dominated", "front"):
        for s in series:
            m = (s["kind"] == layer) & _placeable(s["x"]) & _placeable(s["y"])
            if not m.any():
                continue
            px, py, titles = ax(s["x"][m]), ay(s["y"][m]), np.asarray(s["title"])[m]
            if layer == "front" and connect and m.sum() > 1:
                order = np.argsort(px)
                pts = []
                for k, i in enumerate(order):
                    if k:
                        j = order[k - 1]
                        pts.append(f"{px[j]:.1f},{py[i]:.1f}" if x_max else f"{px[i]:.1f},{py[j]:.1f}")
                    pts.append(f"{px[i]:.1f},{py[i]:.1f}")
                out.append(f'<polyline points="{" ".join(pts)}" class="frontline" stroke="{s["colour"]}"/>')
            r = 4.5 if layer == "front" else 2.5
            run = escape(s["label"], quote=True)
            out.append(f'<g class="{layer}" fill="{s["colour"]}" data-run="{run}">')
            if layer == "front":
                out.append(_error_bars(ax, ay, s, m, px, py, (ML, W - MR), (MT, H - MB)))
            tie = np.where(np.asarray(s.get("tie", np.zeros(len(m), dtype=bool)), dtype=bool)[m], ' data-tie="1"', "")
            extra = tie.astype(object)
            for kind, codes in s.get("attrs", {}).items():  # the point's groups (dse.report.facets)
                extra = extra + np.char.mod(f' data-{kind}="%d"', np.asarray(codes)[m]).astype(object)
            out.extend(f'<circle class="{layer}"{t_} cx="{x:.1f}" cy="{y:.1f}" r="{r}"><title>{escape(t)}</title></circle>'
                       for x, y, t, t_ in zip(px, py, titles, extra))
            out.append("</g>")
    taken: list[tuple[float, float]] = []  # the labels placed so far: an overlay's labels do not collide
    for s in series:  # the recommended design's ring, on top, on or off the panel's front
        if "rec" in s:
            m = np.asarray(s["rec"], dtype=bool) & _placeable(s["x"]) & _placeable(s["y"])
            out.append(_recommended(ax(s["x"][m]), ay(s["y"][m]), np.ones(int(m.sum()), dtype=bool),
                                    s.get("rec_title", ""), W - MR, s.get("rec_label", "recommended"), taken))
    out.append("</svg>")
    return "".join(out)


#: a label's box for collisions: text of 11 px, about 6 px a character
LABEL_H, CHAR_W = 13.0, 6.0


def _recommended(px, py, rec: np.ndarray, title: str, right: float, text: str = "recommended",
                 taken: list | None = None) -> str:
    """A ring and a label around the recommended design's point (a path, so every <circle> stays a design);
    the label moves down, a line at a time, off the labels in ``taken`` (then added to it)."""
    out = []
    taken = taken if taken is not None else []
    width = CHAR_W * len(text)
    for x, y in zip(px[rec], py[rec]):
        r = 9.0
        tx, anchor = (x + r + 3, "start") if x < right - width else (x - r - 3, "end")
        left = tx if anchor == "start" else tx - width
        ty = y - r
        while any(abs(ty - oy) < LABEL_H and left < ox + ow and ox < left + width for ox, oy, ow in taken):
            ty += LABEL_H
        taken.append((left, ty, width))
        y_label = ty
        out.append(f'<g class="rec"><path d="M{x - r:.1f} {y:.1f}a{r} {r} 0 1 0 {2 * r} 0a{r} {r} 0 1 0 {-2 * r} 0" '
                   f'fill="none" stroke="#000" stroke-width="2"><title>{escape(title)}</title></path>'
                   f'<text x="{tx:.1f}" y="{y_label:.1f}" class="rec-label" text-anchor="{anchor}">{escape(text)}</text></g>')
    return "".join(out)


def _error_bars(ax: Axis, ay: Axis, s: dict, m: np.ndarray, px, py, xspan, yspan) -> str:
    """One path of whiskers through the points ``m`` of series ``s``: its 80% intervals on each axis
    (``xerr`` / ``yerr``: (lo, hi) arrays), where both ends are placeable; clipped to the plot area."""
    segments = []
    for err, axis, span, across in (("xerr", ax, xspan, py), ("yerr", ay, yspan, px)):
        if err not in s:
            continue
        lo, hi = (np.asarray(v, dtype=np.float64)[m] for v in s[err])
        ok = _placeable(lo) & _placeable(hi) & (~axis.log | ((lo > 0) & (hi > 0)))
        a = np.clip(axis(np.where(ok, lo, 1.0)), min(span), max(span))
        b = np.clip(axis(np.where(ok, hi, 1.0)), min(span), max(span))
        for k in np.flatnonzero(ok & (np.abs(b - a) >= 0.5)):
            c = across[k]
            if err == "xerr":
                segments.append(f"M{a[k]:.1f} {c:.1f}H{b[k]:.1f}M{a[k]:.1f} {c - 2:.1f}v4M{b[k]:.1f} {c - 2:.1f}v4")
            else:
                segments.append(f"M{c:.1f} {a[k]:.1f}V{b[k]:.1f}M{c - 2:.1f} {a[k]:.1f}h4M{c - 2:.1f} {b[k]:.1f}h4")
    return f'<path class="ebar" stroke="{s["colour"]}" d="{"".join(segments)}"/>' if segments else ""


def stacked_bars(labels: list[str], parts: dict[str, np.ndarray], colours: dict[str, str], unit: str = "s") -> str:
    """Horizontal stacked bars, one per label; ``parts``: part name -> values (one per label)."""
    n = len(labels)
    parts = {k: np.where(_placeable(v) & (np.asarray(v, dtype=np.float64) > 0), v, 0.0) for k, v in parts.items()}
    longest = max((len(lab) for lab in labels), default=0)
    bh, gap, right = 18, 6, 60  # room right of the longest bar for its total
    left = int(min(620, max(250, 6.4 * longest + 14)))  # room for the longest design name (11 px text)
    width = left + 610
    height = MT + n * (bh + gap) + 40
    totals = np.sum(list(parts.values()), axis=0) if parts else np.zeros(n)
    top = float(np.max(totals)) if n and np.max(totals) > 0 else 1.0
    scale = (width - left - right) / top
    out = [f'<svg class="bars" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
           f'aria-label="step time breakdown">']
    for i, lab in enumerate(labels):
        y = MT + i * (bh + gap)
        out.append(f'<text x="{left - 6}" y="{y + bh - 5}" class="tick" text-anchor="end">{escape(lab)}</text>')
        x = float(left)
        for name, vals in parts.items():
            v = float(vals[i])
            if v <= 0:
                continue
            w = v * scale
            out.append(f'<rect class="seg" x="{x:.1f}" y="{y}" width="{max(w, 0.5):.1f}" height="{bh}" '
                       f'fill="{colours.get(name, "#999")}"><title>{escape(lab)}: {escape(name)} '
                       f'{v:.4g} {unit} ({v / max(totals[i], 1e-30):.0%})</title></rect>')
            x += w
        out.append(f'<text x="{x + 4:.1f}" y="{y + bh - 5}" class="tick">{totals[i]:.3g} {unit}</text>')
    y = MT + n * (bh + gap) + 8
    x = float(left)
    for name in parts:
        out.append(f'<rect x="{x:.0f}" y="{y}" width="10" height="10" fill="{colours.get(name, "#999")}"/>'
                   f'<text x="{x + 13:.0f}" y="{y + 9}" class="tick">{escape(name)}</text>')
        x += 20 + 6.2 * len(name)
        if x > width - 90:
            x, y = float(left), y + 14
    out.append("</svg>")
    return "".join(out).replace(f'height="{height}"', f'height="{y + 16}"', 1).replace(
        f'viewBox="0 0 {width} {height}"', f'viewBox="0 0 {width} {y + 16}"', 1)
