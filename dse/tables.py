"""Reading and writing design tables (CSV or Parquet) for the command line.

Columns go between files and the model as numpy arrays, without a pandas DataFrame in between where the
file is Parquet: a number column is read and written zero-copy, and a text column (``gpu``, ``model``, a
note) is held as an object array of its few distinct strings, each stored once, so that the model's
categorical encoding factorizes it by object identity (:func:`objectives.table.factorize`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from dse.errors import UserError
from dse.parquet import write_atomic, write_atomic_row_groups

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["read_table", "read_columns", "write_table", "write_slices", "write_evaluated", "to_columns",
           "read_runs", "describe_input_error", "display_path"]

_PARQUET = (".parquet", ".pq")


def _check_readable(path: str | Path) -> Path:
    p = Path(path)
    if not p.is_file():
        raise UserError("no such file", where=str(p))
    return p


def _unreadable(p: Path, exc: Exception) -> UserError:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return UserError(f"cannot read as {'Parquet' if p.suffix.lower() in _PARQUET else 'CSV'}: {first}", where=str(p))


def read_table(path: str | Path) -> pd.DataFrame:
    """A CSV or Parquet design table; a missing or unreadable file is a UserError naming it."""
    import pandas as pd

    p = _check_readable(path)
    try:
        if p.suffix.lower() in _PARQUET:
            return pd.read_parquet(p)
        return pd.read_csv(p, comment="#", skipinitialspace=True)
    except (ValueError, OSError, pd.errors.ParserError) as exc:
        raise _unreadable(p, exc) from None


def read_columns(path: str | Path) -> dict[str, np.ndarray]:
    """A CSV or Parquet design table as columns (:func:`to_columns`'s types); a Parquet file is read with
    pyarrow straight into numpy (no DataFrame). A missing or unreadable file is a UserError naming it."""
    p = _check_readable(path)
    if p.suffix.lower() not in _PARQUET:
        return to_columns(read_table(p))
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        # text read as dictionaries: each distinct string is decoded once (a file written by pandas or
        # pyarrow stores its text dictionary-encoded)
        # (ParquetFile, not read_table: that goes through pyarrow.dataset, which imports pandas)
        text = [f.name for f in pq.ParquetFile(p).schema_arrow
                if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)]
        table = pq.ParquetFile(p, read_dictionary=text).read()
    except (ValueError, OSError, pa.ArrowException) as exc:
        raise _unreadable(p, exc) from None
    return {str(name): _arrow_to_numpy(column) for name, column in zip(table.column_names, table.columns)}


def _labels(codes: np.ndarray, distinct: np.ndarray) -> np.ndarray:
    """Object column of ``distinct[code]``, NaN where the code is -1 (a blank cell, as pandas reads it)."""
    objects = np.empty(len(distinct) + 1, dtype=object)
    objects[:-1] = distinct
    objects[-1] = np.nan
    return objects.take(codes)


def _arrow_to_numpy(column) -> np.ndarray:
    """One Arrow column as numpy: numbers zero-copy where they can be (an integer column with blanks as
    float with NaN), text as an object array of its distinct strings, anything else as pandas reads it."""
    import pyarrow as pa

    from dse.arrow import numbers_from_arrow, numpy_dtype, texts_from_arrow

    kind = column.type.value_type if pa.types.is_dictionary(column.type) else column.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind):
        encoded = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
        if not pa.types.is_dictionary(encoded.type):
            encoded = encoded.dictionary_encode()
        if pa.types.is_string_view(encoded.dictionary.type):
            encoded = pa.DictionaryArray.from_arrays(encoded.indices, encoded.dictionary.cast(pa.string()))
        codes = numbers_from_arrow(encoded.indices)  # with blanks: float, NaN where blank
        codes = np.where(np.isnan(codes), -1, codes).astype(np.intp) if codes.dtype.kind == "f" \
            else codes.astype(np.intp, copy=False)
        return _labels(codes, texts_from_arrow(encoded.dictionary))
    if numpy_dtype(kind) is not None and kind == column.type:
        chunks = [numbers_from_arrow(chunk) for chunk in column.chunks]  # nulls read as NaN
        values = chunks[0] if len(chunks) == 1 else np.concatenate(chunks) if chunks else np.empty(0, numpy_dtype(kind))
        return values.astype(np.float64) if column.null_count and values.dtype.kind != "f" else values
    return column.to_pandas().to_numpy()


def to_columns(frame: pd.DataFrame) -> dict[str, np.ndarray]:
    """DataFrame -> design-table columns (numpy arrays; text as an object array of its distinct strings,
    NaN where blank)."""
    import pandas as pd

    out: dict[str, np.ndarray] = {}
    for name in frame.columns:
        series = frame[name]
        if not (series.dtype == object or isinstance(series.dtype, pd.StringDtype)):
            out[str(name)] = series.to_numpy()
            continue
        codes, distinct = pd.factorize(series)  # by value: every cell of one label becomes one object
        out[str(name)] = _labels(codes, np.asarray(distinct, dtype=object))
    return out


#: a number column is dictionary-encoded when a sample of this many of its cells holds few distinct values
_SAMPLE_CELLS = 4096


def _arrow_column(values: np.ndarray):
    """(a column as Arrow, whether Parquet should dictionary-encode it).

    Numbers are zero-copy, a NaN stored as a blank (as pandas writes it); a constant (zero-stride) column
    is written out as a plain column of its value, which Parquet's dictionary encoder takes at about half
    the cost of a one-value dictionary array; text becomes a dictionary of its distinct objects. A number
    column whose sample of cells is mostly distinct is written plain: hashing it into a dictionary that
    outgrows its page costs more than the column takes to write. The Arrow type depends on the column's
    dtype alone (numbers and booleans plain, text a dictionary of strings), so that the slices of one
    table share one schema."""
    import pyarrow as pa

    from dse.arrow import numbers_to_arrow, texts_to_arrow
    from objectives.table import factorize, is_constant

    values = np.asarray(values)
    if values.dtype.kind in "iufb":
        if is_constant(values):
            if values.dtype.kind == "f" and np.isnan(values[0]):
                return pa.nulls(len(values), pa.from_numpy_dtype(values.dtype)), True
            return numbers_to_arrow(np.full(len(values), values[0], dtype=values.dtype)), True
        values = np.ascontiguousarray(values)
        nan = values.dtype.kind == "f" and len(values) and np.isnan(np.min(values))
        array = numbers_to_arrow(values, np.isnan(values) if nan else None)
        sample = values[::max(1, len(values) // _SAMPLE_CELLS)]
        return array, values.dtype.kind == "b" or len(np.unique(sample)) <= len(sample) // 2
    if values.dtype.kind in "US":
        values = values.astype(object)
    codes, distinct = factorize(values)  # by object identity first: cheap on a column of repeated labels
    if not all(isinstance(v, str) for v in distinct):
        return pa.array(values, from_pandas=True), True  # mixed objects: as pandas would convert them
    indices = numbers_to_arrow(codes.astype(np.int32), codes < 0 if (codes < 0).any() else None)
    return pa.DictionaryArray.from_arrays(indices, texts_to_arrow(distinct)), True


def _arrow_table(columns: Mapping[str, np.ndarray], names: Sequence[str], schema=None):
    """(the columns ``names`` as a pyarrow table, the names Parquet should dictionary-encode); with
    ``schema`` (an earlier slice's), each column in that slice's type (a blank column's nulls cast to it)."""
    import pyarrow as pa

    arrays, dictionary = [], []
    for i, name in enumerate(names):
        array, encode = _arrow_column(columns[name])
        if schema is not None and array.type != schema.field(i).type:
            array = array.cast(schema.field(i).type)
        arrays.append(array)
        if encode:
            dictionary.append(name)
    return pa.Table.from_arrays(arrays, names=list(names)) if schema is None \
        else pa.Table.from_arrays(arrays, schema=schema), dictionary


def _write_options(names: Sequence[str], dictionary: Sequence[str]) -> dict:
    """ParquetWriter options: a dictionary-encoded column compressed with snappy, a plain number column not
    (model outputs are mostly distinct doubles, which snappy barely shrinks), and no min/max statistics:
    they serve to skip row groups, which no reader of a design table does by value."""
    encoded = set(dictionary)
    return {"use_dictionary": list(dictionary), "write_statistics": False,
            "compression": {name: "snappy" if name in encoded else "none" for name in names}}


def write_table(columns: Mapping[str, np.ndarray], path: str | Path, metadata: dict[str, str] | None = None,
                names: Sequence[str] | None = None) -> None:
    """Write columns (``names`` of them, in that order; default all) to Parquet, or CSV by suffix,
    atomically: a hidden temporary file in the same folder, fsynced, then renamed over ``path``.

    Parquet is built from the numpy columns without a DataFrame copy (:func:`_arrow_column`); a column
    written from a dictionary reads back as its plain type (no Arrow schema is stored: every column is a
    plain Parquet type), ``metadata`` goes in the file's key-value metadata."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    names = list(columns) if names is None else list(names)
    if p.suffix.lower() == ".csv":
        import pandas as pd

        from dse.store import atomic_write_bytes

        frame = pd.DataFrame({k: np.asarray(columns[k]) for k in names})
        atomic_write_bytes(p, frame.to_csv(index=False).encode())
        return
    table, dictionary = _arrow_table(columns, names)
    write_atomic(p, table, metadata, **_write_options(names, dictionary))


def write_slices(slices: Iterable[Mapping[str, np.ndarray]], path: str | Path, metadata: dict[str, str] | None = None,
                 names: Sequence[str] | None = None) -> None:
    """Write a table that arrives in slices of rows (each a mapping of the same columns) to Parquet, one row
    group per slice, atomically (as :func:`write_table`): a slice is converted and written before the next
    is computed, so that no column of the whole table is ever held. The first slice sets the schema and
    which columns are dictionary-encoded. An exception raised while the slices are produced leaves no file."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    slices = iter(slices)
    first = next(slices)
    names = list(first) if names is None else list(names)
    table, dictionary = _arrow_table(first, names)

    def tables():
        yield table
        for columns in slices:
            yield _arrow_table(columns, names, table.schema)[0]

    write_atomic_row_groups(p, table.schema, tables(), metadata, **_write_options(names, dictionary))


def read_runs(path: str | Path, required: Sequence[str], kind: str = "") -> pd.DataFrame:
    """A table of published runs (``dse validate``): its rows with ``include`` 1 (all where it has no such
    column). A missing ``required`` column or no included row is a UserError naming the file; ``kind``
    ('serving ') says in it what table was expected."""
    runs = read_table(path)
    missing = [c for c in required if c not in runs.columns]
    if missing:
        raise UserError(f"missing column(s) {', '.join(missing)}; a {kind}runs table needs {kind}design-table "
                        f"columns plus {', '.join(required)}", where=str(path))
    if "include" in runs.columns:
        runs = runs[runs["include"] == 1].reset_index(drop=True)
    if runs.empty:
        raise UserError("has no included runs", where=str(path))
    return runs


def write_evaluated(evaluate: Callable[[Mapping[str, np.ndarray], int, int], Mapping[str, np.ndarray]],
                    cols: Mapping[str, np.ndarray], n: int, path: str | Path, source: str | Path,
                    metadata: dict[str, str], names: Sequence[str] | None, slice_rows: int) -> int:
    """Evaluate the table ``cols`` (``n`` rows, read from ``source``) and write ``path``; the number of
    columns written. ``evaluate(part, lo, hi)``: the output columns of rows lo..hi (``part``, those rows of
    ``cols``). A CSV output is evaluated whole; a Parquet one in slices of ``slice_rows`` rows, one row group
    each (:func:`write_slices`), so that memory stays bounded. An objectives.InputError raised by
    ``evaluate`` becomes a one-line UserError naming its row in the whole table."""
    from objectives import InputError

    def evaluated(lo: int, hi: int) -> Mapping[str, np.ndarray]:
        part = cols if (lo, hi) == (0, n) else {k: v[lo:hi] for k, v in cols.items()}
        try:
            return evaluate(part, lo, hi)
        except InputError as exc:
            if exc.row is not None:
                exc.row += lo
            raise describe_input_error(exc, source) from None

    if str(path).lower().endswith(".csv"):
        out = evaluated(0, n)
        write_table(out, path, metadata=metadata, names=names)
        return len(names or out)
    slices = (evaluated(lo, min(lo + slice_rows, n)) for lo in range(0, n, slice_rows))
    first = next(slices)
    write_slices(itertools.chain((first,), slices), path, metadata=metadata, names=names)
    return len(names or first)


def describe_input_error(exc, path: str | Path) -> UserError:
    """An objectives.InputError as a one-line UserError: file, data row (1-based) and column."""
    parts = [str(path)]
    if exc.row is not None:
        parts.append(f"row {exc.row + 1}")
    if exc.column is not None:
        parts.append(f"column '{exc.column}'")
    return UserError(exc.detail, where=", ".join(parts))


def display_path(path) -> str:
    """``path`` as a command prints it: relative to the working directory when it lies below it (the repo's
    own files, as typed), else as given."""
    import os

    rel = os.path.relpath(path)
    return str(path) if rel.startswith("..") else rel

