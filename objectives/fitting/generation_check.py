"""Leave one GPU generation out: how far off the model is on a generation it has not seen.

    python -m objectives.fitting.fit --hold-out-generation   # one fit per generation (minutes): prints the table and
                                                     # writes catalog/logo_residuals.csv

For each generation G among the fitted runs (Ampere, Hopper, Blackwell, read from the GPU's tensor-core
formats, :func:`objectives.training.intervals.generation`), the factors are fitted on the runs of the other
generations only (:func:`objectives.fitting.fit.fit_factors`, the main fit's plan: a factor no other generation's
run informs stays at its documented default; no factor is fitted on a run of G) and G's runs are
predicted with them. Per G the check reports its runs, the MAPE with every source weighing the same and
over rows, the bias (mean signed error), and the coverage of the 80% intervals on those predictions: the
intervals derived from the leave-one-source-out residuals of the *other* generations (the factors' fit and
the intervals' derivation both without G; distances from the other generations' validated ground), as a
design on a generation no published run is on would get them (``coverage``), and the intervals with G's
own generation term (objectives.fitting.interval_fit, ``coverage_widened``).

The residuals (``catalog/logo_residuals.csv``, the columns of ``loso_residuals.csv``; ``log_ratio``
predicted without the run's generation) are what objectives.fitting.interval_fit derives the per-generation
widening of the intervals from (its module doc has the rule and the measured figures).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from objectives.fitting.interval_fit import LOGO_RESIDUALS_PATH
from objectives.training.intervals import GENERATIONS, generation

__all__ = ["LOGO_RESIDUALS_PATH", "run_generations", "hold_out_generation", "generation_summary",
           "generation_text", "check"]


def run_generations(runs: pd.DataFrame) -> np.ndarray:
    """The generation name of each run's GPU (catalog/gpus.yaml's tensor-core formats)."""
    from objectives.catalog import gpus

    spec = gpus()
    fp8 = runs["gpu"].map(lambda g: spec[g]["gpu_fp8_tflop_s"]).to_numpy(dtype=np.float64)
    fp4 = runs["gpu"].map(lambda g: spec[g]["gpu_fp4_tflop_s"]).to_numpy(dtype=np.float64)
    return np.asarray(GENERATIONS, dtype=object)[generation(fp8, fp4).astype(int)]


def hold_out_generation(runs: pd.DataFrame, name: str, max_nfev: int = 400, start=None):
    """(``name``'s runs predicted by factors fitted on the other generations' runs alone, the fold's
    objectives.fitting.fit.Fit, the factors the fold leaves at the start value although ``name``'s runs inform them)."""
    from objectives.fitting.fit import BOX, fit_factors, label, plan
    from objectives.fitting.validation import predict

    held = run_generations(runs) == name
    fold = fit_factors(runs[~held].reset_index(drop=True), start, max_nfev)
    test = runs[held].reset_index(drop=True)
    fixed = [label(j) for j in range(len(BOX)) if j not in fold.plan.free]
    unseen = [label(j) for j in plan(test, fold.cal, fixed).free] if fixed and len(test) else []
    return predict(test, fold.cal), fold, unseen


def generation_summary(res: pd.DataFrame, inside: np.ndarray | None = None) -> pd.DataFrame:
    """Per generation (and ``all``) of a residual table: runs, sources, MAPE with every source weighing the
    same and over rows, bias (mean signed error) and, given ``inside`` (per row: the measurement inside its
    interval), the coverage over rows and with every source weighing the same."""
    err = np.expm1(res["log_ratio"].to_numpy(dtype=np.float64))  # predicted / measured - 1
    frame = pd.DataFrame({"generation": res["generation"].to_numpy(), "source": res["source"].to_numpy(),
                          "ape": np.abs(err), "err": err})
    if inside is not None:
        frame["inside"] = np.asarray(inside, dtype=np.float64)
    rows = []
    order = [g for g in GENERATIONS if g in set(frame["generation"])]
    for name, part in [(g, frame[frame["generation"] == g]) for g in order] + [("all", frame)]:
        per_source = part.groupby("source")
        row = {"generation": name, "runs": len(part), "sources": int(part["source"].nunique()),
               "mape_source_weighted": float(per_source["ape"].mean().mean()), "mape": float(part["ape"].mean()),
               "bias": float(part["err"].mean())}
        if inside is not None:
            row["coverage"] = float(part["inside"].mean())
            row["coverage_source_weighted"] = float(per_source["inside"].mean().mean())
        rows.append(row)
    return pd.DataFrame(rows).set_index("generation")


def generation_text(table: pd.DataFrame, title: str = "generation") -> str:
    """A generation_summary (with the coverage columns it has) as a fixed-width table."""
    cov = [c for c in ("coverage", "coverage_widened") if c in table]
    head = f"{title:<10} {'runs':>5} {'sources':>7} {'MAPE':>7} {'(rows)':>7} {'bias':>7}" + "".join(
        f" {'inside 80%' if c == 'coverage' else 'widened':>10}" for c in cov)
    lines = [head, "-" * len(head)]
    for name, row in table.iterrows():
        lines.append(f"{name:<10} {int(row['runs']):>5} {int(row['sources']):>7} {row['mape_source_weighted']:>7.1%} "
                     f"{row['mape']:>7.1%} {row['bias']:>+7.1%}" + "".join(f" {row[c]:>10.0%}" for c in cov))
    return "\n".join(lines)


def check(runs: pd.DataFrame, loso: pd.DataFrame, max_nfev: int = 400, residuals_path=None, command: str = "",
          log=print) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The leave-one-generation-out check (module doc): (per generation table, the residual table). ``loso``:
    the leave-one-source-out residuals (objectives.fitting.interval_fit.read_residuals), whose other generations'
    rows derive the intervals each held-out generation's predictions are checked against."""
    from objectives.fitting import coverage, interval_fit
    from objectives.fitting.validation import predict

    gens = run_generations(runs)
    parts = []
    for name in [g for g in GENERATIONS if g in set(gens)]:
        result, _, unseen = hold_out_generation(runs, name, max_nfev)
        parts.append(result)
        log(f"{name:<10} {len(result):>4} runs predicted without them"
            + (f" (informed by no other generation, left at the default: {', '.join(unseen)})" if unseen else ""))
    res = interval_fit.residual_table(pd.concat(parts, ignore_index=True), predict(runs))
    if residuals_path:
        with open(residuals_path, "w") as fh:
            fh.write(f"# written by `{command or 'python -m objectives.fitting.fit --hold-out-generation'}`: each published "
                     "run predicted by factors fitted without its GPU generation; log_ratio = log(predicted / measured)\n")
            res.to_csv(fh, index=False, float_format="%.6g", lineterminator="\n")
        res = interval_fit.read_residuals(residuals_path)  # as stored (6 digits)
    table = generation_summary(res, coverage.unseen_generation(loso, res))
    table["coverage_widened"] = generation_summary(res, coverage.widened_generation(loso, res))["coverage"]
    return table, res
