"""What the training and the serving interval derivations share (objectives/fitting/interval_fit.py,
objectives/serving/interval_fit.py): the weights of the held-out residuals, the Laplace fit of their log
scale, the weighted quantile of the standardized residuals, the parameters file and the command line.

Each derivation brings its own design matrix (training: stack and dense/MoE levels; serving: engine, MoE
and attention data parallelism), its own distances and its own coverage; what is here is the same for both.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["RIDGE", "FLOOR", "equal_source_weights", "fit_log_scale", "weighted_quantile", "band_quantiles", "write_params", "main"]

#: prior precision of each level effect of log sigma, in sources' weights
RIDGE = 1.0
#: |log ratio| below this (0.2%) counts as this in the likelihood (a perfect prediction has no scale)
FLOOR = 2e-3


def equal_source_weights(res: pd.DataFrame) -> np.ndarray:
    """Every source (column ``source``) weighing 1: each row 1 / its source's rows."""
    return 1.0 / res["source"].map(res["source"].value_counts()).to_numpy(dtype=np.float64)


def fit_log_scale(x: np.ndarray, abs_ratio: np.ndarray, w: np.ndarray, ridge: float = RIDGE) -> np.ndarray:
    """theta of log sigma = x @ theta by maximum likelihood of a Laplace distribution of the log ratio (scale
    sigma; the mean absolute deviation as spread, as Lei et al. 2018 Sec. 5.2 fit it), rows weighted by
    ``w``, Newton's method. ``x``'s first column is the intercept and its last the distance (kappa): both
    free; every other effect carries a Gaussian prior (ridge) of precision ``ridge``. kappa is kept >= 0
    (distance never narrows an interval): a second pass holds it at 0 where the first wants it negative.
    ``abs_ratio``: |log ratio|, floored at :data:`FLOOR` by the caller."""
    prior = np.full(x.shape[1], ridge)
    prior[0] = prior[-1] = 0.0  # the intercept and kappa are free
    free = np.ones(x.shape[1], dtype=bool)
    theta = np.zeros(x.shape[1])
    theta[0] = np.log(np.sum(w * abs_ratio) / np.sum(w))
    for _ in range(2):  # a second pass with kappa held at 0 if the first wants it negative
        for _ in range(100):
            u = abs_ratio * np.exp(-(x @ theta))  # Laplace NLL per weight: eta + |r| e^-eta
            grad = x.T @ (w * (1.0 - u)) + prior * theta
            hess = (x * (w * u)[:, None]).T @ x + np.diag(prior)
            step = np.zeros_like(theta)
            step[free] = np.linalg.solve(hess[np.ix_(free, free)], grad[free])
            theta -= step
            if np.max(np.abs(step)) < 1e-10:
                break
        if theta[-1] >= 0.0:
            break
        free[-1], theta[-1] = False, 0.0
    return theta


def weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    """The q-quantile of the weighted sample (inverted weighted empirical distribution, midpoints)."""
    order = np.argsort(values)
    v, w = values[order], weights[order]
    cum = (np.cumsum(w) - 0.5 * w) / np.sum(w)
    return float(np.interp(q, cum, v))


def band_quantiles(z: np.ndarray, source_weights: np.ndarray, level: float) -> tuple[float, float]:
    """(lo, hi): the (1 - level)/2 and (1 + level)/2 quantiles of the standardized residuals ``z``, the wider of
    those with every source weighing the same (``source_weights``) and with every run weighing the same, so
    that an interval holds ``level`` of the measurements however they are counted."""
    weights = (source_weights, np.ones(len(z)))
    return (min(weighted_quantile(z, w, (1.0 - level) / 2.0) for w in weights),
            max(weighted_quantile(z, w, (1.0 + level) / 2.0) for w in weights))


def write_params(params: dict, path: str | Path) -> None:
    """The parameters as JSON, the validated ground one line per axis so that the file reads."""
    ground = params["ground"]
    rest = {k: v for k, v in params.items() if k != "ground"}
    text = json.dumps(rest, indent=2)[:-2]
    lines = ",\n".join(f'    "{name}": {json.dumps(per_stack)}' for name, per_stack in ground.items())
    Path(path).write_text(text + ',\n  "ground": {\n' + lines + "\n  }\n}\n")


def main(argv: list[str] | None, *, prog: str, doc: str, residuals: Path, out: Path,
         read_residuals: Callable[[str], pd.DataFrame], derive: Callable[..., dict],
         coverage_text: Callable[[pd.DataFrame], str]) -> int:
    """``python -m <prog> [--residuals CSV] [--out JSON]``: the parameters derived again from the stored
    residuals (the command that wrote them, from the file's first line, recorded in the parameters), written,
    and their nested coverage printed."""
    ap = argparse.ArgumentParser(prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--residuals", default=str(residuals))
    ap.add_argument("--out", default=str(out))
    args = ap.parse_args(argv)
    res = read_residuals(args.residuals)
    with open(args.residuals) as fh:
        command = fh.readline().partition("`")[2].partition("`")[0]
    write_params(derive(res, command=command), args.out)
    print(coverage_text(res))
    print(f"wrote {args.out}")
    return 0
