"""Per-design work of the serving model done once per distinct design instead of once per row.

Much of a serving row's arithmetic depends only on its design (the model's architecture, the GPU, the
precisions, the engine and the mapping): parameter counts, weights per GPU, KV bytes per token, layout and
precision flags. A table of a million rows holds a few hundred such designs, each at many request shapes
and loads. :func:`design_codes` numbers the distinct designs of a prepared table from the columns that
identify them (the ``model`` and ``gpu`` labels and small whole-number code columns); a
:class:`PerDesign` model computes its design part on one row of each design and gathers it back by row,
which gives the same values bit for bit as the row-by-row computation (the same IEEE operations on the
same operands, only fewer of them).

A column is known to take one value per design only by where it comes from: a catalog field of the
row's model (or GPU) that the table does not give itself (nor a rented instance sets), or a column that is
constant over the table, or a code column of the key. Any other varying input of a design part (a per-row
override of d_model, say) leaves it uncovered, and a design part that reads it runs row by row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from objectives.base import Model
from objectives.catalog import GPU_FIELDS, MODEL_FIELDS, NETWORK_FIELDS
from objectives.catalog.instances import INSTANCE_FIELDS
from objectives.table import Columns, factorize, is_constant
from objectives.training.transformer import TransformerMath, TransformerParameters

__all__ = ["Designs", "PerDesign", "ServingParameters", "design_codes", "KEY_COLUMNS"]

#: small whole-number columns that, with the model and the GPU, identify a design
KEY_COLUMNS = ("precision", "kv_precision", "engine", "tp", "pp", "ep", "attn_dp", "latency_tuned")
#: the most designs a key may number by a lookup table (else: a sort)
_DENSE_KEYS = 1 << 20


@dataclass(frozen=True)
class Designs:
    """Each row's design (``codes``, 0 .. len(first) - 1), one row of each design (``first``), and the
    columns known to take one value per design (``covered``)."""

    codes: np.ndarray
    first: np.ndarray
    covered: frozenset[str]


class PerDesign(Model):
    """A model split into a part that reads only columns of :attr:`design_requires` (one value per design)
    and a part per row that reads the design part's values as ``d`` (a dict, by row); computing both per
    row (:meth:`compute`) is the plain model."""

    design_requires: tuple[str, ...] = ()

    def design_compute(self, c, cal) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def row_compute(self, c, d, cal) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def compute(self, c, cal):
        return self.row_compute(c, self.design_compute(c, cal), cal)


class ServingParameters(PerDesign):
    """The architecture's parameter counts (objectives.training.transformer.TransformerParameters), once per design."""

    requires = TransformerParameters.requires
    provides = TransformerParameters.provides
    design_requires = TransformerParameters.requires

    def design_compute(self, c, cal):
        return TransformerMath.parameters(c)

    def row_compute(self, c, d, cal):
        return dict(d)


def _addresses(values: np.ndarray) -> np.ndarray:
    """The object pointers an object column holds, as unsigned integers (a view; ``values`` kept alive)."""
    class View:
        __array_interface__ = {"shape": values.shape, "strides": values.strides, "version": 3,
                               "typestr": np.dtype(np.uint64).str, "data": (values.ctypes.data, True)}
        keep = values
    return np.asarray(View())


