"""The outer search space of a space file: Optuna distributions, and design tables of whole batches."""

from dse.space.dimensions import param_name
from dse.space.space import Space

__all__ = ["Space", "param_name"]
