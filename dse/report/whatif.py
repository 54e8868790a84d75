"""What a hardware change is worth: the front's designs re-scored with one hardware field set to each of
the given values, the mapping searched again, and the result said in the objective's units and in money.

For each front design and each value, three design tables go through the run's model in one vectorized
call (:func:`dse.report.sensitivity.default_score`: the training model's mapping search, or the serving
model's): the design as the sweep scored it, the design with the field at the value, and the same with both
prices (``server_usd_per_gpu`` and ``cloud_usd_per_gpu_hr``) raised by :data:`PRICE_STEP`. An owned
design's run cost is affine in its server price (capital recovered as an annuity of the price, upkeep a
fraction of it; objectives.economics.cost), a rented one's in its GPU-hour price (whole instances for the run's
hours), and a serving design's cost per token likewise, so the step gives the cost's slope in the price
exactly and the *break-even price* follows: the price per GPU (owned) or per GPU-hour (rented) at which the
changed hardware costs the run what the design does today,

    break_even = price x (1 + PRICE_STEP x (C_base - C_new) / (C_new,stepped - C_new))

(``C``: run_cost_usd, or usd_per_mtok_out for a serving run). A change that costs money itself (a scale-up
domain beyond the system's pays for NVLink switches, objectives.training.topology) is in ``C_new``. The worth is
``C_base - C_new`` at today's price; the break-even price less today's is what a co-design review
negotiates with: the most a buyer could pay per GPU for the change and still break even on the run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from dse.errors import UserError, did_you_mean
from dse.report.data import Run

__all__ = ["FIELDS", "PRICE_STEP", "parse_vary", "whatif", "whatif_text"]

#: the hardware fields a what-if may set (the design table's catalog columns, gpus.yaml), with their units
FIELDS = {
    "gpu_hbm_tbyte_s": "TB/s", "gpu_hbm_gb": "GB", "scaleup_gbyte_s": "GB/s per direction",
    "scaleup_size": "GPUs", "nic_gbyte_s": "GB/s per direction per GPU on the fabric, NIC and port alike", "gpu_bf16_tflop_s": "TFLOP/s",
    "gpu_fp8_tflop_s": "TFLOP/s", "gpu_fp4_tflop_s": "TFLOP/s", "gpu_gemm_eff_bf16": "of peak",
    "gpu_gemm_eff_fp8": "of peak", "gpu_gemm_eff_fp4": "of peak", "gpu_tdp_w": "W", "server_w_per_gpu": "W",
}
#: the relative price step that measures the cost's slope in the price (any step gives it: the cost is affine)
PRICE_STEP = 0.1
PRICES = ("server_usd_per_gpu", "cloud_usd_per_gpu_hr")


def parse_vary(text: str) -> tuple[str, list[float]]:
    """``FIELD=V1,V2,...`` -> (field, values); one line naming what is wrong otherwise (exit 2)."""
    field, eq, values = text.partition("=")
    field = field.strip()
    if not eq or not values.strip():
        raise UserError(f"--vary {text!r}: expected FIELD=VALUE[,VALUE...], e.g. scaleup_size=72,144")
    if field not in FIELDS:
        raise UserError(f"--vary {field!r}: not a hardware field; {did_you_mean(field, FIELDS)}"
                        f"valid: {', '.join(FIELDS)}")
    out = []
    for v in values.split(","):
        try:
            x = float(v)
        except ValueError:
            raise UserError(f"--vary {field}: {v.strip()!r} is not a number") from None
        if not math.isfinite(x) or x <= 0 or (field == "scaleup_size" and x != int(x)):
            raise UserError(f"--vary {field}: {v.strip()!r} must be a positive "
                            f"{'whole number' if field == 'scaleup_size' else 'number'}")
        if field.startswith("gpu_gemm_eff") and x > 1:
            raise UserError(f"--vary {field}: {v.strip()!r} is a fraction of the peak, at most 1")
        out.append(x)
    return field, out


def _money_metric(run: Run) -> str:
    return "usd_per_mtok_out" if run.serving else "run_cost_usd"


def whatif(run: Run, field: str, values: Sequence[float], score=None) -> pd.DataFrame:
    """One row per (front design, value): the field's value before and after, each objective before and
    after, the money metric's worth and the break-even price (module doc); ``feasible`` False where the
    changed design has no feasible mapping (its numbers NaN)."""
    from dse.report.sensitivity import default_score, design_table, stack_blocks

    front = run.front
    if front.empty:
        return pd.DataFrame()
    if field not in front.columns:
        raise UserError(f"--vary {field}: the run's designs have no such column", where=str(run.root))
    score = score or default_score(run)
    base = design_table(run, front)
    n, k = len(front), len(values)
    blocks = [base]
    for v in values:
        blocks.append(dict(base, **{field: np.full(n, v)}))
    for v in values:
        stepped = dict(base, **{field: np.full(n, v)})
        for p in PRICES:
            if p in front.columns:
                stepped[p] = front[p].to_numpy(dtype=np.float64) * (1.0 + PRICE_STEP)
        blocks.append(stepped)
    with np.errstate(all="ignore"):
        out = score(stack_blocks(blocks, front))
    feasible = np.asarray(out.get("feasible", np.ones(n * (2 * k + 1), dtype=bool)), dtype=bool)
    money = _money_metric(run)
    metrics = list(dict.fromkeys([*run.objectives, money]))
    col = {m: np.asarray(out[m], dtype=np.float64) for m in metrics if m in out}
    # the cost mode as the sweep stored it: its code (a swept column) or its label (a space's constant)
    owned = front["cost_mode"].isin([0, "owned"]).to_numpy() if "cost_mode" in front.columns else np.ones(n, dtype=bool)
    price = np.where(owned, front.get("server_usd_per_gpu", pd.Series(np.nan, index=front.index)).to_numpy(dtype=np.float64),
                     front.get("cloud_usd_per_gpu_hr", pd.Series(np.nan, index=front.index)).to_numpy(dtype=np.float64))
    rows = []
    for j, v in enumerate(values):
        new, step = slice((j + 1) * n, (j + 2) * n), slice((k + j + 1) * n, (k + j + 2) * n)
        ok = feasible[:n] & feasible[new]
        r = pd.DataFrame({"design": np.arange(1, n + 1), "field": field, "before": front[field].to_numpy(dtype=np.float64),
                          "after": v, "feasible": ok})
        for m in col:
            r[f"{m}_before"] = col[m][:n]
            r[f"{m}_after"] = np.where(ok, col[m][new], np.nan)
        if money in col:
            c0, c1, c1s = col[money][:n], col[money][new], col[money][step]
            slope = (c1s - c1) / PRICE_STEP  # the cost's change per unit of relative price
            r["worth"] = np.where(ok, c0 - c1, np.nan)
            with np.errstate(all="ignore"):
                be = price * (1.0 + (c0 - c1) / slope)
            r["price"] = price
            r["price_unit"] = np.where(owned, "USD per GPU", "USD per GPU-hour")
            r["break_even_price"] = np.where(ok & (slope > 0), be, np.nan)
        rows.append(r)
    return pd.concat(rows, ignore_index=True)


def _pct(before: float, after: float) -> str:
    return f"{(after / before - 1.0) * 100:+.1f}%" if before and math.isfinite(after) else "-"


def whatif_text(run: Run, table: pd.DataFrame, names: Sequence[str], show: int = 5) -> str:
    """The what-if as a reviewer reads it: per value, the median over the front, then the first ``show``
    front designs one per line (objective before -> after, worth, break-even price)."""
    from dse.report.buyer import _amount

    if table.empty:
        return f"{run.name}: no feasible front design to re-score"
    field = table["field"].iloc[0]
    money = _money_metric(run)
    lines = [f"What {field} ({FIELDS[field]}) is worth on {run.name}'s front ({len(names)} designs; the mapping "
             f"searched again at each value; dse.report.whatif):"]
    for v, part in table.groupby("after", sort=False):
        ok = part[part["feasible"]]
        head = f"\n{field} -> {v:g}: "
        if ok.empty:
            lines.append(head + "no front design has a feasible mapping")
            continue
        said = [f"{m} {np.median(ok[f'{m}_after'] / ok[f'{m}_before'] - 1) * 100:+.1f}%" for m in run.objectives]
        if "worth" in ok:
            said.append(f"worth {_amount(money, float(np.median(ok['worth'])))} of {money}")
            be = (ok["break_even_price"] / ok["price"] - 1.0).dropna()
            if len(be):
                said.append(f"break-even at {np.median(be) * 100:+.1f}% on the price")
        lines.append(head + ", ".join(said) + f" (medians over {len(ok)} of {len(part)} designs)")
        for _, r in part.head(show).iterrows():
            i = int(r["design"]) - 1
            if not r["feasible"]:
                lines.append(f"  #{i + 1} {names[i]}: no feasible mapping at {field} {v:g}")
                continue
            objs = "; ".join(f"{m} {_amount(m, r[f'{m}_before'])} -> {_amount(m, r[f'{m}_after'])} "
                             f"({_pct(r[f'{m}_before'], r[f'{m}_after'])})" for m in run.objectives)
            money_said = ""
            if "worth" in r and math.isfinite(r["worth"]):
                be = r["break_even_price"]
                unit = "per GPU" if r["price_unit"] == "USD per GPU" else "per GPU-hour"
                money_said = (f"; worth {_amount(money, r['worth'])}"
                              + (f"; break-even price ${be:,.2f} {unit} (today ${r['price']:,.2f}, "
                                 f"{_pct(r['price'], be)})" if math.isfinite(be) else ""))
            lines.append(f"  #{i + 1} {names[i]} ({field} {r['before']:g}): {objs}{money_said}")
    return "\n".join(lines)
