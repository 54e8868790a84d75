"""The outer search space of a :class:`~dse.spec.Spec`: Optuna distributions and design tables.

:class:`Space` is built once per run. Its :attr:`Space.distributions` are what :mod:`dse.study` passes
to ``study.ask``; :meth:`Space.table` turns the parameters of a whole batch of trials into one columnar
design table (searched columns as arrays, fixed columns as scalars the model broadcasts); :meth:`Space.grid`
lists every value of every dimension for the exhaustive grid sampler, and :meth:`Space.grid_table` gives
the whole grid as one design table (for an exact front without Optuna).

A design is its canonical cells (:meth:`Space.canonical`): a space that searches ``instance`` beside
``gpu``, ``network`` or ``pricing`` names one rented design under every ``gpu`` value (the model gives a
renting row its instance's GPU and fabric, objectives.catalog.label_instances) and one owned design under
every ``pricing``. The sweep scores the canonical design table, so the score cache (dse.sweep.cache) scores
each design once and tells every trial that names it the shared result; the grid walks one point per
canonical design (:meth:`Space.grid_points`), so its trials are distinct designs.

Parameter names are the column names, except powers of two: ``n_gpus`` searched over ``{min: 1024,
max: 16384, scale: pow2}`` is the integer parameter ``log2(n_gpus)`` from 10 to 14, so that the samplers
see an ordered, evenly spaced dimension.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from optuna.distributions import BaseDistribution

from dse.space.dimensions import distribution, grid_values, param_name
from dse.spec import Dimension, Spec

__all__ = ["Space", "OVERRIDDEN"]

#: columns the model overrides on some rows (objectives.catalog.label_instances): a renting row's gpu,
#: network and cost mode are its instance's; an owned row has no pricing
OVERRIDDEN = ("gpu", "network", "cost_mode", "pricing")


class Space:
    """Searched dimensions (as Optuna distributions) and fixed columns of one spec."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.searched: tuple[Dimension, ...] = tuple(d for d in spec.dimensions if d.searched)
        #: fixed design-table columns: the workload, fixed dimensions and single-valued mapping columns
        self.constants: dict[str, Any] = dict(spec.workload)
        for d in spec.dimensions:
            if not d.searched:
                self.constants[d.name] = d.values[0]
        for name, values in spec.mapping.items():
            if len(values) == 1:
                self.constants[name] = values[0]
        for name in ("facility_mw", "rack_kw_max"):  # the facility's limits (dse.spec.facility), on every row
            if getattr(spec, name, None) is not None:
                self.constants[name] = getattr(spec, name)
        #: Optuna parameter name -> distribution, in the order of the space file
        self.distributions: dict[str, BaseDistribution] = {param_name(d): distribution(d) for d in self.searched}
        self._dims = {param_name(d): d for d in self.searched}
        names = {d.name for d in self.searched}
        #: the searched columns the model may override on a row (empty: every design table is canonical)
        self.overridden = tuple(c for c in OVERRIDDEN if c in names) if "instance" in names else ()
        self._points: list[dict[str, Any]] | None = None

    # -- the mapping level -------------------------------------------------------------------------

    def mapping_choices(self, defaults: Mapping[str, Sequence]) -> dict[str, tuple]:
        """Allowed values of each mapping column for the inner search: the defaults, narrowed by the space."""
        out = {k: tuple(v) for k, v in defaults.items()}
        for name, values in self.spec.mapping.items():
            if len(values) > 1:
                out[name] = tuple(values)
        return out

    # -- design tables -----------------------------------------------------------------------------

    @property
    def design_columns(self) -> list[str]:
        """Columns that tell one design of this space from another (the searched ones)."""
        return [d.name for d in self.searched]

    def table(self, params: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """Design table of a batch: one row per trial's ``params``; fixed columns stay scalars.

        Called once per batch by :mod:`dse.sweep`, right after the batch is asked.
        """
        out: dict[str, Any] = dict(self.constants)
        for name, dim in self._dims.items():
            out[dim.name] = self._column(dim, [p[name] for p in params])
        if self.spec.price_overrides:  # the space's price file (dse.spec.prices): its prices, else the catalog's
            from dse.spec.prices import apply_prices

            out = apply_prices(out, self.spec.price_overrides, len(params))
        return out

    def canonical(self, table: Mapping[str, Any]) -> dict[str, Any]:
        """The design table with each overridden searched cell the model's (a renting row's gpu its
        instance's, an owned row's pricing blank), so that one design has one row. The fixed columns stay
        as they are. Raises objectives.InputError for an instance the catalog does not have."""
        if not self.overridden:
            return dict(table)
        from objectives.catalog import label_instances

        labeled = label_instances(dict(table))
        out = dict(table)
        for c in self.overridden:
            out[c] = np.asarray(labeled[c], dtype=object)
        return out

    def _column(self, dim: Dimension, values: list) -> np.ndarray:
        if dim.kind == "pow2":
            return np.left_shift(1, np.asarray(values, dtype=np.int64))
        if dim.kind == "int":
            return np.asarray(values, dtype=np.int64)
        if dim.kind == "float":
            return np.asarray(values, dtype=np.float64)
        arr = np.asarray(values)
        return arr.astype(object) if arr.dtype.kind in "US" else arr

    def params_of(self, table: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Inverse of :meth:`table` for the searched columns: parameter name -> array of values."""
        out = {}
        for name, dim in self._dims.items():
            col = np.asarray(table[dim.name])
            out[name] = np.log2(col.astype(np.float64)).round().astype(np.int64) if dim.kind == "pow2" else col
        return out

    # -- the exhaustive grid -----------------------------------------------------------------------

    def grid(self) -> dict[str, list]:
        """Parameter name -> every value, for ``optuna.samplers.GridSampler`` (ValueError if continuous)."""
        return {name: grid_values(dim) for name, dim in self._dims.items()}

    def _product(self) -> list[dict[str, Any]]:
        grid = self.grid()
        return [dict(zip(grid, c)) for c in itertools.product(*grid.values())]

    def grid_points(self) -> list[dict[str, Any]] | None:
        """The parameters of one grid point per canonical design, in the order of the cartesian product;
        None when every point is a design of its own. A design's point is the one whose cells are already
        canonical where there is one (a rented H200 instance under ``gpu: h200-sxm``), else its first."""
        if not self.overridden:
            return None
        if self._points is None:
            self._points = self._canonical_points()
        return self._points

    def _canonical_points(self) -> list[dict[str, Any]]:
        params = self._product()
        table = self.table(params)
        canon = self.canonical(table)
        keys = pd.DataFrame({c: np.asarray(canon[c]).astype(str) for c in self.design_columns})
        fixed = np.all([np.asarray(canon[c]).astype(str) == np.asarray(table[c]).astype(str)
                        for c in self.overridden], axis=0)
        order = np.lexsort((np.arange(len(params)), ~fixed))  # fixed points first, then product order
        first = order[~keys.iloc[order].duplicated().to_numpy()]
        return [params[i] for i in np.sort(first)]

    def grid_size(self) -> int:
        """Number of distinct designs on the grid (1 when nothing is searched)."""
        points = self.grid_points()
        if points is not None:
            return len(points)
        return int(np.prod([len(v) for v in self.grid().values()], dtype=np.int64)) if self._dims else 1

    def grid_table(self) -> dict[str, Any]:
        """Every design of the grid once, as one canonical design table (row order: the cartesian product)."""
        points = self.grid_points()
        return self.canonical(self.table(points if points is not None else self._product()))