def _label_codes(values: np.ndarray) -> tuple[np.ndarray, int] | None:
    """(a code per row, how many codes) of a label column, one code per distinct object (equal labels
    held as different objects get different codes: a finer key, as good); None where a cell is blank.
    A column of few distinct objects (the usual: repeated labels) is coded by a hash of each pointer into
    a table of the objects of a sample, checked against every row; else objectives.table.factorize."""
    if values.dtype == object and values.strides[0] == values.itemsize:
        addresses = _addresses(values)
        step = max(1, len(values) // 4096)
        seen, where = np.unique(addresses[::step], return_index=True)
        objects = values[::step].take(where)
        blank = any(v is None or (isinstance(v, float) and v != v) for v in objects)
        if len(seen) <= 256 and not blank:
            for shift in range(52, 41, -1):  # a multiplicative hash of 12 - 22 bits without collisions
                slots = (seen * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(shift)
                if len(np.unique(slots)) == len(seen):
                    table = np.zeros(1 << (64 - shift), dtype=np.intp)
                    table[slots] = np.arange(len(seen))
                    codes = table.take((addresses * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(shift))
                    if np.array_equal(seen.take(codes), addresses):  # every row's object among the sample's
                        return codes, len(seen)
                    break
    codes, distinct = factorize(values)
    if len(codes) and codes.min() < 0:
        return None
    return np.asarray(codes, dtype=np.intp), len(distinct)


def design_codes(user: Columns, floats: Columns, needs: set[str]) -> Designs | None:
    """The designs of a prepared serving table (module doc) by the columns of ``needs`` that vary, their
    ``covered`` those known to take one value per design (a design part reading another runs row by
    row); None where none is (or the table has one row)."""
    n = max((len(v) for v in floats.values()), default=0)
    if n <= 1:
        return None
    rented = "instance" in user
    parts: list[tuple[np.ndarray, int]] = []
    covered = {k for k, v in floats.items() if is_constant(v)}
    # the catalog's fields of the row's model (seq_len is the request's) and the GPU's chip fields (the
    # system's scale-up, NIC and price an instance or a fabric may set); d_head and n_kv_heads where
    # derived from the model's own d_model and n_heads (objectives/serving/prepare.py)
    derived = () if "d_model" in user or "n_heads" in user else ("d_head", "n_kv_heads")
    model = {f for f in (*MODEL_FIELDS, *derived) if f != "seq_len"}
    # the GPU's chip and scale-up fields (an instance sets scaleup_size, dropped below where one is rented);
    # not its NIC nor its prices, which a fabric or an instance may set, unless the table names no network
    # (nor rents, nor gives nic_gbyte_s): then the network is the GPU's natural one (objectives.catalog
    # _expand_network), its fields and the NIC a function of the GPU alone
    chip = {f for f in GPU_FIELDS if f.startswith(("gpu_", "scaleup_")) or f == "host_grace"}
    if not rented and "network" not in user and "nic_gbyte_s" not in user:
        chip |= {"nic_gbyte_s", *NETWORK_FIELDS}
    for label, fields in (("model", model), ("gpu", chip)):
        mine = {f for f in fields if f not in user and not (rented and f in INSTANCE_FIELDS)}
        if not (needs & mine) - covered:
            continue  # every such column constant
        if label not in user or is_constant(user[label]):
            continue  # varying without a varying label: not the catalog's (left uncovered)
        codes = _label_codes(user[label])
        if codes is None:
            continue
        parts.append(codes)
        covered |= mine
    for name in KEY_COLUMNS:
        v = floats.get(name)
        if v is None or is_constant(v) or name not in needs:
            continue
        low, high = v.min(), v.max()  # whole numbers (checked by prepare_serving) or NaN (fails here)
        if not (low >= 0 and high <= 1 << 16):
            continue
        parts.append((v.astype(np.intp), int(high) + 1))
        covered.add(name)
    if {"tp", "attn_dp", "pp"} <= covered:
        covered.add("n_gpus")  # tp x attn_dp x pp (checked row by row by prepare_serving)
    if not needs & covered:
        return None
    if not parts:
        return Designs(np.zeros(n, dtype=np.intp), np.zeros(1, dtype=np.intp), frozenset(covered))
    key, size = parts[0]
    for codes, count in parts[1:]:
        if size * count > _DENSE_KEYS:
            key, size = _compact(key, size)
        key, size = key * count + codes, size * count
    key, size = _compact(key, size)
    first = np.empty(size, dtype=np.intp)
    first[key] = np.arange(n)  # a row of each design (which one does not matter: they are alike)
    return Designs(key, first, frozenset(covered))


def _compact(key: np.ndarray, size: int) -> tuple[np.ndarray, int]:
    """The key renumbered 0 .. distinct - 1 (a lookup table where the key is dense enough, else a sort)."""
    if size > _DENSE_KEYS:
        _, inverse = np.unique(key, return_inverse=True)
        return inverse.reshape(-1).astype(np.intp), int(inverse.max()) + 1
    present = np.zeros(size, dtype=bool)
    present[key] = True
    number = np.cumsum(present, dtype=np.intp) - 1
    return number.take(key), int(number[-1]) + 1


def design_needs(models) -> set[str]:
    """The input columns the design parts of ``models`` read (what the earlier ones provide excluded)."""
    needs: set[str] = set()
    made: set[str] = set()
    for model in models:
        if isinstance(model, PerDesign):
            needs |= set(model.design_requires) - made
        made |= set(model.provides)
    return needs


def design_parts(floats: Columns, designs: Designs | None, models, cal) -> dict[int, dict[str, np.ndarray]]:
    """Each PerDesign model's design part (by its index in ``models``) over one row of each design, where
    every column it reads takes one value per design; the others run row by row."""
    if designs is None:
        return {}
    small = {k: (v[:1] if is_constant(v) else v.take(designs.first)) for k, v in floats.items() if k in designs.covered}
    parts = {}
    for i, model in enumerate(models):
        if isinstance(model, PerDesign) and all(k in small for k in model.design_requires):
            parts[i] = {k: np.asarray(v) for k, v in model.design_compute(small, cal).items()}
            small.update((k, v) for k, v in parts[i].items() if k in model.provides)
        else:
            for k in model.provides:
                small.pop(k, None)  # a later design part may not read a column computed row by row
    return parts


def by_row(part: dict[str, np.ndarray], codes: np.ndarray) -> dict[str, np.ndarray]:
    """A design part's values by row (``codes``: the rows' designs); a value that is one for every design
    stays one (as the plain model gives it from constant inputs)."""
    return {k: v if v.ndim == 0 or len(v) == 1 else v.take(codes) for k, v in part.items()}
