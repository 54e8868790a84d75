"""A searched dimension as Optuna sees it: its parameter name, its distribution, its grid values."""

from __future__ import annotations

import numpy as np
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution

from dse.spec import Dimension

__all__ = ["param_name", "distribution", "grid_values"]


def param_name(dim: Dimension) -> str:
    """The Optuna parameter name of a searched dimension."""
    return f"log2({dim.name})" if dim.kind == "pow2" else dim.name


def distribution(dim: Dimension) -> BaseDistribution:
    """The Optuna distribution of a searched dimension (a pow2 range: the integer exponent)."""
    if dim.kind == "choice":
        return CategoricalDistribution(list(dim.values))
    if dim.kind == "pow2":
        return IntDistribution(int(round(np.log2(dim.low))), int(round(np.log2(dim.high))))
    if dim.kind == "int":
        return IntDistribution(int(dim.low), int(dim.high), log=dim.log, step=int(dim.step or 1))
    if dim.kind == "float":
        return FloatDistribution(float(dim.low), float(dim.high), log=dim.log, step=dim.step)
    raise ValueError(f"dimension {dim.name} of kind {dim.kind} is not searched")


def grid_values(dim: Dimension) -> list:
    """Every value of a discrete dimension, as the grid sampler takes them (ValueError if continuous)."""
    if dim.kind == "choice":
        return list(dim.values)
    if dim.kind == "pow2":
        return list(range(int(round(np.log2(dim.low))), int(round(np.log2(dim.high))) + 1))
    if dim.kind == "int":
        if dim.log:
            return sorted({int(v) for v in np.unique(np.round(np.geomspace(dim.low, dim.high, 16)))})
        return list(range(int(dim.low), int(dim.high) + 1, int(dim.step or 1)))
    if dim.kind == "float" and dim.step is not None:
        n = int(round((dim.high - dim.low) / dim.step))
        return [float(round(dim.low + i * dim.step, 12)) for i in range(n + 1)]
    raise ValueError(f"dimension {dim.name} is continuous: it has no grid")
