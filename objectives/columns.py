"""Helpers on the columns of a design table at the boundary, shared by the training (objectives/pipeline.py)
and the serving (objectives/serving/prepare.py, intervals.py) preparation: cheap whole-column checks, the
first offending row, blank cells filled, text cells read as numbers, and work on a constant (zero-stride,
:func:`objectives.table.is_constant`) column's one value.

A constant column stands for all its rows by its row 0: the checks look at that one cell, and a function of
it is computed once and broadcast.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import numpy as np

from objectives.table import Columns, InputError, is_constant

__all__ = ["bad_row", "has_nan", "fill_blanks", "distinct_cells", "all_at_least", "all_whole", "per_value",
           "number_cells", "with_outputs"]

#: text that means a blank cell, as '' reads
BLANK_TEXT = ("", "nan", "NaN", "None")


def bad_row(mask: np.ndarray) -> int | None:
    """The first row where ``mask`` is true, None where it is nowhere."""
    return int(np.argmax(mask)) if mask.any() else None


def has_nan(values: np.ndarray) -> bool:
    """True if any cell is NaN (one reduction, no temporary column)."""
    return len(values) > 0 and bool(np.isnan(np.min(values)))


def fill_blanks(values: np.ndarray, default) -> np.ndarray:
    """Blank (NaN) cells of a float column set to ``default`` (a value or a column); a constant column
    stays a constant view, a column without blanks is used as it is."""
    if is_constant(values) and np.ndim(default) == 0:
        return np.broadcast_to(np.where(np.isnan(values[:1]), default, values[:1]), values.shape)
    return np.where(np.isnan(values), default, values) if has_nan(values) else values


def distinct_cells(values: np.ndarray) -> np.ndarray:
    """The cells worth checking: one for a constant column (its row 0 stands for all), else all."""
    return values[:1] if is_constant(values) else values


def all_at_least(v: np.ndarray, low: float) -> bool:
    """Fast check (two reductions) that every cell is finite and >= low (> 0 where low is 0)."""
    if not len(v):
        return True
    least, most = np.min(v), np.max(v)  # NaN anywhere makes both NaN, and the check fails
    return bool(((least > 0) if low == 0 else (least >= low)) and most != np.inf)


def all_whole(v: np.ndarray) -> bool:
    """Fast check that every cell is a non-negative whole number (no blank)."""
    return not len(v) or bool(np.min(v) >= 0 and np.array_equal(np.floor(v), v))


def per_value(fn, x: np.ndarray) -> np.ndarray:
    """``fn`` of a column as floats; of its one value, broadcast, where the column is constant."""
    x = np.asarray(x, dtype=np.float64)
    return np.broadcast_to(fn(x[:1]), x.shape) if is_constant(x) else fn(x)


def number_cells(value: np.ndarray, column: str):
    """(the cells of a text or object column as a pandas Series, which of them mean blank, their numbers with
    NaN where blank) of its distinct cells (:func:`distinct_cells`); InputError naming the column and the
    first row that holds text that is not a number ('abc' where n_gpus goes)."""
    import pandas as pd  # only for a column of text or objects

    raw = pd.Series(distinct_cells(value), dtype=object)
    blank = raw.isna() | raw.astype(str).str.strip().isin(BLANK_TEXT)
    as_num = pd.to_numeric(raw.where(~blank, np.nan), errors="coerce")
    row = bad_row((as_num.isna() & ~blank).to_numpy())
    if row is not None:
        raise InputError(f"'{raw.iloc[row]}' is not a number", column=column, row=row)
    return raw, blank, as_num


def with_outputs(user: Columns, work: Mapping[str, np.ndarray], outputs: Collection[str],
                 categories: Collection[str]) -> Columns:
    """The evaluated table: the user's columns, every new column of ``work`` (the prepared columns and the
    modules' outputs) and each of ``outputs`` over its input, the categorical columns among ``categories``
    as the user wrote them (not their codes)."""
    out = dict(user)
    for name, value in work.items():
        if name not in user or name in outputs:
            out[name] = value
    for name in categories:
        if name in user:
            out[name] = user[name]
    return out
